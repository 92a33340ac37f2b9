"""Integrity of a run dir: ``goexplore verify RUN_DIR``, and the check every
resume runs on the checkpoint it continues from.

What is checked:

* every checkpoint file against its manifest (SHA-256 and size), the meta's
  schema, array dtypes and shapes, the states index;
* every experience-log chunk a checkpoint needs: present, with the SHA-256
  recorded when it was flushed, structurally sound, and every ``prev``
  pointer pointing back inside the log (also in the checkpoint's log tail);
* the references between them: ``LATEST`` and ``BEST`` name existing
  checkpoints, the log count matches the chunks and the tail, every cell's
  ``traj_last`` lies inside the log (and is -1 exactly for the root);
* ``config.json``, ``branch.json`` (a branch's record), ``final.json`` (consistent
  with the latest checkpoint) and ``metrics.jsonl`` (readable rows).

A problem names the file. Crash debris (temp files, a complete checkpoint
newer than ``LATEST`` that was never published, chunks written after the
latest checkpoint) is reported as a note: it is harmless and resume redoes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from goexplore.errors import CheckpointError, GoExploreError, RunDirError
from goexplore.explog import check_entries, chunk_name, load_chunk
from goexplore.formats import read_branch, read_final, read_metrics
from goexplore.store import CKPT_NAME, RunDir, ckpt_frames, read_checkpoint


@dataclass
class Report:
    run_dir: Path
    problems: list[str] = field(default_factory=list)  # damage; each names a file
    notes: list[str] = field(default_factory=list)  # harmless findings
    checkpoints: int = 0
    chunks: int = 0
    latest: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        lines = [
            f"goexplore verify {self.run_dir}",
            f"  checkpoints checked     {self.checkpoints}"
            + (f"  (LATEST {self.latest})" if self.latest else ""),
            f"  log chunks checked      {self.chunks}",
        ]
        lines += [f"  DAMAGED: {p}" for p in self.problems]
        lines += [f"  note: {n}" for n in self.notes]
        lines.append("intact" if self.ok else f"DAMAGED: {len(self.problems)} problem(s)")
        return "\n".join(lines)


class _ChunkChecker:
    """Checks each chunk file once per recorded checksum."""

    def __init__(self):
        self.seen: dict[tuple, list[str]] = {}

    def check(self, path: Path, index: int, chunk_size: int, digest: str | None) -> list[str]:
        key = (str(path), digest)
        if key not in self.seen:
            try:
                cols = load_chunk(path, chunk_size, digest)
                self.seen[key] = check_entries(cols, index * chunk_size, path)
            except CheckpointError as e:
                self.seen[key] = [str(e)]
        return self.seen[key]


def check_checkpoint(
    ckpt: Path, explog_dir: Path | None = None, chunks: _ChunkChecker | None = None
) -> tuple[list[str], dict | None]:
    """(problems, meta) of one checkpoint and the part of the experience log it
    needs (chunks in ``explog_dir``, by default its own run's)."""
    ckpt = Path(ckpt)
    explog_dir = explog_dir if explog_dir is not None else ckpt.parent.parent / "explog"
    chunks = chunks if chunks is not None else _ChunkChecker()
    try:
        meta, arrays, states, tail = read_checkpoint(ckpt)
    except CheckpointError as e:
        return [str(e)], None
    problems = []
    m = CKPT_NAME.fullmatch(ckpt.name)
    if m and int(m.group(1)) != meta["frames"]:
        problems.append(
            f"{ckpt / 'meta.json'}: holds frames {meta['frames']}, "
            f"the directory name says {int(m.group(1))}"
        )
    ex = meta["explog"]
    count, nf, cs = ex["count"], ex["n_flushed"], ex["chunk_size"]
    apath = ckpt / "archive.npz"
    tl, tlen = arrays.get("traj_last"), arrays.get("traj_len")
    if tl is None or tlen is None or tl.ndim != 1 or tlen.ndim != 1:
        problems.append(f"{apath}: no 'traj_last'/'traj_len' arrays")
    else:
        bad = np.flatnonzero((tl < -1) | (tl >= count))
        if len(bad):
            problems.append(
                f"{apath}: {len(bad)} cells point outside the experience log "
                f"(cell {int(bad[0])}: entry {int(tl[bad[0]])}, log has {count})"
            )
        root = (tl == -1) != (tlen == 0)
        if root.any():
            problems.append(
                f"{apath}: {int(root.sum())} cells have trajectory pointer and "
                "length that disagree (-1 only for the root, of length 0)"
            )
    problems += check_entries(tail, nf * cs, ckpt / "explog_tail.npz")
    digests = ex.get("chunk_sha256")
    for i in range(nf):
        p = explog_dir / chunk_name(i)
        if not p.exists():
            problems.append(f"{p}: missing (checkpoint {ckpt.name} needs chunks 0..{nf - 1})")
            continue
        problems += chunks.check(p, i, cs, digests[i] if digests else None)
    del states
    return problems, meta


def check_resume_point(ckpt: Path) -> list[str]:
    """What resume checks before continuing from ``ckpt``: the checkpoint and
    every chunk it needs, in the run dir it was written in."""
    problems, _ = check_checkpoint(ckpt)
    return problems


def verify_run(path: Path) -> Report:
    """Check a whole run dir. Raises RunDirError when ``path`` is not a run dir."""
    rd = RunDir(Path(path))
    if not rd.path.is_dir():
        raise RunDirError(f"{rd.path}: no such run dir")
    if not rd.config_path.exists() and not rd.ckpt_dir.exists():
        raise RunDirError(f"{rd.path}: not a run dir (no config.json, no checkpoints/)")
    rep = Report(rd.path)
    try:
        if rd.read_config() is None:
            rep.problems.append(f"{rd.config_path}: missing")
    except GoExploreError as e:
        rep.problems.append(str(e))
    try:
        read_branch(rd.branch_path)
    except GoExploreError as e:
        rep.problems.append(str(e))

    # pointers
    latest = best = None
    upto = float("inf")  # checkpoints up to LATEST are the run's published state
    try:
        latest = rd.latest_name()
        upto = ckpt_frames(latest) if latest else -1
        if latest is not None and not (rd.ckpt_dir / latest).is_dir():
            rep.problems.append(f"{rd.ckpt_dir / 'LATEST'}: points to {latest}, which is missing")
    except CheckpointError as e:
        rep.problems.append(str(e))
    try:
        best = rd.best_name()
        if best is not None and not (rd.ckpt_dir / best).is_dir():
            rep.problems.append(f"{rd.ckpt_dir / 'BEST'}: points to {best}, which is missing")
    except CheckpointError as e:
        rep.problems.append(str(e))
    rep.latest = latest

    # checkpoints, and the chunks each one needs
    chunks = _ChunkChecker()
    latest_meta = None
    for ckpt in rd.checkpoints():
        if ckpt_frames(ckpt.name) > upto:
            rep.notes.append(
                f"{ckpt}: complete but never published by LATEST (an interrupted "
                "run's last write; ignored, and replaced when the run goes on)"
            )
            continue
        problems, meta = check_checkpoint(ckpt, rd.explog_dir, chunks)
        rep.checkpoints += 1
        for p in problems:
            if p not in rep.problems:
                rep.problems.append(p)
        if ckpt.name == latest:
            latest_meta = meta
    rep.chunks = len(chunks.seen)

    # files that no checkpoint covers yet, and crash debris
    nf = latest_meta["explog"]["n_flushed"] if latest_meta else 0
    if rd.explog_dir.is_dir():
        extra = sorted(
            p.name
            for p in rd.explog_dir.glob("chunk_*.npz")
            if _chunk_index(p.name) is not None and _chunk_index(p.name) >= nf
        )
        if extra:
            rep.notes.append(
                f"{len(extra)} experience-log chunk(s) written after the latest "
                f"checkpoint ({extra[0]}..{extra[-1]}): not covered by a checkpoint "
                "yet; a resume rewrites them"
            )
    debris = [
        p
        for d in (rd.path, rd.ckpt_dir, rd.explog_dir)
        if d.is_dir()
        for p in d.iterdir()
        if p.name.endswith((".tmp", ".del"))
    ]
    if debris:
        rep.notes.append(
            f"{len(debris)} temporary file(s) left by an interrupted write "
            f"(e.g. {debris[0]}); harmless, removed as the run goes on"
        )

    _check_final(rd, latest_meta, rep)
    _check_metrics(rd, rep)
    return rep


def _chunk_index(name: str) -> int | None:
    try:
        return int(name[len("chunk_") : -len(".npz")])
    except ValueError:
        return None


def _check_final(rd: RunDir, latest_meta: dict | None, rep: Report) -> None:
    try:
        final = read_final(rd.final_path)
    except RunDirError as e:
        rep.problems.append(f"{rd.final_path}: unreadable ({e})")
        return
    if final is None:
        return
    frames, entries = final["frames_total"], final["explog_entries"]
    if latest_meta is None:
        rep.problems.append(f"{rd.final_path}: a result, but no intact latest checkpoint")
    elif frames != latest_meta["frames"] or entries != latest_meta["explog"]["count"]:
        if frames < latest_meta["frames"]:
            rep.notes.append(
                f"{rd.final_path}: from an earlier, shorter budget "
                f"({frames:,} steps; the run has gone on since)"
            )
        else:
            rep.problems.append(
                f"{rd.final_path}: reports {frames!r} steps / {entries!r} log "
                f"entries, the latest checkpoint holds {latest_meta['frames']:,}"
                f" / {latest_meta['explog']['count']:,}"
            )


def _check_metrics(rd: RunDir, rep: Report) -> None:
    try:
        rep.notes.extend(read_metrics(rd.metrics_path)[1])
    except RunDirError as e:
        rep.problems.append(str(e))
