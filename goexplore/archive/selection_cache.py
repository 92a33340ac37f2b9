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

from goexplore.selection import cell_weights


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
        csum = self.cumulative_weights()
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
