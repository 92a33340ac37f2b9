"""Dynamic downscaling (Ecoffet et al., Nature 2021): the downscale, re-chosen
as the archive grows.

A key is the reference's downscale (:class:`~goexplore.cells.downscale.DownscaleCells`,
bit-identical to cv2 INTER_AREA) with a width, height and number of grey levels
that the master re-chooses during the run (:mod:`goexplore.dynamic`). Before the
first choice every frame is the same cell (the paper's ``first_compute_archive_size=1``).

The representation a task keys with travels in the task (``Task.rep``, the
bytes of :meth:`DynamicDownscaleCells.params_bytes`): workers hold no state
about it, so a replaced worker or a resumed run needs nothing to be told.

With ``score_bin`` > 0 (``--cell-score-bin``, the original code's ``--use_scores``)
a key is also the score divided by the bin, 4 bytes after the frame's: two states on
one screen that differ in score (a key taken and held, an item picked up) stay two
cells. The downscale is still chosen from the frames alone.

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
_SCORE = struct.Struct("<i")  # score // score_bin, after the frame's key


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
    config names a ``dynamic_start``. With ``score_bin`` > 0 the key also holds the
    score // ``score_bin``: its keyer then takes the score, ``key(frame, facts, score)``."""

    name = "downscale-dynamic"
    needs_context = False
    dynamic = True  # keys change during the run; tasks carry the parameters

    def __init__(self, params: tuple[int, int, int] | None = None, score_bin: int = 0):
        self.params = None if params is None else tuple(int(x) for x in params)
        self.score_bin = int(score_bin)
        self.keys_score = self.score_bin > 0  # the keyer takes the score
        self.score_tail = _SCORE.size if self.keys_score else 0  # the key's last bytes
        self._fixed = None if params is None else DownscaleCells(*self.params)

    @classmethod
    def from_config(cls, cfg) -> DynamicDownscaleCells:
        """The representation before the first choice: ``dynamic_start``, or one cell."""
        start = getattr(cfg, "dynamic_start", "")
        bin_ = getattr(cfg, "cell_score_bin", 0)
        return cls(parse_downscale(start) if start else None, bin_)

    @staticmethod
    def problems(env: str, fact_names: tuple[str, ...]) -> list[str]:
        return []  # any frame can be downscaled

    @property
    def key_size(self) -> int:
        frame = 1 if self._fixed is None else self._fixed.key_size
        return frame + self.score_tail

    def params_bytes(self) -> bytes:
        return b"" if self.params is None else _PARAMS.pack(*self.params)

    def with_params(self, params: tuple[int, int, int] | None) -> DynamicDownscaleCells:
        """The same representation (score bin included) with another downscale."""
        return DynamicDownscaleCells(params, self.score_bin)

    def at(self, params: bytes) -> DynamicDownscaleCells:
        """The representation a task names (``Task.rep``); cached."""
        return _at(params, self.score_bin)

    def key(self, frame: np.ndarray) -> bytes:
        """The frame's part of a key."""
        return WARMUP_KEY if self._fixed is None else self._fixed.key(frame)

    def keys(self, frames: np.ndarray, scores: np.ndarray | None = None) -> np.ndarray:
        """Keys of a stack of frames: their frames' part only, or whole keys given
        each frame's ``scores`` (with a score bin)."""
        if self._fixed is None:
            rows = np.zeros((len(frames), 1), np.uint8)
        else:
            rows = self._fixed.keys(frames)
        if scores is None or not self.keys_score:
            return rows
        part = np.floor_divide(scores, self.score_bin).astype("<i4").view(np.uint8)
        return np.hstack([rows, part.reshape(len(frames), _SCORE.size)])

    def keyer(self, start_key: bytes = b""):
        key = self.key
        if not self.keys_score:
            return lambda frame, facts: key(frame)
        pack, b = _SCORE.pack, self.score_bin
        return lambda frame, facts, score=0.0: key(frame) + pack(int(score // b))

    def describe(self, key: bytes = b"") -> str:
        if self.params is None:
            text = "dynamic downscale (warm-up: one cell)"
        else:
            w, h, levels = self.params
            text = f"dynamic downscale, now {w}x{h}, {levels + 1} grey levels"
        if not self.keys_score:
            return text
        b = self.score_bin
        if len(key) != self.key_size:
            return text + f", and score // {b}"
        lo = _SCORE.unpack(key[-_SCORE.size :])[0] * b
        return text + (f", score {lo}" if b == 1 else f", score {lo}-{lo + b - 1}")

    def place(self, key: bytes):
        return None

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, DynamicDownscaleCells)
            and other.params == self.params
            and other.score_bin == self.score_bin
        )

    def __hash__(self) -> int:
        return hash((self.params, self.score_bin))

    def __repr__(self) -> str:
        if self.keys_score:
            return f"DynamicDownscaleCells({self.params}, score_bin={self.score_bin})"
        return f"DynamicDownscaleCells({self.params})"


@lru_cache(maxsize=8)
def _at(params: bytes, score_bin: int = 0) -> DynamicDownscaleCells:
    if not params:
        return DynamicDownscaleCells(None, score_bin)
    return DynamicDownscaleCells(_PARAMS.unpack(params), score_bin)
