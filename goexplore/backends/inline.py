"""Everything in the master process: the simplest backend, and the one tests
and debugging use. Same worker code as the process backend."""

from __future__ import annotations

from collections.abc import Iterator

from goexplore.backends.worker import Worker, WorkerSpec
from goexplore.explore import EpisodeResult, Task, ViewDelta


class InlineBackend:
    n_workers = 1

    def __init__(self, spec: WorkerSpec):
        self.worker = Worker(spec)
        self.bytes_received = 0  # nothing crosses a process boundary
        self.bytes_sent = 0
        self.messages = 0

    def start(self, full_view: ViewDelta, dictionary: bytes | None = None, view_fn=None) -> None:
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
