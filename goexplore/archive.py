"""The archive: cells as parallel arrays, a key -> id index, novelty-weighted
selection and the accept rule. Only the master writes it.

Semantics (the reference's, DESIGN.md section 2):

* selection weight ``1 / sqrt(seen + 1)``; ``n`` picks with replacement by
  inverse-CDF over the cells in insertion order; the DONE cell (the virtual
  end-of-episode cell) has weight 0 and is never picked;
* a pick freezes the cell's state, lives, score, length and trajectory pointer
  (the *capture*); results are applied in task order against captures;
* a visit replaces a cell's entry iff its score is higher, or equal with a
  strictly shorter trajectory; replacement resets seen/chosen/chosen_since_new;
  ``seen`` counts once per episode; the chosen cell's chosen_since_new resets
  when the episode found anything new or better.

``apply`` does per episode what the reference does per step, with arrays:
within one episode trajectory length grows by one each step, so of all the
visits to a cell the one that ends up stored is the earliest with the highest
score, and a cell is replaced iff that visit beats the live entry.
"""
from __future__ import annotations

import numpy as np

from goexplore.explore import DONE_KEY, EpisodeResult

_INT_FIELDS = ("traj_len", "traj_last", "seen", "chosen", "chosen_since_new")


class Capture:
    """Cells frozen at sampling time (one row per pick)."""

    __slots__ = ("ids", "score", "length", "last", "lives", "states")

    def __init__(self, ids, score, length, last, lives, states):
        self.ids, self.score, self.length, self.last = ids, score, length, last
        self.lives, self.states = lives, states


class Archive:
    def __init__(self, key_size: int, n_facts: int, capacity: int = 1024):
        self.key_size, self.n_facts = key_size, n_facts
        self.n = 0
        self._alloc(capacity)
        self.index: dict[bytes, int] = {}
        self.states: list[bytes] = []
        self.done_scores: list[float] = []
        self.rooms: set[int] = set()
        self.dirty: set[int] = set()       # ids changed since the last delta

    def _alloc(self, cap: int) -> None:
        old = getattr(self, "score", None)
        arrays = {
            "keys": np.zeros((cap, self.key_size), np.uint8),
            "score": np.zeros(cap, np.float64),
            "traj_len": np.zeros(cap, np.int64),
            "traj_last": np.zeros(cap, np.int64),
            "seen": np.zeros(cap, np.int64),
            "chosen": np.zeros(cap, np.int64),
            "chosen_since_new": np.zeros(cap, np.int64),
            "lives": np.zeros(cap, np.int16),
            "facts": np.zeros((cap, self.n_facts), np.int16),
            "is_done": np.zeros(cap, np.bool_),
        }
        for name, a in arrays.items():
            if old is not None:
                a[:self.n] = getattr(self, name)[:self.n]
            setattr(self, name, a)

    ARRAYS = ("keys", "score", "traj_len", "traj_last", "seen", "chosen",
              "chosen_since_new", "lives", "facts", "is_done")

    # --- cells ---------------------------------------------------------------
    def add(self, key: bytes, state: bytes, score: float, length: int, last: int,
            lives: int, facts) -> int:
        if self.n == len(self.score):
            self._alloc(2 * self.n)
        i = self.n
        self.n += 1
        self.index[key] = i
        if key == DONE_KEY:
            self.is_done[i] = True
        else:
            self.keys[i] = np.frombuffer(key, np.uint8)
        self.states.append(state)
        self._set(i, state, score, length, last, lives, facts)
        self.seen[i] = self.chosen[i] = self.chosen_since_new[i] = 0
        return i

    def _set(self, i, state, score, length, last, lives, facts) -> None:
        self.states[i] = state
        self.score[i], self.traj_len[i], self.traj_last[i] = score, length, last
        self.lives[i] = lives
        self.facts[i] = facts
        self.dirty.add(i)

    def key_of(self, i: int) -> bytes:
        return DONE_KEY if self.is_done[i] else self.keys[i].tobytes()

    @property
    def done_id(self) -> int:
        return self.index.get(DONE_KEY, -1)

    @property
    def best_done_score(self) -> float | None:
        d = self.done_id
        return float(self.score[d]) if d >= 0 else None

    @property
    def max_archive_score(self) -> float:
        live = ~self.is_done[:self.n]
        return float(self.score[:self.n][live].max())

    def best_cell(self) -> int:
        """The non-DONE cell with the highest score (shortest among ties, then oldest)."""
        live = np.flatnonzero(~self.is_done[:self.n])
        order = np.lexsort((live, self.traj_len[live], -self.score[live]))
        return int(live[order[0]])

    # --- selection -------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator) -> Capture:
        w = 1.0 / np.sqrt(self.seen[:self.n] + 1.0)
        w[self.is_done[:self.n]] = 0.0
        csum = np.cumsum(w)
        u = rng.random(n) * csum[-1]
        ids = np.minimum(np.searchsorted(csum, u), self.n - 1)
        np.add.at(self.chosen, ids, 1)
        np.add.at(self.chosen_since_new, ids, 1)
        return Capture(ids, self.score[ids].copy(), self.traj_len[ids].copy(),
                       self.traj_last[ids].copy(), self.lives[ids].copy(),
                       [self.states[i] for i in ids])

    # --- the accept rule -----------------------------------------------------------
    def apply(self, chosen: int, score0: float, len0: int, last0: int,
              res: EpisodeResult, first_entry: int) -> bool:
        """Apply one exploration episode (whose steps were appended to the
        experience log from ``first_entry``). Returns whether it found anything."""
        n = res.n
        if n == 0:
            return False
        scores = np.cumsum(np.concatenate(([score0], res.rewards)))[1:]
        wids = res.ids                      # ids as the worker saw them
        ids = wids.copy()
        found = False
        # keys the worker did not know may have been added by an earlier task
        for j, key in enumerate(res.new_keys):
            cid = self.index.get(key)
            if cid is not None:
                ids[wids == -1 - j] = cid
        uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
        wid = wids[first]                   # to find the worker's state snapshots
        best = np.full(len(uniq), -np.inf)
        np.maximum.at(best, inv, scores)
        at_best = scores == best[inv]
        best_t = np.full(len(uniq), n)
        np.minimum.at(best_t, inv[at_best], np.flatnonzero(at_best))
        # new cells, inserted in order of first visit (as the reference does)
        for u in np.argsort(first, kind="stable").tolist():
            cid = int(uniq[u])
            if cid >= 0:
                continue
            t = int(best_t[u])
            i = self.add(res.new_keys[-1 - cid], self._snap(res, cid, t), float(scores[t]),
                         len0 + t + 1, first_entry + t, int(res.lives[t]), res.facts[t])
            self.seen[i] = 1 if t == first[u] else 0
            found = True
        old = uniq >= 0
        if old.any():
            cids, t = uniq[old], best_t[old]
            s, L = scores[t], len0 + t + 1
            live_s, live_L = self.score[cids], self.traj_len[cids]
            better = (s > live_s) | ((s == live_s) & (L < live_L))
            self.seen[cids[~better]] += 1
            for cid, w, tt in zip(cids[better].tolist(), wid[old][better].tolist(),
                                  t[better].tolist()):
                self._set(cid, self._snap(res, w, tt), float(scores[tt]), len0 + tt + 1,
                          first_entry + tt, int(res.lives[tt]), res.facts[tt])
            up = cids[better]
            self.seen[up] = self.chosen[up] = self.chosen_since_new[up] = 0
            found = found or bool(better.any())
        if found:
            self.chosen_since_new[chosen] = 0
        if res.done:
            self.done_scores.append(float(scores[-1]))
        self.rooms.update(np.unique(res.facts[:, 0]).tolist())
        return found

    @staticmethod
    def _snap(res: EpisodeResult, cid: int, t: int) -> bytes:
        snap = res.snaps.get(cid)
        if snap is None or snap[0] != t:
            raise RuntimeError(f"internal error: worker sent no state for cell {cid} at step {t} "
                               f"(has {None if snap is None else snap[0]})")
        return snap[1]

    # --- worker views ----------------------------------------------------------------
    def take_delta(self) -> list[tuple[bytes, int, float, int]]:
        """(key, id, score, length) of every cell changed since the last call."""
        ids = sorted(self.dirty)
        self.dirty.clear()
        return [(self.key_of(i), i, float(self.score[i]), int(self.traj_len[i])) for i in ids]

    def full_view(self) -> list[tuple[bytes, int, float, int]]:
        return [(self.key_of(i), i, float(self.score[i]), int(self.traj_len[i]))
                for i in range(self.n)]
