"""The run directory and its checkpoints. No pickle anywhere: arrays go to
``.npz`` (read back by :func:`goexplore.explog.read_npz`: no pickle, sizes
checked before allocating), emulator states to one raw blob file, everything
else to JSON; a manifest of SHA-256 checksums covers every file of a
checkpoint, and each checkpoint's meta records the SHA-256 of every
experience-log chunk it needs. Anything damaged is a :class:`CheckpointError`
naming the file; any failure to write is a :class:`StorageError`.

Layout of a run dir::

    config.json           the run's configuration (a different run refuses it)
    metrics.jsonl         one row per log cadence
    explog/chunk_*.npz    full experience-log chunks
    checkpoints/ckpt_<frames>/   meta.json archive.npz states.bin explog_tail.npz manifest.json
    checkpoints/LATEST    name of the newest complete checkpoint (atomic pointer;
                          empty until the first one)
    checkpoints/BEST      name of the checkpoint with the best end-of-episode score
    final.json            the result, written when the run ends

Crash safety, step by step. A checkpoint is written into ``ckpt_X.tmp/``,
every file fsynced, the directory renamed to ``ckpt_X`` and only then
published by rewriting ``LATEST`` (temp name + rename). A crash at any moment
leaves ``LATEST`` naming a complete checkpoint whose chunks were all flushed
(fsynced) before it was written. Leftovers of a crash are harmless and
cleaned up later: ``*.tmp`` files and directories, ``*.del`` directories (a
checkpoint being deleted is first renamed to ``*.del``, so a half-deleted one
never looks like a checkpoint), a complete checkpoint newer than ``LATEST``
that was never published, and chunks newer than ``LATEST`` (rewritten, byte
for byte the same, when the run goes on).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np

from goexplore import _faults
from goexplore.config import Config
from goexplore.errors import CheckpointError, StorageError
from goexplore.formats import (
    CHECKPOINT_VERSION,
    MAX_JSON_BYTES,
    MAX_SMALL_JSON,
    load_json,
    read_config,
    read_metrics,
    validate_meta,
)
from goexplore.explog import FIELDS, chunk_name, read_file, read_npz, sha256_file, write_npz_atomic

KEEP_RECENT = 2  # newest checkpoints kept besides BEST and milestones
MILESTONE_EVERY = 5  # every 5th checkpoint is kept for good
CKPT_FILES = ("meta.json", "archive.npz", "states.bin", "explog_tail.npz")
#: files a checkpoint holds only for some settings (listed in its manifest when it does)
OPTIONAL_FILES = ("dynamic.npz",)
CKPT_NAME = re.compile(r"ckpt_(\d{12})")


def ckpt_name(frames: int) -> str:
    return f"ckpt_{frames:012d}"


def ckpt_frames(name: str) -> int:
    m = CKPT_NAME.fullmatch(name)
    if m is None:
        raise ValueError(f"not a checkpoint name: {name!r}")
    return int(m.group(1))


# --- safe writing ---------------------------------------------------------------------
def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Temp name, fsync, rename. Failures are a StorageError naming ``path``."""
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: Path, data) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            if isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                f.writelines(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StorageError(path, e) from None


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.ckpt_dir = self.path / "checkpoints"
        self.explog_dir = self.path / "explog"
        self.metrics_path = self.path / "metrics.jsonl"
        self.config_path = self.path / "config.json"
        self.final_path = self.path / "final.json"
        self.branch_path = self.path / "branch.json"  # only a run made by --branch-from

    # --- config ----------------------------------------------------------------
    def read_config(self) -> Config | None:
        """The run's config (None: no config.json yet)."""
        return read_config(self.config_path) if self.config_path.exists() else None

    def holds_run(self) -> bool:
        return self.config_path.exists() or self.ckpt_dir.exists()

    def create(self, cfg: Config) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(self.path, e) from None
        write_text_atomic(self.config_path, cfg.dumps())  # first: a run dir has a config
        try:
            self.explog_dir.mkdir(exist_ok=True)
            self.ckpt_dir.mkdir(exist_ok=True)
        except OSError as e:
            raise StorageError(self.path, e) from None
        if not (self.ckpt_dir / "LATEST").exists():
            write_text_atomic(self.ckpt_dir / "LATEST", "")  # "no checkpoint yet"

    # --- metrics -----------------------------------------------------------------
    def append_metrics(self, row: dict) -> None:
        try:
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(row) + "\n")
        except OSError as e:
            raise StorageError(self.metrics_path, e) from None

    def read_metrics(self) -> list[dict]:
        """The metrics rows (:func:`goexplore.formats.read_metrics`'s one rule)."""
        return read_metrics(self.metrics_path)[0]

    def write_metrics(self, rows: list[dict]) -> None:
        write_text_atomic(self.metrics_path, "".join(json.dumps(r) + "\n" for r in rows))

    # --- pointers ----------------------------------------------------------------
    def _pointer(self, which: str) -> str | None:
        ptr = self.ckpt_dir / which
        try:
            with open(ptr, "rb") as f:
                raw = f.read(256)
        except FileNotFoundError:
            if which == "LATEST" and self.checkpoints():
                raise CheckpointError(
                    f"{ptr}: missing, but the run dir holds checkpoints "
                    f"({', '.join(p.name for p in self.checkpoints()[-3:])}); "
                    "resume from one explicitly with --resume PATH"
                ) from None
            return None
        except OSError as e:
            raise CheckpointError(f"{ptr}: unreadable ({e})") from None
        try:
            name = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            name = None
        if name == "":
            return None
        if name is None or not CKPT_NAME.fullmatch(name):
            raise CheckpointError(f"{ptr}: damaged (holds {raw[:40]!r}, not a checkpoint name)")
        return name

    def latest_name(self) -> str | None:
        return self._pointer("LATEST")

    def best_name(self) -> str | None:
        return self._pointer("BEST")

    def latest_checkpoint(self) -> Path | None:
        name = self.latest_name()
        if name is None:
            return None
        path = self.ckpt_dir / name
        if not path.is_dir():
            raise CheckpointError(f"{self.ckpt_dir / 'LATEST'} points to {name}, which is missing")
        return path

    def set_latest(self, name: str) -> None:
        write_text_atomic(self.ckpt_dir / "LATEST", name + "\n")
        fsync_dir(self.ckpt_dir)

    def drop_best_after(self, frames: int) -> None:
        """Forget BEST if it names a checkpoint past ``frames`` (an abandoned future)."""
        try:
            best = self.best_name()
        except CheckpointError:
            best = "ckpt_999999999999"
        if best is not None and ckpt_frames(best) > frames:
            try:
                os.unlink(self.ckpt_dir / "BEST")
            except OSError as e:
                raise StorageError(self.ckpt_dir / "BEST", e) from None

    # --- checkpoints ---------------------------------------------------------------
    def checkpoints(self) -> list[Path]:
        """Complete checkpoint directories (published or not), oldest first."""
        if not self.ckpt_dir.is_dir():
            return []
        return sorted(
            p for p in self.ckpt_dir.iterdir() if CKPT_NAME.fullmatch(p.name) and p.is_dir()
        )

    def write_checkpoint(
        self,
        frames: int,
        meta: dict,
        arrays: dict[str, np.ndarray],
        states: list[bytes],
        explog_tail: dict[str, np.ndarray],
        best: bool = False,
        extra: dict[str, dict[str, np.ndarray]] | None = None,
        milestone: bool = False,
    ) -> Path:
        """``extra``: name -> arrays of the optional files (OPTIONAL_FILES);
        ``milestone``: keep this checkpoint for good (a ``MILESTONE`` marker file)."""
        name = ckpt_name(frames)
        final = self.ckpt_dir / name
        tmp = self.ckpt_dir / (name + ".tmp")
        if name == self.latest_name() and final.is_dir():
            # Already published at this step count: the same run at the same step
            # count is the same state (the search is deterministic), and a
            # published checkpoint is never rewritten in place.
            return final
        try:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            lengths = np.fromiter((len(s) for s in states), dtype=np.int64, count=len(states))
            write_npz_atomic(
                tmp / "archive.npz", dict(arrays, state_lengths=lengths), compress=False
            )
            _faults.hit("ckpt-files")
            write_bytes_atomic(tmp / "states.bin", states)
            write_npz_atomic(tmp / "explog_tail.npz", explog_tail)
            for fname, arrs in (extra or {}).items():
                if fname not in OPTIONAL_FILES:
                    raise ValueError(f"internal error: unknown checkpoint file {fname!r}")
                write_npz_atomic(tmp / fname, arrs, compress=False)
            meta = dict(meta, format_version=CHECKPOINT_VERSION, name=name)
            validate_meta(meta, tmp / "meta.json")  # the writer keeps to the schema too
            write_text_atomic(tmp / "meta.json", json.dumps(meta, indent=1))
            manifest = {
                n: {"sha256": sha256_file(tmp / n), "bytes": (tmp / n).stat().st_size}
                for n in CKPT_FILES + tuple(extra or ())
            }
            write_text_atomic(tmp / "manifest.json", json.dumps(manifest, indent=1))
            if milestone:
                (tmp / "MILESTONE").touch()
            fsync_dir(tmp)
            if final.exists():  # an unpublished leftover of a crash
                self._discard(final)
            os.rename(tmp, final)
            fsync_dir(self.ckpt_dir)
            _faults.hit("ckpt-rename")
            self.set_latest(name)
            if best:
                write_text_atomic(self.ckpt_dir / "BEST", name + "\n")
                fsync_dir(self.ckpt_dir)
        except (OSError, StorageError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, StorageError):
                raise
            raise StorageError(e.filename or tmp, e) from None
        _faults.hit("ckpt-publish")
        self._prune()
        return final

    def _discard(self, path: Path) -> None:
        """Delete a directory so that a crash half way never leaves a
        half-deleted checkpoint: rename to ``*.del`` first."""
        trash = path.with_name(path.name + ".del")
        if trash.exists():
            shutil.rmtree(trash, ignore_errors=True)
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def _prune(self) -> None:
        """Keep LATEST, BEST, the newest KEEP_RECENT and the milestones up to
        LATEST; drop the rest, unpublished leftovers, and crash debris. Best
        effort: a failure to delete never fails the run."""
        try:
            latest = self.latest_name()
            if latest is None:
                return
            try:
                best = self.best_name()
            except CheckpointError:
                best = None
            upto = ckpt_frames(latest)
            all_ckpts = self.checkpoints()
            older = [p for p in all_ckpts if ckpt_frames(p.name) <= upto]
            keep = {latest, best}
            keep.update(p.name for p in older[-KEEP_RECENT:])
            keep.update(p.name for p in older if (p / "MILESTONE").exists())
            for p in all_ckpts:
                if p.name not in keep:
                    self._discard(p)
            for p in self.ckpt_dir.iterdir():
                if p.is_dir() and p.name.endswith((".tmp", ".del")):
                    shutil.rmtree(p, ignore_errors=True)
        except (OSError, CheckpointError):
            pass


# --- reading checkpoints -------------------------------------------------------------------
def check_files(path: Path) -> tuple[dict | None, list[str]]:
    """(manifest, problems): every checkpoint file present with its checksum."""
    mpath = path / "manifest.json"
    if not mpath.exists():
        return None, [f"{mpath}: missing (the checkpoint is incomplete)"]
    try:
        manifest = load_json(mpath, MAX_SMALL_JSON, "checkpoint manifest")
    except CheckpointError as e:
        return None, [str(e)]
    if not isinstance(manifest, dict):
        return None, [f"{mpath}: not a manifest"]
    problems = []
    for name in CKPT_FILES + tuple(n for n in OPTIONAL_FILES if n in manifest):
        entry = manifest.get(name)
        p = path / name
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            problems.append(f"{mpath}: no checksum for {name}")
        elif not p.is_file():
            problems.append(f"{p}: missing")
        elif p.stat().st_size != entry.get("bytes"):
            problems.append(
                f"{p}: truncated or altered ({p.stat().st_size:,} bytes, "
                f"the manifest says {entry.get('bytes')!r})"
            )
        else:
            try:
                ok = sha256_file(p) == entry["sha256"]
            except OSError as e:
                problems.append(f"{p}: unreadable ({e})")
                continue
            if not ok:
                problems.append(f"{p}: altered (checksum mismatch)")
    return manifest, problems


def verify_checkpoint(path: Path) -> dict:
    """Check a checkpoint against its manifest; return the manifest."""
    manifest, problems = check_files(Path(path))
    if problems:
        raise CheckpointError("; ".join(problems))
    return manifest


def read_checkpoint(path: Path) -> tuple[dict, dict[str, np.ndarray], list[bytes], dict]:
    """(meta, archive arrays, states, explog tail) of a verified checkpoint.
    Everything is checked before it is returned: checksums, meta schema,
    array dtypes and shapes (sizes checked before allocating), states index."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint directory")
    verify_checkpoint(path)
    mpath = path / "meta.json"
    meta = load_json(mpath, MAX_JSON_BYTES, "checkpoint meta")
    validate_meta(meta, mpath)
    n = meta["n_cells"]
    apath = path / "archive.npz"
    arrays = read_npz(read_file(apath, 1 << 40, "checkpoint file"), apath, stored_only=True)
    for name, a in arrays.items():
        if a.ndim == 0 or a.shape[0] != n:
            raise CheckpointError(
                f"{apath}: array {name!r} has shape {a.shape}, expected ({n}, ...)"
            )
    lengths = arrays.pop("state_lengths", None)
    if lengths is None or lengths.ndim != 1 or lengths.dtype != np.int64:
        raise CheckpointError(f"{apath}: no valid 'state_lengths'")
    ex = meta["explog"]
    fill = ex["count"] - ex["n_flushed"] * ex["chunk_size"]
    tpath = path / "explog_tail.npz"
    tail = read_npz(
        read_file(tpath, 1 << 40, "checkpoint file"),
        tpath,
        {name: (dt, (fill,)) for name, dt in FIELDS},
    )
    spath = path / "states.bin"
    blob = read_file(spath, 1 << 40, "checkpoint file")
    if (lengths < 0).any() or int(lengths.sum()) != len(blob):
        raise CheckpointError(f"{spath}: does not match its index (state_lengths)")
    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    states = [blob[a:b] for a, b in zip(starts, ends)]
    return meta, arrays, states, tail


def read_optional(path: Path, name: str) -> dict[str, np.ndarray]:
    """The arrays of an optional checkpoint file (checked against the manifest by
    :func:`read_checkpoint`); CheckpointError naming it when it is absent."""
    fpath = Path(path) / name
    manifest = load_json(Path(path) / "manifest.json", MAX_SMALL_JSON, "checkpoint manifest")
    if name not in manifest:
        raise CheckpointError(f"{fpath}: missing (the checkpoint's settings need it)")
    return read_npz(read_file(fpath, 1 << 40, "checkpoint file"), fpath, stored_only=True)


def adopt_chunks(
    src_explog: Path, dst_explog: Path, n_chunks: int, digests: list[str] | None = None
) -> None:
    """Make chunks 0..n-1 of another run available in this run (hard link, or copy).
    A chunk already there is kept only if it has the recorded checksum."""
    try:
        dst_explog.mkdir(parents=True, exist_ok=True)
        for i in range(n_chunks):
            src, dst = src_explog / chunk_name(i), dst_explog / chunk_name(i)
            if dst.exists():
                if digests is None or sha256_file(dst) == digests[i]:
                    continue
                dst.unlink()
            if not src.exists():
                raise CheckpointError(
                    f"experience-log chunk {i} needed by the checkpoint is missing: {src}"
                )
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    except OSError as e:
        raise StorageError(e.filename or dst_explog, e) from None
