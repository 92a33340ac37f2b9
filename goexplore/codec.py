"""Compression of emulator states.

An ALE state is 7,741 bytes, of which only ~150 byte positions ever differ
between the states of a run (RAM, CPU and TIA registers, frame counters); the
rest is the same everywhere. Plain zstd makes ~3,900 bytes of a state, zstd
with a 16 KB dictionary trained on the run's states ~120-150. The *state
model* the master trains on the run's own states does better (~65-80 bytes):

* ``base``: one state of the run (the root's);
* ``mask``: the positions where any training state differs from ``base``;
* a zstd dictionary trained on the transformed training states.

A state is transformed to (the bytes at the mask positions, the few other
positions where it differs from ``base`` with their values), and that is
compressed with zstd and the dictionary (magicless frames: 4 bytes less).

Every blob starts with a tag byte that says how it was made, so blobs of every
kind stay readable side by side (a checkpoint written before the model
existed, say):

* ``0``: plain zstd;
* ``1``: zstd with a plain zstd dictionary (``dictionary`` is one);
* ``2 + g``: the state model of generation ``g`` (``dictionary`` is a model).

The master retrains the model as the archive grows (:data:`TRAIN_AT`),
recompresses the archive with it and hands it to the workers at a batch
boundary, so a run only ever holds blobs of one generation; a blob of another
generation is refused, never misread. Training is deterministic: the same
states give the same model, hence the same bytes (a resumed run stores
exactly what an uninterrupted one does).

The frames carry no checksum (checkpoint files are covered by SHA-256 in their
manifest); a blob that is truncated, of an unknown kind, or needs a model that
is missing is a :class:`~goexplore.errors.CheckpointError`.
"""

from __future__ import annotations

import struct

import numpy as np
import zstandard as zstd

from goexplore.errors import CheckpointError

LEVEL = 3
TAG_PLAIN, TAG_DICT, TAG_MODEL = 0, 1, 2
DICT_SIZE = 16 * 1024
#: archive sizes at which the master (re)trains the state model
TRAIN_AT = (256, 1024, 4096, 16384, 65536)
MAX_SAMPLES = 1024  # states a model is trained on (spread over the archive)
MIN_STATE = 512  # smaller states (the toy's 56 bytes) get no model
_MAGIC = b"GXSM1"
_HEAD = struct.Struct("<BII")  # generation, len(base), len(mask positions)


def _model_params():
    return zstd.ZstdCompressionParameters.from_level(
        LEVEL,
        format=zstd.FORMAT_ZSTD1_MAGICLESS,
        write_checksum=0,
        write_dict_id=0,
        write_content_size=1,
    )


class StateModel:
    """base state + mask positions + zstd dictionary (see the module docstring)."""

    def __init__(self, generation: int, base: bytes, positions: np.ndarray, zdict: bytes):
        self.generation, self.zdict = generation, zdict
        self.base = np.frombuffer(base, np.uint8)
        self.positions = np.asarray(positions, np.uint32)
        self.rest = np.ones(len(self.base), np.bool_)
        self.rest[self.positions] = False
        d = zstd.ZstdCompressionDict(zdict)
        self._c = zstd.ZstdCompressor(dict_data=d, compression_params=_model_params())
        self._d = zstd.ZstdDecompressor(dict_data=d, format=zstd.FORMAT_ZSTD1_MAGICLESS)

    def to_bytes(self) -> bytes:
        return b"".join(
            [
                _MAGIC,
                _HEAD.pack(self.generation, len(self.base), len(self.positions)),
                self.base.tobytes(),
                self.positions.tobytes(),
                self.zdict,
            ]
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> StateModel:
        o = len(_MAGIC)
        g, nb, npos = _HEAD.unpack_from(blob, o)
        o += _HEAD.size
        base = blob[o : o + nb]
        pos = np.frombuffer(blob, np.uint32, npos, o + nb)
        zdict = blob[o + nb + 4 * npos :]
        if nb == 0 or len(base) != nb or len(zdict) < 64 or (npos and int(pos.max()) >= nb):
            raise ValueError("truncated state model")
        return cls(g, base, pos, zdict)

    def transform(self, raw: bytes) -> bytes | None:
        """The bytes zstd sees, or None if ``raw`` does not fit the model."""
        s = np.frombuffer(raw, np.uint8)
        if len(s) != len(self.base):
            return None
        other = np.flatnonzero((s != self.base) & self.rest).astype(np.uint32)
        return b"".join(
            [
                struct.pack("<I", len(other)),
                other.tobytes(),
                s[other].tobytes(),
                s[self.positions].tobytes(),
            ]
        )

    def untransform(self, data: bytes) -> bytes:
        (k,) = struct.unpack_from("<I", data)
        npos = len(self.positions)
        if len(data) != 4 + 5 * k + npos:
            raise ValueError("state does not fit the model")
        other = np.frombuffer(data, np.uint32, k, 4)
        s = self.base.copy()
        s[other] = np.frombuffer(data, np.uint8, k, 4 + 4 * k)
        s[self.positions] = np.frombuffer(data, np.uint8, npos, 4 + 5 * k)
        return s.tobytes()

    def compress(self, raw: bytes) -> bytes | None:
        data = self.transform(raw)
        return None if data is None else self._c.compress(data)

    def decompress(self, payload) -> bytes:
        return self.untransform(self._d.decompress(payload))


class StateCodec:
    """Compress/decompress state blobs. ``dictionary``: None (plain zstd), a
    serialized :class:`StateModel`, or (older runs) a plain zstd dictionary."""

    def __init__(self, dictionary: bytes | None = None):
        self.dictionary = dictionary
        self.generation = None
        self._plain_c = zstd.ZstdCompressor(level=LEVEL, write_checksum=False)
        self._plain_d = zstd.ZstdDecompressor()
        self._dict_c = self._dict_d = self._model = None
        if not dictionary:
            return
        try:
            if dictionary.startswith(_MAGIC):
                self._model = StateModel.from_bytes(dictionary)
                self.generation = self._model.generation
            else:
                d = zstd.ZstdCompressionDict(dictionary)
                d.precompute_compress(level=LEVEL)
                self._dict_c = zstd.ZstdCompressor(
                    level=LEVEL, dict_data=d, write_checksum=False, write_dict_id=False
                )
                self._dict_d = zstd.ZstdDecompressor(dict_data=d)
        except (zstd.ZstdError, ValueError, struct.error) as e:
            raise CheckpointError(f"damaged state dictionary ({e})") from None

    @property
    def _tag(self) -> int:
        if self._model is not None:
            return TAG_MODEL + self._model.generation
        return TAG_DICT if self._dict_c is not None else TAG_PLAIN

    def compress(self, raw: bytes) -> bytes:
        if self._model is not None:
            payload = self._model.compress(raw)
            if payload is not None:
                return bytes([TAG_MODEL + self._model.generation]) + payload
        elif self._dict_c is not None:
            return b"\x01" + self._dict_c.compress(raw)
        return b"\x00" + self._plain_c.compress(raw)

    def decompress(self, blob: bytes) -> bytes:
        if not blob:
            raise CheckpointError("empty state blob")
        tag = blob[0]
        payload = memoryview(blob)[1:]
        try:
            if tag == TAG_PLAIN:
                return self._plain_d.decompress(payload)
            if tag == TAG_DICT and self._dict_d is not None:
                return self._dict_d.decompress(payload)
            if self._model is not None and tag == TAG_MODEL + self._model.generation:
                return self._model.decompress(payload)
        except (zstd.ZstdError, ValueError, struct.error) as e:
            raise CheckpointError(f"damaged state blob ({e})") from None
        if tag == TAG_DICT or tag >= TAG_MODEL:
            raise CheckpointError(
                f"state blob (tag {tag}) made with a compression dictionary "
                "this codec does not have"
            )
        raise CheckpointError(f"state blob with unknown codec tag {tag}")

    def recompress(self, blob: bytes) -> bytes:
        """A blob in this codec's current form (unchanged if it already is)."""
        return blob if blob[0] == self._tag else self.compress(self.decompress(blob))


def train_model(
    raw_states: list[bytes], generation: int = 0, size: int = DICT_SIZE
) -> bytes | None:
    """A serialized :class:`StateModel` for these (uncompressed) states, or None
    when one would not help (states too small, too few, of different sizes) or
    training fails. Deterministic. The first state is the model's base."""
    if len(raw_states) < 16 or generation > 250:
        return None
    n = len(raw_states[0])
    if n < MIN_STATE or any(len(s) != n for s in raw_states):
        return None
    S = np.frombuffer(b"".join(raw_states), np.uint8).reshape(len(raw_states), n)
    base = S[0]
    positions = np.flatnonzero((S != base).any(axis=0)).astype(np.uint32)
    shell = StateModel.__new__(StateModel)
    shell.base, shell.positions = base, positions
    shell.rest = np.ones(n, np.bool_)
    shell.rest[positions] = False
    samples = [StateModel.transform(shell, s) for s in raw_states]
    total = sum(map(len, samples))
    size = min(size, max(1024, total // 4))
    try:
        zdict = zstd.train_dictionary(
            size, samples, k=min(2048, size // 2), d=8, steps=0, threads=0
        ).as_bytes()
    except zstd.ZstdError:
        return None
    return StateModel(generation, base.tobytes(), positions, zdict).to_bytes()


def train_dictionary(raw_states: list[bytes], size: int = DICT_SIZE) -> bytes | None:
    """A plain zstd dictionary (tag-1 blobs), or None. Deterministic."""
    if len(raw_states) < 16 or sum(map(len, raw_states)) / len(raw_states) < MIN_STATE:
        return None
    size = min(size, sum(map(len, raw_states)) // 8)
    try:
        return zstd.train_dictionary(
            size, raw_states, k=min(2048, size // 2), d=8, steps=0, threads=0
        ).as_bytes()
    except zstd.ZstdError:
        return None
