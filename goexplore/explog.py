"""The experience log: every agent step ever executed, append-only.

Each entry is ``(prev, action, reward, done)`` where ``prev`` is the id of the
entry before it on the same trajectory (-1 at the root). A cell stores only
the id of its trajectory's last step (``traj_last``); walking ``prev`` back to
-1 rebuilds its action sequence: the demo source for replay and Phase 2.

Entries live in fixed-size chunks. Full chunks are written to
``<run>/explog/chunk_NNNNN.npz`` (atomically: temp name, fsync, rename) and
dropped from memory; only the active chunk is kept in RAM and in checkpoints.
The SHA-256 of every flushed chunk is kept (``digests``) and recorded in each
checkpoint's meta, so a checkpoint pins the exact bytes of the log it needs.

Files are written byte-for-byte deterministically (fixed zip timestamps), and
read by :func:`read_npz`, a loader for untrusted files: no pickle, only plain
numeric dtypes, every array's size checked against the file before anything is
allocated, and any damage reported as :class:`CheckpointError`.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from goexplore import _faults
from goexplore.errors import CheckpointError, StorageError

FIELDS = (("prev", np.int64), ("act", np.uint8), ("rew", np.float32), ("done", np.uint8))
ENTRY_BYTES = sum(np.dtype(dt).itemsize for _, dt in FIELDS)

# dtypes a loaded array may have: plain little-endian numbers and bools
ALLOWED_DTYPES = frozenset(np.dtype(c).newbyteorder("<") for c in "?bBhHiIlLqQfd")
MAX_MEMBERS = 64
MAX_NDIM = 4
MAX_RATIO = 1100  # deflate expands at most ~1032x: a file can't claim more than this
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_MEMBER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\.npy")


def chunk_name(i: int) -> str:
    return f"chunk_{i:05d}.npz"


# --- writing --------------------------------------------------------------------------
def write_npz(
    f, arrays: dict[str, np.ndarray], compress: bool = True, hook: str | None = None
) -> None:
    """Like ``np.savez[_compressed]``, but the same arrays always give the same bytes."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    try:
        with zipfile.ZipFile(f, "w", compression=method, allowZip64=True) as zf:
            for i, (name, arr) in enumerate(arrays.items()):
                info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
                info.compress_type = method
                with zf.open(info, "w", force_zip64=True) as out:
                    np.lib.format.write_array(
                        out, np.ascontiguousarray(arr), version=(1, 0), allow_pickle=False
                    )
                if i == 0 and hook:
                    f.flush()
                    _faults.hit(hook)
    except ValueError as e:
        # a Ctrl-C mid-write makes zipfile's close fail over it ("open writing handle"):
        # the interrupt is what happened (the half-written file is a temp file)
        if isinstance(e.__context__, KeyboardInterrupt):
            raise e.__context__ from None
        raise


def write_npz_atomic(
    path: Path, arrays: dict[str, np.ndarray], compress: bool = True, hook: str | None = None
) -> str:
    """Write under a temp name, fsync, rename into place; returns the file's SHA-256.
    Any OS failure (disk full, read-only) is a :class:`StorageError` naming the file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write_npz(f, arrays, compress, hook)
            f.flush()
            os.fsync(f.fileno())
        digest = sha256_file(tmp)
        os.replace(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise StorageError(path, e) from None
    return digest


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# --- reading untrusted files ----------------------------------------------------------------
def read_file(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of a file no bigger than ``max_bytes``; CheckpointError otherwise."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise CheckpointError(
                    f"{what} {path}: {size:,} bytes, more than the {max_bytes:,} it can hold"
                )
            data = f.read(size + 1)  # (read(n) allocates n bytes up front)
    except FileNotFoundError:
        raise CheckpointError(f"{what} missing: {path}") from None
    except IsADirectoryError:
        raise CheckpointError(f"{what} {path}: is a directory") from None
    except OSError as e:
        raise CheckpointError(f"{what} unreadable: {path} ({e})") from None
    if len(data) > size:
        raise CheckpointError(f"{what} {path}: grew while it was read")
    return data


def read_npz(
    data: bytes, where, expect: dict[str, tuple] | None = None, stored_only: bool = False
) -> dict[str, np.ndarray]:
    """Arrays of an ``.npz`` held in ``data``, from a possibly hostile source.

    ``expect`` maps name -> (dtype or None, shape pattern or None); a pattern is
    a tuple of ints and Nones (any). With ``expect`` exactly those arrays are
    read; without it, every member. Sizes are checked before allocating: an
    array must fit in the bytes its zip member declares, and the whole file
    cannot expand more than deflate can (with ``stored_only``, members must
    be uncompressed, so the arrays cannot be bigger than the file). Never
    unpickles.
    """
    try:
        return _read_npz(data, where, expect, stored_only)
    except CheckpointError:
        raise
    except (Exception, MemoryError) as e:  # zipfile/zlib/numpy parse errors of all kinds
        raise CheckpointError(f"{where}: unreadable ({type(e).__name__}: {e})") from None


def _read_npz(data: bytes, where, expect, stored_only=False) -> dict[str, np.ndarray]:
    budget = MAX_RATIO * len(data) + (1 << 20)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise CheckpointError(f"{where}: {len(infos)} members, at most {MAX_MEMBERS} expected")
        by_name = {}
        for info in infos:
            if not _MEMBER.fullmatch(info.filename) or info.filename in by_name:
                raise CheckpointError(f"{where}: unexpected member {info.filename[:80]!r}")
            if stored_only and info.compress_type != zipfile.ZIP_STORED:
                raise CheckpointError(
                    f"{where}: member {info.filename!r} is compressed; "
                    "goexplore writes this file uncompressed"
                )
            by_name[info.filename] = info
        names = list(expect) if expect is not None else [n[:-4] for n in by_name]
        out = {}
        for name in names:
            info = by_name.get(name + ".npy")
            if info is None:
                raise CheckpointError(f"{where}: no array {name!r}")
            dtype, pattern = expect[name] if expect is not None else (None, None)
            out[name] = _read_member(zf, info, f"{where}[{name}]", dtype, pattern, budget)
            budget -= out[name].nbytes
        return out


def _read_member(zf, info, where, dtype, pattern, budget) -> np.ndarray:
    fmt = np.lib.format
    with zf.open(info) as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dt = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dt = fmt.read_array_header_2_0(f)
        else:
            raise CheckpointError(f"{where}: .npy format {version} not supported")
        header_len = f.tell()
        if dt not in ALLOWED_DTYPES or dt.byteorder == ">" or dt.hasobject or dt.fields:
            raise CheckpointError(f"{where}: dtype {dt.str!r} is not a plain number type")
        if dtype is not None and dt != np.dtype(dtype):
            raise CheckpointError(f"{where}: dtype {dt.str}, expected {np.dtype(dtype).str}")
        if fortran:
            raise CheckpointError(f"{where}: Fortran-ordered arrays are not written by goexplore")
        if len(shape) > MAX_NDIM or any(not isinstance(s, int) or s < 0 for s in shape):
            raise CheckpointError(f"{where}: bad shape {shape!r}")
        if pattern is not None and (
            len(shape) != len(pattern)
            or any(p is not None and p != s for p, s in zip(pattern, shape))
        ):
            want = tuple("*" if p is None else p for p in pattern)
            raise CheckpointError(f"{where}: shape {shape}, expected {want}")
        count = 1
        for s in shape:
            count *= s
        nbytes = count * dt.itemsize
        if header_len + nbytes != info.file_size:
            raise CheckpointError(
                f"{where}: header claims {nbytes:,} bytes of data, the member "
                f"holds {info.file_size - header_len:,} (truncated or altered)"
            )
        if nbytes > budget:
            raise CheckpointError(f"{where}: claims {nbytes:,} bytes, more than the file can hold")
        arr = np.empty(shape, dtype=dt)
        view = memoryview(arr.reshape(-1).view(np.uint8))
        got = 0
        while got < nbytes:  # in blocks: no second full-size buffer
            block = f.read(min(nbytes - got, 1 << 20))
            if not block:
                raise CheckpointError(f"{where}: truncated ({got:,} of {nbytes:,} bytes)")
            view[got : got + len(block)] = block
            got += len(block)
        if f.read(1):
            raise CheckpointError(f"{where}: trailing bytes after the array")
    return arr


def load_chunk(
    path: Path, expect_len: int | None = None, sha256: str | None = None
) -> dict[str, np.ndarray]:
    """Load one chunk file; any damage is a CheckpointError naming the file. With
    ``sha256`` the file must have exactly that digest (as recorded when flushed)."""
    limit = (expect_len or (1 << 26)) * ENTRY_BYTES * 2 + (1 << 20)
    data = read_file(path, limit, "experience-log chunk")
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise CheckpointError(
            f"experience-log chunk {path}: truncated or altered "
            "(its SHA-256 differs from the one recorded when it was written)"
        )
    pattern = (expect_len,) if expect_len is not None else (None,)
    out = read_npz(
        data, f"experience-log chunk {path}", {name: (dt, pattern) for name, dt in FIELDS}
    )
    n = len(out["prev"])
    if any(len(out[name]) != n for name, _ in FIELDS):
        raise CheckpointError(f"experience-log chunk {path}: fields of different lengths")
    return out


def check_entries(cols: dict[str, np.ndarray], first: int, where) -> list[str]:
    """Problems with log entries ``first..``: every ``prev`` must point back
    (-1 .. own id - 1) and ``done`` be 0/1."""
    problems = []
    prev = cols["prev"]
    ids = np.arange(first, first + len(prev), dtype=np.int64)
    bad = np.flatnonzero((prev < -1) | (prev >= ids))
    if len(bad):
        j = int(bad[0])
        problems.append(
            f"{where}: {len(bad)} entries point outside the log before them "
            f"(entry {first + j} -> {int(prev[j])})"
        )
    if (cols["done"] > 1).any():
        problems.append(f"{where}: done flags other than 0/1")
    return problems


# --- the log ------------------------------------------------------------------------------
class ExperienceLog:
    """Append-only step log in chunks; ``directory=None`` keeps chunks in RAM."""

    CACHE_CHUNKS = 1  # flushed chunks kept loaded for trajectory walks (they go backwards)

    def __init__(self, directory: Path | None, chunk_size: int = 1 << 22):
        self.dir = Path(directory) if directory is not None else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.chunk_size = chunk_size
        self.count = 0  # entries ever appended
        self.n_flushed = 0  # chunks written out
        self.digests: list[str] = []  # SHA-256 of each flushed chunk file
        self._ram_chunks: list[dict[str, np.ndarray]] = []
        self._cache: dict[int, dict[str, np.ndarray]] = {}
        self._new_chunk()

    def _new_chunk(self) -> None:
        # filled ahead with what most entries hold (prev: the entry before; no reward, not
        # done), so an episode appended in place writes only its first link and its actions
        self.cur = {name: np.zeros(self.chunk_size, dtype=dt) for name, dt in FIELDS}
        base = self.n_flushed * self.chunk_size
        self.cur["prev"][:] = np.arange(base - 1, base - 1 + self.chunk_size, dtype=np.int64)
        self.fill = 0

    def append_episode(
        self, prev0: int, actions: np.ndarray, rew_t: np.ndarray, rew_v: np.ndarray, done_last: bool
    ) -> int:
        """Append one exploration episode (a chain starting after ``prev0``): its
        actions, its nonzero rewards (steps ``rew_t``, values ``rew_v``) and whether its
        last step ended it. Returns the id of its first entry; entry ``first + i`` is
        step ``i``."""
        n = len(actions)
        first = self.count
        if n == 0:  # nothing to log (and no last step to mark)
            return first
        f = self.fill
        if f + n <= self.chunk_size:  # the common case: written in place (see _new_chunk)
            cur = self.cur
            cur["prev"][f] = prev0
            cur["act"][f : f + n] = actions
            if len(rew_t):
                cur["rew"][f + rew_t] = rew_v
            if done_last:
                cur["done"][f + n - 1] = 1
            self.fill = f + n
            self.count += n
            if self.fill == self.chunk_size:
                self._flush()
            return first
        prev = np.arange(first - 1, first + n - 1, dtype=np.int64)
        prev[0] = prev0
        rewards = np.zeros(n, np.float64)
        rewards[rew_t] = rew_v
        done = np.zeros(n, dtype=np.uint8)
        done[-1] = done_last
        cols = {"prev": prev, "act": actions, "rew": rewards, "done": done}
        pos = 0
        while pos < n:
            take = min(n - pos, self.chunk_size - self.fill)
            for name, _ in FIELDS:
                self.cur[name][self.fill : self.fill + take] = cols[name][pos : pos + take]
            self.fill += take
            pos += take
            if self.fill == self.chunk_size:
                self._flush()
        self.count += n
        return first

    def _flush(self) -> None:
        arrays = {name: self.cur[name] for name, _ in FIELDS}
        if self.dir is not None:
            self.digests.append(
                write_npz_atomic(self.dir / chunk_name(self.n_flushed), arrays, hook="chunk-write")
            )
            _faults.hit("chunk-done")
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
            if len(self._cache) >= self.CACHE_CHUNKS:
                self._cache.pop(next(iter(self._cache)))
            digest = self.digests[i] if i < len(self.digests) else None
            self._cache[i] = load_chunk(self.dir / chunk_name(i), self.chunk_size, digest)
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
                raise CheckpointError(
                    f"experience log corrupt: entry {idx} points forward to {nxt}"
                )
            idx = nxt
        return np.array(acts[::-1], dtype=np.uint8)

    def all_entries(self) -> dict[str, np.ndarray]:
        """Every entry as whole arrays (tests, export)."""
        parts = [self._chunk(i) for i in range(self.n_flushed)]
        parts.append({k: v[: self.fill] for k, v in self.cur.items()})
        return {name: np.concatenate([p[name] for p in parts]) for name, _ in FIELDS}

    # --- checkpointing ------------------------------------------------------
    def tail_arrays(self) -> dict[str, np.ndarray]:
        """The active chunk's entries: views (no copy), valid until the next append."""
        return {name: self.cur[name][: self.fill] for name, _ in FIELDS}

    def meta(self) -> dict:
        """What a checkpoint records about the log (with each chunk's checksum)."""
        return {
            "count": self.count,
            "n_flushed": self.n_flushed,
            "chunk_size": self.chunk_size,
            "chunk_sha256": list(self.digests),
        }

    def restore(
        self,
        count: int,
        n_flushed: int,
        tail: dict[str, np.ndarray],
        digests: list[str] | None = None,
    ) -> None:
        fill = count - n_flushed * self.chunk_size
        if not 0 <= fill < self.chunk_size or any(len(tail[k]) != fill for k, _ in FIELDS):
            raise CheckpointError(f"experience-log tail inconsistent with count {count}")
        if digests is not None and len(digests) != n_flushed:
            raise CheckpointError(
                f"experience log: {len(digests)} chunk checksums for {n_flushed} chunks"
            )
        if self.dir is not None:
            for i in range(n_flushed):
                p = self.dir / chunk_name(i)
                if not p.exists():
                    raise CheckpointError(f"experience-log chunk missing: {p}")
        self.count, self.n_flushed = count, n_flushed
        if digests is None and self.dir is not None:  # a checkpoint made before chunk checksums
            digests = [sha256_file(self.dir / chunk_name(i)) for i in range(n_flushed)]
        self.digests = list(digests) if digests is not None else []
        self._cache.clear()
        self._ram_chunks = self._ram_chunks[:n_flushed]
        self._new_chunk()
        for name, dt in FIELDS:
            self.cur[name][:fill] = np.asarray(tail[name], dtype=dt)
        self.fill = fill
