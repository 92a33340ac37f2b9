"""The archive: cells as parallel arrays, a compact key index, novelty-weighted
selection and the accept rule. Only the master writes it.

Semantics (the reference's, DESIGN.md section 2):

* selection weight ``1 / sqrt(seen + 1)``; ``n`` picks with replacement by
  inverse-CDF (``np.cumsum`` of the weights in insertion order, then
  ``searchsorted``); the DONE cell (the virtual end-of-episode cell) has
  weight 0 and is never picked;
* a pick freezes the cell's state, lives, score, length and trajectory pointer
  (the *capture*); results are applied in task order against captures;
* a visit replaces a cell's entry iff its score is higher, or equal with a
  strictly shorter trajectory; replacement resets seen/chosen/chosen_since_new;
  ``seen`` counts once per episode; the chosen cell's chosen_since_new resets
  when the episode found anything new or better.

Beyond the reference: ``steps`` counts the agent steps episodes spent in a
cell, added at the episode's end; an episode that sets a cell's entry leaves
its ``steps`` at 0 (``seen`` follows the reference rule above; with
``reset_on_update=False`` both keep counting instead). The selection weight is
:mod:`goexplore.selection`'s formula; only the weights of cells whose terms changed are recomputed.

``apply`` does per episode what the reference does per step. Within one
episode the trajectory grows by one step per step, so of all the visits to a
cell the one that can end up stored is its best visit (the earliest with the
highest score), and the cell is replaced iff that visit beats the live entry;
a new cell is inserted at its first visit, so it keeps ``seen == 1`` iff its
best visit is its first. The worker has already reduced the episode to best
visits (:mod:`goexplore.explore`).

Memory (what makes a million cells cheap): keys are packed two 4-bit values a
byte while every key value is below 16 (the default 9 grey levels), the key
index is an open-addressing table of int32 ids (no Python object per cell),
and the compressed states live in one bytes arena addressed by offset and
length. Selection keeps the weights and their running sum between batches:
only the weights of cells whose ``seen`` changed are recomputed, and the
cumulative sum only from the first changed position on — bit-identical to a
full ``np.cumsum`` (which adds sequentially).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from goexplore.cells import DONE_KEY
from goexplore.errors import CheckpointError
from goexplore.wire import EpisodeResult, ViewDelta
from goexplore.selection import PlaceTerms, SelectionParams, cell_weights

# name -> dtype of the per-cell arrays (the first ones are the checkpoint format)
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
    "level": np.int16,
    "weight": np.float64,
    "csum": np.float64,  # selection caches
    "state_off": np.int64,
    "state_len": np.int32,  # where the state lives in the arena
}
_GROW = 1.25
DONE_SCORES_KEPT = 200  # end-of-episode scores kept (and checkpointed) for logging
_COMPACT_AT = 0.10  # compact the state arena when this share of it is garbage
_NIBBLES = bytes(range(16))  # the byte values a nibble-packed key can hold


class Capture:
    """Cells frozen at sampling time (one row per pick; Python lists)."""

    __slots__ = ("ids", "score", "length", "last", "lives", "states")

    def __init__(self, ids, score, length, last, lives, states):
        self.ids, self.score, self.length, self.last = ids, score, length, last
        self.lives, self.states = lives, states


class Archive:
    #: arrays of a checkpoint (each with one row per cell), see :meth:`to_arrays`
    ARRAYS = (
        "keys",
        "score",
        "traj_len",
        "traj_last",
        "seen",
        "chosen",
        "chosen_since_new",
        "lives",
        "facts",
        "is_done",
        "steps",
    )
    #: arrays a checkpoint written before they existed may lack (they start at 0)
    OPTIONAL = ("steps",)

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

    # --- storage -----------------------------------------------------------------------
    @property
    def _key_width(self) -> int:
        return (self.key_size + 1) // 2 if self._nibbles else self.key_size

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

    def _pack(self, key: bytes) -> bytes:
        if not self._nibbles:
            return key
        if len(key) % 2:
            key += b"\x00"
        x = int.from_bytes(key, "little")
        return ((x | (x >> 4)).to_bytes(len(key), "little"))[0::2]

    def _unpack_rows(self, rows: np.ndarray) -> np.ndarray:
        if not self._nibbles:
            return rows
        out = np.empty((len(rows), 2 * rows.shape[1]), np.uint8)
        out[:, 0::2] = rows & 15
        out[:, 1::2] = rows >> 4
        return out[:, : self.key_size]

    def _pack_rows(self, keys: np.ndarray) -> np.ndarray:
        if not self._nibbles:
            return keys
        if keys.shape[1] % 2:
            keys = np.concatenate([keys, np.zeros((len(keys), 1), np.uint8)], axis=1)
        return keys[:, 0::2] | (keys[:, 1::2] << 4)

    def _to_bytes_keys(self) -> None:
        """Leave nibble packing (a key value >= 16 arrived)."""
        keys = self._unpack_rows(self._keys[: self.n])
        self._nibbles = False
        self._keys = np.zeros((self._cap, self.key_size), np.uint8)
        self._keys[: self.n] = keys
        self._rebuild_index()

    @property
    def keys(self) -> np.ndarray:
        """The keys as [n, key_size] uint8 (the DONE cell's row is zeros)."""
        return self._unpack_rows(self._keys[: self.n])

    def key_of(self, i: int) -> bytes:
        if i == self._done_id:
            return DONE_KEY
        return self._unpack_rows(self._keys[i : i + 1])[0].tobytes()

    def state(self, i: int) -> bytes:
        o = int(self.state_off[i])
        return bytes(self._arena[o : o + int(self.state_len[i])])

    @property
    def states(self) -> list[bytes]:
        """Every cell's compressed state (a copy: for tests and tools)."""
        return [self.state(i) for i in range(self.n)]

    def _store_state(self, i: int, blob: bytes, new: bool) -> None:
        ln = len(blob)
        if not new:
            old = int(self.state_len[i])
            if ln <= old:  # fits in place
                o = int(self.state_off[i])
                self._arena[o : o + ln] = blob
                self.state_len[i] = ln
                self._garbage += old - ln
                return
            self._garbage += old
        self.state_off[i] = len(self._arena)
        self.state_len[i] = ln
        self._arena += blob
        if self._garbage > _COMPACT_AT * len(self._arena) and len(self._arena) > 1 << 16:
            self._compact()

    def _compact(self) -> None:
        mv = memoryview(self._arena)
        offs, lens = self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist()
        arena = bytearray(b"".join([mv[o : o + ln] for o, ln in zip(offs, lens)]))
        del mv
        self._arena = arena
        ends = np.cumsum(self.state_len[: self.n], dtype=np.int64)
        self.state_off[: self.n] = ends - self.state_len[: self.n]
        self._garbage = 0

    def recompress_states(self, old, new) -> None:
        """Rewrite every state, read with codec ``old``, in codec ``new``'s form."""
        mv = memoryview(self._arena)
        blobs = [
            new.compress(old.decompress(mv[o : o + ln]))
            for o, ln in zip(self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist())
        ]
        del mv
        lens = np.fromiter(map(len, blobs), np.int64, len(blobs))
        self.state_len[: self.n] = lens
        self.state_off[: self.n] = np.cumsum(lens) - lens
        self._arena = bytearray(b"".join(blobs))
        self._garbage = 0

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held (allocated, not only used), by part."""
        arrays = sum(getattr(self, name).nbytes for name in _FIELDS)
        return {
            "arrays": arrays + self.facts.nbytes,
            "keys": self._keys.nbytes,
            "index": self._slots.nbytes,
            "states": self._arena.__sizeof__(),
        }

    # --- the key index (open addressing, linear probing, int32 ids) ---------------------
    def lookup(self, key: bytes) -> int:
        """The id of the cell with this key, or -1."""
        if key == DONE_KEY:
            return self._done_id
        if len(key) != self.key_size:
            return -1
        if self._nibbles:
            if key.translate(None, _NIBBLES):  # every stored key value is below 16
                return -1
            pk = self._pack(key)
        else:
            pk = key
        slots, keys = self._slots, self._keys
        mask = len(slots) - 1
        s = hash(pk) & mask
        while True:
            c = int(slots[s])
            if c < 0:
                return -1
            if keys[c].tobytes() == pk:
                return c
            s = (s + 1) & mask

    def _index_insert(self, i: int, pk: bytes) -> None:
        if 2 * (self._n_indexed + 1) > len(self._slots):
            self._rebuild_index(min_slots=4 * (self._n_indexed + 1))
            return  # the rebuild indexed cell i
        slots = self._slots
        mask = len(slots) - 1
        s = hash(pk) & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = i
        self._n_indexed += 1

    def _rebuild_index(self, min_slots: int = 0) -> None:
        """Index every cell 0..n-1 (vectorised rounds of linear probing).
        Raises ValueError on duplicate keys."""
        ids = np.flatnonzero(~self.is_done[: self.n])
        size = 64
        while size < max(min_slots, 2 * len(ids) + 2):
            size *= 2
        slots = np.full(size, -1, np.int32)
        w = self._keys.shape[1]
        block = self._keys[: self.n].tobytes()
        hashes = np.fromiter(
            (hash(block[i * w : (i + 1) * w]) for i in ids.tolist()), np.int64, len(ids)
        )
        if len(np.unique(hashes)) != len(hashes):
            rows = self._keys[ids]
            if len(np.unique(rows.view(np.dtype((np.void, w))).ravel())) != len(ids):
                raise ValueError("duplicate cell keys")
        pending, pos = ids.astype(np.int32), hashes & (size - 1)
        while len(pending):
            free = np.flatnonzero(slots[pos] < 0)
            u, first = np.unique(pos[free], return_index=True)
            slots[u] = pending[free[first]]
            placed = np.zeros(len(pending), np.bool_)
            placed[free[first]] = True
            pending, pos = pending[~placed], (pos[~placed] + 1) & (size - 1)
        self._slots = slots
        self._n_indexed = len(ids)

    # --- cells -------------------------------------------------------------------------
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
        return i

    def _replace(self, i, state, score, length, last, lives, facts) -> None:
        if self._seen_pending:
            self._flush_seen()
        self._set_entry(i, state, score, length, last, lives, facts, new=False)

    def _set_entry(self, i, state, score, length, last, lives, facts, new: bool) -> None:
        """Cell ``i`` now holds this visit; its counters start again."""
        self._store_state(i, state, new=new)
        self.score[i], self.traj_len[i], self.traj_last[i] = score, length, last
        self.lives[i] = lives
        self.facts[i] = facts
        if new or self.params.reset_on_update:
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
    def seen(self) -> np.ndarray:
        """Per-cell visit counts (episodes since the entry was last set)."""
        if self._seen_pending:
            self._flush_seen()
        return self._seen

    def _flush_seen(self) -> None:
        p, q = self._seen_pending, self._steps_pending
        ids = p[0] if len(p) == 1 else np.concatenate(p)
        np.add.at(self._seen, ids, 1)
        np.add.at(self.steps, ids, q[0] if len(q) == 1 else np.concatenate(q))
        self._touched.append(ids)
        p.clear()
        q.clear()

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
    def index(self) -> dict[bytes, int]:
        """key -> id of every cell (a copy: for tests and tools)."""
        return {self.key_of(i): i for i in range(self.n)}

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

    def best_cell(self) -> int:
        """The non-DONE cell with the highest score (shortest among ties, then oldest)."""
        live = np.flatnonzero(~self.is_done[: self.n])
        order = np.lexsort((live, self.traj_len[live], -self.score[live]))
        return int(live[order[0]])

    # --- selection ---------------------------------------------------------------------
    def _weights(self) -> np.ndarray:
        """The cumulative weights of cells 0..n-1, brought up to date."""
        n = self.n
        if self._seen_pending:
            self._flush_seen()
        if self._touch_all:
            self._touch_all = False
            self._touched.clear()
            self._touched_ids.clear()
            self._touched.append(np.arange(n))
        if self._touched or self._touched_ids:
            self._touched.append(np.array(self._touched_ids, np.int64))
            ids = np.unique(np.concatenate(self._touched))
            self._touched.clear()
            self._touched_ids.clear()
            self.weight[ids] = self.weights_of(ids)
            self._csum_from = min(self._csum_from, int(ids[0]))
        p = self._csum_from
        if p < n:
            csum = self.csum
            if p == 0:
                np.cumsum(self.weight[:n], out=csum[:n])
            else:  # continue the sequential sum: csum[p] = csum[p-1] + w[p], ...
                tail = self.weight[p:n].copy()
                tail[0] = csum[p - 1] + tail[0]
                np.cumsum(tail, out=csum[p:n])
            self._csum_from = n
        return self.csum[:n]

    def weights_of(self, ids: np.ndarray) -> np.ndarray:
        """The selection weights of cells ``ids`` from their current counters."""
        return cell_weights(
            self.params,
            seen=self._seen[ids],
            chosen=self.chosen[ids],
            since_new=self.chosen_since_new[ids],
            steps=self.steps[ids],
            missing_lr=self.missing_lr[ids],
            missing_ud=self.missing_ud[ids],
            holds_most=self.holds_most[ids],
            level=self.level[ids],
            max_level=self.max_level,
            is_done=self.is_done[ids],
        )

    def sample(self, n: int, rng: np.random.Generator) -> Capture:
        csum = self._weights()
        u = rng.random(n) * csum[-1]
        ids = np.minimum(np.searchsorted(csum, u), self.n - 1)
        np.add.at(self.chosen, ids, 1)
        np.add.at(self.chosen_since_new, ids, 1)
        if self.params.pick_counters:
            self._touched.append(ids)
        mv = memoryview(self._arena)  # one copy per state (released before any add)
        states = [
            bytes(mv[o : o + ln])
            for o, ln in zip(self.state_off[ids].tolist(), self.state_len[ids].tolist())
        ]
        del mv
        return Capture(
            ids.tolist(),
            self.score[ids].tolist(),
            self.traj_len[ids].tolist(),
            self.traj_last[ids].tolist(),
            self.lives[ids].tolist(),
            states,
        )

    # --- the accept rule -----------------------------------------------------------------
    def apply(
        self,
        chosen: int,
        score0: float,
        len0: int,
        last0: int,
        res: EpisodeResult,
        first_entry: int,
        on_set=None,
    ) -> bool:
        """Apply one exploration episode (whose steps were appended to the
        experience log from ``first_entry``). Returns whether it found anything.
        ``on_set(i, c)``: cell ``i``'s entry was just set from candidate ``c``."""
        if res.n == 0:
            return False
        # cells visited whose best visit does not beat the view: seen += 1, deferred
        # (increments commute; they are applied before any entry is reset, and before
        # anything reads seen)
        if len(res.seen_ids):
            self._seen_pending.append(res.seen_ids)
            self._steps_pending.append(res.seen_steps)
        if res.done:
            self.done_scores.append(res.final_score)
            self.n_done_episodes += 1
        self._rooms_pending.append(res.rooms)
        if len(self._rooms_pending) > 512:
            self._merge_rooms()  # bounds what is held
        if not len(res.cand_ids):
            return False
        if self._seen_pending:
            self._flush_seen()
        found = False
        keep = not self.params.reset_on_update
        for c, (cid, t, s) in enumerate(
            zip(res.cand_ids.tolist(), res.cand_t.tolist(), res.cand_score.tolist())
        ):
            length = len0 + t + 1
            if cid < 0:
                key = res.new_keys[-1 - cid]
                cid = self.lookup(key)
                if cid < 0:  # new: inserted in first-visit order
                    i = self.add(
                        key,
                        res.cand_states[c],
                        s,
                        length,
                        first_entry + t,
                        int(res.cand_lives[c]),
                        res.cand_facts[c],
                    )
                    self._seen[i] = 1 if res.cand_first[c] else 0
                    found = True
                    if on_set is not None:
                        on_set(i, c)
                    continue
            live_s = self.score[cid]  # (add may have grown the arrays: no aliases)
            if s > live_s or (s == live_s and length < self.traj_len[cid]):
                self._replace(
                    cid,
                    res.cand_states[c],
                    s,
                    length,
                    first_entry + t,
                    int(res.cand_lives[c]),
                    res.cand_facts[c],
                )
                found = True
                if on_set is not None:
                    on_set(cid, c)
                if not keep:
                    continue  # counters start again (the reference)
            self._seen[cid] += 1
            self.steps[cid] += res.cand_steps[c]
            self._touched_ids.append(cid)
        if found:
            self.chosen_since_new[chosen] = 0
            if self.params.pick_counters:
                self._touched_ids.append(chosen)
        return found

    # --- worker views ----------------------------------------------------------------------
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

    # --- checkpoints -------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The checkpoint arrays (:attr:`ARRAYS`, one row per cell; keys unpacked)."""
        n = self.n
        out = {
            name: getattr(self, name)[:n] for name in self.ARRAYS if name not in ("keys", "facts")
        }
        out["traj_len"] = out["traj_len"].astype(np.int64)
        out["keys"] = self.keys
        out["facts"] = self.facts[:n]
        return out

    def state_blobs(self) -> list[memoryview]:
        """Every cell's state, as views into the arena (release them before adding)."""
        mv = memoryview(self._arena)
        return [
            mv[o : o + ln]
            for o, ln in zip(self.state_off[: self.n].tolist(), self.state_len[: self.n].tolist())
        ]

    @classmethod
    def from_arrays(
        cls,
        key_size: int,
        n_facts: int,
        arrays: dict[str, np.ndarray],
        states: list[bytes],
        where: str = "checkpoint",
        params=None,
        rep=None,
        level_fact: int | None = None,
    ) -> Archive:
        """An archive from checkpoint arrays; CheckpointError if they do not fit."""
        try:
            n = len(arrays["score"])
        except (KeyError, TypeError):
            raise CheckpointError(f"{where}: no array 'score'") from None
        want = {"keys": (n, key_size), "facts": (n, n_facts)}
        arrays = dict(arrays)
        for name in cls.OPTIONAL:
            arrays.setdefault(name, np.zeros(n, _FIELDS[name]))
        for name in cls.ARRAYS:
            arr = arrays.get(name)
            shape = want.get(name, (n,))
            if arr is None or arr.shape != shape:
                raise CheckpointError(
                    f"{where}: array {name!r} has shape "
                    f"{None if arr is None else arr.shape}, expected {shape}"
                )
        if len(states) != n:
            raise CheckpointError(f"{where}: {len(states)} states for {n} cells")
        a = cls(
            key_size, n_facts, capacity=max(64, n), params=params, rep=rep, level_fact=level_fact
        )
        a.n = n
        for name in cls.ARRAYS:
            if name not in ("keys", "facts"):
                getattr(a, name)[:n] = arrays[name]
        a.facts[:n] = arrays["facts"]
        done = np.flatnonzero(a.is_done[:n])
        if len(done) > 1:
            raise CheckpointError(f"{where}: {len(done)} DONE cells")
        a._done_id = int(done[0]) if len(done) else -1
        keys = np.asarray(arrays["keys"], np.uint8)
        if a._nibbles and n and int(keys.max()) >= 16:
            a._nibbles = False
            a._keys = np.zeros((a._cap, key_size), np.uint8)
        a._keys[:n] = a._pack_rows(keys)
        if a._done_id >= 0:
            a._keys[a._done_id] = 0
        lens = np.fromiter(map(len, states), np.int64, n)
        a.state_len[:n] = lens
        a.state_off[:n] = np.cumsum(lens) - lens
        a._arena = bytearray(b"".join(states))
        try:
            a._rebuild_index()
        except ValueError:
            raise CheckpointError(f"{where}: duplicate cell keys") from None
        if level_fact is not None:
            a.level[:n] = a.facts[:n, level_fact]
            live = a.level[:n][~a.is_done[:n]]
            a.max_level = int(live.max(initial=0))
        if a._places is not None:
            for i in np.flatnonzero(~a.is_done[:n]).tolist():
                a._places.add(i, a.key_of(i), a, recompute=False)
            a._places.recompute_neighbours(a)
        a.weight[:n] = a.weights_of(np.arange(n))
        a._csum_from = 0
        a._view_n = n
        return a
