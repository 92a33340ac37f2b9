"""The selection weight: the vectorised formula against a literal per-cell
oracle of the papers' WeightedSelector, the reference setting bit for bit, and
the incremental map terms against a from-scratch computation."""

from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from goexplore.cells.domain import PYRAMID, MontezumaCells
from goexplore.selection import PlaceTerms, SelectionParams, cell_weights

counts = st.lists(st.integers(0, 10_000), min_size=1, max_size=60)


def _arrays(rng: random.Random, n: int) -> dict:
    return {
        "seen": np.array([rng.randrange(0, 500) for _ in range(n)], np.int32),
        "chosen": np.array([rng.randrange(0, 500) for _ in range(n)], np.int32),
        "since_new": np.array([rng.randrange(0, 50) for _ in range(n)], np.int32),
        "steps": np.array([rng.randrange(0, 5000) for _ in range(n)], np.int32),
        "missing_lr": np.array([rng.randrange(0, 3) for _ in range(n)], np.int8),
        "missing_ud": np.array([rng.randrange(0, 3) for _ in range(n)], np.int8),
        "holds_most": np.array([rng.random() < 0.5 for _ in range(n)], np.bool_),
        "level": np.array([rng.randrange(0, 3) for _ in range(n)], np.int16),
        "is_done": np.array([rng.random() < 0.05 for _ in range(n)], np.bool_),
    }


def _oracle(p: SelectionParams, a: dict, i: int, max_level: int) -> float:
    """The original code's get_weight, one cell at a time, in plain floats."""
    if a["is_done"][i]:
        return 0.0
    res = 0.0
    for name, (w, pw) in (
        ("seen", p.seen),
        ("chosen", p.chosen),
        ("since_new", p.since_new),
        ("steps", p.steps),
    ):
        res += w * 1 / (int(a[name][i]) + 1) ** pw
    res += (
        p.horiz * int(a["missing_lr"][i])
        + p.vert * int(a["missing_ud"][i])
        + p.keys * bool(a["holds_most"][i])
    )
    level_weight = 1.0
    if a["level"][i] < max_level:
        level_weight = p.low_level_weight ** (max_level - int(a["level"][i]))
    return res * level_weight


@given(counts)
def test_reference_setting_is_bit_exact(seen):
    seen = np.array(seen, np.int32)
    n = len(seen)
    zeros = np.zeros(n, np.int32)
    done = np.zeros(n, np.bool_)
    done[0] = True
    w = cell_weights(
        SelectionParams(),
        seen=seen,
        chosen=zeros + 7,
        since_new=zeros + 3,
        steps=zeros + 11,
        missing_lr=zeros,
        missing_ud=zeros,
        holds_most=zeros.astype(bool),
        level=zeros,
        max_level=0,
        is_done=done,
    )
    want = 1.0 / np.sqrt(seen + 1.0)  # the reference's own expression
    want[done] = 0.0
    assert w.tobytes() == want.tobytes()


@settings(max_examples=60)
@given(st.integers(0, 2**32 - 1))
def test_formula_matches_the_per_cell_oracle(seed):
    rng = random.Random(seed)
    pw = lambda: rng.choice((0.5, 1.0, 0.3, 2.0))
    wt = lambda: rng.choice((0.0, 0.0, 1.0, 0.25, 3.0))
    p = SelectionParams(
        (rng.choice((1.0, 0.5)), pw()),
        (wt(), pw()),
        (wt(), pw()),
        (wt(), pw()),
        wt(),
        wt(),
        wt(),
        rng.choice((1.0, 0.1, 0.5, 0.0)),
    )
    a = _arrays(rng, 40)
    max_level = int(a["level"].max())
    got = cell_weights(p, **a, max_level=max_level)
    want = [_oracle(p, a, i, max_level) for i in range(40)]
    for i in range(40):
        assert math.isclose(got[i], want[i], rel_tol=1e-12, abs_tol=1e-300), (i, got[i], want[i])


# --- map terms ------------------------------------------------------------------------------
class _Arrays:
    def __init__(self, n):
        self.missing_lr = np.zeros(n, np.int8)
        self.missing_ud = np.zeros(n, np.int8)
        self.holds_most = np.zeros(n, np.bool_)


def _room_xy(room):
    for y, row in enumerate(PYRAMID):
        if room in row:
            return row.index(room), y
    raise KeyError(room)


def _brute(keys: list[bytes]):
    """From scratch, the original code's rules: neighbours wrap into the next room
    of the pyramid past the x/y range of all known cells; off the pyramid counts
    as missing; 'most keys' compares the key count of the cells at a place."""
    rep = MontezumaCells()
    places = [rep.place(k) for k in keys]
    known = {(p.level, p.group, p.room, p.x, p.y) for p in places}
    xr = (min(p.x for p in places), max(p.x for p in places))
    yr = (min(p.y for p in places), max(p.y for p in places))
    lr, ud, most = [], [], []
    for p in places:
        miss = {"h": 0, "v": 0}
        for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            x, y = p.x + dx, p.y + dy
            rx, ry = _room_xy(p.room)
            if x < xr[0]:
                x, rx = xr[1], rx - 1
            elif x > xr[1]:
                x, rx = xr[0], rx + 1
            elif y < yr[0]:
                y, ry = yr[1], ry - 1
            elif y > yr[1]:
                y, ry = yr[0], ry + 1
            off = (
                ry < 0
                or rx < 0
                or ry >= len(PYRAMID)
                or rx >= len(PYRAMID[0])
                or PYRAMID[ry][rx] == -1
            )
            if off or (p.level, p.group, PYRAMID[ry][rx], x, y) not in known:
                miss["h" if dx else "v"] += 1
        lr.append(miss["h"])
        ud.append(miss["v"])
        top = max(
            q.items for q in places if (q.level, q.room, q.x, q.y) == (p.level, p.room, p.x, p.y)
        )
        most.append(p.items == top)
    return lr, ud, most


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_map_terms_incremental_equal_from_scratch(seed):
    rng = random.Random(seed)
    keys, seen = [], set()
    while len(keys) < 120:
        n = rng.choice((0, 0, 1, 2))
        rooms = [rng.choice((1, 0, 2, 5)) for _ in range(n)]
        k = bytes(
            (
                rng.choice((0, 0, 1)),
                rng.choice((1, 0, 2, 5, 4, 6, 15)),
                rng.randrange(2, 9),
                rng.randrange(3, 8),
                n,
                *rooms,
                *[255] * (3 - n),
            )
        )
        if k not in seen:
            seen.add(k)
            keys.append(k)
    terms, arr = PlaceTerms(MontezumaCells()), _Arrays(len(keys))
    for i, k in enumerate(keys):
        terms.add(i, k, arr)
        if i % 17 == 0 or i == len(keys) - 1:
            lr, ud, most = _brute(keys[: i + 1])
            assert arr.missing_lr[: i + 1].tolist() == lr
            assert arr.missing_ud[: i + 1].tolist() == ud
            assert arr.holds_most[: i + 1].tolist() == most


def test_params_from_a_preset():
    from goexplore.presets import apply_preset

    p = SelectionParams.from_config(apply_preset("montezuma-dk", {}))
    assert p.seen == (1.0, 0.5) and p.keys == 1.0 and p.horiz == 0.1 and p.vert == 0.0
    assert p.low_level_weight == 0.1 and p.uses_places and p.uses_levels
    assert not SelectionParams.from_config(apply_preset("reference", {})).uses_places


def test_level_weight_follows_the_top_level_of_live_cells():
    """low_level_weight ** (max level - level), with max level the top level of the
    live cells: it rises when a higher cell arrives and falls back when the only
    top-level cell improves into a lower level; cached weights follow."""
    from goexplore.archive import Archive

    p = SelectionParams(low_level_weight=0.1)
    a = Archive(2, 1, params=p, level_fact=0)
    for j, lv in enumerate((0, 0, 1)):
        a.add(bytes((j, 0)), b"s", 0.0, 1, 0, 3, (lv,))
    a.cumulative_weights()
    assert a.max_level == 1
    np.testing.assert_allclose(a.weight[:3], [0.1, 0.1, 1.0])
    a._replace(2, b"s", 5.0, 1, 0, 3, (0,))  # the level-1 cell is now level 0
    csum = a.cumulative_weights()
    assert a.max_level == 0
    np.testing.assert_array_equal(a.weight[:3], a.weights_of(np.arange(3)))
    np.testing.assert_allclose(a.weight[:3], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(csum, np.cumsum(a.weight[:3]))
    a.add(b"", b"s", 0.0, 1, 0, 3, (7,))  # a DONE cell's level does not count
    a.cumulative_weights()
    assert a.max_level == 0 and a.weight[3] == 0.0
