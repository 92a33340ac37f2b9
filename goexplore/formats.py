"""One schema per run-dir file format, used by every writer, reader and validator.

``docs/run-dir-format.md`` documents these; a change here is a change of the
format (and of its version where it has one):

* **run config** (``config.json``): the fields of :class:`~goexplore.config.Config`;
  :func:`read_config` is its one reader.
* **metrics row** (one line of ``metrics.jsonl``): :data:`METRICS_FIELDS`;
  :func:`metrics_row` builds one, :func:`read_metrics` is the one reader, with
  one rule for a bad line (shared by resume, ``verify``, ``report``, ``compare``
  and TensorBoard).
* **final.json**: :data:`FINAL_FIELDS`; :func:`check_final` checks it where it is
  written and where it is read.
* **checkpoint meta** (``checkpoints/ckpt_*/meta.json``): :data:`META_FIELDS`,
  :data:`CHECKPOINT_VERSION`; :func:`validate_meta` checks it before a checkpoint
  is written and after one is read.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from goexplore.config import Config
from goexplore.errors import CheckpointError, GoExploreError, RunDirError
from goexplore.explog import read_file

CHECKPOINT_VERSION = 2  # 2: meta.explog.chunk_sha256
READABLE_CHECKPOINT_VERSIONS = (1, 2)
MAX_CHUNK_SIZE = 1 << 26  # experience-log entries per chunk (~0.9 GB in RAM)
MAX_JSON_BYTES = 256 << 20  # meta.json (done_scores, chunk checksums) and friends
MAX_SMALL_JSON = 1 << 20  # manifest.json, config.json, final.json, pointers
_HEX64 = re.compile(r"[0-9a-f]{64}")


# --- values ------------------------------------------------------------------------------
def is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x) -> bool:
    return (
        isinstance(x, (int, float))
        and not isinstance(x, bool)
        and math.isfinite(x)
        and abs(x) < 1e300
    )


_KINDS = {
    "int": is_int,
    "num": is_num,
    "bool": lambda x: isinstance(x, bool),
    "str": lambda x: isinstance(x, str),
    "list": lambda x: isinstance(x, list),
    "dict": lambda x: isinstance(x, dict),
}


_WHAT = {
    "int": "an integer",
    "num": "a number",
    "bool": "true or false",
    "str": "a string",
    "list": "a list",
    "dict": "an object",
}


def _fits(kind: str, v) -> bool:
    """``kind``: "int", "num", ..., with "?" for "or null" ("num?")."""
    if kind.endswith("?"):
        return v is None or _KINDS[kind[:-1]](v)
    return _KINDS[kind](v)


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed")


def load_json(path: Path, max_bytes: int = MAX_SMALL_JSON, what: str = "file"):
    """Parse a JSON file of bounded size; damage is a CheckpointError naming it."""
    data = read_file(path, max_bytes, what)
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:  # includes UnicodeDecodeError
        raise CheckpointError(
            f"{what} {path}: unreadable ({type(e).__name__}: {str(e)[:200]})"
        ) from None


# --- run config ----------------------------------------------------------------------------
def read_config_object(path: Path) -> dict:
    """config.json as a JSON object (tools that read old runs use the raw fields)."""
    try:
        d = load_json(path, MAX_SMALL_JSON, "run config")
    except CheckpointError as e:
        raise RunDirError(str(e)) from None
    if not isinstance(d, dict):
        raise RunDirError(f"{path}: unreadable run config (not a JSON object)")
    return d


def read_config(path: Path) -> Config:
    """config.json as a validated :class:`Config`; a RunDirError naming the file."""
    d = read_config_object(path)
    try:
        cfg = Config.from_json(d).validate()
    except (GoExploreError, ValueError, TypeError) as e:
        raise RunDirError(f"{path}: unreadable run config ({e})") from None
    if cfg.explog_chunk > MAX_CHUNK_SIZE:
        raise RunDirError(
            f"{path}: explog_chunk {cfg.explog_chunk} is larger than {MAX_CHUNK_SIZE}"
        )
    return cfg


# --- metrics.jsonl -------------------------------------------------------------------------
#: name -> (kind, meaning); the first four are in every row
METRICS_FIELDS: dict[str, tuple[str, str]] = {
    "batch": ("int", "batches done"),
    "frames": ("int", "agent steps done (strictly increasing from row to row)"),
    "max_archive_score": ("num", "highest score of an archived cell"),
    "n_cells": ("int", "cells in the archive (the DONE cell included once it exists)"),
    "steps_per_s": ("num", "agent steps per second of this process's run so far"),
    "best_done_score": ("num?", "best end-of-episode score (null: no episode ended yet)"),
    "ep_return_mean": ("num?", "mean of the last 20 end-of-episode scores"),
    "game_return_count": ("int", "episodes ended so far"),
    "rooms_found": ("int?", "rooms any step has seen (null: the game has no room fact)"),
    "max_level": ("int?", "highest level of an archived cell (null: no level fact)"),
    "explog_entries": ("int", "experience-log entries (= agent steps)"),
    "time": ("num", "Unix time of the row"),
    "cell_repr": ("list?", "dynamic cells only: [width, height, levels] in use"),
    "final": ("bool", "present (true) on the end-of-run row written off the log cadence"),
}
METRICS_REQUIRED = ("batch", "frames", "max_archive_score", "n_cells")
#: fields that differ between two runs of the same search (timing)
METRICS_VOLATILE = ("steps_per_s", "time")


def metrics_row(**values: Any) -> dict:
    """A metrics row; every field must be one of :data:`METRICS_FIELDS`."""
    unknown = set(values) - set(METRICS_FIELDS)
    if unknown:
        raise ValueError(f"internal error: metrics fields {sorted(unknown)} have no schema")
    return values


def check_metrics_row(row, prev_frames: int | None = None) -> str | None:
    """What is wrong with one parsed row (None: nothing)."""
    if not isinstance(row, dict):
        return "a JSON object is expected"
    frames = row.get("frames")
    if not is_int(frames) or frames < 0:
        return f"'frames' must be a non-negative integer, got {frames!r}"
    if prev_frames is not None and frames <= prev_frames:
        return f"frames {frames:,} does not increase on the previous row's {prev_frames:,}"
    for name, (kind, _) in METRICS_FIELDS.items():
        if name in row and not _fits(kind, row[name]):
            what = _WHAT[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
            return f"{name!r} must be {what}, got {row[name]!r}"
    return None


def read_metrics(path: Path) -> tuple[list[dict], list[str]]:
    """The rows of a metrics.jsonl and notes about it: the one reader.

    The rule: blank lines are skipped; a last line cut short by a crash (no
    newline after it) is skipped with a note; any other malformed line is a
    :class:`RunDirError` naming the file and line. A missing file has no rows."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return [], []
    except OSError as e:
        raise RunDirError(f"{path}: cannot read metrics: {e.strerror or e}") from None
    lines = text.splitlines()
    rows: list[dict] = []
    notes: list[str] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if n == len(lines) and not text.endswith("\n"):
            try:
                json.loads(line, parse_constant=_reject_constant)
            except (ValueError, RecursionError):
                notes.append(f"{path}: last line cut short (a crash while it was written); skipped")
                continue
        rows.append(parse_metrics_line(line, f"{path}, line {n}", rows[-1] if rows else None))
    return rows, notes


def parse_metrics_line(line: str | bytes, where: str, prev: dict | None = None) -> dict:
    """One complete line of metrics.jsonl (``prev``: the row before it); a
    RunDirError naming ``where`` if it is malformed."""
    try:
        row = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise RunDirError(f"{where}: malformed metrics line (not JSON): {line[:80]!r}") from None
    why = check_metrics_row(row, prev["frames"] if prev else None)
    if why is not None:
        raise RunDirError(f"{where}: malformed metrics line ({why})")
    return row


# --- final.json ------------------------------------------------------------------------------
#: name -> (kind, meaning)
FINAL_FIELDS: dict[str, tuple[str, str]] = {
    "env": ("str", "the env's name"),
    "seed": ("int", "the run's seed"),
    "preset": ("str?", "the preset the run started from"),
    "cells": ("str", "the cell representation"),
    "episode_end": ("str", "what ends an episode: 'life' or 'game'"),
    "frames_total": ("int", "agent steps executed"),
    "frames_unit": ("str", "always 'agent_steps'"),
    "emulator_frames_total": (
        "int?",
        "emulator frames (agent steps x frameskip; null: the env has no frameskip)",
    ),
    "batches": ("int", "batches done"),
    "metric": ("str", "the headline metric's name"),
    "value": ("num", "the headline metric's value"),
    "best_done_score": ("num?", "best end-of-episode score (null: no episode ended)"),
    "max_archive_score": ("num", "highest score of an archived cell"),
    "best_score": (
        "num",
        "the best score of any trajectory, a cell's or an episode end's (the larger above)",
    ),
    "n_cells": ("int", "cells in the archive"),
    "rooms_found": ("int?", "rooms seen (null: no room fact)"),
    "max_level": ("int?", "highest level of an archived cell (null: no level fact)"),
    "explog_entries": ("int", "experience-log entries"),
    "verified": ("bool", "every replay-verification below passed"),
    "verification": (
        "dict",
        "replays from reset: best_cell and best_done -> {cell, score, ok, detail}; "
        "sample -> {cells, ok, detail} (16 other cells drawn with the run's seed)",
    ),
    "protocol": ("str", "how the scores were obtained"),
    "wall_s": ("num", "wall-clock seconds of the last process's run"),
    "dynamic_cells": ("dict", "dynamic cells only: the representation and its history"),
    "replayed_steps": (
        "int?",
        "env steps spent on restores by replay, apart from frames_total (null: native states)",
    ),
    "warnings": ("list", "what the user should know about the run (e.g. one cell only)"),
}
FINAL_REQUIRED = ("env", "frames_total", "explog_entries", "max_archive_score", "verified")


def _check_object(obj, schema: dict, required, where, file: str) -> None:
    """A run-dir JSON object against ``schema`` (name -> (kind, meaning)) with the
    ``required`` names; a RunDirError naming ``where``."""
    if not isinstance(obj, dict):
        raise RunDirError(f"{where}: {file} must be a JSON object")
    for name in required:
        if name not in obj:
            raise RunDirError(f"{where}: {file} lacks {name!r}")
    for name, (kind, _) in schema.items():
        if name in obj and not _fits(kind, obj[name]):
            what = _WHAT[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
            raise RunDirError(f"{where}: {name!r} must be {what}, got {obj[name]!r}")


def check_final(final, where) -> None:
    """final.json's shape; a RunDirError naming ``where``."""
    _check_object(final, FINAL_FIELDS, FINAL_REQUIRED, where, "final.json")


def _read_run_file(path: Path, what: str):
    """A small JSON file of a run dir, parsed (None: there is none); damage is a
    RunDirError naming it."""
    if not Path(path).exists():
        return None
    try:
        return load_json(path, MAX_SMALL_JSON, what)
    except CheckpointError as e:
        raise RunDirError(str(e)) from None


def read_final(path: Path) -> dict | None:
    """final.json checked against :data:`FINAL_FIELDS` (None: there is none)."""
    final = _read_run_file(path, "final result")
    if final is not None:
        check_final(final, path)
    return final


# --- branch.json -------------------------------------------------------------------------------
#: name -> (kind, meaning); every field is required
BRANCH_FIELDS: dict[str, tuple[str, str]] = {
    "source": ("str", "the checkpoint dir the branch continued (an absolute path)"),
    "frames": ("int", "agent steps at the branch point (the checkpoint's)"),
    "changed": ("list", "the config fields whose values differ from the source run's"),
}


def branch_record(source: Path, frames: int, changed: list[str]) -> dict:
    return {"source": str(Path(source).resolve()), "frames": frames, "changed": list(changed)}


def read_branch(path: Path) -> dict | None:
    """branch.json checked against :data:`BRANCH_FIELDS` (None: the run is no branch)."""
    branch = _read_run_file(path, "branch record")
    if branch is None:
        return None
    _check_object(branch, BRANCH_FIELDS, BRANCH_FIELDS, path, "branch.json")
    if branch["frames"] < 0 or not all(isinstance(c, str) for c in branch["changed"]):
        raise RunDirError(
            f"{path}: 'frames' must be >= 0 and 'changed' a list of field names, "
            f"got {branch['frames']!r} and {branch['changed']!r}"
        )
    return branch


# --- checkpoint meta ---------------------------------------------------------------------------
#: name -> meaning (see validate_meta for each one's type and range)
META_FIELDS: dict[str, str] = {
    "format_version": "int: the checkpoint format (CHECKPOINT_VERSION)",
    "name": "str: the checkpoint's directory name, ckpt_<frames, 12 digits>",
    "frames": "int: agent steps done",
    "batch": "int: batches done",
    "config": "object: the run config (as config.json)",
    "rng": "object: the master generator's PCG64 state (numpy's bit_generator.state)",
    "n_cells": "int >= 1: cells in the archive (rows of archive.npz)",
    "done_scores": "[float]: the last (up to 200) end-of-episode scores",
    "n_done_episodes": "int: episodes ended so far",
    "rooms": "[int]: rooms seen by any step",
    "explog": "object: count, n_flushed, chunk_size, chunk_sha256 (one per flushed chunk)",
    "codec_dictionary": "hex str or null: the state codec's zstd dictionary",
    "codec_level": "int: state-model trainings done",
    "best_done_score": "float or null: best end-of-episode score",
    "max_archive_score": "float: highest score of an archived cell",
    "checkpoints_written": "int: checkpoints this run has written, this one included",
    "replayed_steps": "int: env steps spent on restores by replay so far (0: native states)",
    "dynamic": "object, dynamic cells only: the representation's state (dynamic.npz)",
}


def validate_meta(meta, where) -> None:
    """The checkpoint's meta.json has the right shape and consistent numbers."""

    def need(cond, what):
        if not cond:
            raise CheckpointError(f"{where}: {what}")

    need(isinstance(meta, dict), "not a JSON object")
    v = meta.get("format_version")
    need(
        v in READABLE_CHECKPOINT_VERSIONS,
        f"checkpoint format {v!r}, this goexplore reads "
        f"{', '.join(map(str, READABLE_CHECKPOINT_VERSIONS))}",
    )
    for k in ("frames", "batch", "n_cells"):
        need(is_int(meta.get(k)) and meta[k] >= 0, f"{k!r} must be a non-negative integer")
    need(meta["n_cells"] >= 1, "'n_cells' must be at least 1")
    cw = meta.get("checkpoints_written", 0)
    need(is_int(cw) and cw >= 0, "'checkpoints_written' must be a non-negative integer")
    rs = meta.get("replayed_steps", 0)
    need(is_int(rs) and rs >= 0, "'replayed_steps' must be a non-negative integer")
    try:
        cfg = Config.from_json(meta["config"]).validate()
    except (KeyError, TypeError, ValueError, AttributeError, GoExploreError) as e:
        raise CheckpointError(f"{where}: bad 'config' ({str(e)[:300]})") from None
    try:
        np.random.PCG64().state = meta["rng"]
    except Exception as e:
        raise CheckpointError(f"{where}: bad 'rng' state ({type(e).__name__})") from None
    ds = meta.get("done_scores")
    need(isinstance(ds, list) and all(is_num(x) for x in ds), "'done_scores' must be numbers")
    nd = meta.get("n_done_episodes", len(ds))
    need(
        is_int(nd) and nd >= len(ds),
        "'n_done_episodes' must be an integer, at least the number of 'done_scores'",
    )
    rooms = meta.get("rooms")
    need(
        isinstance(rooms, list) and all(is_int(x) and abs(x) < 2**31 for x in rooms),
        "'rooms' must be integers",
    )
    for k in ("best_done_score", "max_archive_score"):
        need(k in meta and (meta[k] is None or is_num(meta[k])), f"{k!r} must be a number")
    d = meta.get("codec_dictionary")
    if d is not None:
        try:
            need(isinstance(d, str), "'codec_dictionary' must be hex text")
            bytes.fromhex(d)
        except ValueError:
            need(False, "'codec_dictionary' must be hex text")
    ex = meta.get("explog")
    need(isinstance(ex, dict), "'explog' missing")
    for k in ("count", "n_flushed", "chunk_size"):
        need(is_int(ex.get(k)) and ex[k] >= 0, f"'explog.{k}' must be a non-negative integer")
    cs = ex["chunk_size"]
    need(1 <= cs <= MAX_CHUNK_SIZE, f"'explog.chunk_size' {cs} out of range")
    need(
        cs == cfg.explog_chunk,
        f"'explog.chunk_size' {cs} differs from the config's {cfg.explog_chunk}",
    )
    need(
        ex["n_flushed"] == ex["count"] // cs,
        f"'explog.n_flushed' {ex['n_flushed']} does not match count {ex['count']} (chunks of {cs})",
    )
    digests = ex.get("chunk_sha256")
    if v >= 2 or digests is not None:
        need(
            isinstance(digests, list)
            and len(digests) == ex["n_flushed"]
            and all(isinstance(h, str) and _HEX64.fullmatch(h) for h in digests),
            f"'explog.chunk_sha256' must hold one SHA-256 per flushed chunk ({ex['n_flushed']})",
        )
    need(
        ex["count"] == meta["frames"],
        f"'explog.count' {ex['count']} differs from 'frames' "
        f"{meta['frames']} (every step executed is logged)",
    )
