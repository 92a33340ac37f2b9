"""The checkpoint and chunk loaders against random and mutated files
(hypothesis). Whatever the bytes, they

* only ever raise the project's own errors (GoExploreError subclasses),
* never allocate memory the file cannot justify (npz headers claiming huge
  shapes are refused before allocating; measured with tracemalloc, which
  sees numpy's allocations),
* never execute code (no pickle: object arrays are refused; JSON only).

Mutations are applied both without and with a re-signed manifest (and
re-recorded chunk checksums), so the parsers behind the checksums are
exercised too, through to a full resume (``prepare``) and ``verify``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import tempfile
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goexplore.config import Config
from goexplore.errors import CheckpointError, GoExploreError
from goexplore.explog import chunk_name, load_chunk, read_npz
from goexplore.runner import prepare
from goexplore.store import CKPT_FILES, RunDir, read_checkpoint, sha256_file
from goexplore.verify import check_checkpoint, verify_run

CFG = Config(env="toy", seed=1, total_frames=8_000, ckpt_every=0, explog_chunk=1_000)
MEM_LIMIT = 48 << 20  # bytes any single load may allocate here (files are ~100 KB)
FUZZ = settings(
    deadline=None,
    max_examples=120,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A small finished run: checkpoint, chunks, tail."""
    from goexplore.runner import execute

    d = tmp_path_factory.mktemp("fuzz") / "run"
    p, _ = prepare(CFG, d, None)
    execute(p, log=lambda *a: None)
    rd = RunDir(d)
    return {"dir": d, "ckpt": rd.latest_checkpoint(), "chunk": d / "explog" / chunk_name(0)}


class _Mem:
    """Peak Python+numpy allocation inside the block."""

    def __enter__(self):
        tracemalloc.start()
        return self

    def __exit__(self, *exc):
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert self.peak < MEM_LIMIT, f"allocated {self.peak:,} bytes"
        return False


def _only_our_errors(fn, *a, **k):
    with _Mem():
        try:
            return fn(*a, **k)
        except GoExploreError:
            return None


# --- mutations -------------------------------------------------------------------------------
mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("overwrite"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(
        st.just("int"),
        st.floats(0, 1),
        st.sampled_from([0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFFFFFF, 2**63 - 1, 0]),
    ),
)


def _mutate(data: bytes, mut) -> bytes:
    kind, where, arg = mut
    i = min(int(where * len(data)), max(len(data) - 1, 0))
    b = bytearray(data)
    if kind == "flip" and b:
        b[i] ^= arg
    elif kind == "truncate":
        del b[i:]
    elif kind == "insert":
        b[i:i] = arg
    elif kind == "overwrite":
        b[i : i + len(arg)] = arg
    elif kind == "int":  # a size/offset field blown up
        b[i : i + 8] = struct.pack("<Q", arg)
    return bytes(b)


# --- chunks ------------------------------------------------------------------------------------
@FUZZ
@given(data=st.binary(max_size=4096), expect=st.sampled_from([None, 1000, 0, 3]))
def test_chunk_loader_random_bytes(tmp_path_factory, data, expect):
    path = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "chunk_00000.npz"
    path.write_bytes(data)
    _only_our_errors(load_chunk, path, expect)


@FUZZ
@given(muts=st.lists(mutation, min_size=1, max_size=4), check_sha=st.booleans())
def test_chunk_loader_mutated(tmp_path_factory, good, muts, check_sha):
    data = good["chunk"].read_bytes()
    for m in muts:
        data = _mutate(data, m)
    path = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "chunk_00000.npz"
    path.write_bytes(data)
    sha = sha256_file(good["chunk"]) if check_sha else None
    out = _only_our_errors(load_chunk, path, 1000, sha)
    if out is not None:
        assert all(len(v) == 1000 for v in out.values())
        if check_sha:
            assert data == good["chunk"].read_bytes()


# --- crafted npy headers -------------------------------------------------------------------
def _npy(descr: str, shape, fortran: bool, body: bytes, version=(1, 0)) -> bytes:
    header = f"{{'descr': {descr}, 'fortran_order': {fortran!r}, 'shape': {shape}, }}"
    header = header.encode("latin1")
    pad = 64 - (10 + len(header) + 1) % 64
    header += b" " * pad + b"\n"
    if version == (1, 0):
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) % 65536) + header + body
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header + body


def _zip(members: dict[str, bytes], method=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


descrs = st.sampled_from(
    [
        "'<i8'",
        "'>i8'",
        "'|u1'",
        "'<f4'",
        "'|O'",
        "'<U10'",
        "'|V8'",
        "[('a', '<i4')]",
        "'<c16'",
        "'|b1'",
        "'<M8[s]'",
        "None",
        "'zz'",
        "(1,2)",
        "'<i8' + 'x'",
        "__import__('os').system('true')",
    ]
)
shapes = st.one_of(
    st.tuples(st.integers(0, 2**62)).map(str),
    st.tuples(st.integers(0, 2**31), st.integers(0, 2**31)).map(str),
    st.sampled_from(
        ["()", "(-1,)", "(1.5,)", "('a',)", "(3,)*9", "[3]", "(2**70,)", "(" + "3," * 40 + ")"]
    ),
)


@FUZZ
@given(
    descr=descrs,
    shape=shapes,
    fortran=st.booleans(),
    body=st.binary(max_size=256),
    version=st.sampled_from([(1, 0), (2, 0)]),
    deflate=st.booleans(),
)
def test_crafted_npy_headers(descr, shape, fortran, body, version, deflate):
    data = _zip(
        {"prev.npy": _npy(descr, shape, fortran, body, version)},
        zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED,
    )
    out = _only_our_errors(read_npz, data, "fuzz")
    if out is not None:
        assert out["prev"].dtype != object and out["prev"].nbytes <= len(body)


def test_huge_shape_is_refused_before_allocating():
    for shape in ["(1099511627776,)", "(4294967296, 4294967296)", "(8589934592,)"]:
        data = _zip({"prev.npy": _npy("'<f8'", shape, False, b"\0" * 64)})
        with _Mem() as m, pytest.raises(CheckpointError, match="claims|holds"):
            read_npz(data, "fuzz")
        assert m.peak < 1 << 20


def test_zip_bombs_are_refused_before_inflating(tmp_path, good):
    """Deflate makes 64 MB of zeros ~65 KB: the chunk loader knows the exact
    shape to expect, and archive.npz must be stored uncompressed."""
    body = b"\0" * (64 << 20)
    member = _npy("'<i8'", f"({len(body) // 8},)", False, body)
    bomb = _zip(
        {name + ".npy": member for name in ("prev", "act", "rew", "done")}, zipfile.ZIP_DEFLATED
    )
    del body, member
    assert len(bomb) < 1_000_000
    chunk = tmp_path / "chunk_00000.npz"
    chunk.write_bytes(bomb)
    with _Mem() as m, pytest.raises(CheckpointError, match="expected"):
        load_chunk(chunk, 1000)
    assert m.peak < 4 << 20
    d = tmp_path / "run"
    shutil.copytree(good["dir"], d)
    ckpt = RunDir(d).latest_checkpoint()
    (ckpt / "archive.npz").write_bytes(bomb)
    _resign(ckpt)
    with _Mem() as m, pytest.raises(CheckpointError, match="compressed"):
        read_checkpoint(ckpt)
    assert m.peak < 4 << 20


class _Trap:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickled_objects_are_never_executed(tmp_path):
    marker = str(tmp_path / "code-ran")
    buf = io.BytesIO()
    np.savez(buf, prev=np.array([_Trap(marker)], dtype=object))
    with pytest.raises(CheckpointError, match="not a plain number type"):
        read_npz(buf.getvalue(), "fuzz")
    chunk = tmp_path / "chunk_00000.npz"
    chunk.write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError):
        load_chunk(chunk)
    assert not os.path.exists(marker)


# --- whole checkpoints, re-signed so the parsers behind the checksums are reached ----------
def _copy_run(good, base) -> Path:
    d = Path(tempfile.mkdtemp(dir=base)) / "run"
    shutil.copytree(good["dir"], d)
    return d


def _resign(ckpt: Path) -> None:
    m = {
        n: {"sha256": sha256_file(ckpt / n), "bytes": (ckpt / n).stat().st_size}
        for n in CKPT_FILES
        if (ckpt / n).exists()
    }
    (ckpt / "manifest.json").write_text(json.dumps(m))


def _attempt_resume(d: Path) -> None:
    """Everything a resume does with the files: must end in success or our errors."""

    def go():
        ckpt = RunDir(d).latest_checkpoint()
        read_checkpoint(ckpt)
        check_checkpoint(ckpt)
        p, _ = prepare(CFG.replace(total_frames=CFG.total_frames), d, "auto")
        p.explog.all_entries()
        verify_run(d)

    _only_our_errors(go)


@settings(
    deadline=None,
    max_examples=80,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    target=st.sampled_from(list(CKPT_FILES) + ["manifest.json", "chunk"]),
    muts=st.lists(mutation, min_size=1, max_size=3),
    resign=st.booleans(),
)
def test_checkpoint_files_mutated(tmp_path_factory, good, target, muts, resign):
    d = _copy_run(good, tmp_path_factory.getbasetemp())
    ckpt = RunDir(d).latest_checkpoint()
    path = d / "explog" / chunk_name(0) if target == "chunk" else ckpt / target
    data = path.read_bytes()
    for m in muts:
        data = _mutate(data, m)
    path.write_bytes(data)
    if resign:
        if target == "chunk":
            meta = json.loads((ckpt / "meta.json").read_text())
            meta["explog"]["chunk_sha256"][0] = hashlib.sha256(data).hexdigest()
            (ckpt / "meta.json").write_text(json.dumps(meta))
        if target != "manifest.json":
            _resign(ckpt)
    _attempt_resume(d)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
META_PATHS = [
    ("frames",),
    ("batch",),
    ("n_cells",),
    ("config",),
    ("config", "explog_chunk"),
    ("config", "seed"),
    ("rng",),
    ("rng", "state"),
    ("rng", "state", "state"),
    ("done_scores",),
    ("rooms",),
    ("explog",),
    ("explog", "count"),
    ("explog", "n_flushed"),
    ("explog", "chunk_size"),
    ("explog", "chunk_sha256"),
    ("codec_dictionary",),
    ("best_done_score",),
    ("format_version",),
    (),
]


@settings(
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(where=st.sampled_from(META_PATHS), value=json_values, delete=st.booleans())
def test_meta_json_values(tmp_path_factory, good, where, value, delete):
    d = _copy_run(good, tmp_path_factory.getbasetemp())
    ckpt = RunDir(d).latest_checkpoint()
    meta = json.loads((ckpt / "meta.json").read_text())
    if not where:
        meta = value
    else:
        node = meta
        for k in where[:-1]:
            node = node[k]
        if delete:
            node.pop(where[-1], None)
        else:
            node[where[-1]] = value
    (ckpt / "meta.json").write_text(json.dumps(meta))
    _resign(ckpt)
    _attempt_resume(d)


def test_deeply_nested_json_is_refused(tmp_path, good):
    d = tmp_path / "run"
    shutil.copytree(good["dir"], d)
    ckpt = RunDir(d).latest_checkpoint()
    (ckpt / "meta.json").write_text("[" * 200_000 + "]" * 200_000)
    _resign(ckpt)
    with pytest.raises(CheckpointError, match="RecursionError"):
        read_checkpoint(ckpt)
    (ckpt / "manifest.json").write_text("{" * 200_000)
    with pytest.raises(CheckpointError):
        read_checkpoint(ckpt)
