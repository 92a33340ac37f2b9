"""The backend protocol: where exploration episodes run.

A backend owns workers (each a :class:`~goexplore.backends.worker.Worker`:
one env and its archive view) and runs the master's batches on them. Every
backend gives the same results: tasks carry their own seeds, and results come
back in task order, so the archive does not depend on which worker ran what,
how many there are, or whether one died and its tasks ran again.

A new backend is one module with a class that implements :class:`Backend`,
plus one line in :data:`REGISTRY`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from goexplore.backends.worker import WorkerSpec
from goexplore.wire import EpisodeResult, Task, ViewDelta

#: name -> "module:class" (imported on first use)
REGISTRY: dict[str, str] = {
    "inline": "goexplore.backends.inline:InlineBackend",
    "processes": "goexplore.backends.processes:ProcessBackend",
    "ray": "goexplore.backends.ray:RayBackend",
}

#: how a backend tells the user about faults: one line of text
Notify = Callable[[str], None]


@dataclass
class Counters:
    """What a backend measures about itself (summed over a run's backends)."""

    bytes_sent: int = 0  # master -> workers: views, tasks, codecs
    bytes_received: int = 0  # workers -> master: results
    messages: int = 0  # result messages received
    between_batches_s: float = 0.0  # worker-seconds waiting between batches
    tail_idle_s: float = 0.0  # worker-seconds idle at batches' tails
    workers_lost: int = 0  # workers that died and were replaced
    tasks_rerun: int = 0  # tasks run again because their worker died

    def add(self, other: Counters) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@runtime_checkable
class Backend(Protocol):
    n_workers: int
    counters: Counters

    def start(
        self,
        full_view: ViewDelta,
        dictionary: bytes | None = None,
        view_fn: Callable[[], ViewDelta] | None = None,
    ) -> None:
        """Start the workers with the whole archive view and the state codec's
        dictionary; ``view_fn()`` gives the current view (for a replacement worker)."""

    def run_batch(self, delta: ViewDelta, tasks: list[Task]) -> Iterator[EpisodeResult]:
        """Bring every worker's view up to date with ``delta``, run ``tasks``, and
        yield their results strictly in task order."""

    def set_codec(self, dictionary: bytes | None) -> None:
        """Hand the workers a new state codec (at a batch boundary)."""

    def close(self) -> None:
        """Stop the workers (idempotent)."""


MAX_CHUNK = 12  # tasks per message at most


def next_chunk(left: int, n_workers: int, queued: int) -> int:
    """The dispatch policy every backend shares: how many of the batch's ``left``
    tasks to send a worker that has ``queued`` chunks unanswered (0: none now).
    Guided chunks of about left / 2W tasks (at most MAX_CHUNK), a second one
    queued behind the current one while much is left (no worker waits on the
    master), only one near the end (a short tail)."""
    limit = 2 if left >= 8 * n_workers else 1
    if not left or queued >= limit:
        return 0
    return max(1, min(MAX_CHUNK, left // (2 * n_workers)))


def backend_names() -> list[str]:
    return list(REGISTRY)


def local_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def make_backend(
    name: str, spec: WorkerSpec, n_workers: int, notify: Notify | None = None, **options
) -> Backend:
    """The backend ``name`` with ``n_workers`` workers (0: auto, the backend's
    own count of CPUs). ``processes`` with one worker runs in-process
    (``inline``): the same results, no process to feed."""
    if name == "processes" and n_workers == 0:
        n_workers = local_cores()
    if name == "processes" and n_workers <= 1:
        name = "inline"
    try:
        module, cls = REGISTRY[name].split(":")
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(REGISTRY)}"
        ) from None
    backend_cls = getattr(importlib.import_module(module), cls)
    return backend_cls(spec, n_workers, notify=notify or (lambda msg: None), **options)
