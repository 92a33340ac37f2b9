"""The archive's key index: cell key -> id, with no Python object per cell.

Keys are packed two 4-bit values a byte while every key value is below 16 (the
default 9 grey levels); the index is an open-addressing table of int32 ids
(linear probing) over the packed key rows.
"""

from __future__ import annotations

import numpy as np

from goexplore.cells import DONE_KEY

_NIBBLES = bytes(range(16))  # the byte values a nibble-packed key can hold


class KeyIndex:
    """Mixin of :class:`~goexplore.archive.Archive`: its keys and their index."""

    @property
    def _key_width(self) -> int:
        return (self.key_size + 1) // 2 if self._nibbles else self.key_size

    def _pack(self, key: bytes) -> bytes:
        if not self._nibbles:
            return key
        if len(key) % 2:
            key += b"\x00"
        x = int.from_bytes(key, "little")
        return ((x | (x >> 4)).to_bytes(len(key), "little"))[0::2]

    def _unpack_rows(self, rows: np.ndarray) -> np.ndarray:
        if not self._nibbles:
            return rows
        out = np.empty((len(rows), 2 * rows.shape[1]), np.uint8)
        out[:, 0::2] = rows & 15
        out[:, 1::2] = rows >> 4
        return out[:, : self.key_size]

    def _pack_rows(self, keys: np.ndarray) -> np.ndarray:
        if not self._nibbles:
            return keys
        if keys.shape[1] % 2:
            keys = np.concatenate([keys, np.zeros((len(keys), 1), np.uint8)], axis=1)
        return keys[:, 0::2] | (keys[:, 1::2] << 4)

    def _to_bytes_keys(self) -> None:
        """Leave nibble packing (a key value >= 16 arrived)."""
        keys = self._unpack_rows(self._keys[: self.n])
        self._nibbles = False
        self._keys = np.zeros((self._cap, self.key_size), np.uint8)
        self._keys[: self.n] = keys
        self._rebuild_index()

    @property
    def keys(self) -> np.ndarray:
        """The keys as [n, key_size] uint8 (the DONE cell's row is zeros)."""
        return self._unpack_rows(self._keys[: self.n])

    def key_of(self, i: int) -> bytes:
        if i == self._done_id:
            return DONE_KEY
        return self._unpack_rows(self._keys[i : i + 1])[0].tobytes()

    @property
    def index(self) -> dict[bytes, int]:
        """key -> id of every cell (a copy: for tests and tools)."""
        return {self.key_of(i): i for i in range(self.n)}

    def lookup(self, key: bytes) -> int:
        """The id of the cell with this key, or -1."""
        if key == DONE_KEY:
            return self._done_id
        if len(key) != self.key_size:
            return -1
        if self._nibbles:
            if key.translate(None, _NIBBLES):  # every stored key value is below 16
                return -1
            pk = self._pack(key)
        else:
            pk = key
        slots, keys = self._slots, self._keys
        mask = len(slots) - 1
        s = hash(pk) & mask
        while True:
            c = int(slots[s])
            if c < 0:
                return -1
            if keys[c].tobytes() == pk:
                return c
            s = (s + 1) & mask

    def _index_insert(self, i: int, pk: bytes) -> None:
        if 2 * (self._n_indexed + 1) > len(self._slots):
            self._rebuild_index(min_slots=4 * (self._n_indexed + 1))
            return  # the rebuild indexed cell i
        slots = self._slots
        mask = len(slots) - 1
        s = hash(pk) & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = i
        self._n_indexed += 1

    def _rebuild_index(self, min_slots: int = 0) -> None:
        """Index every cell 0..n-1 (vectorised rounds of linear probing).
        Raises ValueError on duplicate keys."""
        ids = np.flatnonzero(~self.is_done[: self.n])
        size = 64
        while size < max(min_slots, 2 * len(ids) + 2):
            size *= 2
        slots = np.full(size, -1, np.int32)
        w = self._keys.shape[1]
        block = self._keys[: self.n].tobytes()
        hashes = np.fromiter(
            (hash(block[i * w : (i + 1) * w]) for i in ids.tolist()), np.int64, len(ids)
        )
        if len(np.unique(hashes)) != len(hashes):
            rows = self._keys[ids]
            if len(np.unique(rows.view(np.dtype((np.void, w))).ravel())) != len(ids):
                raise ValueError("duplicate cell keys")
        pending, pos = ids.astype(np.int32), hashes & (size - 1)
        while len(pending):
            free = np.flatnonzero(slots[pos] < 0)
            u, first = np.unique(pos[free], return_index=True)
            slots[u] = pending[free[first]]
            placed = np.zeros(len(pending), np.bool_)
            placed[free[first]] = True
            pending, pos = pending[~placed], (pos[~placed] + 1) & (size - 1)
        self._slots = slots
        self._n_indexed = len(ids)
