"""Dying and failing worker processes.

* A worker SIGKILLed mid-batch (the OOM killer, say): the run does not hang,
  the worker is replaced, its tasks re-run from their own seeds, and the
  final archive equals the undisturbed run's.
* A worker that raises: the error and its traceback reach the user as
  WorkerError (exit code 2 from the CLI); no retry, since an exception is not
  transient. Workers that keep dying are given up on after a bounded number
  of replacements.
* In every case no worker process is left behind.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from conftest import archive_table, run_ours
from runutil import cli, run_args, wait_gone
from runutil import workers as children

from goexplore.backends import processes
from goexplore.errors import WorkerError

FRAMES = 20_000


@pytest.fixture(scope="module")
def undisturbed():
    return archive_table(run_ours("toy", 4, FRAMES, 1, explog_chunk=3000))


@pytest.fixture
def respawns(monkeypatch):
    """Counts worker replacements made by the process backend."""
    seen = []
    real = processes.ProcessBackend._replace

    def counting(self, p, todo):
        try:
            return real(self, p, todo)
        finally:
            p.proc.join(5)
            seen.append(p.proc.exitcode)

    monkeypatch.setattr(processes.ProcessBackend, "_replace", counting)
    return seen


def _assert_same(a: dict, b: dict) -> None:
    assert a["cells"] == b["cells"] and a["done_scores"] == b["done_scores"]
    assert a["frames"] == b["frames"] and a["explog_count"] == b["explog_count"]
    for k in b["explog"]:
        np.testing.assert_array_equal(a["explog"][k], b["explog"][k], err_msg=k)


@pytest.mark.parametrize("task", [7, 83])  # in the first batch; in the second
def test_worker_killed_mid_batch_is_replaced(tmp_path, monkeypatch, undisturbed, respawns, task):
    monkeypatch.setenv("GOEXPLORE_TEST_KILL_AT", f"task:{task}")
    monkeypatch.setenv("GOEXPLORE_TEST_ONCE", str(tmp_path / "fired"))
    before = children(os.getpid())
    got = archive_table(run_ours("toy", 4, FRAMES, 2, explog_chunk=3000))
    assert (tmp_path / "fired").exists(), "the fault was not injected"
    assert respawns == [-signal.SIGKILL]
    _assert_same(got, undisturbed)
    assert not wait_gone(children(os.getpid()) - before, 10)


def test_worker_killed_between_batches(undisturbed, respawns):
    """A worker that dies while idle (no task in flight) is found at the next
    batch; sending it the batch's view must not fail."""
    from goexplore.config import Config
    from goexplore.phase1 import Phase1

    p = Phase1(Config(env="toy", seed=4, total_frames=FRAMES, n_workers=2, explog_chunk=3000))
    p.seed_root()
    state = {"killed": None}

    def stop_after_first():
        if p.batch == 1 and state["killed"] is None:
            pid = min(children(os.getpid()))
            os.kill(pid, signal.SIGKILL)
            state["killed"] = pid
            wait_gone({pid}, 10)
        return False

    p.run(should_stop=stop_after_first)
    assert state["killed"] is not None and len(respawns) == 1
    _assert_same(archive_table(p), undisturbed)


def test_worker_that_raises_reaches_the_user(tmp_path, monkeypatch):
    monkeypatch.setenv("GOEXPLORE_TEST_RAISE_AT", "task:3")
    before = children(os.getpid())
    t0 = time.time()
    with pytest.raises(WorkerError) as e:
        run_ours("toy", 4, FRAMES, 2, tmp_path / "run", explog_chunk=3000)
    msg = str(e.value)
    assert "Traceback" in msg and "RuntimeError: test fault injected at task #3" in msg
    assert "_faults.py" in msg  # the worker's own stack
    assert time.time() - t0 < 60
    assert not wait_gone(children(os.getpid()) - before, 10)


def test_worker_error_from_the_cli(tmp_path):
    d = tmp_path / "run"
    r = cli(run_args(d, frames=FRAMES, workers=2), timeout=120, GOEXPLORE_TEST_RAISE_AT="task:5")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "goexplore: error: worker failed" in r.stderr
    assert "Traceback" in r.stderr and "RuntimeError: test fault injected" in r.stderr


def test_workers_that_keep_dying_are_given_up_on(tmp_path, monkeypatch, respawns):
    monkeypatch.setenv("GOEXPLORE_TEST_KILL_AT", "task:1")  # every worker, every time
    before = children(os.getpid())
    t0 = time.time()
    with pytest.raises(WorkerError, match="giving up"):
        run_ours("toy", 4, FRAMES, 2, explog_chunk=3000)
    assert 1 <= len(respawns) <= processes.MAX_RESPAWNS + 1
    assert time.time() - t0 < 120
    assert not wait_gone(children(os.getpid()) - before, 10)


def test_the_user_is_told_which_worker_died_and_which_tasks_ran_again(tmp_path):
    """On the log and the progress line, through the CLI, and the run's result
    is still the undisturbed one's."""
    args = run_args(tmp_path / "run", env="toy", seed=4, frames=FRAMES, workers=2, resume=False)
    r = cli(
        args,
        GOEXPLORE_TEST_KILL_AT="task:7",
        GOEXPLORE_TEST_ONCE=str(tmp_path / "fired"),
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fired").exists(), "the fault was not injected"
    import re

    told = re.findall(
        r"worker (\d) \(pid \d+\) died \(exit code -9\); re-running its (\d+) unfinished "
        r"task\(s\) of this batch \(tasks? ([\d, -]+)\) on a new worker (\d)",
        r.stdout,
    )
    assert len(told) == 1, r.stdout[-2000:]
    slot, n, which, new_slot = told[0]
    assert slot == new_slot and int(n) >= 1
    ids = []
    for part in which.split(", "):
        lo, _, hi = part.partition("-")
        ids += range(int(lo), int(hi or lo) + 1)
    assert len(ids) == int(n) and all(0 <= i < 100 for i in ids)  # tasks of a 100-cell batch
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("steps ")]
    assert lines and "workers lost 1" in lines[-1]
    assert "workers lost" not in lines[0] or "batch 1 " in lines[0]
