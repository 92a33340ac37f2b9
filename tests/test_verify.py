"""``goexplore verify RUN_DIR``: checksums over checkpoints and experience-log
chunks and every reference between them; names each truncated, altered or
missing file; exit 0 intact, 1 damaged, 2 usage. Resume runs the same check
and refuses damaged state; ``--fallback`` (or ``--resume PATH``) continues
from an older intact checkpoint, to the same final result."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from runutil import assert_same_run, final_json, run_state

from goexplore.cli import main
from goexplore.explog import FIELDS, chunk_name, load_chunk, write_npz
from goexplore.store import RunDir, sha256_file

ARGS = [
    "--env",
    "toy",
    "--seed",
    "7",
    "--total-frames",
    "30000",
    "--ckpt-every",
    "5000",
    "--explog-chunk",
    "2000",
    "--log-every-batches",
    "1",
]


def _tree(path: Path) -> dict:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify") / "run"
    assert main(["run", *ARGS, "--run-dir", str(d)]) == 0
    return d


@pytest.fixture
def run(tmp_path, base):
    d = tmp_path / "run"
    shutil.copytree(base, d)
    return d


def _ckpts(d: Path) -> list[Path]:
    return RunDir(d).checkpoints()


def _latest(d: Path) -> Path:
    return RunDir(d).latest_checkpoint()


def _resign(ckpt: Path) -> None:
    """Rewrite a checkpoint's manifest to match its files (a deliberate edit)."""
    m = json.loads((ckpt / "manifest.json").read_text())
    for name in m:
        m[name] = {"sha256": sha256_file(ckpt / name), "bytes": (ckpt / name).stat().st_size}
    (ckpt / "manifest.json").write_text(json.dumps(m))


def _flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x40
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _bad_traj_last(d: Path) -> None:
    ckpt = _latest(d)
    with np.load(ckpt / "archive.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["traj_last"][1] = 10**9
    buf = io.BytesIO()
    write_npz(buf, arrays, compress=False)
    (ckpt / "archive.npz").write_bytes(buf.getvalue())
    _resign(ckpt)


def _forward_prev(d: Path) -> None:
    """A chunk whose prev pointer points forward, with every checksum updated."""
    rd = RunDir(d)
    path = rd.explog_dir / chunk_name(1)
    cols = load_chunk(path)
    cols["prev"][5] = 2000 + 1999
    buf = io.BytesIO()
    write_npz(buf, {name: cols[name] for name, _ in FIELDS})
    path.write_bytes(buf.getvalue())
    digest = hashlib.sha256(buf.getvalue()).hexdigest()
    for ckpt in rd.checkpoints():
        meta = json.loads((ckpt / "meta.json").read_text())
        if meta["explog"]["n_flushed"] > 1:
            meta["explog"]["chunk_sha256"][1] = digest
            (ckpt / "meta.json").write_text(json.dumps(meta))
            _resign(ckpt)


DAMAGE = {
    "truncated archive (oldest checkpoint)": (
        lambda d: _truncate(_ckpts(d)[0] / "archive.npz"),
        "archive.npz: truncated",
    ),
    "altered states": (lambda d: _flip(_latest(d) / "states.bin"), "states.bin: altered"),
    "missing states": (lambda d: (_latest(d) / "states.bin").unlink(), "states.bin: missing"),
    "missing manifest": (
        lambda d: (_latest(d) / "manifest.json").unlink(),
        "manifest.json: missing",
    ),
    "altered meta": (lambda d: _flip(_latest(d) / "meta.json", 0.3), "meta.json: altered"),
    "altered tail": (
        lambda d: _flip(_latest(d) / "explog_tail.npz", 0.9),
        "explog_tail.npz: altered",
    ),
    "missing chunk": (
        lambda d: (d / "explog" / chunk_name(1)).unlink(),
        "chunk_00001.npz: missing",
    ),
    "altered chunk": (
        lambda d: _flip(d / "explog" / chunk_name(2)),
        "chunk_00002.npz: truncated or altered",
    ),
    "truncated chunk": (lambda d: _truncate(d / "explog" / chunk_name(0)), "chunk_00000.npz"),
    "LATEST dangling": (
        lambda d: (d / "checkpoints" / "LATEST").write_text("ckpt_000000000001\n"),
        "LATEST: points to ckpt_000000000001, which is missing",
    ),
    "BEST dangling": (
        lambda d: (d / "checkpoints" / "BEST").write_text("ckpt_000000000002\n"),
        "BEST: points to ckpt_000000000002",
    ),
    "final.json altered": (
        lambda d: (d / "final.json").write_text(
            (d / "final.json").read_text().replace('"frames_total": ', '"frames_total": 1')
        ),
        "final.json: reports",
    ),
    "traj_last outside the log (re-signed)": (
        _bad_traj_last,
        "cells point outside the experience log",
    ),
    "prev pointer forward (re-signed)": (_forward_prev, "point outside the log before them"),
    "missing config": (lambda d: (d / "config.json").unlink(), "config.json: missing"),
}


def test_intact_run_verifies(capsys, base):
    code, out = _cli(capsys, "verify", str(base))
    assert code == 0, out
    assert out.rstrip().endswith("intact")


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damage_is_named(capsys, run, case):
    damage, expect = DAMAGE[case]
    damage(run)
    code, out = _cli(capsys, "verify", str(run))
    assert code == 1, out
    assert expect in out, out
    assert "DAMAGED" in out


def test_usage_errors(capsys, tmp_path):
    code, out = _cli(capsys, "verify", str(tmp_path / "nowhere"))
    assert code == 2 and "no such run dir" in out
    (tmp_path / "empty").mkdir()
    code, out = _cli(capsys, "verify", str(tmp_path / "empty"))
    assert code == 2 and "not a run dir" in out
    with pytest.raises(SystemExit) as e:
        main(["verify"])
    assert e.value.code == 2


def test_resume_refuses_damaged_state(capsys, run):
    _flip(run / "explog" / chunk_name(3))
    before = _tree(run)
    code, out = _cli(
        capsys, "run", *ARGS, "--total-frames", "40000", "--run-dir", str(run), "--resume", "auto"
    )
    assert code == 2, out
    assert "chunk_00003.npz" in out and "--fallback" in out and "goexplore verify" in out
    assert _tree(run) == before


def _alter_last_chunk(d: Path) -> None:
    _flip(sorted((d / "explog").glob("chunk_*.npz"))[-1])


@pytest.mark.parametrize("case", ["altered states", "altered last chunk", "LATEST dangling"])
def test_fallback_resumes_from_an_older_intact_checkpoint(capsys, run, base, case):
    """Damage at the end of a finished run; --fallback goes back to the newest
    intact checkpoint and redoes the rest, to the same result."""
    (_alter_last_chunk if case == "altered last chunk" else DAMAGE[case][0])(run)
    code, out = _cli(capsys, "run", *ARGS, "--run-dir", str(run), "--resume", "auto")
    assert code == 2 and "damaged" in out
    code, out = _cli(capsys, "run", *ARGS, "--run-dir", str(run), "--resume", "auto", "--fallback")
    assert code == 0, out
    assert "--fallback:" in out and "continuing from" in out
    assert_same_run(run, base)
    code, out = _cli(capsys, "verify", str(run))
    assert code == 0, out


def test_resume_from_an_older_checkpoint_by_path(capsys, run, base):
    older = _ckpts(run)[0]
    code, out = _cli(capsys, "run", *ARGS, "--run-dir", str(run), "--resume", str(older))
    assert code == 0, out
    assert RunDir(run).latest_name() == run_state(base)["name"]
    assert final_json(run) == final_json(base)
    assert _cli(capsys, "verify", str(run))[0] == 0


def test_fallback_with_nothing_intact_to_fall_back_to(capsys, run):
    _flip(run / "explog" / chunk_name(0))  # every checkpoint needs chunk 0
    before = _tree(run)
    code, out = _cli(capsys, "run", *ARGS, "--run-dir", str(run), "--resume", "auto", "--fallback")
    assert code == 2 and "no older intact checkpoint" in out and "chunk_00000.npz" in out
    assert _tree(run) == before
