"""Bad input: one clear message naming the problem and what is allowed, exit
code 2, and nothing in the run dir overwritten."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from goexplore.cli import main


def _tree(path: Path) -> dict:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def toy_run(tmp_path, capsys):
    d = tmp_path / "run"
    code, _ = _run(
        capsys,
        "run",
        "--env",
        "toy",
        "--total-frames",
        "5000",
        "--run-dir",
        str(d),
        "--ckpt-every",
        "2000",
    )
    assert code == 0
    return d


def test_unknown_game_lists_choices(tmp_path, capsys):
    code, out = _run(capsys, "run", "--env", "pong", "--run-dir", str(tmp_path / "x"))
    assert code == 2
    assert "unknown env 'pong'" in out and "montezuma" in out and "skiing" in out
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "flag,value,expect",
    [
        ("--total-frames", "0", "total-frames: must be a positive integer"),
        ("--total-frames", "-5", "total-frames: must be a positive integer"),
        ("--n-workers", "-1", "n-workers: must be a positive integer or 0 (auto)"),
    ],
)
def test_non_positive_budget_or_workers(tmp_path, capsys, flag, value, expect):
    code, out = _run(capsys, "run", "--env", "toy", flag, value, "--run-dir", str(tmp_path / "x"))
    assert code == 2 and expect in out
    assert not (tmp_path / "x").exists()


def test_workers_must_be_a_number_or_auto(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--env", "toy", "--n-workers", "many"])
    assert e.value.code == 2 and "expected a number or auto, got 'many'" in capsys.readouterr().err


def test_all_problems_reported_at_once(tmp_path, capsys):
    code, out = _run(
        capsys,
        "run",
        "--env",
        "nope",
        "--total-frames",
        "0",
        "--n-workers",
        "-1",
        "--run-dir",
        str(tmp_path / "x"),
    )
    assert code == 2
    assert "unknown env" in out and "total-frames" in out and "n-workers" in out


def test_run_dir_of_a_different_run_is_refused(toy_run, capsys):
    before = _tree(toy_run)
    code, out = _run(
        capsys,
        "run",
        "--env",
        "toy",
        "--seed",
        "9",
        "--total-frames",
        "5000",
        "--run-dir",
        str(toy_run),
        "--resume",
        "auto",
    )
    assert code == 2 and "different run" in out and "seed" in out
    assert _tree(toy_run) == before


def test_existing_run_dir_without_resume_is_refused(toy_run, capsys):
    before = _tree(toy_run)
    code, out = _run(
        capsys, "run", "--env", "toy", "--total-frames", "5000", "--run-dir", str(toy_run)
    )
    assert code == 2 and "--resume auto" in out
    assert _tree(toy_run) == before


def test_missing_checkpoint(tmp_path, capsys):
    code, out = _run(
        capsys,
        "run",
        "--env",
        "toy",
        "--run-dir",
        str(tmp_path / "new"),
        "--resume",
        str(tmp_path / "nowhere"),
    )
    assert code == 2 and "nowhere" in out
    assert not (tmp_path / "new").exists()


def test_corrupt_checkpoint_names_the_file(toy_run, capsys):
    latest = toy_run / "checkpoints" / (toy_run / "checkpoints" / "LATEST").read_text().strip()
    target = latest / "archive.npz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    before = _tree(toy_run)
    code, out = _run(
        capsys,
        "run",
        "--env",
        "toy",
        "--total-frames",
        "9000",
        "--run-dir",
        str(toy_run),
        "--resume",
        "auto",
    )
    assert code == 2 and "archive.npz" in out
    assert _tree(toy_run) == before


def test_replay_command(toy_run, capsys):
    code, out = _run(capsys, "replay", str(toy_run), "--cell", "best")
    assert code == 0 and "VERIFIED" in out
    code, out = _run(capsys, "replay", str(toy_run), "--cell", "all")
    assert code == 0 and "VERIFIED" in out and "MISMATCH" not in out
    code, out = _run(capsys, "replay", str(toy_run), "--cell", "99999999")
    assert code == 2 and "out of range" in out
    code, out = _run(capsys, "replay", str(toy_run.parent / "nothing"))
    assert code == 2


def test_replay_detects_tampered_score(toy_run, capsys):
    """A run dir whose archived score was altered (checksums rewritten too) fails replay."""
    import numpy as np

    from goexplore.store import sha256_file

    ckpt = toy_run / "checkpoints" / (toy_run / "checkpoints" / "LATEST").read_text().strip()
    with np.load(ckpt / "archive.npz") as z:
        arrays = {k: z[k] for k in z.files}
    best = int(np.argmax(np.where(arrays["is_done"], -np.inf, arrays["score"])))
    arrays["score"][best] += 1000
    np.savez(ckpt / "archive.npz", **arrays)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["archive.npz"] = {
        "sha256": sha256_file(ckpt / "archive.npz"),
        "bytes": (ckpt / "archive.npz").stat().st_size,
    }
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    code, out = _run(capsys, "replay", str(toy_run), "--cell", str(best))
    assert code == 1 and "MISMATCH" in out
    code, out = _run(capsys, "replay", str(toy_run), "--cell", "all")
    assert code == 1 and f"cell {best}: MISMATCH" in out


def test_games_lists_all():
    out = subprocess.run(
        [sys.executable, "-m", "goexplore.cli", "games"], capture_output=True, text=True, check=True
    ).stdout
    for g in (
        "montezuma",
        "pitfall",
        "private_eye",
        "venture",
        "gravitar",
        "solaris",
        "freeway",
        "berzerk",
        "bowling",
        "centipede",
        "skiing",
    ):
        assert g in out
    assert "ALE/MontezumaRevenge-v5" in out


def test_auto_workers_are_this_machines_cores(tmp_path):
    """--n-workers auto (the default): the process backend uses the cores this
    process may run on, says so, and the result is the one-worker run's."""
    from runutil import cli, final_json, run_args

    from goexplore.backends.base import local_cores

    one, auto = tmp_path / "one", tmp_path / "auto"
    assert cli(run_args(one, frames=8_000, workers=1, resume=False)).returncode == 0
    args = [a for a in run_args(auto, frames=8_000, workers=1, resume=False)]
    args[args.index("--n-workers") + 1] = "auto"
    r = cli(args)
    assert r.returncode == 0, r.stderr
    assert f"workers: auto = {local_cores()} (this machine's cores)" in r.stdout
    assert final_json(auto) == final_json(one)
