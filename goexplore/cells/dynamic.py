"""Dynamic downscaling (Ecoffet et al., Nature 2021): the downscale, re-chosen
as the archive grows.

A key is the reference's downscale (:class:`~goexplore.cells.downscale.DownscaleCells`,
bit-identical to cv2 INTER_AREA) with a width, height and number of grey levels
that the master re-chooses during the run (:mod:`goexplore.dynamic`). Before the
first choice every frame is the same cell (the paper's ``first_compute_archive_size=1``).

The representation a task keys with travels in the task (``Task.rep``, the
bytes of :meth:`DynamicDownscaleCells.params_bytes`): workers hold no state
about it, so a replaced worker or a resumed run needs nothing to be told.

Re-keying the archive needs each cell's frame: with this representation the
worker also returns, for each candidate step, its full grayscale frame,
compressed (:class:`FrameCodec`, lossless: every later key is exact), and a
sample of the frames its episode passed through (for the search).
"""

from __future__ import annotations

import struct
from functools import lru_cache

import numpy as np
import zstandard

from goexplore.cells.downscale import DownscaleCells
from goexplore.config import parse_downscale

__all__ = ["DynamicDownscaleCells", "FrameCodec", "WARMUP_KEY"]

WARMUP_KEY = b"\x00"  # every frame's key before the first representation is chosen
_PARAMS = struct.Struct("<HHH")  # width, height, levels
_SHAPE = struct.Struct("<HH")  # a compressed frame's height, width


class FrameCodec:
    """Lossless compression of uint8 frames (zstd level 1: ~700 B for a
    210x160 Montezuma frame, ~25 µs); a 4-byte header holds the shape."""

    def __init__(self) -> None:
        self._c = zstandard.ZstdCompressor(level=1)
        self._d = zstandard.ZstdDecompressor()

    def compress(self, frame: np.ndarray) -> bytes:
        h, w = frame.shape
        return _SHAPE.pack(h, w) + self._c.compress(np.ascontiguousarray(frame).data)

    def decompress(self, blob: bytes) -> np.ndarray:
        h, w = _SHAPE.unpack_from(blob)
        raw = self._d.decompress(memoryview(blob)[_SHAPE.size :], max_output_size=h * w)
        if len(raw) != h * w:
            raise ValueError(f"a compressed frame of {h}x{w} decompressed to {len(raw)} bytes")
        return np.frombuffer(raw, np.uint8).reshape(h, w)

    @staticmethod
    def shape(blob: bytes) -> tuple[int, int]:
        return _SHAPE.unpack_from(blob)


class DynamicDownscaleCells:
    """The downscale ``width`` x ``height`` with ``levels`` grey levels, re-chosen
    during the run; ``params=None`` before the first choice (one cell) unless the
    config names a ``dynamic_start``."""

    name = "downscale-dynamic"
    needs_context = False
    dynamic = True  # keys change during the run; tasks carry the parameters

    def __init__(self, params: tuple[int, int, int] | None = None):
        self.params = None if params is None else tuple(int(x) for x in params)
        self._fixed = None if params is None else DownscaleCells(*self.params)

    @classmethod
    def from_config(cls, cfg) -> DynamicDownscaleCells:
        """The representation before the first choice: ``dynamic_start``, or one cell."""
        start = getattr(cfg, "dynamic_start", "")
        return cls(parse_downscale(start) if start else None)

    @staticmethod
    def problems(env: str, fact_names: tuple[str, ...]) -> list[str]:
        return []  # any frame can be downscaled

    @property
    def key_size(self) -> int:
        return 1 if self._fixed is None else self._fixed.key_size

    def params_bytes(self) -> bytes:
        return b"" if self.params is None else _PARAMS.pack(*self.params)

    def at(self, params: bytes) -> DynamicDownscaleCells:
        """The representation a task names (``Task.rep``); cached."""
        return _at(params)

    def key(self, frame: np.ndarray) -> bytes:
        return WARMUP_KEY if self._fixed is None else self._fixed.key(frame)

    def keys(self, frames: np.ndarray) -> np.ndarray:
        if self._fixed is None:
            return np.zeros((len(frames), 1), np.uint8)
        return self._fixed.keys(frames)

    def keyer(self, start_key: bytes = b""):
        key = self.key
        return lambda frame, facts: key(frame)

    def describe(self, key: bytes = b"") -> str:
        if self.params is None:
            return "dynamic downscale (warm-up: one cell)"
        w, h, levels = self.params
        return f"dynamic downscale, now {w}x{h}, {levels + 1} grey levels"

    def place(self, key: bytes):
        return None

    def __eq__(self, other) -> bool:
        return isinstance(other, DynamicDownscaleCells) and other.params == self.params

    def __hash__(self) -> int:
        return hash(self.params)

    def __repr__(self) -> str:
        return f"DynamicDownscaleCells({self.params})"


@lru_cache(maxsize=8)
def _at(params: bytes) -> DynamicDownscaleCells:
    if not params:
        return DynamicDownscaleCells(None)
    return DynamicDownscaleCells(_PARAMS.unpack(params))
