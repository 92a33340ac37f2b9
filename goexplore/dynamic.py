"""The master's side of dynamic downscaling (Ecoffet et al., Nature 2021;
the original code's ``--dynamic_state``): choose the downscale from a sample
of recent frames, and re-key the archive when it changes.

* **The sample.** Each non-final step's frame joins it with probability
  ``dynamic_sample_p`` (drawn by the worker from a generator seeded by its
  task); duplicates are skipped, the oldest frame leaves when ``dynamic_sample``
  are held, and the sample is emptied after each choice (as in the paper).
* **The choice** (:func:`choose`): a random search of ``dynamic_iterations``
  proposals over (width, height, levels), each proposal drawn geometrically
  around the best so far, maximising the normalised entropy of the sample's
  cell distribution divided by ``sqrt(|n - T| / T + 1)``, ``n`` the number of
  distinct cells and ``T = split_factor * frames sampled`` (:func:`split_score`).
  It draws from the master generator, at a batch boundary: the same seed gives
  the same choices whatever the workers.
* **A target that grows** (``dynamic_target_floor`` F, not in the paper; 0 turns
  it off): ``T`` is at least F times the number of cells the current downscale
  gives the same sample. The sample covers more screens as the archive spreads,
  so the target grows with it, and a choice can cut the sample's cells to at
  most a fraction F of the current ones (F = 1: never coarser on the sample).
  Without it, ``T`` stays near 0.125 x the frames of one interval, and most
  re-keyings late in a run merge the archive back to a third of its cells.
* **Keeping** (``dynamic_keep``, not in the paper; 0 turns it off): the current
  downscale is scored on the same sample, and stays unless the search's best
  scores more than ``1 + dynamic_keep`` times as much. Each choice then re-keys
  (and merges) only when the sample has really outgrown the current cells.
* **Enough cells** (``dynamic_min_cells`` F, not in the paper; 0 turns it off): a
  choice that puts the sample into fewer than F x ``T`` cells is not taken; the best
  proposal of the same search that has enough is, and the current downscale stays
  when none has (the first choice, from one cell, is always taken). The paper's score
  divides a 2-cell split by at most sqrt(2), so with 100 proposals an even 2-cell
  split can win: measured, a choice that merged 1,802 Venture cells into 2. The search
  is unchanged, so a run whose choices all have enough cells is the same without it.
* **When:** first after ``dynamic_first`` agent steps; then the interval
  doubles (``dynamic_first`` x 2, x 4, ...) up to ``dynamic_every``, after
  which it stays there; and at once when the archive holds more than
  ``dynamic_max_cells`` cells. The paper chose once after 10,000 steps and
  then every 10M; at the budgets run here (millions of steps) a choice made
  from the first few hundred frames would hold for a large share of the run
  (measured: a 500k-step interval after a choice from 184 frames left
  Montezuma at 92 cells and one room for the whole interval), so the early
  choices come more often, each from a sample twice as long.
* **Re-keying** (:func:`rekey`) computes every entry's key from its stored
  frame (exact: the frames are kept losslessly). Entries that fall in one cell
  keep the best under the accept rule (higher score, then shorter
  trajectory, then the older entry) with that entry's counters, as the paper
  does with ``--reset_cell_on_update``. Like the paper's former grids, the
  entries that lost are kept and take part in every later re-keying, so a
  finer representation splits them out again. ``dynamic_max_shadow`` (not in the
  paper; 0: no bound) keeps only that many of them, the highest-scoring, then the
  shortest, then the oldest (:func:`best_entries`): 65,210 of them held 66 MB by
  20M agent steps on Montezuma.
* **Regions** (``region_power``, not in the paper; 0 turns it off): each cell
  also belongs to the region of its frame under a fixed coarse downscale
  (``region_cells``, 4x4 with 9 grey levels by default), whose size the
  selection divides by (:mod:`goexplore.selection`); ``region_chosen_power``
  also divides by a power of one plus the picks of the region's cells. With
  ``region_radius`` > 0 a region is instead a cluster of look-alike screens
  (:class:`Regions`). Regions are computed from the kept frames (and, with a
  radius, the checkpointed first key of each region), so they are rebuilt
  exactly after a re-keying or a resume.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from goexplore.archive import Archive
from goexplore.cells import DONE_KEY
from goexplore.cells.dynamic import DynamicDownscaleCells, FrameCodec
from goexplore.config import parse_downscale
from goexplore.errors import CheckpointError

#: archive arrays an entry keeps (Archive.ARRAYS less the key)
ENTRY_ARRAYS = tuple(n for n in Archive.ARRAYS if n != "keys")
_CHUNK = 256  # frames decompressed at a time when re-keying


# --- the choice ----------------------------------------------------------------------------
def split_score(counts: np.ndarray, n_frames: int, split_factor: float) -> float:
    """The paper's score of a cell distribution: normalised entropy / sqrt(|n-T|/T + 1)."""
    n = len(counts)
    if n <= 1:
        return 0.0
    p = counts / n_frames
    entropy = float(-(p * np.log(p)).sum())
    target = split_factor * n_frames
    return entropy / math.log(n) / math.sqrt(abs(n - target) / target + 1)


def distinct_counts(keys: np.ndarray) -> np.ndarray:
    """How many rows of ``keys`` (n, key_size) fall in each distinct key."""
    rows = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
    return np.unique(rows, return_counts=True)[1]


def _geometric(rng: np.random.Generator, p: float, lo: int, hi: int) -> int:
    while True:
        v = int(rng.geometric(p))
        if lo <= v <= hi:
            return v


@dataclass
class Choice:
    params: tuple[int, int, int]  # width, height, levels
    score: float
    distinct: int  # cells the sample falls into
    frames: int  # frames sampled
    proposals: int
    enough: Choice | None = None  # the best proposal with at least min_cells x target cells


def choose(
    frames: np.ndarray,
    rng: np.random.Generator,
    iterations: int,
    split_factor: float,
    min_cells: float = 0.0,
) -> Choice:
    """The paper's random search (``try_split_frames``) over (width, height,
    levels) for a stack of frames (n, H, W): widths 1..W-1, heights 1..H-1,
    levels 2..255; a proposal equal to or better than the best becomes the best.

    With ``min_cells`` > 0 (not in the paper) the search also notes, in ``enough``,
    the best proposal that puts the sample into at least ``min_cells`` times the
    target cells (None when none did). The search itself is unchanged by it."""
    n, H, W = frames.shape
    best = (int(rng.integers(1, W)), int(rng.integers(1, H)), int(rng.integers(2, 256)))
    best_score, best_n = -math.inf, 0
    floor = min_cells * split_factor * n
    enough: Choice | None = None
    tried: set[tuple[int, int, int]] = set()
    for _ in range(iterations):
        cur = best
        while cur in tried:
            w = _geometric(rng, min(1 / (best[0] + 1), 20 / W), 1, W - 1)
            h = _geometric(rng, min(1 / (best[1] + 1), 20 / H), 1, H - 1)
            lv = _geometric(rng, min(1 / best[2], 1 / 12), 2, 255)
            cur = (w, h, lv)
        tried.add(cur)
        counts = distinct_counts(DynamicDownscaleCells(cur).keys(frames))
        score = split_score(counts, n, split_factor)
        if score >= best_score:
            best, best_score, best_n = cur, score, len(counts)
        if min_cells > 0 and len(counts) >= floor and (enough is None or score >= enough.score):
            enough = Choice(cur, score, len(counts), n, iterations)
    return Choice(best, best_score, best_n, n, iterations, enough)


# --- entries (cells with their frames) -------------------------------------------------------
@dataclass
class Entries:
    """Archive entries outside the archive: arrays (ENTRY_ARRAYS), states, frames."""

    arrays: dict[str, np.ndarray]
    states: list[bytes]
    frames: list[bytes]

    @classmethod
    def empty(cls, n_facts: int) -> Entries:
        a = Archive(1, n_facts).to_arrays()  # the dtypes of a checkpoint's arrays
        return cls({k: a[k][:0] for k in ENTRY_ARRAYS}, [], [])

    def __len__(self) -> int:
        return len(self.states)

    def take(self, idx: np.ndarray) -> Entries:
        il = idx.tolist()
        return Entries(
            {k: v[idx] for k, v in self.arrays.items()},
            [self.states[i] for i in il],
            [self.frames[i] for i in il],
        )

    @staticmethod
    def concat(a: Entries, b: Entries) -> Entries:
        return Entries(
            {k: np.concatenate([a.arrays[k], b.arrays[k]]) for k in a.arrays},
            a.states + b.states,
            a.frames + b.frames,
        )


def archive_entries(archive: Archive, frames: list[bytes]) -> Entries:
    arrays = archive.to_arrays()
    return Entries(
        {k: arrays[k].copy() for k in ENTRY_ARRAYS},
        [bytes(s) for s in archive.state_blobs()],
        list(frames),
    )


def new_keys(rep: DynamicDownscaleCells, entries: Entries, codec: FrameCodec) -> list[bytes]:
    """Each entry's key under ``rep`` (DONE_KEY for the DONE entry)."""
    a = entries.arrays
    return frame_keys(rep, entries.frames, a["is_done"], codec, a["score"])


def frame_keys(
    rep: DynamicDownscaleCells,
    frames: list[bytes],
    done: np.ndarray,
    codec: FrameCodec,
    scores: np.ndarray | None = None,
) -> list[bytes]:
    """The key under ``rep`` of each compressed frame (DONE_KEY where ``done``), with
    its entry's score where ``rep`` keys on the score."""
    out: list[bytes] = []
    for s in range(0, len(frames), _CHUNK):
        idx = [i for i in range(s, min(s + _CHUNK, len(frames))) if not done[i]]
        keys = {}
        if idx:
            stack = np.stack([codec.decompress(frames[i]) for i in idx])
            rows = rep.keys(stack, None if scores is None else scores[idx])
            keys = {i: rows[j].tobytes() for j, i in enumerate(idx)}
        out += [keys.get(i, DONE_KEY) for i in range(s, min(s + _CHUNK, len(frames)))]
    return out


def rekey(entries: Entries, keys: list[bytes]) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    """(winners, their keys, losers): per key the best entry under the accept rule
    (highest score, then shortest trajectory, then the first), winners in entry order."""
    n = len(keys)
    kid: dict[bytes, int] = {}
    group = np.fromiter((kid.setdefault(k, len(kid)) for k in keys), np.int64, n)
    score, length = entries.arrays["score"], entries.arrays["traj_len"]
    order = np.lexsort((np.arange(n), length, -score, group))
    first = np.ones(n, bool)
    first[1:] = group[order][1:] != group[order][:-1]
    winners = np.sort(order[first])
    losers = np.sort(order[~first])
    return winners, [keys[i] for i in winners.tolist()], losers


def best_entries(entries: Entries, n: int) -> np.ndarray:
    """Indices of the ``n`` best entries under the accept rule (highest score, then
    shortest trajectory, then the first), in entry order."""
    if len(entries) <= n:
        return np.arange(len(entries))
    a = entries.arrays
    order = np.lexsort((np.arange(len(entries)), a["traj_len"], -a["score"]))
    return np.sort(order[:n])


# --- regions ---------------------------------------------------------------------------------
_REGION_ID = np.dtype("<u4")


class Regions:
    """Groups frames into regions for the region terms (``region_cells``: the coarse
    downscale W x H x L; ``region_radius``).

    With radius 0 a region is one key of the coarse downscale. With radius r > 0 a
    region is a cluster of look-alike screens: a frame joins the first region (in the
    order they were made) whose first frame's key differs from its own by at most
    ``r * L`` grey levels per pixel on average, else it starts a new region. A frame
    that started a region is at distance 0 from it and the regions only grow, so every
    frame's region, recomputed later from the same list of first frames, is the one it
    got when it was set: the list is checkpointed, and the regions after a re-keying
    or a resume are exact. All distances are integer sums."""

    def __init__(self, whl: tuple[int, int, int], radius: float = 0.0, firsts=None):
        w, h, levels = whl
        self.rep = DynamicDownscaleCells(whl)
        self.radius = float(radius)
        self._limit = self.radius * levels * w * h  # the largest sum of differences
        self._firsts = np.zeros((16, w * h), np.int32)
        self.n = 0
        if firsts is not None and radius > 0:
            self._firsts = np.array(firsts, np.int32).reshape(-1, w * h)
            self.n = len(firsts)

    @property
    def firsts(self) -> np.ndarray:
        """The regions' first keys, in the order the regions were made."""
        return self._firsts[: self.n].astype(np.uint8)

    def key(self, frame: np.ndarray) -> bytes:
        return self.region(self.rep.key(frame))

    def region(self, key: bytes) -> bytes:
        """The region of a coarse key (the key itself with radius 0)."""
        if not self.radius:
            return key
        v = np.frombuffer(key, np.uint8).astype(np.int32)
        if self.n:
            hit = np.flatnonzero(np.abs(self._firsts[: self.n] - v).sum(1) <= self._limit)
            if hit.size:
                return _REGION_ID.type(hit[0]).tobytes()
        if self.n == len(self._firsts):
            grown = np.zeros((max(16, 2 * self.n), self._firsts.shape[1]), np.int32)
            grown[: self.n] = self._firsts[: self.n]
            self._firsts = grown
        self._firsts[self.n] = v
        self.n += 1
        return _REGION_ID.type(self.n - 1).tobytes()


def with_score(region: bytes, score: float) -> bytes:
    """A region key split by score (``--region-score``): the 8 bytes of the float
    appended, -0.0 as 0.0, so no two scores share a region."""
    return region + np.float64(score + 0.0).tobytes()


# --- the master's state --------------------------------------------------------------------------
@dataclass
class DynamicState:
    """The dynamic representation's state on the master (checkpointed)."""

    n_facts: int
    rep: DynamicDownscaleCells = field(default_factory=DynamicDownscaleCells)
    frames: list[bytes] = field(default_factory=list)  # per archive cell (DONE: b"")
    sample: dict[bytes, None] = field(default_factory=dict)  # recent frames, oldest first
    shadow: Entries | None = None  # entries that lost a merge
    last: int = 0  # agent steps at the last choice
    history: list[dict] = field(default_factory=list)
    codec: FrameCodec = field(default_factory=FrameCodec)
    regions: Regions | None = None  # the region terms' grouping (None: terms off)
    region_firsts: np.ndarray | None = None  # from a checkpoint, until use_regions
    region_where: str = "dynamic.npz"  # the checkpoint file they came from

    @classmethod
    def start(cls, cfg, n_facts: int) -> DynamicState:
        d = cls(n_facts, DynamicDownscaleCells.from_config(cfg))
        d.shadow = Entries.empty(n_facts)
        d.use_regions(cfg)
        return d

    def use_regions(self, cfg) -> None:
        """Group cells into regions when the config's region term is on."""
        on = bool(cfg.region_power or cfg.region_chosen_power)
        whl = parse_downscale(cfg.region_cells)
        firsts = self.region_firsts
        if on and cfg.region_radius and firsts is not None and firsts.shape[1] != whl[0] * whl[1]:
            raise CheckpointError(
                f"{self.region_where}: 'region_firsts' rows hold {firsts.shape[1]} values, but "
                f"--region-cells {cfg.region_cells} makes keys of {whl[0] * whl[1]}"
            )
        self.regions = Regions(whl, cfg.region_radius, firsts) if on else None
        self.region_firsts = None

    @staticmethod
    def _region_of(archive: Archive, i: int, region: bytes) -> bytes:
        """Cell ``i``'s region key: its frame's region, with ``--region-score`` also the
        score its state holds."""
        return with_score(region, archive.score[i]) if archive.params.region_score else region

    def set_region(self, archive: Archive, i: int, blob: bytes) -> None:
        """Cell ``i`` of ``archive`` now holds the frame ``blob`` (DONE: none): its
        region follows."""
        if self.regions is not None and blob:
            region = self.regions.key(self.codec.decompress(blob))
            archive.set_region(i, self._region_of(archive, i, region))

    def assign_regions(self, archive: Archive) -> None:
        """Every cell's region from its frame (after a re-keying or a resume)."""
        if self.regions is None:
            return
        regions = self.regions
        keys = frame_keys(regions.rep, self.frames, archive.is_done[: archive.n], self.codec)
        for i, k in enumerate(keys):
            if k != DONE_KEY:
                archive.set_region(i, self._region_of(archive, i, regions.region(k)))

    def interval(self, cfg) -> int:
        """Agent steps from the last choice to the next: dynamic_first, doubling
        with each choice, up to dynamic_every."""
        return min(cfg.dynamic_every, cfg.dynamic_first << min(len(self.history), 40))

    def due(self, cfg, frames: int, n_cells: int) -> bool:
        if frames - self.last > self.interval(cfg):
            return True
        return n_cells > cfg.dynamic_max_cells and frames - self.last > cfg.dynamic_first

    def set_frame(self, i: int, blob: bytes) -> None:
        if i == len(self.frames):
            self.frames.append(blob)
        else:
            self.frames[i] = blob

    def observe(self, blobs: list[bytes], cap: int) -> None:
        sample = self.sample
        for b in blobs:
            if b in sample:
                continue
            if len(sample) >= cap:
                del sample[next(iter(sample))]
            sample[b] = None

    def sample_stack(self) -> np.ndarray | None:
        """The sample as one (n, H, W) stack (frames of the most common shape)."""
        if not self.sample:
            return None
        blobs = list(self.sample)
        shapes = [FrameCodec.shape(b) for b in blobs]
        common = max(set(shapes), key=shapes.count)
        return np.stack([self.codec.decompress(b) for b, s in zip(blobs, shapes) if s == common])

    @staticmethod
    def split_factor(cfg, n_frames: int, current: np.ndarray | None) -> float:
        """The choice's split factor: the config's, raised so that the target
        ``factor * n_frames`` is at least ``dynamic_target_floor`` times the cells the
        current downscale gives the sample (``current``: their counts; None: none yet)."""
        if cfg.dynamic_target_floor <= 0 or current is None:
            return cfg.split_factor
        return max(cfg.split_factor, cfg.dynamic_target_floor * len(current) / n_frames)

    def recompute(
        self, cfg, archive: Archive, rng: np.random.Generator, frames: int, **archive_args
    ):
        """Choose the representation from the sample and re-key ``archive``; returns
        the new archive (the same one when nothing changed)."""
        self.last = frames
        stack = self.sample_stack()
        self.sample = {}
        if stack is None or len(stack) < 2:
            return archive
        current = None  # the sample's cells under the current downscale
        if self.rep.params is not None and (
            cfg.dynamic_keep > 0 or cfg.dynamic_target_floor > 0 or cfg.dynamic_min_cells > 0
        ):
            current = distinct_counts(self.rep.keys(stack))
        factor = self.split_factor(cfg, len(stack), current)
        best = choose(stack, rng, cfg.dynamic_iterations, factor, cfg.dynamic_min_cells)
        choice: Choice | None = best
        if best.distinct < cfg.dynamic_min_cells * factor * len(stack):
            choice = best.enough  # too few cells: the best proposal with enough, if any
        kept = False  # the current downscale stays against the search's best
        if current is not None:
            score = split_score(current, len(stack), factor)
            margin = 1 + cfg.dynamic_keep
            if choice is None or (cfg.dynamic_keep > 0 and choice.score <= score * margin):
                choice, kept = Choice(self.rep.params, score, len(current), len(stack), 0), True
        if choice is None:  # the first choice, from one cell: nothing to keep
            choice = best
        del stack
        event = {
            "frames": frames,
            "width": choice.params[0],
            "height": choice.params[1],
            "levels": choice.params[2],
            "score": round(choice.score, 6),
            "target": round(factor * choice.frames, 3),
            "sample_frames": choice.frames,
            "sample_cells": choice.distinct,
            "cells_before": archive.n,
            "changed": self.rep.with_params(choice.params) != self.rep,
        }
        if best is not choice:  # the search's best, not taken (--dynamic-keep, -min-cells)
            event["kept_over" if kept else "refused"] = {
                "width": best.params[0],
                "height": best.params[1],
                "levels": best.params[2],
                "score": round(best.score, 6),
                "sample_cells": best.distinct,
            }
        if event["changed"]:
            archive = self.apply(
                choice.params, archive, max_shadow=cfg.dynamic_max_shadow, **archive_args
            )
        event["cells_after"] = archive.n
        self.history.append(event)
        return archive

    def apply(self, whl, archive: Archive, max_shadow: int = 0, **archive_args) -> Archive:
        """Re-key ``archive`` and the shadow entries under ``whl`` (width, height, levels)."""
        rep = self.rep.with_params(whl)
        entries = Entries.concat(archive_entries(archive, self.frames), self.shadow)
        keys = new_keys(rep, entries, self.codec)
        win, wkeys, lose = rekey(entries, keys)
        kept = entries.take(win)
        arrays = dict(kept.arrays)
        arrays["keys"] = np.array(
            [np.frombuffer(k, np.uint8) if k else np.zeros(rep.key_size, np.uint8) for k in wkeys],
            np.uint8,
        ).reshape(len(wkeys), rep.key_size)
        new = Archive.from_arrays(
            rep.key_size, self.n_facts, arrays, kept.states, where="re-keying", **archive_args
        )
        new.done_scores.extend(archive.done_scores)
        new.n_done_episodes = archive.n_done_episodes
        new.rooms = archive.rooms
        new.resend_all()
        if max_shadow:
            lose = lose[best_entries(entries.take(lose), max_shadow)]
        self.rep, self.frames, self.shadow = rep, kept.frames, entries.take(lose)
        self.assign_regions(new)
        return new

    def recompress_states(self, old, new) -> None:
        """The state codec changed: the shadow entries' states follow."""
        self.shadow.states = [new.compress(old.decompress(s)) for s in self.shadow.states]

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held, by part (Python objects included: a list slot and a bytes header)."""

        def held(blobs) -> int:
            return sum(map(sys.getsizeof, blobs)) + 8 * len(blobs)

        sh = self.shadow
        return {
            "frames": held(self.frames),
            "sample": held(self.sample) + 100 * len(self.sample),  # + dict entries
            "shadow": held(sh.states) + held(sh.frames) + sum(v.nbytes for v in sh.arrays.values()),
        }

    # --- checkpoints ---------------------------------------------------------------------------
    def to_meta(self) -> dict:
        meta = {"params": self.rep.params, "last": self.last, "history": self.history}
        if self.rep.score_bin:
            meta["score_bin"] = self.rep.score_bin
        return meta

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for name, blobs in (
            ("frames", self.frames),
            ("sample", list(self.sample)),
            ("shadow_states", self.shadow.states),
            ("shadow_frames", self.shadow.frames),
        ):
            out[name] = np.frombuffer(b"".join(blobs), np.uint8)
            out[name + "_len"] = np.fromiter(map(len, blobs), np.int64, len(blobs))
        for k, v in self.shadow.arrays.items():
            out["shadow_" + k] = v
        if self.regions is not None and self.regions.radius:
            out["region_firsts"] = self.regions.firsts
        return out

    @classmethod
    def from_checkpoint(cls, meta: dict, arrays: dict, n_cells: int, n_facts: int, where: str):
        try:
            params = meta["params"]
            rep = DynamicDownscaleCells(
                None if params is None else tuple(params), int(meta.get("score_bin", 0))
            )
            d = cls(n_facts, rep, last=int(meta["last"]), history=list(meta["history"]))

            def blobs(name):
                data, lens = arrays[name], arrays[name + "_len"]
                if lens.ndim != 1 or (lens < 0).any() or int(lens.sum()) != len(data):
                    raise CheckpointError(f"{where}: {name!r} does not match its lengths")
                ends = np.cumsum(lens).tolist()
                raw = data.tobytes()
                return [raw[a:b] for a, b in zip([0] + ends[:-1], ends)]

            d.frames = blobs("frames")
            if len(d.frames) != n_cells:
                raise CheckpointError(f"{where}: {len(d.frames)} frames for {n_cells} cells")
            d.sample = dict.fromkeys(blobs("sample"))
            firsts = arrays.get("region_firsts")
            if firsts is not None and (firsts.ndim != 2 or firsts.dtype != np.uint8):
                raise CheckpointError(f"{where}: 'region_firsts' is not a 2-D uint8 array")
            d.region_firsts, d.region_where = firsts, where
            sa = {k: arrays["shadow_" + k] for k in ENTRY_ARRAYS}
            d.shadow = Entries(sa, blobs("shadow_states"), blobs("shadow_frames"))
            m = len(d.shadow.states)
            if len(d.shadow.frames) != m or any(len(v) != m for v in sa.values()):
                raise CheckpointError(f"{where}: shadow entries of different lengths")
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f"{where}: malformed dynamic-cells state ({e!r})") from None
        return d
