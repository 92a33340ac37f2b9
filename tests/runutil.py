"""Helpers for the crash-safety tests: the CLI in a subprocess, child
processes from /proc, and the comparison of two run dirs' results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from goexplore.explog import FIELDS, chunk_name, load_chunk
from goexplore.formats import load_json
from goexplore.store import RunDir, read_checkpoint

ROOT = Path(__file__).resolve().parent.parent
VOLATILE_FINAL = {"wall_s"}
VOLATILE_METRICS = {"steps_per_s", "time"}
HOOK_VARS = ("GOEXPLORE_TEST_KILL_AT", "GOEXPLORE_TEST_RAISE_AT", "GOEXPLORE_TEST_ONCE")


def cli_env(**hooks) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in HOOK_VARS}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in hooks.items()})
    return env


def run_args(
    run_dir: Path,
    env="toy",
    seed=3,
    frames=60_000,
    workers=1,
    ckpt_every=5_000,
    chunk=2_000,
    resume=True,
    extra=(),
) -> list[str]:
    args = [
        "run",
        "--env",
        env,
        "--seed",
        str(seed),
        "--total-frames",
        str(frames),
        "--n-workers",
        str(workers),
        "--ckpt-every",
        str(ckpt_every),
        "--explog-chunk",
        str(chunk),
        "--log-every-batches",
        "1",
        "--run-dir",
        str(run_dir),
    ]
    if resume:
        args += ["--resume", "auto"]
    return args + list(extra)


def cli(args, timeout=300, **hooks) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(**hooks),
        cwd=ROOT,
    )


def start(args, **hooks) -> subprocess.Popen:
    """The CLI in its own session (a terminal's Ctrl-C goes to its whole group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "goexplore.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(**hooks),
        cwd=ROOT,
        start_new_session=True,
    )


# --- processes --------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[str, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()
    return rest[0], int(rest[1])  # state, ppid


def children(pid: int) -> set[int]:
    """All live descendants of ``pid``."""
    by_parent: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None:
                by_parent.setdefault(st[1], []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in by_parent.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def workers(pid: int) -> set[int]:
    """Descendants but multiprocessing's resource tracker (which lives as long
    as the process that started it)."""
    out = set()
    for c in children(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in cmd:
            out.add(c)
    return out


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def wait_gone(pids, timeout=15.0) -> set[int]:
    """The pids still alive after ``timeout`` seconds."""
    end = time.time() + timeout
    left = {p for p in pids if alive(p)}
    while left and time.time() < end:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


# --- results --------------------------------------------------------------------------------
def final_json(run_dir: Path) -> dict:
    d = json.loads((Path(run_dir) / "final.json").read_text())
    return {k: v for k, v in d.items() if k not in VOLATILE_FINAL}


def metrics(run_dir: Path) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k not in VOLATILE_METRICS}
        for r in RunDir(Path(run_dir)).read_metrics()
    ]


def run_state(run_dir: Path) -> dict:
    """The latest checkpoint's archive arrays and states, and the whole
    experience log (chunks and tail) with each chunk file's checksum."""
    rd = RunDir(Path(run_dir))
    ckpt = rd.latest_checkpoint()
    meta, arrays, states, tail = read_checkpoint(ckpt)
    ex = meta["explog"]
    parts = [
        load_chunk(rd.explog_dir / chunk_name(i), ex["chunk_size"], ex["chunk_sha256"][i])
        for i in range(ex["n_flushed"])
    ] + [tail]
    log = {name: np.concatenate([p[name] for p in parts]) for name, _ in FIELDS}
    return {
        "name": ckpt.name,
        "frames": meta["frames"],
        "arrays": arrays,
        "states": states,
        "log": log,
        "chunk_sha256": ex["chunk_sha256"],
        "rng": meta["rng"],
        "done_scores": meta["done_scores"],
    }


def assert_same_run(got: Path, want: Path) -> None:
    assert final_json(got) == final_json(want)
    a, b = run_state(got), run_state(want)
    assert a["name"] == b["name"] and a["frames"] == b["frames"]
    assert sorted(a["arrays"]) == sorted(b["arrays"])
    for k in b["arrays"]:
        np.testing.assert_array_equal(a["arrays"][k], b["arrays"][k], err_msg=k)
    assert a["states"] == b["states"]
    for k in b["log"]:
        np.testing.assert_array_equal(a["log"][k], b["log"][k], err_msg=f"explog {k}")
    assert a["chunk_sha256"] == b["chunk_sha256"]  # chunk files byte for byte
    assert a["rng"] == b["rng"] and a["done_scores"] == b["done_scores"]
    assert metrics(got) == metrics(want)


def load_meta(ckpt: Path) -> dict:
    return load_json(Path(ckpt) / "meta.json", 1 << 28, "meta")
