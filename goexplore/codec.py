"""Compression of emulator states (and anything else shipped as bytes).

A state is stored as zstd frames. Once the archive holds enough states the
master trains a zstd dictionary on them (DESIGN.md section 3: 7.7 KB ALE
states shrink to ~120 bytes with it); every blob records which dictionary it
was made with in its first byte (0 = none), so old blobs stay readable.
"""
from __future__ import annotations

import zstandard as zstd

from goexplore.errors import CheckpointError

LEVEL = 3


class StateCodec:
    def __init__(self, dictionary: bytes | None = None):
        self.dictionary = dictionary
        self._plain_c = zstd.ZstdCompressor(level=LEVEL)
        self._plain_d = zstd.ZstdDecompressor()
        self._dict_c = self._dict_d = None
        if dictionary:
            d = zstd.ZstdCompressionDict(dictionary)
            self._dict_c = zstd.ZstdCompressor(level=LEVEL, dict_data=d)
            self._dict_d = zstd.ZstdDecompressor(dict_data=d)

    def compress(self, raw: bytes) -> bytes:
        if self._dict_c is not None:
            return b"\x01" + self._dict_c.compress(raw)
        return b"\x00" + self._plain_c.compress(raw)

    def decompress(self, blob: bytes) -> bytes:
        try:
            tag = blob[0]
            if tag == 0:
                return self._plain_d.decompress(blob[1:])
            if tag == 1 and self._dict_d is not None:
                return self._dict_d.decompress(blob[1:])
        except (zstd.ZstdError, IndexError) as e:
            raise CheckpointError(f"damaged state blob ({e})") from None
        raise CheckpointError(f"state blob with unknown codec tag {blob[:1]!r}")
