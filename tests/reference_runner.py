"""Run the read-only Go-Explore reference script in a subprocess with the
stand-in harness (tests/reference_harness/env_go_explore.py) and load its
final archive + experience log for fidelity comparisons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
HARNESS_DIR = HERE / "reference_harness"
REFERENCE_ENV_VAR = "GOEXPLORE_REFERENCE"


def reference_script() -> Path:
    """Path of go_explore_reference.py: $GOEXPLORE_REFERENCE, else
    <repo parent>/shared/reference/go_explore_reference.py."""
    override = os.environ.get(REFERENCE_ENV_VAR)
    path = (
        Path(override)
        if override
        else (Path(__file__).resolve().parents[2] / "shared/reference/go_explore_reference.py")
    )
    if not path.is_file():
        raise FileNotFoundError(
            f"Go-Explore reference script not found at {path}. Expected "
            f"<repo parent>/shared/reference/go_explore_reference.py or set "
            f"${REFERENCE_ENV_VAR} to its path."
        )
    return path


def run_reference(
    env: str,
    seed: int,
    total_frames: int,
    n_workers: int,
    run_dir: str | Path,
    timeout: float = 600,
) -> dict:
    """Run the reference to completion; return reference_final.json's content
    plus ``"explog"``: {"prev", "act", "rew", "done"} numpy arrays, and
    ``"metrics"``: the rows of its metrics.jsonl."""
    script = reference_script()
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("reference_final.json", "reference_explog.npz", "metrics.jsonl"):
        (run_dir / stale).unlink(missing_ok=True)

    env_vars = dict(os.environ)
    old_pp = env_vars.get("PYTHONPATH")
    env_vars["PYTHONPATH"] = str(HARNESS_DIR) + (os.pathsep + old_pp if old_pp else "")
    cmd = [
        sys.executable,
        str(script),
        "--env",
        env,
        "--seed",
        str(seed),
        "--total-frames",
        str(total_frames),
        "--n-workers",
        str(n_workers),
        "--run-dir",
        str(run_dir),
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=run_dir, env=env_vars, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise RuntimeError(
            f"reference run timed out after {timeout}s: {' '.join(cmd)}\n"
            f"stderr tail:\n{err[-4000:]}"
        ) from e
    if proc.returncode != 0:
        raise RuntimeError(
            f"reference run failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"stderr tail:\n{proc.stderr[-4000:]}"
        )

    final = run_dir / "reference_final.json"
    if not final.is_file():
        raise RuntimeError(
            f"reference run produced no {final}\nstdout tail:\n{proc.stdout[-2000:]}"
        )
    result = json.loads(final.read_text())
    with np.load(run_dir / "reference_explog.npz") as z:
        result["explog"] = {k: np.array(z[k]) for k in z.files}
    metrics = run_dir / "metrics.jsonl"
    result["metrics"] = (
        [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.is_file() else []
    )
    return result


def reference_actions(result: dict, cell_index: int) -> list[int]:
    """Actions (forward order) of result["cells"][cell_index]'s trajectory,
    rebuilt by walking the explog prev-links from traj_last back to -1."""
    prev = result["explog"]["prev"]
    act = result["explog"]["act"]
    idx = int(result["cells"][cell_index]["traj_last"])
    actions = []
    while idx >= 0:
        actions.append(int(act[idx]))
        idx = int(prev[idx])
    return actions[::-1]
