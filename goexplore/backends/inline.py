"""Everything in the master process: the simplest backend, and the one tests
and debugging use. Same worker code as the process backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from goexplore.backends.base import Counters, Notify
from goexplore.backends.worker import Worker, WorkerSpec
from goexplore.wire import EpisodeResult, Task, ViewDelta


class InlineBackend:
    def __init__(self, spec: WorkerSpec, n_workers: int = 1, notify: Notify | None = None):
        self.n_workers = 1
        self.worker = Worker(spec)
        self.counters = Counters()  # nothing crosses a process boundary

    def start(
        self,
        full_view: ViewDelta,
        dictionary: bytes | None = None,
        view_fn: Callable[[], ViewDelta] | None = None,
    ) -> None:
        self.worker.view.apply(full_view)
        self.worker.set_codec(dictionary)

    def set_codec(self, dictionary: bytes | None) -> None:
        self.worker.set_codec(dictionary)

    def run_batch(self, delta: ViewDelta, tasks: list[Task]) -> Iterator[EpisodeResult]:
        self.worker.view.apply(delta)
        for task in tasks:
            yield self.worker.run(task)

    def close(self) -> None:
        self.worker.close()
