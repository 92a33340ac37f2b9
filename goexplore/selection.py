"""Which cell to return to: the papers' selection weight as one vectorised formula.

For a cell with counters ``seen``, ``chosen``, ``since_new`` (picks since it
last led to something new or better) and ``steps`` (agent steps taken in it),
and, for cells with a position (:class:`goexplore.cells.Place`), the number of
missing left/right and up/down neighbours and whether it holds the most items
(keys) of all cells at its place::

    W = ( sum_k w_k / (c_k + 1) ** p_k                  k in seen, chosen, since_new, steps
          + horiz * missing_lr + vert * missing_ud + keys * holds_most
          + keys_ahead * ahead + score / sqrt(score_rank) )
        * low_level_weight ** (max_level - level) * region_cells ** -region
        * (1 + region_chosen) ** -region_chosen_power * (1 + lives) ** lives_power

(Ecoffet et al. 2019, section 2.1 and appendix A.5; the original code's
``WeightedSelector``). Terms whose weight is 0 are left out, and a power of
0.5 is computed as a square root, so the reference's ``1 / sqrt(seen + 1)``
(seen weight 1, all else 0) is bit-exact. The DONE cell weighs 0.

Two terms the papers' configurations left off, from the original code:
``score_rank`` is the rank of the cell's score among the distinct scores of
the archive's cells (1: the highest; equal scores share a rank), the original
code's ``score_high`` term for cells without a position; and
:meth:`SelectionParams.score_filter` (its ``ScoreBasedFilter``), applied at
the pick (:meth:`goexplore.archive.Archive.sample`). One term of our own:
``ahead`` is 1 for a cell that holds more items than every other cell at its
place (0 where it is alone there), so a state with more keys than any other
at a place it shares is worth exploring from (``holds_most`` is also 1 for
every cell alone at its place, most of a growing map). Another of our own:
``lives`` is the lives the cell's state has left (the emulator's count, any
Atari game): when an episode ends only at game over, the same place is reached
again with fewer lives, and ``(1 + lives) ** lives_power`` favours the copy
that can still lose one. And ``region_chosen``, the picks of the cells in the cell's
region (each counted since the cell was last set, as ``chosen``): a domain-free
frontier term, the region-level count that makes screens picked often weigh
less than screens found lately. With keys that hold the score (``--cell-score-bin``),
``max_score_only`` gives weight 0 to a cell outscored by another whose key differs
only in the score (:class:`ScoreGroups`; the original code's ``MaxScoreReset``):
of the states found at one place, only the one that scored most is explored from.

:class:`PlaceTerms` keeps the map terms up to date as cells arrive: a new
cell changes the terms of at most its four neighbours and of the cells at its
place, so an archive of any size costs a few dictionary operations per new
cell. A neighbour past the x (or y) range seen so far lies in the next room of
the representation's room grid at the other end of the range (the original
code's rule); off the grid counts as missing, as there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.cells import neighbour_room

_OFFSETS = ((-1, 0), (1, 0), (0, -1), (0, 1))


@dataclass(frozen=True)
class SelectionParams:
    seen: tuple[float, float] = (1.0, 0.5)  # (weight, power)
    chosen: tuple[float, float] = (0.0, 0.5)
    since_new: tuple[float, float] = (0.0, 0.5)
    steps: tuple[float, float] = (0.0, 0.5)
    horiz: float = 0.0
    vert: float = 0.0
    keys: float = 0.0
    low_level_weight: float = 1.0
    reset_on_update: bool = True
    keys_ahead: float = 0.0
    score: float = 0.0  # weight of 1 / sqrt(score rank)
    score_filter: float = 0.0  # probability that a batch picks only cells >= a random one
    seen_start: bool = False  # seen also counts the cell an episode starts from
    region: float = 0.0  # power of 1 / (cells in the cell's region)
    lives: float = 0.0  # power of (1 + lives left)
    region_chosen: float = 0.0  # power of 1 / (1 + picks of the region's cells)
    max_score_only: bool = False  # a cell outscored by one keyed alike but for the score: 0
    region_score: bool = False  # the region terms' regions are also split by score

    @classmethod
    def from_config(cls, cfg) -> SelectionParams:
        return cls(
            (cfg.seen_weight, cfg.seen_power),
            (cfg.chosen_weight, cfg.chosen_power),
            (cfg.since_new_weight, cfg.since_new_power),
            (cfg.steps_weight, cfg.steps_power),
            cfg.horiz_weight,
            cfg.vert_weight,
            cfg.keys_weight,
            cfg.low_level_weight,
            cfg.reset_on_update,
            cfg.keys_ahead_weight,
            cfg.score_weight,
            cfg.score_filter,
            cfg.seen_start,
            cfg.region_power,
            cfg.lives_power,
            cfg.region_chosen_power,
            cfg.max_score_only,
            cfg.region_score,
        )

    @property
    def uses_places(self) -> bool:
        return bool(self.horiz or self.vert or self.keys or self.keys_ahead)

    @property
    def uses_levels(self) -> bool:
        return self.low_level_weight != 1.0

    @property
    def uses_regions(self) -> bool:
        return bool(self.region or self.region_chosen)

    @property
    def pick_counters(self) -> bool:
        """Whether picking a cell changes its weight (chosen / since-new terms)."""
        return bool(self.chosen[0] or self.since_new[0])


def _count_term(c: np.ndarray, weight: float, power: float) -> np.ndarray:
    x = c + 1.0
    if power == 0.5:
        t = 1.0 / np.sqrt(x)
    elif power == 1.0:
        t = 1.0 / x
    else:
        t = x**-power
    return t if weight == 1.0 else weight * t


def cell_weights(
    p: SelectionParams,
    *,
    seen,
    chosen,
    since_new,
    steps,
    missing_lr,
    missing_ud,
    holds_most,
    level,
    max_level: int,
    is_done,
    ahead=None,
    lives=None,
) -> np.ndarray:
    """The selection weight of each cell (all arguments are aligned arrays), less the
    score-rank term (:func:`score_weights`, added to it)."""
    w = None
    for c, (weight, power) in (
        (seen, p.seen),
        (chosen, p.chosen),
        (since_new, p.since_new),
        (steps, p.steps),
    ):
        if weight:
            t = _count_term(c, weight, power)
            w = t if w is None else w + t
    if w is None:
        w = np.zeros(len(seen))
    if p.horiz:
        w = w + p.horiz * missing_lr
    if p.vert:
        w = w + p.vert * missing_ud
    if p.keys:
        w = w + p.keys * holds_most
    if p.keys_ahead:
        w = w + p.keys_ahead * ahead
    if p.low_level_weight != 1.0:
        w = w * _level_factor(p, level, max_level)
    if p.lives:
        w = w * _lives_factor(p, lives)
    w[is_done] = 0.0
    return w


def region_factors(
    p: SelectionParams, region_cells: np.ndarray, region_chosen: np.ndarray | None = None
) -> np.ndarray:
    """``region_cells ** -region * (1 + region_chosen) ** -region_chosen`` per cell or
    region (a cell count of 0, no region yet, counts as 1)."""
    c = np.maximum(region_cells, 1).astype(np.float64)
    if p.region == 1.0:
        f = 1.0 / c
    elif p.region == 0.5:
        f = 1.0 / np.sqrt(c)
    else:
        f = c**-p.region
    if p.region_chosen:
        f = f * _count_term(np.asarray(region_chosen, np.float64), 1.0, p.region_chosen)
    return f


def score_weights(
    p: SelectionParams, *, score_rank, level, max_level: int, is_done, lives=None
) -> np.ndarray:
    """The score-rank term, ``score / sqrt(score_rank)`` times the level factor (0 for
    DONE). It changes for every cell when the set of distinct scores changes, so the
    archive keeps it apart from :func:`cell_weights` and recomputes only it then."""
    w = p.score / np.sqrt(score_rank)
    if p.low_level_weight != 1.0:
        w = w * _level_factor(p, level, max_level)
    if p.lives:
        w = w * _lives_factor(p, lives)
    w[is_done] = 0.0
    return w


def _lives_factor(p: SelectionParams, lives) -> np.ndarray:
    """(1 + lives) ** lives_power (a negative count, none reported, counts as 0)."""
    x = np.maximum(lives, 0).astype(np.float64) + 1.0
    return x if p.lives == 1.0 else x**p.lives


def _level_factor(p: SelectionParams, level, max_level: int) -> np.ndarray:
    """low_level_weight ** (levels below the top), by table."""
    table = p.low_level_weight ** np.arange(max_level + 1, dtype=np.float64)
    return table[max_level - np.minimum(level, max_level)]


class ScoreGroups:
    """Cells whose keys are equal but for the representation's score tail (their last
    ``tail`` bytes), and ``outscored``: True for a cell scoring less than another of
    its group (the ``max_score_only`` rule). Kept as cells arrive or improve; a
    change costs the size of one group (the states found at one place)."""

    def __init__(self, tail: int):
        self.tail = tail
        self.groups: dict[bytes, list[int]] = {}  # key less the tail -> ids
        self.group_of: dict[int, list[int]] = {}  # id -> its group

    def add(
        self, i: int, key: bytes, scores: np.ndarray, outscored: np.ndarray, rescore: bool = True
    ) -> list[int]:
        """Cell ``i`` (key ``key``, score ``scores[i]``) joins its group; returns the ids
        whose ``outscored`` changed (none with ``rescore=False``, for a bulk load that
        ends with :meth:`rescore_all`)."""
        g = self.groups.setdefault(key[: len(key) - self.tail], [])
        g.append(i)
        self.group_of[i] = g
        return self.rescore(i, scores, outscored) if rescore else []

    def rescore_all(self, scores: np.ndarray, outscored: np.ndarray) -> None:
        """``outscored`` of every grouped cell, one pass per group."""
        for g in self.groups.values():
            s = scores[g]
            outscored[g] = s < s.max()

    def rescore(self, i: int, scores: np.ndarray, outscored: np.ndarray) -> list[int]:
        """Cell ``i``'s score is now ``scores[i]``; returns the ids whose ``outscored``
        changed."""
        g = self.group_of.get(i)
        if g is None:
            return []
        ids = np.array(g, np.int64)
        s = scores[ids]
        now = s < s.max()
        changed = ids[now != outscored[ids]]
        outscored[ids] = now
        return changed.tolist()


class PlaceTerms:
    """Missing neighbours, holds-the-most-items and levels of every positioned
    cell, kept incrementally (see the module docstring)."""

    def __init__(self, rep):
        self.rep = rep
        self.pos: dict[tuple, int] = {}  # (level, group, room, x, y) -> id
        # (level, room, x, y) -> [most items, fewest items, ids...]
        self.places: dict[tuple, list] = {}
        self.xr: tuple[int, int] | None = None  # x and y bin ranges seen
        self.yr: tuple[int, int] | None = None
        self.cell_place: dict[int, tuple] = {}  # id -> Place

    def neighbour(self, pl, dx: int, dy: int):
        """The position key of the neighbour in direction (dx, dy), or None off the grid."""
        x, y, room = pl.x + dx, pl.y + dy, pl.room
        (x0, x1), (y0, y1) = self.xr, self.yr
        rdx = rdy = 0
        if x < x0:
            x, rdx = x1, -1
        elif x > x1:
            x, rdx = x0, 1
        elif y < y0:
            y, rdy = y1, -1
        elif y > y1:
            y, rdy = y0, 1
        if rdx or rdy:
            room = neighbour_room(self.rep, room, rdx, rdy)
            if room is None:
                return None
        return (pl.level, pl.group, room, x, y)

    def add(self, i: int, key: bytes, arrays, recompute: bool = True) -> list[int] | None:
        """Cell ``i`` (key ``key``) was added. Updates the arrays
        (``missing_lr``, ``missing_ud``, ``holds_most``) and returns the other
        ids whose terms changed, or None when every cell's did (a new x/y range:
        recompute everything; skipped with ``recompute=False``, for a bulk load
        that ends with :meth:`recompute_neighbours`)."""
        pl = self.rep.place(key)
        if pl is None:
            return []
        self.cell_place[i] = pl
        self.pos[(pl.level, pl.group, pl.room, pl.x, pl.y)] = i
        wider = False
        if self.xr is None:
            self.xr, self.yr, wider = (pl.x, pl.x), (pl.y, pl.y), True
        if not self.xr[0] <= pl.x <= self.xr[1]:
            self.xr, wider = (min(self.xr[0], pl.x), max(self.xr[1], pl.x)), True
        if not self.yr[0] <= pl.y <= self.yr[1]:
            self.yr, wider = (min(self.yr[0], pl.y), max(self.yr[1], pl.y)), True
        changed = self._add_items(i, pl, arrays)
        if wider:
            if recompute:
                self.recompute_neighbours(arrays)
            return None
        lr = ud = 0
        for dx, dy in _OFFSETS:
            nb = self.neighbour(pl, dx, dy)
            j = self.pos.get(nb) if nb is not None else None
            if j is None:
                if dx:
                    lr += 1
                else:
                    ud += 1
                continue
            # symmetric: i is j's neighbour in the opposite direction
            (arrays.missing_lr if dx else arrays.missing_ud)[j] -= 1
            changed.append(j)
        arrays.missing_lr[i], arrays.missing_ud[i] = lr, ud
        return changed

    def _add_items(self, i: int, pl, arrays) -> list[int]:
        """Cell ``i`` joins its place: its own ``holds_most`` and ``ahead``, and the
        other cells at the place whose terms changed."""
        q = (pl.level, pl.room, pl.x, pl.y)
        entry = self.places.get(q)
        items = pl.items
        if entry is None:
            self.places[q] = [items, items, i]
            arrays.holds_most[i] = True
            arrays.ahead[i] = False
            return []
        top, low = entry[0], entry[1]
        entry.append(i)
        if items <= top:
            arrays.holds_most[i] = items == top
            arrays.ahead[i] = items == top and low < top
            if items >= low:
                return []
            entry[1] = items
            if low < top:  # the holders were ahead already
                return []
            holders = [j for j in entry[2:-1] if arrays.holds_most[j]]
            arrays.ahead[holders] = True
            return holders
        arrays.holds_most[i] = arrays.ahead[i] = True
        entry[0] = items
        losers = [j for j in entry[2:-1] if arrays.holds_most[j]]
        arrays.holds_most[losers] = False
        arrays.ahead[losers] = False
        return losers

    def recompute_neighbours(self, arrays) -> None:
        for i, pl in self.cell_place.items():
            lr = ud = 0
            for dx, dy in _OFFSETS:
                nb = self.neighbour(pl, dx, dy)
                if nb is None or nb not in self.pos:
                    if dx:
                        lr += 1
                    else:
                        ud += 1
            arrays.missing_lr[i], arrays.missing_ud[i] = lr, ud
