"""Fault-injection points for the crash-safety tests (private). Off unless one of
these environment variables is set when the process first reaches a point;
then :func:`hit` becomes a no-op function for the rest of the process:

``GOEXPLORE_TEST_KILL_AT="POINT:N[,POINT:N...]"``
    the process SIGKILLs itself the N-th time (1-based) it reaches POINT;
``GOEXPLORE_TEST_RAISE_AT="POINT:N[,...]"``
    it raises ``RuntimeError`` there instead.

Counts are per process (a worker process counts its own tasks). With
``GOEXPLORE_TEST_ONCE=PATH`` a fault fires only in the first process to create
PATH (so a replacement worker does not die again). Points:

``ckpt-files``    a checkpoint half written (archive.npz done, in its temp dir)
``ckpt-rename``   a checkpoint complete and renamed into place, LATEST not yet updated
``ckpt-publish``  LATEST updated, old checkpoints not yet pruned
``chunk-write``   an experience-log chunk half written (temp name)
``chunk-done``    a chunk renamed into place, not yet recorded anywhere
``task``          a worker process about to explore a task
"""

from __future__ import annotations

import os
import signal

_spec: tuple[dict[str, int], dict[str, int]] | None = None
_counts: dict[str, int] = {}


def _parse(var: str) -> dict[str, int]:
    out = {}
    for item in os.environ.get(var, "").split(","):
        if item.strip():
            point, _, n = item.partition(":")
            out[point.strip()] = int(n or 1)
    return out


def hit(point: str) -> None:
    global _spec
    if _spec is None:
        _spec = (_parse("GOEXPLORE_TEST_KILL_AT"), _parse("GOEXPLORE_TEST_RAISE_AT"))
    kill, fail = _spec
    if not (kill or fail):
        globals()["hit"] = _off  # callers look ``hit`` up on the module: now it costs nothing
        return
    n = _counts[point] = _counts.get(point, 0) + 1
    if n not in (kill.get(point), fail.get(point)) or not _first():
        return
    if kill.get(point) == n:
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"test fault injected at {point} #{n}")


def _off(point: str) -> None:
    """:func:`hit` when no fault is asked for."""


def _first() -> bool:
    once = os.environ.get("GOEXPLORE_TEST_ONCE")
    if not once:
        return True
    try:
        os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False
