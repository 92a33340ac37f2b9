"""The experience log: every agent step ever executed, append-only.

Each entry is ``(prev, action, reward, done)`` where ``prev`` is the id of the
entry before it on the same trajectory (-1 at the root). A cell stores only
the id of its trajectory's last step (``traj_last``); walking ``prev`` back to
-1 rebuilds its action sequence: the demo source for replay and Phase 2.

Entries live in fixed-size chunks. Full chunks are written to
``<run>/explog/chunk_NNNNN.npz`` (atomically: temp name, fsync, rename) and
dropped from memory; only the active chunk is kept in RAM and in checkpoints.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from goexplore.errors import CheckpointError

FIELDS = (("prev", np.int64), ("act", np.uint8), ("rew", np.float32), ("done", np.uint8))


def chunk_name(i: int) -> str:
    return f"chunk_{i:05d}.npz"


def load_chunk(path: Path, expect_len: int | None = None) -> dict[str, np.ndarray]:
    """Load one chunk file; any damage is a CheckpointError naming the file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {name: z[name] for name, _ in FIELDS}
    except FileNotFoundError:
        raise CheckpointError(f"experience-log chunk missing: {path}") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise CheckpointError(f"experience-log chunk unreadable: {path} ({e})") from None
    n = len(out["prev"])
    for name, dtype in FIELDS:
        a = out[name]
        if a.dtype != dtype or a.shape != (n,):
            raise CheckpointError(f"experience-log chunk damaged: {path} (field {name!r})")
    if expect_len is not None and n != expect_len:
        raise CheckpointError(f"experience-log chunk {path} holds {n} entries, expected {expect_len}")
    return out


def write_npz_atomic(path: Path, arrays: dict[str, np.ndarray], compress: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        (np.savez_compressed if compress else np.savez)(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ExperienceLog:
    """Append-only step log in chunks; ``directory=None`` keeps chunks in RAM."""

    def __init__(self, directory: Path | None, chunk_size: int = 1 << 22):
        self.dir = Path(directory) if directory is not None else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.chunk_size = chunk_size
        self.count = 0          # entries ever appended
        self.n_flushed = 0      # chunks written out
        self._ram_chunks: list[dict[str, np.ndarray]] = []
        self._cache: dict[int, dict[str, np.ndarray]] = {}
        self._new_chunk()

    def _new_chunk(self) -> None:
        self.cur = {name: np.empty(self.chunk_size, dtype=dt) for name, dt in FIELDS}
        self.fill = 0

    def append_episode(self, prev0: int, actions: np.ndarray, rewards: np.ndarray,
                       done_last: bool) -> int:
        """Append one exploration episode (a chain starting after ``prev0``).
        Returns the id of its first entry; entry ``first + i`` is step ``i``."""
        n = len(actions)
        first = self.count
        prev = np.arange(first - 1, first + n - 1, dtype=np.int64)
        prev[0] = prev0
        done = np.zeros(n, dtype=np.uint8)
        done[-1] = done_last
        cols = {"prev": prev, "act": actions, "rew": rewards, "done": done}
        pos = 0
        while pos < n:
            take = min(n - pos, self.chunk_size - self.fill)
            for name, _ in FIELDS:
                self.cur[name][self.fill:self.fill + take] = cols[name][pos:pos + take]
            self.fill += take
            pos += take
            if self.fill == self.chunk_size:
                self._flush()
        self.count += n
        return first

    def _flush(self) -> None:
        arrays = {name: self.cur[name] for name, _ in FIELDS}
        if self.dir is not None:
            write_npz_atomic(self.dir / chunk_name(self.n_flushed), arrays)
        else:
            self._ram_chunks.append({k: v.copy() for k, v in arrays.items()})
        self.n_flushed += 1
        self._new_chunk()

    def _chunk(self, i: int) -> dict[str, np.ndarray]:
        if i == self.n_flushed:
            return self.cur
        if self.dir is None:
            return self._ram_chunks[i]
        if i not in self._cache:
            if len(self._cache) > 4:
                self._cache.clear()
            self._cache[i] = load_chunk(self.dir / chunk_name(i), self.chunk_size)
        return self._cache[i]

    def entry(self, idx: int) -> tuple[int, int, float, int]:
        c = self._chunk(idx // self.chunk_size)
        o = idx % self.chunk_size
        return int(c["prev"][o]), int(c["act"][o]), float(c["rew"][o]), int(c["done"][o])

    def trajectory(self, last: int) -> np.ndarray:
        """Actions from the root to entry ``last`` (inclusive), forward order."""
        acts = []
        idx = last
        while idx >= 0:
            if idx >= self.count:
                raise CheckpointError(f"experience log: entry {idx} beyond end {self.count}")
            c = self._chunk(idx // self.chunk_size)
            o = idx % self.chunk_size
            acts.append(int(c["act"][o]))
            nxt = int(c["prev"][o])
            if nxt >= idx:
                raise CheckpointError(f"experience log corrupt: entry {idx} points forward to {nxt}")
            idx = nxt
        return np.array(acts[::-1], dtype=np.uint8)

    def all_entries(self) -> dict[str, np.ndarray]:
        """Every entry as whole arrays (tests, export)."""
        parts = [self._chunk(i) for i in range(self.n_flushed)]
        parts.append({k: v[:self.fill] for k, v in self.cur.items()})
        return {name: np.concatenate([p[name] for p in parts]) for name, _ in FIELDS}

    # --- checkpointing ------------------------------------------------------
    def tail_arrays(self) -> dict[str, np.ndarray]:
        return {name: self.cur[name][:self.fill].copy() for name, _ in FIELDS}

    def restore(self, count: int, n_flushed: int, tail: dict[str, np.ndarray]) -> None:
        fill = count - n_flushed * self.chunk_size
        if not 0 <= fill < self.chunk_size or any(len(tail[k]) != fill for k, _ in FIELDS):
            raise CheckpointError(f"experience-log tail inconsistent with count {count}")
        if self.dir is not None:
            for i in range(n_flushed):
                p = self.dir / chunk_name(i)
                if not p.exists():
                    raise CheckpointError(f"experience-log chunk missing: {p}")
        self.count, self.n_flushed = count, n_flushed
        self._cache.clear()
        self._new_chunk()
        for name, dt in FIELDS:
            self.cur[name][:fill] = np.asarray(tail[name], dtype=dt)
        self.fill = fill
