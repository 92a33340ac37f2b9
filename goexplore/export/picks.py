"""Which trajectories become demos: candidates from a run's experience log
and archive, ranked by score, optionally chosen to differ from each other.

The experience log is a tree (every entry points to the entry before it on
its trajectory), appended one exploration episode at a time, so an episode
is a run of consecutive entries whose first entry points back into the tree.
Per-entry score and depth are computed one episode at a time, vectorised
inside it: a whole 2M-step log takes well under a second.

Two candidate sets:

* ``done``: every trajectory that ended an episode (a logged step with
  ``done``: a life lost, or game over, per the run's episode end) with a
  positive score;
* ``best``: the archive's cells with a positive score (a cell that is not an
  episode end is a demo cut short: its last step is a truncation).

Ranking: higher score first, then shorter, then older. ``diverse`` picks as
the Nature paper's demo generator does, preferring trajectories that share
the least of their path with the demos already chosen: the first pick is the
best; each next one is, among the candidates scoring at least what the plain
top-K's last pick scores, the one whose shared steps (its prefix that lies on
an already-chosen path) are the smallest fraction of its length; ties go by
the ranking. Diversity never lowers the worst score below the plain top-K's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.errors import GoExploreError

SELECT = ("done", "best")


@dataclass(frozen=True)
class Pick:
    last: int  # experience-log entry of the last step
    score: float  # the score the run recorded for it
    length: int  # agent steps
    done: bool  # its last step ended an episode
    cell: int | None  # archive cell it is the trajectory of (None: an episode end only)
    shared: int = 0  # steps shared with demos picked before it (diverse picks)

    @property
    def source(self) -> str:
        end = "episode end" if self.done else "cell"
        return f"{end} (log entry {self.last}" + (
            f", cell {self.cell})" if self.cell is not None else ")"
        )


class LogTree:
    """Score and depth of every experience-log entry."""

    def __init__(self, entries: dict[str, np.ndarray]):
        prev = entries["prev"].astype(np.int64)
        rew = entries["rew"].astype(np.float64)
        n = len(prev)
        self.prev, self.done = prev, entries["done"].astype(bool)
        self.score = np.zeros(n, np.float64)
        self.depth = np.zeros(n, np.int64)
        # an episode's first entry points elsewhere than the entry before it (the
        # very first one points to the root, -1)
        starts = np.flatnonzero((prev != np.arange(n) - 1) | (np.arange(n) == 0))
        if np.any(prev >= np.arange(n)):
            bad = int(np.flatnonzero(prev >= np.arange(n))[0])
            raise GoExploreError(f"experience log corrupt: entry {bad} points forward")
        self.starts = starts
        self.ends = np.append(starts[1:], n)
        for s, e in zip(starts.tolist(), self.ends.tolist()):
            p = int(prev[s])
            base_s, base_d = (self.score[p], self.depth[p]) if p >= 0 else (0.0, 0)
            self.score[s:e] = base_s + np.cumsum(rew[s:e])
            self.depth[s:e] = base_d + np.arange(1, e - s + 1)

    def path(self, last: int) -> np.ndarray:
        """Entry ids from the root to ``last``, forward order."""
        out = np.empty(int(self.depth[last]), np.int64)
        i, k = last, len(out) - 1
        while i >= 0:
            out[k] = i
            i, k = int(self.prev[i]), k - 1
        return out

    def shared_depth(self, on_path: np.ndarray) -> np.ndarray:
        """For every entry, how many steps of its path lie in ``on_path`` (a
        boolean mark per entry that is closed under ``prev``: a union of paths
        from the root). Those steps are a prefix, so this is the depth of the
        deepest marked ancestor."""
        out = np.zeros(len(self.prev), np.int64)
        marked_depth = np.where(on_path, self.depth, 0)
        for s, e in zip(self.starts.tolist(), self.ends.tolist()):
            p = int(self.prev[s])
            base = out[p] if p >= 0 else 0
            out[s:e] = np.maximum.accumulate(np.maximum(marked_depth[s:e], base))
        return out


def candidates(tree: LogTree, archive, select: str) -> list[Pick]:
    """Every scoring trajectory of the kind ``select`` names, best first."""
    from goexplore.cells import DONE_KEY

    if select not in SELECT:
        raise GoExploreError(f"--select {select!r}: choose one of: {', '.join(SELECT)}")
    if select == "done":
        ids = np.flatnonzero(tree.done & (tree.score > 0))
        cell_of = (
            {int(archive.traj_last[archive.done_id]): archive.done_id}
            if (archive.done_id >= 0)
            else {}
        )
        picks = [
            Pick(int(i), float(tree.score[i]), int(tree.depth[i]), True, cell_of.get(int(i)))
            for i in ids
        ]
    else:
        picks = []
        for c in np.flatnonzero(np.asarray(archive.score[: archive.n]) > 0).tolist():
            last = int(archive.traj_last[c])
            picks.append(
                Pick(last, float(archive.score[c]), int(archive.traj_len[c]),
                     archive.key_of(c) == DONE_KEY, c)
            )  # fmt: skip
    picks.sort(key=lambda p: (-p.score, p.length, p.last))
    return picks


def choose(tree: LogTree, pool: list[Pick], k: int, diverse: bool) -> list[Pick]:
    """The ``k`` demos: the top ``k`` of ``pool`` (ranked best first), or with
    ``diverse`` the greedy least-shared choice described in the module doc."""
    if k < 1:
        raise GoExploreError(f"--top {k}: must be at least 1")
    if not diverse:
        return pool[:k]
    floor = pool[k - 1].score
    eligible = [p for p in pool if p.score >= floor]
    chosen = [eligible[0]]
    on_path = np.zeros(len(tree.prev), bool)
    while len(chosen) < k:
        on_path[tree.path(chosen[-1].last)] = True
        shared = tree.shared_depth(on_path)
        taken = {p.last for p in chosen}
        best, best_key = None, None
        for rank, p in enumerate(eligible):
            if p.last in taken:
                continue
            key = (shared[p.last] / max(p.length, 1), rank)
            if best_key is None or key < best_key:
                best, best_key = p, key
        if best is None:
            break
        chosen.append(
            Pick(best.last, best.score, best.length, best.done, best.cell, int(shared[best.last]))
        )
    return chosen
