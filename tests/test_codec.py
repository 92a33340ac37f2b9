"""State compression: the trained state model and dictionaries round trip, old
blobs stay readable, damage and foreign blobs are errors, never misreads."""

from __future__ import annotations

import numpy as np
import pytest

from goexplore.codec import StateCodec, train_dictionary, train_model
from goexplore.errors import CheckpointError


def _states(n=400, size=4000, seed=0, moving=60):
    """Emulator-like states: one fixed image with a few dozen bytes that vary."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, size, dtype=np.uint8)
    where = rng.choice(size, moving, replace=False)
    out = []
    for _ in range(n):
        s = base.copy()
        s[where] = rng.integers(0, 8, len(where))
        out.append(s.tobytes())
    return out


def test_model_round_trip_and_size():
    states = _states()
    m = train_model(states[:256], generation=1)
    assert m is not None
    plain, model = StateCodec(), StateCodec(m)
    for s in states[256:]:
        assert model.decompress(model.compress(s)) == s
    mean_plain = np.mean([len(plain.compress(s)) for s in states[256:]])
    mean_model = np.mean([len(model.compress(s)) for s in states[256:]])
    assert mean_model < mean_plain / 4  # the point of the model
    # states that move where the training states did not: still exact
    rng = np.random.default_rng(5)
    for s in states[300:320]:
        t = np.frombuffer(s, np.uint8).copy()
        t[rng.integers(0, len(t), 7)] ^= 0x5A
        assert model.decompress(model.compress(t.tobytes())) == t.tobytes()
    # a state of another size falls back to plain zstd (tag 0)
    odd = states[0] + b"xyz"
    assert model.compress(odd)[0] == 0 and model.decompress(model.compress(odd)) == odd


def test_plain_dictionary_round_trip():
    states = _states()
    d = train_dictionary(states[:256])
    codec = StateCodec(d)
    for s in states[256:300]:
        b = codec.compress(s)
        assert b[0] == 1 and codec.decompress(b) == s


def test_training_is_deterministic():
    states = _states()[:300]
    assert train_model(states, 2) == train_model(list(states), 2)
    assert train_dictionary(states) == train_dictionary(list(states))
    c1, c2 = StateCodec(train_model(states, 2)), StateCodec(train_model(states, 2))
    assert [c1.compress(s) for s in states[:20]] == [c2.compress(s) for s in states[:20]]


def test_no_model_for_tiny_or_few_states():
    assert train_model([bytes(56)] * 1000) is None  # the toy's 56-byte states
    assert train_model(_states(n=5)) is None
    assert train_dictionary([bytes(56)] * 1000) is None


def test_old_blobs_stay_readable():
    states = _states()
    plain = StateCodec()
    old = [plain.compress(s) for s in states[:50]]
    assert all(b[0] == 0 for b in old)
    new = StateCodec(train_model(states[:256], generation=3))
    assert [new.decompress(b) for b in old] == states[:50]
    blob = new.compress(states[0])
    assert blob[0] == 2 + 3
    assert new.recompress(old[0])[0] == 5 and new.decompress(new.recompress(old[0])) == states[0]
    assert new.recompress(blob) is blob
    # tag-1 blobs of an older plain-dictionary run, read with that run's dictionary
    d = train_dictionary(states[:256])
    assert StateCodec(d).decompress(StateCodec(d).compress(states[1])) == states[1]


def test_blob_of_another_generation_is_refused():
    states = _states()
    g1 = StateCodec(train_model(states[:256], generation=1))
    g2 = StateCodec(train_model(states[100:356], generation=2))
    with pytest.raises(CheckpointError, match="dictionary"):
        g2.decompress(g1.compress(states[0]))
    assert g1.decompress(g1.compress(states[0])) == states[0]


@pytest.mark.parametrize(
    "damage", ["empty", "tag", "truncated", "garbage", "no-model", "header", "bad-length"]
)
def test_damaged_blob_raises_checkpoint_error(damage):
    states = _states()
    codec = StateCodec(train_model(states[:256], generation=1))
    blob = codec.compress(states[300])
    plain_blob = StateCodec().compress(states[300])
    bad = {
        "empty": b"",
        "tag": b"\xf7" + blob[1:],
        "truncated": blob[: len(blob) // 2],
        "garbage": b"\x00" + bytes(range(200)),
        "no-model": blob,
        "header": plain_blob[:1] + b"\xff\xff\xff\xff" + plain_blob[5:],
        "bad-length": blob[:1] + codec._model._c.compress(b"\x00" * 13),
    }[damage]
    reader = StateCodec() if damage == "no-model" else codec
    with pytest.raises(CheckpointError):
        reader.decompress(bad)


@pytest.mark.parametrize("model", [b"\x37\xa4\x30\xec" + bytes(100), b"GXSM1\x01" + bytes(20)])
def test_damaged_dictionary_raises_checkpoint_error(model):
    with pytest.raises(CheckpointError):
        StateCodec(model)
