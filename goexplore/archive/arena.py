"""The archive's state arena: every cell's compressed emulator state in one
bytes buffer, addressed by offset and length (compacted when a tenth of it is
garbage)."""

from __future__ import annotations

import numpy as np

_COMPACT_AT = 0.10  # compact the state arena when this share of it is garbage


class StateArena:
    """Mixin of :class:`~goexplore.archive.Archive`: where its states live."""

    def state(self, i: int) -> bytes:
        o = int(self.state_off[i])
        return bytes(self._arena[o : o + int(self.state_len[i])])

    @property
    def states(self) -> list[bytes]:
        """Every cell's compressed state (a copy: for tests and tools)."""
        return [self.state(i) for i in range(self.n)]

    def state_blobs(self) -> list[memoryview]:
        """Every cell's state, as views into the arena (release them before adding)."""
        mv = memoryview(self._arena)
        return [
            mv[o : o + ln]
            for o, ln in zip(self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist())
        ]

    def _store_state(self, i: int, blob: bytes, new: bool) -> None:
        ln = len(blob)
        if not new:
            old = int(self.state_len[i])
            if ln <= old:  # fits in place
                o = int(self.state_off[i])
                self._arena[o : o + ln] = blob
                self.state_len[i] = ln
                self._garbage += old - ln
                return
            self._garbage += old
        self.state_off[i] = len(self._arena)
        self.state_len[i] = ln
        self._arena += blob
        if self._garbage > _COMPACT_AT * len(self._arena) and len(self._arena) > 1 << 16:
            self._compact()

    def _compact(self) -> None:
        mv = memoryview(self._arena)
        offs, lens = self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist()
        arena = bytearray(b"".join([mv[o : o + ln] for o, ln in zip(offs, lens)]))
        del mv
        self._arena = arena
        ends = np.cumsum(self.state_len[: self.n], dtype=np.int64)
        self.state_off[: self.n] = ends - self.state_len[: self.n]
        self._garbage = 0

    def recompress_states(self, old, new) -> None:
        """Rewrite every state, read with codec ``old``, in codec ``new``'s form."""
        mv = memoryview(self._arena)
        blobs = [
            new.compress(old.decompress(mv[o : o + ln]))
            for o, ln in zip(self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist())
        ]
        del mv
        lens = np.fromiter(map(len, blobs), np.int64, len(blobs))
        self.state_len[: self.n] = lens
        self.state_off[: self.n] = np.cumsum(lens) - lens
        self._arena = bytearray(b"".join(blobs))
        self._garbage = 0
