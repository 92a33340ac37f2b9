"""Where exploration episodes run: in-process, or in worker processes."""

from __future__ import annotations

from goexplore.backends.worker import WorkerSpec


def make_backend(spec: WorkerSpec, n_workers: int):
    if n_workers <= 1:
        from goexplore.backends.inline import InlineBackend

        return InlineBackend(spec)
    from goexplore.backends.processes import ProcessBackend

    return ProcessBackend(spec, n_workers)


__all__ = ["make_backend", "WorkerSpec"]
