"""The archive's selection: weights kept between batches, and the picks.

``n`` picks with replacement by inverse CDF (``np.cumsum`` of the weights in
insertion order, then ``searchsorted``); the DONE cell has weight 0 and is
never picked. Only the weights of cells whose terms changed are recomputed,
and the cumulative sum only from the first changed position on: bit-identical
to a full ``np.cumsum`` (which adds sequentially). The weight itself is
:func:`goexplore.selection.cell_weights`.
"""

from __future__ import annotations

import numpy as np

from goexplore.selection import cell_weights, region_factors, score_weights


class Capture:
    """Cells frozen at sampling time (one row per pick; Python lists): a pick
    freezes the cell's state, lives, score, length and trajectory pointer, and
    results are applied in task order against captures."""

    __slots__ = ("ids", "score", "length", "last", "lives", "states")

    def __init__(self, ids, score, length, last, lives, states):
        self.ids, self.score, self.length, self.last = ids, score, length, last
        self.lives, self.states = lives, states


class SelectionCache:
    """Mixin of :class:`~goexplore.archive.Archive`: its weights and picks."""

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

    def add_visits(self, ids: np.ndarray) -> None:
        """``seen += 1`` for each occurrence of an id in ``ids`` (outside the accept
        rule: tools and benchmarks); their weights are recomputed at the next pick."""
        ids = np.asarray(ids, np.int64)
        np.add.at(self.seen, ids, 1)
        self._touched.append(ids)

    def cumulative_weights(self) -> np.ndarray:
        """The cumulative weights of cells 0..n-1, brought up to date."""
        self._update_weights()
        n, p = self.n, self._csum_from
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

    def _update_weights(self) -> None:
        """Recompute the weights of the cells whose terms changed."""
        if self._seen_pending:
            self._flush_seen()
        ids: np.ndarray | slice | None = None  # a slice when every cell's changed
        if self._touch_all:
            self._touch_all = False
            ids = slice(0, self.n)
        elif self._touched or self._touched_ids:
            self._touched.append(np.array(self._touched_ids, np.int64))
            ids = np.unique(np.concatenate(self._touched))
        p = self.params
        if not (p.score or p.uses_regions):
            if ids is not None:
                self.weight[ids] = self._base_weights(ids)
        else:  # the score and region terms apart: they change every cell's weight (the
            # score ranks) or a whole region's (its size), but only through themselves
            if ids is not None:
                self.weight0[ids] = self._base_weights(ids)
            if p.score and self._rank_of is None:
                ids = slice(0, self.n)
            if not p.uses_regions:
                if ids is not None:
                    self.weight[ids] = self.weight0[ids] + self._score_weights(ids)
            else:
                if ids is not None:
                    w0 = self.weight0[ids]
                    self.weight1[ids] = w0 + self._score_weights(ids) if p.score else w0
                if self._region_dirty or p.region_chosen:  # one gather for every cell:
                    self._update_region_factors()  # cheaper than finding the cells of the
                    ids = slice(0, self.n)  # changed regions (every pick changes one)
                if ids is not None:
                    self.weight[ids] = self.weight1[ids] * self._region_factor[self.region[ids]]
        if ids is not None:
            self._touched.clear()
            self._touched_ids.clear()
            first = 0 if isinstance(ids, slice) else int(ids[0])
            self._csum_from = min(self._csum_from, first)

    def _update_region_factors(self) -> None:
        """The region factor of each region whose size changed (of every region with
        the region-chosen term, whose picks change with every batch)."""
        if self.params.region_chosen:
            self._region_dirty.clear()
            self._region_factor = region_factors(
                self.params, self._region_count, self._region_chosen()
            )
            self._region_factor[0] = 1.0
            return
        dirty = np.fromiter(self._region_dirty, np.int64, len(self._region_dirty))
        self._region_dirty.clear()
        self._region_factor[dirty] = region_factors(self.params, self._region_count[dirty])

    def _region_chosen(self) -> np.ndarray:
        """Per 1 + region id, the picks of its cells (each since the cell was last set):
        counted from the cells once, then kept as cells are picked, reset or move."""
        if self._region_picks is None:
            n, size = self.n, len(self._region_count)
            c = np.bincount(self.region[:n], weights=self.chosen[:n], minlength=size)
            self._region_picks = c[:size].astype(np.int64)
        return self._region_picks

    def _region_factor_of(self, ids: np.ndarray) -> np.ndarray:
        """The region factor of cells ``ids`` from the current counts."""
        r = self.region[ids]
        chosen = self._region_chosen()[r] if self.params.region_chosen else None
        return np.where(r > 0, region_factors(self.params, self._region_count[r], chosen), 1.0)

    def _count_score(self, i: int, new: bool, score: float) -> None:
        """Live cell ``i`` (``new``: just added) now holds ``score``. When the set of
        distinct scores changes, every cell's rank may change: only the score term is
        recomputed then (``_rank_of = None``)."""
        counts = self._score_count
        if not new:
            old = int(self.score_level[i])
            if self._score_value[old] == score:
                return
            counts[old] -= 1
            if not counts[old]:
                self._rank_of = None
        sid = self._score_id.get(score)
        if sid is None:
            sid = self._score_id[score] = len(counts)
            counts.append(0)
            self._score_value.append(score)
        if not counts[sid]:
            self._rank_of = None
        counts[sid] += 1
        self.score_level[i] = sid

    def _recount_scores(self) -> None:
        """The score ids and counts from the arrays (after a load)."""
        self._score_id, self._score_count, self._score_value = {}, [], []
        self._rank_of = None
        for i in np.flatnonzero(~self.is_done[: self.n]).tolist():
            self._count_score(i, True, float(self.score[i]))

    def score_rank(self, ids: np.ndarray) -> np.ndarray:
        """1 + the number of distinct live scores above each cell's score."""
        if self._rank_of is None:
            vals = np.array(self._score_value, np.float64)
            live = np.array(self._score_count) > 0
            order = np.argsort(-np.where(live, vals, -np.inf), kind="stable")
            rank = np.ones(max(1, len(vals)), np.int64)  # (a DONE cell's id may be 0)
            rank[order] = np.arange(1, len(vals) + 1)  # the live levels come first
            self._rank_of = rank
        return self._rank_of[self.score_level[ids]]

    def weights_of(self, ids: np.ndarray) -> np.ndarray:
        """The selection weights of cells ``ids`` from their current counters."""
        w = self._base_weights(ids)
        if self.params.score:
            w = w + self._score_weights(ids)
        if self.params.uses_regions:
            w = w * self._region_factor_of(ids)
        return w

    def set_region(self, i: int, key: bytes) -> None:
        """Cell ``i``'s region is the one named ``key`` (any bytes; the region term)."""
        rid = self._region_id.get(key)
        if rid is None:
            rid = self._region_id[key] = len(self._region_id) + 1
            if rid == len(self._region_count):  # both tables double
                self._region_count = np.concatenate(
                    [self._region_count, np.zeros(len(self._region_count), np.int64)]
                )
                self._region_factor = np.concatenate(
                    [self._region_factor, np.ones(len(self._region_factor))]
                )
                if self._region_picks is not None:
                    self._region_picks = np.concatenate(
                        [self._region_picks, np.zeros(len(self._region_picks), np.int64)]
                    )
        old = int(self.region[i])
        if old == rid:
            return
        if self._region_picks is not None:
            self._region_picks[old] -= self.chosen[i]
            self._region_picks[rid] += self.chosen[i]
        if old:
            self._region_count[old] -= 1
            self._region_dirty.add(old)
        self._region_count[rid] += 1
        self._region_dirty.add(rid)
        self.region[i] = rid

    def region_sizes(self) -> np.ndarray:
        """Cells per region, for each cell (0: no region assigned)."""
        return self._region_count[self.region[: self.n]]

    def _score_weights(self, ids: np.ndarray) -> np.ndarray:
        return score_weights(
            self.params,
            score_rank=self.score_rank(ids),
            level=self.level[ids],
            max_level=self.max_level,
            is_done=self._weighs_nothing(ids),
            lives=self.lives[ids],
        )

    def _weighs_nothing(self, ids: np.ndarray) -> np.ndarray:
        """The cells of ``ids`` whose weight is 0: DONE, and with ``max_score_only`` the
        outscored ones."""
        d = self.is_done[ids]
        return d if self._groups is None else d | self.outscored[ids]

    def _base_weights(self, ids: np.ndarray) -> np.ndarray:
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
            is_done=self._weighs_nothing(ids),
            ahead=self.ahead[ids],
            lives=self.lives[ids],
        )

    def sample(self, n: int, rng: np.random.Generator) -> Capture:
        f = self.params.score_filter
        if f and rng.random() < f:  # the original code's ScoreBasedFilter
            self._update_weights()  # (the full running sum waits for an unfiltered batch)
            m = self.n
            keep = self.score[:m] >= self.score[self._random_live(rng)]
            csum = np.cumsum(self.weight[:m] * keep)
        else:
            csum = self.cumulative_weights()
        u = rng.random(n) * csum[-1]
        ids = np.minimum(np.searchsorted(csum, u), self.n - 1)
        np.add.at(self.chosen, ids, 1)
        np.add.at(self.chosen_since_new, ids, 1)
        if self._region_picks is not None:
            np.add.at(self._region_picks, self.region[ids], 1)
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

    def _random_live(self, rng: np.random.Generator) -> int:
        """A cell drawn uniformly from the cells other than DONE."""
        d = self._done_id
        j = int(rng.integers(self.n - (d >= 0)))
        return j + 1 if 0 <= d <= j else j
