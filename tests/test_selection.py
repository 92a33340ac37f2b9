"""The selection weight: the vectorised formula against a literal per-cell
oracle of the papers' WeightedSelector, the reference setting bit for bit, and
the incremental map terms against a from-scratch computation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from conftest import archive_table, run_ours
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dk import _same_archive, _weights_are_current

from goexplore.cells import make_cells
from goexplore.cells.domain import PYRAMID, MontezumaCells
from goexplore.codec import StateCodec
from goexplore.config import Config
from goexplore.demos import verify_archive
from goexplore.envs import make_env
from goexplore.episode import explore_raw
from goexplore.errors import ConfigError
from goexplore.wire import Task, WorkerView
from goexplore.selection import PlaceTerms, SelectionParams, cell_weights, score_weights

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
        "ahead": np.array([rng.random() < 0.3 for _ in range(n)], np.bool_),
        "level": np.array([rng.randrange(0, 3) for _ in range(n)], np.int16),
        "is_done": np.array([rng.random() < 0.05 for _ in range(n)], np.bool_),
        "lives": np.array([rng.randrange(-1, 7) for _ in range(n)], np.int16),
    }


def _oracle(p: SelectionParams, a: dict, rank: list, i: int, max_level: int) -> float:
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
        + p.keys_ahead * bool(a["ahead"][i])
        # the original code's score_high: 1 / sqrt(len(scores) - scores.index(score))
        + p.score * 1 / math.sqrt(rank[i])
    )
    level_weight = 1.0
    if a["level"][i] < max_level:
        level_weight = p.low_level_weight ** (max_level - int(a["level"][i]))
    return res * level_weight * (1 + max(int(a["lives"][i]), 0)) ** p.lives


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
        keys_ahead=wt(),
        score=wt(),
        lives=rng.choice((0.0, 1.0, 2.0, 0.5)),
    )
    a = _arrays(rng, 40)
    rank = [rng.randrange(1, 20) for _ in range(40)]
    max_level = int(a["level"].max())
    got = cell_weights(p, **a, max_level=max_level) + score_weights(
        p,
        score_rank=np.array(rank),
        level=a["level"],
        max_level=max_level,
        is_done=a["is_done"],
        lives=a["lives"],
    )
    want = [_oracle(p, a, rank, i, max_level) for i in range(40)]
    for i in range(40):
        assert math.isclose(got[i], want[i], rel_tol=1e-12, abs_tol=1e-300), (i, got[i], want[i])


# --- map terms ------------------------------------------------------------------------------
class _Arrays:
    def __init__(self, n):
        self.missing_lr = np.zeros(n, np.int8)
        self.missing_ud = np.zeros(n, np.int8)
        self.holds_most = np.zeros(n, np.bool_)
        self.ahead = np.zeros(n, np.bool_)


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
    lr, ud, most, ahead = [], [], [], []
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
        here = [
            q.items for q in places if (q.level, q.room, q.x, q.y) == (p.level, p.room, p.x, p.y)
        ]
        most.append(p.items == max(here))
        # more items than every other cell at its place (some other with fewer)
        ahead.append(p.items == max(here) and min(here) < p.items)
    return lr, ud, most, ahead


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
            lr, ud, most, ahead = _brute(keys[: i + 1])
            assert arr.missing_lr[: i + 1].tolist() == lr
            assert arr.missing_ud[: i + 1].tolist() == ud
            assert arr.holds_most[: i + 1].tolist() == most
            assert arr.ahead[: i + 1].tolist() == ahead


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


# --- score terms ------------------------------------------------------------------------------
def _rank_oracle(a) -> list[float]:
    """The original code's score_high weight from scratch: the distinct scores of the
    live cells, ascending; a cell's is 1/sqrt(len - index of its score)."""
    live = [i for i in range(a.n) if not a.is_done[i]]
    scores = sorted({float(a.score[i]) for i in live})
    return [
        0.0 if a.is_done[i] else 1 / math.sqrt(len(scores) - scores.index(float(a.score[i])))
        for i in range(a.n)
    ]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_score_rank_kept_as_scores_come_and_go(seed):
    """The score-rank term against a from-scratch oracle while cells arrive and improve
    (a score held by no cell any more drops out of the ranking), after a DONE cell with
    the highest score (it does not count), and after a checkpoint round trip."""
    from goexplore.archive import Archive

    rng = random.Random(seed)
    p = SelectionParams(seen=(0.0, 0.5), chosen=(1e-9, 0.5), score=1.0)
    a = Archive(2, 1, params=p)
    a.add(bytes((0, 0)), b"s", 0.0, 1, 0, 3, (0,))
    for step in range(60):
        if rng.random() < 0.5 or a.n < 3:
            a.add(bytes((a.n % 200, a.n // 200 + 1)), b"s", rng.choice((0, 100, 400, 500, 2500)),
                  1, 0, 3, (0,))  # fmt: skip
        else:
            i = rng.randrange(a.n)
            if not a.is_done[i]:
                a._replace(i, b"s", float(a.score[i]) + rng.choice((0, 100, 300)), 1, 0, 3, (0,))
        if step == 30:
            a.add(b"", b"s", 99999.0, 1, 0, 3, (0,))  # DONE
        a.cumulative_weights()
        want = _rank_oracle(a)
        for i in range(a.n):  # the tiny chosen term keeps the pick weights positive
            assert math.isclose(a.weight[i], want[i] + (0 if a.is_done[i] else 1e-9), rel_tol=1e-9)
    b = Archive.from_arrays(2, 1, a.to_arrays(), [a.state(i) for i in range(a.n)], params=p)
    np.testing.assert_array_equal(b.weights_of(np.arange(b.n)), a.weight[: a.n])


def _halves(filter_p: float, batches: int = 400, seed: int = 0) -> int:
    """Batches (of 40 picks) from an archive of 100 cells at score 0 and 100 at 100
    whose picks are all at 100."""
    from goexplore.archive import Archive

    a = Archive(2, 1, params=SelectionParams(score_filter=filter_p))
    for j in range(200):
        a.add(bytes((j % 100, j // 100)), b"s", 100.0 * (j % 2), 1, 0, 3, (0,))
    a.add(b"", b"s", 0.0, 1, 0, 3, (0,))
    rng = np.random.default_rng(seed)
    high = 0
    for _ in range(batches):
        ids = a.sample(40, rng).ids
        assert not any(a.is_done[i] for i in ids)
        high += all(a.score[i] == 100 for i in ids)
    return high


def test_score_filter_picks_only_cells_scoring_as_much_as_a_random_one():
    """ScoreBasedFilter: with probability p a batch keeps the cells scoring at least
    as much as a uniformly drawn cell, here half the time the 100-point half. Mixed
    batches otherwise (all-100 by chance: 2**-40)."""
    assert _halves(0.0) == 0
    assert 140 <= _halves(1.0) <= 260  # Binomial(400, 1/2): mean 200, sd 10
    assert 60 <= _halves(0.5) <= 140  # Binomial(400, 1/4): mean 100, sd 8.7


def test_score_terms_from_the_config():
    from goexplore.config import Config

    p = SelectionParams.from_config(
        Config(score_weight=0.5, score_filter=0.5, keys_ahead_weight=2.0, seen_start=True)
    )
    assert (p.score, p.score_filter, p.keys_ahead, p.seen_start) == (0.5, 0.5, 2.0, True)
    assert p.uses_places
    problems = Config(score_filter=1.5, seen_start="yes").problems()  # type: ignore[arg-type]
    assert any(q.startswith("score-filter:") for q in problems)
    assert any(q.startswith("seen-start:") for q in problems)


# --- the lives term in a run ----------------------------------------------------------------
def test_lives_power_weighs_each_cell_by_the_lives_its_state_has_left():
    """A game-over run on the toy (3 lives) keeps copies of places with fewer lives;
    with --lives-power 2 every kept weight is the preset's count terms times
    (1 + lives)^2, recomputed here from the archive's arrays, for 1 and 2 workers."""
    flags = dict(episode_end="game", since_new_weight=1.0, lives_power=2.0)
    runs = [run_ours("toy", 3, 20_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    a, n = p.archive, p.archive.n
    live = ~a.is_done[:n]
    assert len(set(a.lives[:n][live].tolist())) >= 2, "no cell lost a life"
    a.cumulative_weights()
    want = (1 / np.sqrt(a.seen[:n] + 1.0) + 1 / np.sqrt(a.chosen_since_new[:n] + 1.0)) * (
        1.0 + a.lives[:n]
    ) ** 2
    want[~live] = 0.0
    np.testing.assert_allclose(a.weight[:n], want, rtol=1e-12)
    _same_archive(p, runs[1])
    _weights_are_current(runs[1])
    plain = run_ours("toy", 3, 20_000, 1, **dict(flags, lives_power=0.0))
    assert archive_table(plain)["cells"] != archive_table(p)["cells"]  # it changes the search


def test_lives_power_must_be_a_non_negative_number():
    with pytest.raises(ConfigError, match="lives-power: must be a finite"):
        Config(env="toy", lives_power=-1.0).validate()


# --- an exploration that stops at a life loss ---------------------------------------------
def _losses(env, start: bytes, lives: int, actions) -> list[int]:
    """The steps at which replaying ``actions`` from ``start`` (with ``lives``) loses a life."""
    env.restore_state(start)
    out = []
    for t, a in enumerate(actions):
        _, _, _, now = env.step(int(a))
        if now < lives:
            out.append(t)
        lives = now
    return out


def test_stop_at_life_loss_ends_an_exploration_at_its_first_lost_life():
    """Toy (3 lives), episodes to game over: with the task's ``stop_on_life`` an exploration's
    actions, replayed from its start, lose a life at the last one and never before;
    without it, explorations go on after a loss."""
    env, cells = make_env("toy"), make_cells(Config(env="toy", seed=1))
    env.reset()
    for _ in range(3):
        env.step(0)
    start = env.clone_state()
    codec = StateCodec()
    stopped = went_on = 0
    for seed in range(40):
        for stop in (True, False):
            task = Task(0, codec.compress(start), env.lives(), 0.0, 0, seed, 300, stop_on_life=stop)
            raw = explore_raw(env, cells, codec, WorkerView(), task, 0.95, False)
            acts = bytes(raw["actions"])
            lost = _losses(env, start, task.lives, acts)
            if stop:
                assert lost in ([], [len(acts) - 1]), (seed, lost, len(acts))
                assert lost or len(acts) == 300 or raw["done"]
                stopped += bool(lost)
            else:
                went_on += any(t < len(acts) - 1 for t in lost)
    assert stopped >= 5 and went_on >= 5, (stopped, went_on)


def test_stop_at_life_loss_runs_replay_and_agree_across_workers():
    """A toy game-over run with --stop-at-life-loss keeps cells after deaths, every cell
    replays from reset, 1 and 2 workers give one archive, and the search differs."""
    flags = dict(episode_end="game", since_new_weight=1.0)
    runs = [run_ours("toy", 5, 15_000, w, stop_at_life_loss=True, **flags) for w in (1, 2)]
    p = runs[0]
    assert p.archive.lives[: p.archive.n][~p.archive.is_done[: p.archive.n]].min() < 3
    _same_archive(p, runs[1])
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0
    plain = run_ours("toy", 5, 15_000, 1, **flags)
    assert archive_table(plain)["cells"] != archive_table(p)["cells"]


def test_stop_at_life_loss_needs_game_over_episodes():
    with pytest.raises(ConfigError, match="stop-at-life-loss: needs --episode-end game"):
        Config(env="toy", stop_at_life_loss=True).validate()


def test_stop_at_life_loss_until_stops_only_in_batches_that_start_before_it(monkeypatch):
    """Each task carries the stop: True exactly in the batches that start before
    --stop-at-life-loss-until agent steps (counted from the results themselves)."""
    import goexplore.phase1 as phase1

    seen: list[tuple[int, list[bool]]] = []
    make = phase1.make_backend

    def spying(*args, **kw):
        backend = make(*args, **kw)
        run_batch, done = backend.run_batch, [0]

        def run(delta, tasks):
            seen.append((done[0], [t.stop_on_life for t in tasks]))
            results = list(run_batch(delta, tasks))
            done[0] += sum(r.n for r in results)
            return results

        backend.run_batch = run
        return backend

    monkeypatch.setattr(phase1, "make_backend", spying)
    until = 6_000
    run_ours(
        "toy",
        5,
        15_000,
        1,
        episode_end="game",
        stop_at_life_loss=True,
        stop_at_life_loss_until=until,
    )
    assert any(f < until for f, _ in seen) and any(f >= until for f, _ in seen)
    for frames, stops in seen:
        assert stops == [frames < until] * len(stops), (frames, stops)


def test_stop_at_life_loss_until_switches_to_game_over_explorations():
    """A stop until past the budget is the plain stop; a stop until mid-run follows it
    and then differs from it, replays from reset, and agrees across 1 and 2 workers."""
    flags = dict(episode_end="game", since_new_weight=1.0, stop_at_life_loss=True)
    always = run_ours("toy", 5, 15_000, 1, **flags)
    past = run_ours("toy", 5, 15_000, 1, stop_at_life_loss_until=15_000, **flags)
    _same_archive(always, past)
    runs = [run_ours("toy", 5, 15_000, w, stop_at_life_loss_until=6_000, **flags) for w in (1, 2)]
    _same_archive(runs[0], runs[1])
    assert archive_table(runs[0])["cells"] != archive_table(always)["cells"]
    played, failures = verify_archive(
        "toy", runs[0].cells, runs[0].archive, runs[0].explog, end_on_life=False
    )
    assert failures == [] and played > 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(stop_at_life_loss_until=-1), "whole number of agent steps >= 0"),
        (dict(stop_at_life_loss_until=1.5), "whole number of agent steps >= 0"),
        (dict(stop_at_life_loss_until=1000), "needs --stop-at-life-loss true"),
    ],
)
def test_stop_at_life_loss_until_checks_its_value(kw, match):
    with pytest.raises(ConfigError, match=match):
        Config(env="toy", episode_end="game", **kw).validate()
