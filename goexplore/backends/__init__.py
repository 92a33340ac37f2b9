"""Where exploration episodes run: in-process, in worker processes (see
:mod:`goexplore.backends.base` for the protocol every backend implements)."""

from __future__ import annotations

from goexplore.backends.base import REGISTRY, Backend, Counters, backend_names, make_backend
from goexplore.backends.worker import WorkerSpec

__all__ = ["REGISTRY", "Backend", "Counters", "WorkerSpec", "backend_names", "make_backend"]
