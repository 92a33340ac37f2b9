"""kill -9 of the main process at any moment, then ``--resume auto``: the run
completes exactly like an uninterrupted one (final.json but for wall_s, the
last checkpoint's archive and states, every experience-log entry, the chunk
files byte for byte, the metrics rows). Also Ctrl-C (SIGINT) and SIGTERM.

Kill points are drawn at random (print the seed; rerun one with
CRASH_SEED=<seed>) among: a moment in time (mid-batch, mostly), and the
fault-injection points of :mod:`goexplore._faults` - a checkpoint half
written, renamed but not published, published but not pruned; a log chunk
half written, or renamed but not yet recorded.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from runutil import alive, assert_same_run, children, cli, run_args, start, wait_gone

from goexplore.verify import verify_run

HOOK_POINTS = ("ckpt-files", "ckpt-rename", "ckpt-publish", "chunk-write", "chunk-done")
TOY = dict(env="toy", seed=3, frames=40_000, workers=1, ckpt_every=4_000, chunk=1_500)
# ~6 batches of ~6.7k steps: a checkpoint after every batch, ~4 chunk flushes per batch
MONTEZUMA = dict(env="montezuma", seed=0, frames=7_000, workers=2, ckpt_every=1_500, chunk=1_000)


@pytest.fixture(scope="module")
def toy_baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("baseline") / "run"
    r = cli(run_args(d, resume=False, **TOY))
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def _kill_run(run_dir: Path, kind: str, arg, cfg: dict) -> tuple[bool, set[int]]:
    """One attempt of ``run --resume auto`` that is killed at ``kind:arg``
    (kind 'time': after ``arg`` seconds; 'chunks': as soon as the run dir holds
    ``arg`` experience-log chunks, wherever the run is then, however fast the
    machine). Returns (was killed, worker pids seen)."""
    watched = kind in ("time", "chunks")
    hooks = {} if watched else {"GOEXPLORE_TEST_KILL_AT": f"{kind}:{arg}"}
    proc = start(run_args(run_dir, **cfg), **hooks)
    seen: set[int] = set()
    t_kill = time.time() + arg if kind == "time" else None
    while proc.poll() is None:
        seen |= children(proc.pid)
        if (t_kill is not None and time.time() >= t_kill) or (
            kind == "chunks" and len(list(run_dir.glob("explog/chunk_*.npz"))) >= arg
        ):
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    out = proc.communicate(timeout=300)[0]
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"run failed (rc {proc.returncode}):\n{out}")
    return proc.returncode == -signal.SIGKILL, seen


def _assert_intact(run_dir: Path, where: str) -> None:
    if (run_dir / "config.json").exists():
        rep = verify_run(run_dir)
        assert rep.ok, f"{where}: a crash left damaged state:\n{rep.text()}"


def _finish(run_dir: Path, cfg: dict) -> None:
    r = cli(run_args(run_dir, **cfg))
    assert r.returncode == 0, r.stdout + r.stderr


def test_kill_at_each_injection_point(tmp_path, toy_baseline):
    """One kill at every fault-injection point and one mid-batch, in one run."""
    d = tmp_path / "run"
    # the mid-run kill first, when most of the run is still ahead: once 8 of its ~26
    # chunks are written (a moment in time would depend on the machine's load)
    plan = [
        ("chunks", 8),
        ("chunk-write", 2),
        ("ckpt-files", 1),
        ("chunk-done", 3),
        ("ckpt-rename", 1),
        ("ckpt-publish", 1),
    ]
    for kind, arg in plan:
        killed, _ = _kill_run(d, kind, arg, TOY)
        assert killed, f"{kind}:{arg} was not reached"
        _assert_intact(d, f"after kill at {kind}:{arg}")
    _finish(d, TOY)
    assert_same_run(d, toy_baseline)


@pytest.mark.slow
def test_kill_at_random_points(tmp_path, toy_baseline):
    """At least 20 kills at randomly drawn points; every chain of kills resumes
    to the same result as the uninterrupted run."""
    seed = int(os.environ.get("CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    print(f"CRASH_SEED={seed}")
    kills, chain, log = 0, 0, []
    while kills < 20:
        chain += 1
        d = tmp_path / f"chain{chain}"
        for _ in range(6):  # up to 6 kills in a row, then finish
            kind = rng.choice(("time",) * 3 + HOOK_POINTS)
            arg = (
                round(rng.uniform(0.6, 2.0), 2)
                if kind == "time"
                else rng.randint(1, 10 if kind.startswith("chunk") else 4)
            )
            killed, _ = _kill_run(d, kind, arg, TOY)
            log.append(f"{kind}:{arg}{'' if killed else ' (finished first)'}")
            if not killed:
                break
            kills += 1
            _assert_intact(d, f"CRASH_SEED={seed} chain {chain} after {log[-1]}")
        if not (d / "final.json").exists():
            _finish(d, TOY)
        try:
            assert_same_run(d, toy_baseline)
        except AssertionError as e:
            raise AssertionError(f"CRASH_SEED={seed}, chain {chain}: {log}") from e
    print(f"{kills} kills in {chain} chains: {log}")


@pytest.mark.slow
def test_kill_montezuma_with_workers(tmp_path):
    """Montezuma with 2 worker processes: kills while a checkpoint and a chunk
    are written and mid-batch; orphaned workers end; the result is the same."""
    base = tmp_path / "base"
    r = cli(run_args(base, resume=False, **MONTEZUMA))
    assert r.returncode == 0, r.stdout + r.stderr
    d = tmp_path / "run"
    # the mid-run kill first, after 2 of its 7 chunks: enough of the run is left for
    # a checkpoint and two chunk writes
    for kind, arg in [("chunks", 2), ("ckpt-files", 1), ("chunk-write", 2)]:
        killed, workers = _kill_run(d, kind, arg, MONTEZUMA)
        assert killed, f"{kind}:{arg} was not reached"
        assert workers, "no worker processes seen"
        assert not wait_gone(workers, 20), "worker processes outlived the killed master"
        _assert_intact(d, f"after kill at {kind}:{arg}")
    _finish(d, MONTEZUMA)
    assert_same_run(d, base)


def _until_progress(proc, run_dir: Path, rows: int, timeout=120, workers=True) -> set[int]:
    """Wait for ``rows`` metric rows (batches) from the run; return its workers."""
    end = time.time() + timeout
    seen: set[int] = set()
    m = run_dir / "metrics.jsonl"
    while time.time() < end:
        assert proc.poll() is None, proc.communicate()[0]
        seen |= children(proc.pid)
        if m.exists() and len(m.read_text().splitlines()) >= rows and (seen or not workers):
            return seen
        time.sleep(0.05)
    raise AssertionError("the run made no progress")


def test_ctrl_c_checkpoints_ends_workers_and_resumes(tmp_path):
    """SIGINT to the process group (a terminal's Ctrl-C), 2 workers: a final
    checkpoint, no child process left, a message saying how to resume; then a
    double Ctrl-C (stop at once); then resume completes to the same result."""
    cfg = dict(TOY, frames=50_000, workers=2, ckpt_every=40_000)
    base = tmp_path / "base"
    assert cli(run_args(base, resume=False, **cfg)).returncode == 0

    d = tmp_path / "run"
    proc = start(run_args(d, **cfg))
    workers = _until_progress(proc, d, 2)
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert "resume with: goexplore run" in out and "--resume auto" in out, out
    assert not wait_gone(workers, 10), "workers left running after Ctrl-C"
    assert not {p for p in workers if alive(p)}
    rep = verify_run(d)
    assert rep.ok and rep.latest is not None, rep.text()
    assert "checkpoint" in out and rep.latest in out

    # Ctrl-C twice: stop at once, mid-batch, from the last complete checkpoint
    proc = start(run_args(d, **cfg))
    workers = _until_progress(proc, d, len((d / "metrics.jsonl").read_text().splitlines()) + 1)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert "resume with:" in out, out
    assert not wait_gone(workers, 10), "workers left running after a double Ctrl-C"
    assert verify_run(d).ok

    r = cli(run_args(d, **cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(d, base)


def test_sigterm_stops_like_ctrl_c(tmp_path):
    d = tmp_path / "run"
    proc = start(run_args(d, **dict(TOY, frames=400_000)))
    _until_progress(proc, d, 1, workers=False)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and "resume with:" in out, out
    assert verify_run(d).ok


def test_kill_dk_run_resumes_to_the_same_result(tmp_path):
    """kill -9 of a domain-knowledge run (every selection term on, episodes to
    game over) at a mid-run moment and at three injection points."""
    from test_dk import TOY_DK, _flags

    cfg = dict(TOY, extra=tuple(_flags(TOY_DK)))
    base = tmp_path / "baseline"
    r = cli(run_args(base, resume=False, **cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    d = tmp_path / "run"
    for kind, arg in [
        ("chunks", 8),
        ("chunk-write", 2),
        ("ckpt-rename", 1),
        ("ckpt-publish", 1),
    ]:
        killed, _ = _kill_run(d, kind, arg, cfg)
        assert killed, f"{kind}:{arg} was not reached"
        _assert_intact(d, f"after kill at {kind}:{arg}")
    _finish(d, cfg)
    assert_same_run(d, base)


def test_a_second_process_on_a_run_dir_in_use_is_refused(tmp_path):
    """Two processes writing one run dir would interleave checkpoints and metrics: the
    second is refused, naming the first's pid, and the first's run is unharmed."""
    d = tmp_path / "run"
    cfg = dict(TOY, frames=400_000, workers=1, ckpt_every=40_000)
    proc = start(run_args(d, **cfg))
    _until_progress(proc, d, 1, workers=False)
    second = cli(run_args(d, **cfg))
    assert second.returncode == 2
    assert "in use by another goexplore process" in second.stderr
    assert f"pid {proc.pid}" in second.stderr
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert verify_run(d).ok
    # once it has ended, the run dir is free again
    assert cli(run_args(d, **dict(cfg, frames=60_000))).returncode == 0
