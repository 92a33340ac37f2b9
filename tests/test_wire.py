"""The episode wire format: whatever the episodes, decoding gives back exactly
what was encoded, with the schema's dtypes, from any buffer type the backends
hand over (bytes from Ray, a memoryview past the process backend's tag byte)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goexplore.wire import EPISODE, decode_results, encode_results

_LIMITS = {"f8": None, "i4": 2**31 - 1, "i2": 2**15 - 1, "u1": 255}


def _values(dtype: str, n: int, nf: int):
    if dtype == "f8":
        v = st.floats(allow_nan=False, width=64)
    elif dtype == "?":
        v = st.booleans()
    elif dtype == "bytes":
        v = st.binary(max_size=40)
    else:
        v = st.integers(-_LIMITS[dtype] - 1 if dtype != "u1" else 0, _LIMITS[dtype])
    return v, n


@st.composite
def _episode(draw, nf: int, index: int) -> dict:
    sizes = {}
    for f in EPISODE:
        if f.size != "episode" and f.size not in sizes:
            sizes[f.size] = draw(st.integers(0, 60 if f.size == "steps" else 6))
    raw = {}
    for f in EPISODE:
        if f.size == "episode":
            v, _ = _values(f.dtype, 1, nf)
            raw[f.name] = index if f.name == "index" else draw(v)
            continue
        v, n = _values(f.dtype, sizes[f.size], nf)
        if f.per_item:
            raw[f.name] = [tuple(draw(st.lists(v, min_size=nf, max_size=nf))) for _ in range(n)]
        elif f.name == "actions":
            raw[f.name] = bytes(draw(st.lists(v, min_size=n, max_size=n)))
        else:
            raw[f.name] = draw(st.lists(v, min_size=n, max_size=n))
    return raw


@st.composite
def _message(draw):
    nf = draw(st.sampled_from([0, 1, 2, 5]))
    ne = draw(st.integers(1, 13))
    return nf, [draw(_episode(nf, i)) for i in range(ne)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_message(), st.sampled_from(["bytes", "bytearray", "view"]))
def test_decode_gives_back_what_was_encoded(msg, kind):
    nf, raws = msg
    buf = encode_results(raws, nf)
    if kind == "bytearray":
        buf = bytearray(buf)
    elif kind == "view":  # the process backend's message: a tag byte, then the results
        buf = memoryview(b"\x01" + buf)[1:]
    got = decode_results(buf)
    assert len(got) == len(raws)
    for res, raw in zip(got, raws):
        assert res.raw() == raw
        assert res.n == len(raw["actions"])
        for f in EPISODE:
            v = getattr(res, f.name)
            if f.dtype == "bytes":
                assert all(type(x) is bytes for x in v), f.name
            elif f.size != "episode":
                assert v.dtype == np.dtype(f.dtype), f.name
                assert v.shape == ((len(raw[f.name]), nf) if f.per_item else (len(raw[f.name]),))
