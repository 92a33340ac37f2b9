"""The worked example of docs/custom-envs.md: a user's own env in its own file
(examples/key_maze.py), explored by the CLI with two worker processes and by the
Python API (examples/explore_key_maze.py), with every command reading the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from runutil import ROOT, cli_env

EXAMPLES = ROOT / "examples"


def _env() -> dict:
    env = cli_env()
    env["PYTHONPATH"] = str(EXAMPLES) + os.pathsep + env["PYTHONPATH"]
    return env


def ge(*args):
    return subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *map(str, args)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_the_example_env_is_solved_by_cli_and_api_alike(tmp_path):
    check = ge("check-env", "key_maze:make_env", "--cells", "facts")
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout + check.stderr

    cli_dir, api_dir = tmp_path / "cli", tmp_path / "api"
    run = ge(
        "run", "--env", "key_maze:make_env", "--cells", "facts", "--episode-end", "game",
        "--n-workers", "2", "--total-frames", "200000", "--run-dir", cli_dir,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    final = json.loads((cli_dir / "final.json").read_text())
    assert final["best_score"] == 1.0 and final["verified"]

    # the API script: same settings and seed, so the same archive as the CLI's
    api = subprocess.run(
        [sys.executable, str(EXAMPLES / "explore_key_maze.py"), str(api_dir)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert api.returncode == 0, api.stdout + api.stderr
    assert "replayed from reset: score 1" in api.stdout and "has_key=1" in api.stdout
    api_final = json.loads((api_dir / "final.json").read_text())
    for k in ("n_cells", "best_score", "explog_entries", "frames_total"):
        assert api_final[k] == final[k], k

    # every command reads the CLI's run
    replay = ge("replay", cli_dir)
    assert replay.returncode == 0 and "VERIFIED" in replay.stdout
    assert ge("replay", cli_dir, "--cell", "all").returncode == 0
    assert ge("verify", cli_dir).returncode == 0
    rep = ge("report", cli_dir, "--out", tmp_path / "rep")
    assert rep.returncode == 0 and (tmp_path / "rep" / "index.html").exists(), rep.stderr
    demo = ge("demo", cli_dir, "--top", "1", "--out", tmp_path / "ds")
    assert demo.returncode == 0 and "VERIFIED" in demo.stdout + demo.stderr, demo.stderr
