"""The run directory and its checkpoints. No pickle anywhere: arrays go to
``.npz`` (loaded with ``allow_pickle=False``), emulator states to one raw blob
file, everything else to JSON; a manifest of SHA-256 checksums covers every
file, and a checkpoint that fails it is an error naming the file.

Layout of a run dir::

    config.json           the run's configuration (a different run refuses it)
    metrics.jsonl         one row per log cadence
    explog/chunk_*.npz    full experience-log chunks
    checkpoints/ckpt_<frames>/   meta.json archive.npz states.bin explog_tail.npz manifest.json
    checkpoints/LATEST    name of the newest complete checkpoint (atomic pointer)
    checkpoints/BEST      name of the checkpoint with the best end-of-episode score
    final.json            the result, written when the run ends

A checkpoint is written into a temporary directory, fsynced, renamed into
place, and only then published through ``LATEST``: a crash at any moment
leaves the previous checkpoint intact and pointed to.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np

from goexplore.config import Config
from goexplore.errors import CheckpointError, RunDirError
from goexplore.explog import chunk_name, write_npz_atomic

FORMAT_VERSION = 1
KEEP_RECENT = 2          # newest checkpoints kept besides BEST and milestones
MILESTONE_EVERY = 5      # every 5th checkpoint is kept for good


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.ckpt_dir = self.path / "checkpoints"
        self.explog_dir = self.path / "explog"
        self.metrics_path = self.path / "metrics.jsonl"
        self.config_path = self.path / "config.json"
        self.final_path = self.path / "final.json"

    # --- config ----------------------------------------------------------------
    def read_config(self) -> Config | None:
        if not self.config_path.exists():
            return None
        try:
            return Config.from_json(json.loads(self.config_path.read_text()))
        except (ValueError, TypeError) as e:
            raise RunDirError(f"{self.config_path}: unreadable run config ({e})") from None

    def holds_run(self) -> bool:
        return self.config_path.exists() or self.ckpt_dir.exists()

    def create(self, cfg: Config) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.explog_dir.mkdir(exist_ok=True)
        self.ckpt_dir.mkdir(exist_ok=True)
        write_text_atomic(self.config_path, cfg.dumps())

    # --- metrics -----------------------------------------------------------------
    def append_metrics(self, row: dict) -> None:
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        rows = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a crash
        return rows

    def write_metrics(self, rows: list[dict]) -> None:
        write_text_atomic(self.metrics_path, "".join(json.dumps(r) + "\n" for r in rows))

    # --- checkpoints ---------------------------------------------------------------
    def latest_checkpoint(self) -> Path | None:
        ptr = self.ckpt_dir / "LATEST"
        if not ptr.exists():
            return None
        name = ptr.read_text().strip()
        path = self.ckpt_dir / name
        if not path.is_dir():
            raise CheckpointError(f"{ptr} points to {name}, which is missing")
        return path

    def checkpoints(self) -> list[Path]:
        if not self.ckpt_dir.exists():
            return []
        return sorted(p for p in self.ckpt_dir.iterdir()
                      if p.is_dir() and p.name.startswith("ckpt_") and not p.name.endswith(".tmp"))

    def write_checkpoint(self, frames: int, meta: dict, arrays: dict[str, np.ndarray],
                         states: list[bytes], explog_tail: dict[str, np.ndarray],
                         best: bool = False) -> Path:
        name = f"ckpt_{frames:012d}"
        final = self.ckpt_dir / name
        tmp = self.ckpt_dir / (name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        lengths = np.fromiter((len(s) for s in states), dtype=np.int64, count=len(states))
        arrays = dict(arrays, state_lengths=lengths)
        write_npz_atomic(tmp / "archive.npz", arrays, compress=False)
        with open(tmp / "states.bin", "wb") as f:
            f.write(b"".join(states))
            f.flush()
            os.fsync(f.fileno())
        write_npz_atomic(tmp / "explog_tail.npz", explog_tail)
        meta = dict(meta, format_version=FORMAT_VERSION, name=name)
        write_text_atomic(tmp / "meta.json", json.dumps(meta, indent=1))
        manifest = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size}
                    for p in sorted(tmp.iterdir())}
        write_text_atomic(tmp / "manifest.json", json.dumps(manifest, indent=1))
        fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
        fsync_dir(self.ckpt_dir)
        write_text_atomic(self.ckpt_dir / "LATEST", name + "\n")
        if best:
            write_text_atomic(self.ckpt_dir / "BEST", name + "\n")
        fsync_dir(self.ckpt_dir)
        self._prune()
        return final

    def _prune(self) -> None:
        keep = set()
        for ptr in ("LATEST", "BEST"):
            p = self.ckpt_dir / ptr
            if p.exists():
                keep.add(p.read_text().strip())
        all_ckpts = self.checkpoints()
        keep.update(p.name for p in all_ckpts[-KEEP_RECENT:])
        keep.update(p.name for p in all_ckpts if (p / "MILESTONE").exists())
        for p in all_ckpts:
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)

    def mark_milestone(self, ckpt: Path) -> None:
        (ckpt / "MILESTONE").touch()


def verify_checkpoint(path: Path) -> dict:
    """Check a checkpoint against its manifest; return the manifest."""
    mpath = path / "manifest.json"
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{mpath}: missing (the checkpoint is incomplete)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{mpath}: unreadable ({e})") from None
    if not isinstance(manifest, dict):
        raise CheckpointError(f"{mpath}: not a manifest")
    for name in ("meta.json", "archive.npz", "states.bin", "explog_tail.npz"):
        entry = manifest.get(name)
        p = path / name
        if not isinstance(entry, dict) or "sha256" not in entry:
            raise CheckpointError(f"{mpath}: no checksum for {name}")
        if not p.exists():
            raise CheckpointError(f"{p}: missing")
        if p.stat().st_size != entry.get("bytes") or sha256_file(p) != entry["sha256"]:
            raise CheckpointError(f"{p}: truncated or altered (checksum mismatch)")
    return manifest


def read_checkpoint(path: Path) -> tuple[dict, dict[str, np.ndarray], list[bytes], dict]:
    """(meta, archive arrays, states, explog tail) of a verified checkpoint."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint directory")
    verify_checkpoint(path)
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path / 'meta.json'}: unreadable ({e})") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format {meta.get('format_version')!r}, "
                              f"this goexplore reads {FORMAT_VERSION}")
    arrays = _load_npz(path / "archive.npz")
    tail = _load_npz(path / "explog_tail.npz")
    blob = (path / "states.bin").read_bytes()
    lengths = arrays.pop("state_lengths")
    if lengths.ndim != 1 or (lengths < 0).any() or int(lengths.sum()) != len(blob):
        raise CheckpointError(f"{path / 'states.bin'}: does not match its index")
    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    states = [blob[a:b] for a, b in zip(starts, ends)]
    return meta, arrays, states, tail


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise CheckpointError(f"{path}: unreadable ({e})") from None


def resolve_resume(arg: str, run_dir: RunDir) -> Path | None:
    """``auto``: the run dir's latest checkpoint, or None for a fresh start.
    A path: a checkpoint dir, or a run dir (its latest checkpoint)."""
    if arg == "auto":
        return run_dir.latest_checkpoint()
    p = Path(arg)
    if (p / "manifest.json").exists() or p.name.startswith("ckpt_"):
        if not p.is_dir():
            raise CheckpointError(f"{p}: no such checkpoint")
        return p
    if p.is_dir():
        latest = RunDir(p).latest_checkpoint()
        if latest is None:
            raise CheckpointError(f"{p}: holds no checkpoint to resume from")
        return latest
    raise CheckpointError(f"--resume {arg}: no such run dir or checkpoint "
                          "(give 'auto', a run dir, or a checkpoint dir)")


def adopt_chunks(src_explog: Path, dst_explog: Path, n_chunks: int) -> None:
    """Make chunks 0..n-1 of another run available in this run (hard link, or copy)."""
    dst_explog.mkdir(parents=True, exist_ok=True)
    for i in range(n_chunks):
        src, dst = src_explog / chunk_name(i), dst_explog / chunk_name(i)
        if dst.exists():
            continue
        if not src.exists():
            raise CheckpointError(f"experience-log chunk {i} needed by the checkpoint is missing: {src}")
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
