"""``goexplore run --branch-from PATH``: a new run dir continues another run's
checkpoint with other selection settings. Unchanged, a branch is the run itself
continued; changed, its weights are the new formula on the checkpoint's counters
from the first pick on, and it is a run like any other (replay-verified, resumable).
Anything but the selection's settings is refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from runutil import assert_same_run, metrics

from goexplore.cli import main
from goexplore.config import Config
from goexplore.runner import prepare, unlock_run_dir
from goexplore.selection import SelectionParams
from goexplore.store import RunDir, read_checkpoint
from goexplore.verify import verify_run

BASE = [
    "--env",
    "toy",
    "--seed",
    "4",
    "--ckpt-every",
    "10000",
    "--explog-chunk",
    "2000",
    "--log-every-batches",
    "1",
]


def _cli(capsys, *argv):
    code = main(["run", *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def _branch(capsys, source, run_dir, frames, *flags):
    """``run --branch-from source --seen-power 1`` (and ``flags``) to ``frames`` steps."""
    args = ["--branch-from", str(source), "--seen-power", "1", *flags]
    return _cli(capsys, *args, "--total-frames", str(frames), "--run-dir", str(run_dir))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A run stopped at 10,000 agent steps (its last checkpoint)."""
    d = tmp_path_factory.mktemp("branch") / "source"
    assert main(["run", *BASE, "--total-frames", "10000", "--run-dir", str(d)]) == 0
    return d


def test_a_branch_that_changes_nothing_is_the_run_continued(tmp_path, capsys, source):
    code, out = _cli(
        capsys,
        "--branch-from",
        str(source),
        "--total-frames",
        "30000",
        "--run-dir",
        str(tmp_path / "b"),
    )
    assert code == 0, out
    assert "changed: nothing" in out
    code, out = _cli(capsys, *BASE, "--total-frames", "30000", "--run-dir", str(tmp_path / "full"))
    assert code == 0, out
    assert_same_run(tmp_path / "b", tmp_path / "full")


def test_a_branch_picks_with_its_own_weights_from_the_checkpoint(tmp_path, source):
    saved = RunDir(source).read_config()
    cfg = saved.replace(seen_power=1.0, total_frames=30000)
    p, ckpt = prepare(cfg, tmp_path / "b", str(source), branch=True)
    try:
        _, arrays, _, _ = read_checkpoint(ckpt)
        seen = arrays["seen"].astype(np.float64)
        want = np.where(arrays["is_done"], 0.0, 1.0 / (seen + 1.0))  # 1/(seen+1), DONE 0
        got = p.archive.weights_of(np.arange(p.archive.n))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        # the source's own weights, 1/sqrt(seen+1), are not these
        assert not np.allclose(got, np.where(arrays["is_done"], 0.0, 1.0 / np.sqrt(seen + 1)))
    finally:
        unlock_run_dir(p.lock)


def test_a_changed_branch_is_a_run_of_its_own(tmp_path, capsys, source):
    b, same = tmp_path / "b", tmp_path / "same"
    code, out = _branch(capsys, source, b, 30000)
    assert code == 0, out  # its best trajectories replay-verified from reset
    assert "changed: seen_power" in out
    cfg = json.loads((b / "config.json").read_text())
    assert cfg["seen_power"] == 1.0 and cfg["seed"] == 4 and cfg["env"] == "toy"
    # the source's metrics up to the branch point, then its own
    before = metrics(source)[:-1]  # a run's last row is dropped when it is continued
    assert metrics(b)[: len(before)] == before
    _cli(capsys, "--branch-from", str(source), "--total-frames", "30000", "--run-dir", str(same))
    assert metrics(b) != metrics(same)
    # interrupted and resumed, a branch ends as if it had not been
    code, out = _branch(capsys, source, tmp_path / "r", 20000)
    assert code == 0, out
    code, out = _cli(
        capsys, "--resume", "auto", "--total-frames", "30000", "--run-dir", str(tmp_path / "r")
    )
    assert code == 0, out
    assert_same_run(tmp_path / "r", b)


def test_a_branch_records_where_it_branched_and_compare_tells_it_apart(tmp_path, capsys, source):
    from goexplore.report.compare import load_runs

    b, fresh = tmp_path / "b", tmp_path / "fresh"
    code, out = _branch(capsys, source, b, 20000)
    assert code == 0, out
    ckpt = RunDir(source).latest_checkpoint()
    record = json.loads((b / "branch.json").read_text())
    want_frames = json.loads((ckpt / "meta.json").read_text())["frames"]
    assert record == {
        "source": str(ckpt.resolve()),
        "frames": want_frames,
        "changed": ["seen_power"],
    }
    # the same settings from the start are another search: another group in compare
    code, out = _cli(
        capsys, *BASE, "--seen-power", "1", "--total-frames", "20000", "--run-dir", str(fresh)
    )
    assert code == 0, out
    assert not (fresh / "branch.json").exists()
    groups = {r.path.name: r.group[1] for r in load_runs([b, fresh])}
    assert groups["fresh"] + f" branched at {float(f'{want_frames:.2g}') / 1e6:g}M" == groups["b"]
    # a damaged record is an error naming it, in compare and on resume
    (b / "branch.json").write_text('{"source": "x", "frames": -1, "changed": []}')
    with pytest.raises(Exception, match="branch.json"):
        load_runs([b])
    assert any("branch.json" in p for p in verify_run(b).problems)
    code, out = _cli(capsys, "--resume", "auto", "--total-frames", "30000", "--run-dir", str(b))
    assert code == 2 and str(b / "branch.json") in out, out


def test_a_branch_stopped_before_its_first_checkpoint_resumes_at_its_branch_point(
    tmp_path, capsys, source
):
    cfg = RunDir(source).read_config().replace(seen_power=1.0, total_frames=30000)
    p, _ = prepare(cfg, tmp_path / "b", str(source), branch=True)
    unlock_run_dir(p.lock)  # stopped before it wrote anything of its own
    assert RunDir(tmp_path / "b").latest_checkpoint() is None
    code, out = _cli(
        capsys, "--resume", "auto", "--total-frames", "30000", "--run-dir", str(tmp_path / "b")
    )
    assert code == 0, out
    code, out = _branch(capsys, source, tmp_path / "whole", 30000)
    assert code == 0, out
    assert_same_run(tmp_path / "b", tmp_path / "whole")


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--cell-width", "7"], "differs in: cell_width); a branch may change only seen_weight"),
        (["--resume", "auto"], "leave out --resume"),
        (["--preset", "montezuma-dk"], "was started with preset"),
    ],
)
def test_a_branch_refuses_other_changes(tmp_path, capsys, source, extra, message):
    code, out = _cli(capsys, "--branch-from", str(source), *extra, "--run-dir", str(tmp_path / "b"))
    assert code == 2 and message in out, out
    assert not (tmp_path / "b" / "checkpoints").exists()


def test_a_branch_needs_a_new_run_dir(tmp_path, capsys, source):
    code, out = _cli(capsys, "--branch-from", str(source), "--seen-power", "1")
    assert code == 2 and "--run-dir" in out
    code, out = _cli(capsys, "--branch-from", str(source), "--run-dir", str(source))
    assert code == 2 and "already holds a run" in out
    code, out = _cli(
        capsys, "--branch-from", str(tmp_path / "nothing"), "--run-dir", str(tmp_path / "b")
    )
    assert code == 2 and f"--branch-from {tmp_path / 'nothing'}: no such run dir" in out, out
    assert "(give a run dir or a checkpoint dir)" in out
    gone = source / "checkpoints" / "ckpt_000000099999"
    code, out = _cli(capsys, "--branch-from", str(gone), "--run-dir", str(tmp_path / "b"))
    assert code == 2 and f"--branch-from {gone}: no such checkpoint" in out, out
    assert "--resume" not in out


def test_branchable_fields_are_exactly_the_selections():
    """A field may change in a branch exactly when the selection reads it."""
    base = Config()
    for f in dataclasses.fields(Config):
        v = getattr(base, f.name)
        if isinstance(v, bool):
            changed = not v
        elif isinstance(v, (int, float)):
            changed = v + 1
        else:
            assert f.name not in Config.BRANCHABLE, f.name
            continue
        reads = SelectionParams.from_config(base.replace(**{f.name: changed})) != (
            SelectionParams.from_config(base)
        )
        assert reads == (f.name in Config.BRANCHABLE), f.name
