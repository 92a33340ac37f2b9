"""The archive: cells as parallel arrays, and what changes them. Only the master
writes it.

Its parts, one job each: the accept rule (:mod:`.accept`, the heart of the
algorithm: read it first), the key index (:mod:`.keys`), the state arena
(:mod:`.arena`), the selection cache (:mod:`.selection_cache`) and the
checkpoint form (:mod:`.io`). This module holds the per-cell arrays, inserts
and replaces entries, and hands the workers their views.

Memory (what makes a million cells cheap): packed keys in an int32 index, the
compressed states in one arena, the selection weights and their running sum
kept between batches.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from goexplore.archive.accept import apply_episode
from goexplore.archive.arena import StateArena
from goexplore.archive.io import CheckpointArrays
from goexplore.archive.keys import KeyIndex
from goexplore.archive.selection_cache import Capture, SelectionCache
from goexplore.cells import DONE_KEY
from goexplore.selection import PlaceTerms, ScoreGroups, SelectionParams
from goexplore.wire import ViewDelta

__all__ = ["DONE_SCORES_KEPT", "Archive", "Capture"]

# name -> dtype of the per-cell arrays
_FIELDS = {
    "score": np.float64,
    "traj_len": np.int32,
    "traj_last": np.int64,
    "_seen": np.int32,
    "chosen": np.int32,
    "chosen_since_new": np.int32,
    "lives": np.int16,
    "is_done": np.bool_,
    "steps": np.int32,
    "missing_lr": np.int8,
    "missing_ud": np.int8,
    "holds_most": np.bool_,  # map terms
    "ahead": np.bool_,
    "outscored": np.bool_,  # max-score-only: another cell keyed alike but for the score beats it
    "score_level": np.int32,  # the score-rank term: which distinct score the cell holds
    "weight0": np.float64,  # the weight less the score-rank term (kept with that term on)
    "weight1": np.float64,  # the weight less the region term (kept with that term on)
    "level": np.int16,
    "region": np.int32,  # the region term: 1 + the cell's region id (0: none yet)
    "weight": np.float64,
    "csum": np.float64,  # selection caches
    "state_off": np.int64,
    "state_len": np.int32,  # where the state lives in the arena
}
_GROW = 1.25
DONE_SCORES_KEPT = 200  # end-of-episode scores kept (and checkpointed) for logging


class Archive(KeyIndex, StateArena, SelectionCache, CheckpointArrays):
    FIELDS = _FIELDS
    # the per-cell arrays (:data:`_FIELDS`, allocated by ``_alloc``) that tools read
    score: np.ndarray
    traj_len: np.ndarray
    traj_last: np.ndarray
    chosen: np.ndarray
    is_done: np.ndarray
    facts: np.ndarray

    def __init__(
        self,
        key_size: int,
        n_facts: int,
        capacity: int = 64,
        params: SelectionParams | None = None,
        rep=None,
        level_fact: int | None = None,
    ):
        """``params``: the selection weight (default: the reference's);
        ``rep``: the cell representation (for the map terms); ``level_fact``:
        which fact is the level (for the level weight and ``max_level``)."""
        self.key_size, self.n_facts = key_size, n_facts
        self.params = params or SelectionParams()
        self.level_fact = level_fact
        self.max_level = 0  # highest level of the non-DONE cells
        self._places = PlaceTerms(rep) if (self.params.uses_places and rep is not None) else None
        self._groups = None
        if self.params.max_score_only:
            tail = getattr(rep, "score_tail", 0)
            if not tail:
                raise ValueError("max_score_only needs cells whose keys hold the score")
            self._groups = ScoreGroups(tail)
        self._touch_all = False
        self.n = 0
        self._nibbles = True  # keys packed two values a byte (until one is >= 16)
        self._cap = 0
        self._alloc(max(2, capacity))
        self._slots = np.full(64, -1, np.int32)
        self._n_indexed = 0
        self._done_id = -1
        self._arena = bytearray()
        self._garbage = 0
        #: the last DONE_SCORES_KEPT end-of-episode scores (for logging; the reference
        #: checkpoints the same 200), and how many episodes ended in all
        self.done_scores: deque[float] = deque(maxlen=DONE_SCORES_KEPT)
        self.n_done_episodes = 0
        self._rooms: set[int] = set()
        self._rooms_pending: list[np.ndarray] = []  # rooms of episodes not yet merged
        self._seen_pending: list[np.ndarray] = []  # seen += 1 not yet applied (see apply)
        self._steps_pending: list[np.ndarray] = []  # ... and steps += these (same ids)
        self.dirty: set[int] = set()  # ids whose entry changed since the last view delta
        self._view_n = 0  # cells the workers' views know
        self._touched: list[np.ndarray] = []  # ids whose seen changed (weights to recompute)
        self._touched_ids: list[int] = []  # ... one at a time
        self._csum_from = 0  # csum[:_csum_from] is up to date
        # the score-rank term: each distinct score ever held gets an id (score_level);
        # live cells per id; the rank of each id (None: to be ranked again)
        self._score_id: dict[float, int] = {}
        self._score_count: list[int] = []
        self._score_value: list[float] = []  # id -> score
        self._rank_of: np.ndarray | None = None
        # the region term: region key -> 1 + id; live cells per 1 + id (slot 0: unused)
        self._region_id: dict[bytes, int] = {}
        self._region_count = np.zeros(8, np.int64)
        self._region_dirty: set[int] = set()  # regions whose size changed since the weights
        self._region_factor = np.ones(8)  # cells ** -power per 1 + id (slot 0: 1)
        self._region_picks: np.ndarray | None = None  # picks per 1 + id (region-chosen term)

    def _alloc(self, cap: int) -> None:
        n = self.n
        for name, dt in _FIELDS.items():
            a = np.zeros(cap, dt)
            if self._cap:
                a[:n] = getattr(self, name)[:n]
            setattr(self, name, a)
        f = np.zeros((cap, self.n_facts), np.int16)
        k = np.zeros((cap, self._key_width), np.uint8)
        if self._cap:
            f[:n], k[:n] = self.facts[:n], self._keys[:n]
        self.facts, self._keys = f, k
        self._cap = cap

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held (allocated, not only used), by part."""
        arrays = sum(getattr(self, name).nbytes for name in _FIELDS)
        return {
            "arrays": arrays + self.facts.nbytes,
            "keys": self._keys.nbytes,
            "index": self._slots.nbytes,
            "states": self._arena.__sizeof__(),
        }

    # --- cells ---------------------------------------------------------------------------
    def add(
        self, key: bytes, state: bytes, score: float, length: int, last: int, lives: int, facts
    ) -> int:
        if key == DONE_KEY:
            if self._done_id >= 0:
                raise ValueError("the archive already has a DONE cell")
        else:
            if len(key) != self.key_size:
                raise ValueError(f"cell key of {len(key)} bytes, expected {self.key_size}")
            if self._nibbles and max(key) >= 16:
                self._to_bytes_keys()
        if self.n == self._cap:
            self._alloc(int(self._cap * _GROW) + 1)
        i = self.n
        self.n += 1
        if key == DONE_KEY:
            self._done_id = i
            self.is_done[i] = True
        else:
            pk = self._pack(key)
            self._keys[i] = np.frombuffer(pk, np.uint8)
            self._index_insert(i, pk)
        self._set_entry(i, state, score, length, last, lives, facts, new=True)
        if self._places is not None and key != DONE_KEY:
            changed = self._places.add(i, key, self)
            if changed is None:
                self._touch_all = True
            else:
                self._touched_ids.extend(changed)
        if self._groups is not None and key != DONE_KEY:
            self._touched_ids.extend(self._groups.add(i, key, self.score, self.outscored))
        return i

    def _replace(self, i, state, score, length, last, lives, facts) -> None:
        if self._seen_pending:
            self._flush_seen()
        self._set_entry(i, state, score, length, last, lives, facts, new=False)
        if self._groups is not None:
            self._touched_ids.extend(self._groups.rescore(i, self.score, self.outscored))

    def _set_entry(self, i, state, score, length, last, lives, facts, new: bool) -> None:
        """Cell ``i`` now holds this visit; its counters start again."""
        self._store_state(i, state, new=new)
        if self.params.score and not self.is_done[i]:
            self._count_score(i, new, float(score))
        self.score[i], self.traj_len[i], self.traj_last[i] = score, length, last
        self.lives[i] = lives
        self.facts[i] = facts
        if new or self.params.reset_on_update:
            if not new and self._region_picks is not None:  # its picks leave its region
                self._region_picks[self.region[i]] -= self.chosen[i]
            self._seen[i] = self.chosen[i] = self.chosen_since_new[i] = self.steps[i] = 0
        if self.level_fact is not None and not self.is_done[i]:
            old = None if new else int(self.level[i])
            lv = self.level[i] = self.facts[i, self.level_fact]
            top = self.max_level
            if lv > top:
                top = int(lv)
            elif old == top and lv < old:  # the top level's only cell may have moved down
                top = int(self.level[: self.n][~self.is_done[: self.n]].max(initial=0))
            if top != self.max_level:  # max_level: the top level of the live cells
                self.max_level = top
                self._touch_all = self._touch_all or self.params.uses_levels
        self.dirty.add(i)
        self._touched_ids.append(i)

    @property
    def rooms(self) -> set[int]:
        """Rooms (``facts[0]``) seen by any step."""
        self._merge_rooms()
        return self._rooms

    def _merge_rooms(self) -> None:
        if self._rooms_pending:
            self._rooms.update(np.unique(np.concatenate(self._rooms_pending)).tolist())
            self._rooms_pending.clear()

    @rooms.setter
    def rooms(self, value) -> None:
        self._rooms_pending.clear()
        self._rooms = set(value)

    @property
    def done_id(self) -> int:
        return self._done_id

    @property
    def best_done_score(self) -> float | None:
        d = self._done_id
        return float(self.score[d]) if d >= 0 else None

    @property
    def max_level_reached(self) -> int | None:
        """The highest level of a non-DONE cell now in the archive (None: no level fact)."""
        if self.level_fact is None:
            return None
        live = ~self.is_done[: self.n]
        return int(self.facts[: self.n, self.level_fact][live].max(initial=0))

    @property
    def max_archive_score(self) -> float:
        live = ~self.is_done[: self.n]
        return float(self.score[: self.n][live].max())

    @property
    def best_score(self) -> float:
        """The best score of any trajectory: a cell's, or an episode end's."""
        done = self.best_done_score
        return self.max_archive_score if done is None else max(self.max_archive_score, done)

    def best_cell(self) -> int:
        """The non-DONE cell with the highest score (shortest among ties, then oldest)."""
        live = np.flatnonzero(~self.is_done[: self.n])
        order = np.lexsort((live, self.traj_len[live], -self.score[live]))
        return int(live[order[0]])

    def best_trajectory(self) -> int:
        """The cell whose trajectory scores most: :meth:`best_cell`, or the DONE cell
        where an episode's end scored more than any cell (an env whose goal ends the
        episode keeps its score there)."""
        best = self.best_cell()
        done = self._done_id
        if done >= 0 and self.score[done] > self.score[best]:
            return int(done)
        return best

    # --- the accept rule (goexplore.archive.accept) -------------------------------------
    apply = apply_episode

    # --- worker views --------------------------------------------------------------------
    def _view(self, start: int, ids: np.ndarray) -> ViewDelta:
        keys = self._unpack_rows(self._keys[start : self.n])
        done_pos = self._done_id - start if self._done_id >= start else -1
        return ViewDelta(start, keys, done_pos, ids, self.score[ids], self.traj_len[ids])

    def take_delta(self) -> ViewDelta:
        """The cells added or changed since the last delta (or :meth:`views_synced`)."""
        ids = np.fromiter(self.dirty, np.int64, len(self.dirty))
        ids.sort()
        self.dirty.clear()
        d = self._view(self._view_n, ids)
        self._view_n = self.n
        return d

    def full_view(self) -> ViewDelta:
        return self._view(0, np.arange(self.n, dtype=np.int64))

    def resend_all(self) -> None:
        """The next delta is a whole view (the workers' views start afresh)."""
        self.dirty = set(range(self.n))
        self._view_n = 0

    def views_synced(self) -> None:
        """The workers' views were just built from :meth:`full_view`."""
        self.dirty.clear()
        self._view_n = self.n
