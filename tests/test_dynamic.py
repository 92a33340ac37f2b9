"""Dynamic downscaling (goexplore.dynamic, goexplore.cells.dynamic): the
choice's score against an independent computation, the re-keying against
keys computed from scratch with cv2, the merge rule, the same archive for 1,
2 and 3 workers and across kill -9 plus resume, and checkpoints; the region
term against region sizes counted from the frames."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import archive_table, run_ours
from runutil import assert_same_run, cli, load_meta, run_args
from test_crash import _assert_intact, _finish, _kill_run
from test_dk import _flags, _same_archive, _weights_are_current
from test_resume import _run

from goexplore.cells import DONE_KEY
from goexplore.config import Config, parse_downscale
from goexplore.cells.downscale import reference_key
from goexplore.cells.dynamic import DynamicDownscaleCells, FrameCodec
from goexplore.demos import verify_archive
from goexplore.dynamic import (
    DynamicState,
    Entries,
    Regions,
    choose,
    distinct_counts,
    rekey,
    split_score,
)
from goexplore.errors import CheckpointError, ConfigError
from goexplore.phase1 import load_run
from goexplore.runner import prepare, unlock_run_dir
from goexplore.selection import cell_weights
from goexplore.store import RunDir

# small cadences for the toy world (24x33 frames): several choices in a short run
TOY_DYN = dict(
    cells="downscale-dynamic",
    dynamic_first=2_000,
    dynamic_every=7_000,
    dynamic_sample_p=0.05,
    dynamic_iterations=30,
    episode_end="game",
    since_new_weight=1.0,  # the preset's selection: counters that picks change, re-keyed too
)


def _rows(frames, whl):
    return [reference_key(f, *whl) for f in frames]


def test_split_score_matches_a_direct_computation():
    counts = np.array([5, 3, 1, 1])
    n, factor = 10, 0.3
    p = [c / n for c in counts]
    ent = -sum(q * math.log(q) for q in p) / math.log(4)
    want = ent / math.sqrt(abs(4 - 3) / 3 + 1)
    assert split_score(counts, n, factor) == pytest.approx(want, rel=1e-12)
    assert split_score(np.array([10]), 10, 0.3) == 0.0  # one cell: no information
    # the uniform split into exactly T cells scores 1, the best possible
    assert split_score(np.full(4, 5), 20, 0.2) == pytest.approx(1.0)


def test_choice_counts_cells_like_cv2_and_is_deterministic():
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, (6, 40, 30), dtype=np.uint8)
    frames = np.concatenate([base[rng.integers(0, 6, 60)] for _ in range(1)])
    frames = frames + rng.integers(0, 3, frames.shape, dtype=np.uint8)  # near-duplicates
    a = choose(frames, np.random.default_rng(1), 40, 0.125)
    b = choose(frames, np.random.default_rng(1), 40, 0.125)
    assert a == b
    w, h, lv = a.params
    assert 1 <= w < 30 and 1 <= h < 40 and 2 <= lv <= 255
    assert a.distinct == len(set(_rows(frames, a.params)))
    counts = np.array(sorted(np.unique(_rows(frames, a.params), return_counts=True)[1]))
    assert a.score == pytest.approx(split_score(counts, len(frames), 0.125))
    assert sorted(distinct_counts(DynamicDownscaleCells(a.params).keys(frames))) == list(counts)


def test_rekey_keeps_the_best_entry_per_key():
    e = Entries(
        {
            "score": np.array([1.0, 5.0, 5.0, 5.0, 0.0, 2.0]),
            "traj_len": np.array([3, 9, 7, 7, 1, 1]),
        },
        [b""] * 6,
        [b""] * 6,
    )
    keys = [b"a", b"b", b"b", b"b", b"a", b"c"]
    win, wkeys, lose = rekey(e, keys)
    # a: 1.0 beats 0.0; b: 5.0 with the shorter 7, the first of the two; c alone
    assert win.tolist() == [0, 2, 5] and wkeys == [b"a", b"b", b"c"]
    assert lose.tolist() == [1, 3, 4]


def test_frame_codec_is_lossless():
    f = np.random.default_rng(0).integers(0, 256, (210, 160), dtype=np.uint8)
    c = FrameCodec()
    np.testing.assert_array_equal(c.decompress(c.compress(f)), f)
    np.testing.assert_array_equal(c.decompress(c.compress(f[:, ::2])), f[:, ::2])


def _check_keys_against_frames(p):
    """Every archived key is cv2's key of the cell's stored frame (exact re-keying)."""
    d, a = p.dynamic, p.archive
    assert len(d.frames) == a.n
    for i in range(a.n):
        if a.key_of(i) == DONE_KEY:
            assert d.frames[i] == b""
            continue
        frame = d.codec.decompress(d.frames[i])
        if p.cells.params is None:
            assert a.key_of(i) == b"\x00"
        else:
            assert a.key_of(i) == reference_key(frame, *p.cells.params)


def test_toy_dynamic_same_archive_for_1_2_3_workers_and_replays():
    runs = [run_ours("toy", 2, 30_000, w, **TOY_DYN) for w in (1, 2, 3)]
    p = runs[0]
    changes = [e for e in p.dynamic.history if e["changed"]]
    assert len(p.dynamic.history) >= 3 and len(changes) >= 2, p.dynamic.history
    assert len(p.dynamic.shadow) > 0  # some entries merged away at a change
    for q in runs[1:]:
        _same_archive(p, q)
        assert q.dynamic.history == p.dynamic.history
        assert q.dynamic.frames == p.dynamic.frames
    _weights_are_current(p)
    _check_keys_against_frames(p)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


def test_montezuma_dynamic_keys_match_cv2_and_replay():
    p = run_ours(
        "montezuma", 0, 30_000, 2, **dict(TOY_DYN, dynamic_first=5_000, dynamic_every=10_000)
    )
    assert p.cells.params is not None and p.archive.n > 5
    _check_keys_against_frames(p)
    played, failures = verify_archive("montezuma", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


def test_dynamic_start_keys_cells_with_the_given_downscale_until_the_first_choice():
    """--dynamic-start: before the first choice the archive is keyed by that downscale
    (checked with cv2 on every stored frame), the same for 1 and 2 workers, and replays;
    after the first choice the run goes on as usual."""
    flags = dict(TOY_DYN, dynamic_start="5x4x6", dynamic_first=9_000)
    early = [run_ours("toy", 2, 8_000, w, **flags) for w in (1, 2)]
    p = early[0]
    assert p.dynamic.history == [] and p.cells.params == (5, 4, 6) and p.archive.n > 5
    _check_keys_against_frames(p)
    _same_archive(p, early[1])
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0
    late = run_ours("toy", 2, 20_000, 1, **flags)
    assert late.dynamic.history and late.dynamic.history[0]["frames"] > 9_000
    _check_keys_against_frames(late)


def test_dynamic_checkpoint_round_trip_and_damage_is_named(tmp_path):
    p = run_ours("toy", 1, 20_000, 1, tmp_path / "run", **TOY_DYN)
    ckpt = p.checkpoint()
    meta = load_meta(ckpt)
    assert meta["dynamic"]["params"] == list(p.cells.params)
    q = load_run(tmp_path / "run")
    _same_archive(p, q)
    assert q.cells == p.cells and q.dynamic.history == p.dynamic.history
    assert q.dynamic.frames == p.dynamic.frames and q.dynamic.sample == p.dynamic.sample
    assert q.dynamic.shadow.states == p.dynamic.shadow.states
    # a damaged dynamic.npz is named, not a fresh start
    f = ckpt / "dynamic.npz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="dynamic.npz"):
        load_run(tmp_path / "run")


def _score_part(score: float, bin_: int) -> bytes:
    return int(np.floor(score / bin_)).to_bytes(4, "little", signed=True)


@pytest.mark.parametrize("bin_", [1, 30])
def test_score_bin_keys_each_cell_by_its_frame_and_score_and_replays(tmp_path, bin_):
    """--cell-score-bin: every key is cv2's key of the cell's stored frame followed
    by its score // bin (re-keyings included); cells that look the same but differ in
    score stay apart; the archive is the same for 1 and 2 workers and across a resume,
    and every cell replays from reset to its own key."""
    flags = dict(TOY_DYN, cell_score_bin=bin_)
    runs = [run_ours("toy", 2, 30_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    _same_archive(p, runs[1])
    assert sum(e["changed"] for e in p.dynamic.history) >= 2
    d, a = p.dynamic, p.archive
    by_frame = Counter()
    for i in range(a.n):
        if a.key_of(i) == DONE_KEY:
            continue
        frame_key = reference_key(d.codec.decompress(d.frames[i]), *p.cells.params)
        assert a.key_of(i) == frame_key + _score_part(float(a.score[i]), bin_)
        by_frame[frame_key] += 1
    assert max(by_frame.values()) > 1  # one screen, several scores: kept apart
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0
    # the shadow entries are re-keyed with their scores too
    rep = p.cells
    assert rep.keys(np.zeros((2, 24, 33), np.uint8), np.array([0.0, 45.0])).shape[1] == (
        rep.key_size
    )
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **flags)
    _run(cfg, tmp_path / "same", stop_after=8)
    q = load_run(tmp_path / "same")
    assert q.cells == p.cells.with_params(q.cells.params) and q.cells.score_bin == bin_
    _same_archive(p, _run(cfg, tmp_path / "same", resume="auto"))


def test_score_bin_keyer_and_keys_agree_and_off_leaves_keys_as_they_were():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (6, 210, 160), dtype=np.uint8)
    scores = np.array([0.0, 99.0, 100.0, 250.0, -10.0, 13_400.0])
    rep = DynamicDownscaleCells((11, 8, 8), score_bin=100)
    assert rep.key_size == 88 + 4
    rows = rep.keys(frames, scores)
    for f, s, row in zip(frames, scores, rows):
        want = reference_key(f, 11, 8, 8) + _score_part(s, 100)
        assert rep.keyer()(f, (), s) == row.tobytes() == want
    assert rep.describe(rows[5].tobytes()).endswith("score 13400-13499")
    assert rep.describe(b"").endswith("grey levels, and score // 100")  # the report's line
    off = DynamicDownscaleCells((11, 8, 8))
    assert off.key_size == 88 and off.keyer()(frames[0], ()) == reference_key(frames[0], 11, 8, 8)
    np.testing.assert_array_equal(off.keys(frames, scores), rep.keys(frames))
    assert rep.at(rep.params_bytes()) == rep and rep.at(b"").score_bin == 100


def test_max_score_only_leaves_only_the_top_score_of_each_look_alike_group(tmp_path):
    """--max-score-only: a cell weighs 0 exactly when another cell's key differs from
    its own only in the score tail and it scores less (the groups counted here from
    the keys); every other cell weighs what it would without the rule; no pick lands
    on an outscored cell; the archive is the same for 1 and 2 workers and across a
    resume, a loaded archive marks the same cells, and every cell replays."""
    flags = dict(TOY_DYN, cell_score_bin=1, max_score_only=True)
    runs = [run_ours("toy", 2, 30_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    _same_archive(p, runs[1])
    assert sum(e["changed"] for e in p.dynamic.history) >= 2  # groups rebuilt on re-keying
    a, n = p.archive, p.archive.n
    live = [i for i in range(n) if a.key_of(i) != DONE_KEY]
    top: dict[bytes, float] = {}
    for i in live:
        g = a.key_of(i)[:-4]
        top[g] = max(top.get(g, -math.inf), float(a.score[i]))
    out = np.zeros(n, bool)
    out[live] = [float(a.score[i]) < top[a.key_of(i)[:-4]] for i in live]
    assert 0 < out.sum() < len(live)
    np.testing.assert_array_equal(a.outscored[:n], out)
    _weights_are_current(p)
    w = a.weight[:n]
    assert (w[out] == 0).all() and (w[~out & ~a.is_done[:n]] > 0).all()
    args = (a.key_size, a.n_facts, a.to_arrays(), a.states)
    plain = type(a).from_arrays(
        *args, params=dataclasses.replace(a.params, max_score_only=False), rep=p.cells
    )
    np.testing.assert_array_equal(w[~out], plain.weight[:n][~out])
    loaded = type(a).from_arrays(*args, params=a.params, rep=p.cells)
    np.testing.assert_array_equal(loaded.outscored[:n], out)
    picks = loaded.sample(2_000, np.random.default_rng(0)).ids
    assert not out[picks].any() and len(set(picks)) > 1
    played, failures = verify_archive("toy", p.cells, a, p.explog, end_on_life=False)
    assert failures == [] and played > 0
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **flags)
    _run(cfg, tmp_path / "same", stop_after=8)
    _same_archive(p, _run(cfg, tmp_path / "same", resume="auto"))
    # off, the same flags find another archive: the rule changed the picks
    assert (
        archive_table(run_ours("toy", 2, 30_000, 1, **dict(flags, max_score_only=False)))["cells"]
        != archive_table(p)["cells"]
    )


@pytest.mark.parametrize("keep", [0.0, 0.05])
def test_recompute_metrics_and_history_are_recorded(tmp_path, keep):
    flags = dict(TOY_DYN, log_every_batches=1, dynamic_keep=keep)
    p = run_ours("toy", 1, 20_000, 1, tmp_path / "run", **flags)
    rows = RunDir(tmp_path / "run").read_metrics()
    changed = [e for e in p.dynamic.history if e["changed"]]
    assert len(changed) >= (1 if keep else 2)
    for e in p.dynamic.history[1:]:  # after the first choice, a kept one names what it beat
        if "kept_over" in e:
            assert not e["changed"] and e["kept_over"]["score"] <= e["score"] * (1 + keep)
    if keep:
        assert any("kept_over" in e for e in p.dynamic.history), p.dynamic.history
    for row in rows:  # each row shows the representation of the last change before it
        before = [e for e in changed if e["frames"] < row["frames"]]
        want = [before[-1][k] for k in ("width", "height", "levels")] if before else None
        assert row["cell_repr"] == want, row
    assert rows[-1]["cell_repr"] == list(p.cells.params)


def test_kill_dynamic_run_resumes_to_the_same_result(tmp_path):
    """kill -9 mid-run and at two injection points of a run that re-keys its
    archive, then resume: the same archive, frames, sample and history."""
    cfg = dict(env="toy", seed=3, frames=40_000, workers=2, ckpt_every=4_000, chunk=1_500)
    cfg["extra"] = tuple(_flags(TOY_DYN))
    base = tmp_path / "baseline"
    r = cli(run_args(base, resume=False, **cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    d = tmp_path / "run"
    for kind, arg in [("chunks", 8), ("ckpt-rename", 2), ("ckpt-publish", 1)]:
        killed, _ = _kill_run(d, kind, arg, cfg)
        assert killed, f"{kind}:{arg} was not reached"
        _assert_intact(d, f"after kill at {kind}:{arg}")
    _finish(d, cfg)
    assert_same_run(d, base)
    a, b = (RunDir(x).latest_checkpoint() for x in (d, base))
    assert load_meta(a)["dynamic"] == load_meta(b)["dynamic"]
    assert (a / "dynamic.npz").read_bytes() == (b / "dynamic.npz").read_bytes()


def test_generic_game_just_works_with_the_preset_and_the_report_shows_the_choices(tmp_path):
    """`--env venture --preset downscale-dynamic`: no per-game settings needed; the
    report draws the representation over time and lists every choice."""
    from runutil import final_json

    from goexplore.report.build import build_report

    d = tmp_path / "venture"
    r = cli(
        [
            "run",
            "--env",
            "venture",
            "--preset",
            "downscale-dynamic",
            "--total-frames",
            "12000",
            "--dynamic-first",
            "2000",
            "--n-workers",
            "1",
            "--run-dir",
            str(d),
        ]
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cells: now " in r.stdout  # each choice is reported as it happens
    final = final_json(d)
    assert final["verified"] and final["preset"] == "downscale-dynamic"
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["stop_at_life_loss"] is True and cfg["region_power"] == 1.0
    dyn = final["dynamic_cells"]
    assert dyn["changes"] >= 1 and dyn["cell_repr"] is not None
    assert dyn["frame_bytes_per_cell"] > 0
    rep = build_report(d, video=False, log=lambda *a: None)
    page = rep.html.read_text()
    assert rep.representation_png is not None and rep.representation_png.stat().st_size > 1000
    assert "Cell representation" in page
    w, h, lv = dyn["cell_repr"]
    assert f"{w}×{h}×{lv + 1}" in page


def test_schedule_doubles_up_to_every_and_the_sample_rotates():
    from goexplore.config import Config
    from goexplore.dynamic import DynamicState

    cfg = Config(
        cells="downscale-dynamic", dynamic_first=10, dynamic_every=50, dynamic_max_cells=100
    )
    d = DynamicState.start(cfg, 0)
    got = []
    for _ in range(6):
        got.append(d.interval(cfg))
        d.history.append({})
    assert got == [10, 20, 40, 50, 50, 50]
    d.last = 1000
    assert not d.due(cfg, 1050, 100) and d.due(cfg, 1051, 100)
    assert not d.due(cfg, 1010, 101) and d.due(cfg, 1011, 101)  # over the cap: soon
    d.observe([b"a", b"b", b"a", b"c", b"d"], cap=3)  # duplicates skipped, oldest out
    assert list(d.sample) == [b"b", b"c", b"d"]


@pytest.mark.parametrize("margin", [0.0, 0.01, 10.0])
def test_keep_margin_keeps_the_current_downscale_unless_clearly_beaten(margin):
    """--dynamic-keep: the current downscale, scored on the same sample (here with cv2's
    keys), stays unless the search's best beats it by more than the margin."""
    from types import SimpleNamespace

    from goexplore.config import Config
    from goexplore.dynamic import DynamicState

    cfg = Config(cells="downscale-dynamic", dynamic_iterations=30, dynamic_keep=margin)
    rng = np.random.default_rng(7)
    base = rng.integers(0, 256, (8, 40, 30), dtype=np.uint8)
    frames = base[rng.integers(0, 8, 80)] + rng.integers(0, 4, (80, 40, 30), dtype=np.uint8)
    current = (3, 2, 4)
    d = DynamicState.start(cfg, 0)
    d.rep = DynamicDownscaleCells(current)
    d.observe([d.codec.compress(f) for f in frames], cap=1000)
    stack = d.sample_stack()
    applied = []
    d.apply = lambda whl, archive, **kw: applied.append(whl) or archive
    d.recompute(cfg, SimpleNamespace(n=5), np.random.default_rng(3), 100)
    (ev,) = d.history

    best = choose(stack, np.random.default_rng(3), 30, cfg.split_factor)
    counts = np.unique(_rows(stack, current), return_counts=True)[1]
    cur_score = split_score(counts, len(stack), cfg.split_factor)
    take = margin == 0.0 or best.score > cur_score * (1 + margin)
    if take:
        assert "kept_over" not in ev
        assert (ev["width"], ev["height"], ev["levels"]) == best.params
        assert applied == ([best.params] if best.params != current else [])
    else:
        assert not ev["changed"] and applied == [] and d.rep.params == current
        assert (ev["width"], ev["height"], ev["levels"]) == current
        assert ev["score"] == pytest.approx(cur_score, abs=1e-6)
        assert ev["sample_cells"] == len(counts)
        over = ev["kept_over"]
        assert (over["width"], over["height"], over["levels"]) == best.params
        assert over["score"] == pytest.approx(best.score, abs=1e-6)
    if margin == 10.0:
        assert not take  # a margin this large always keeps


def _proposals(monkeypatch):
    """Record every proposal the search scores: (params, cells in the sample, score)."""
    import goexplore.dynamic as dyn

    seen: list = []
    keys, score = dyn.DynamicDownscaleCells.keys, dyn.split_score

    def rec_keys(self, frames):
        seen.append([self.params])
        return keys(self, frames)

    def rec_score(counts, n, factor):
        v = score(counts, n, factor)
        seen[-1] += [len(counts), v]
        return v

    monkeypatch.setattr(dyn.DynamicDownscaleCells, "keys", rec_keys)
    monkeypatch.setattr(dyn, "split_score", rec_score)
    return seen


def _two_scenes(noise=4, n=120):
    """Frames of two flat scenes with grey-level noise below ``noise``: an even 2-cell
    split scores best under the paper's rule (noise 1: only the two scenes)."""
    rng = np.random.default_rng(5)
    scenes = np.stack([np.full((40, 30), 20, np.uint8), np.full((40, 30), 220, np.uint8)])
    return scenes[np.arange(n) % 2] + rng.integers(0, noise, (n, 40, 30), dtype=np.uint8)


@pytest.mark.parametrize("min_cells", [0.0, 0.5, 1.0])
def test_min_cells_notes_the_best_proposal_with_enough_cells(monkeypatch, min_cells):
    """--dynamic-min-cells leaves the paper's search as it is (the same best) and notes
    the highest-scoring proposal that puts the sample into at
    least min_cells x target cells, found here from every proposal's recorded cells."""
    frames = _two_scenes()
    plain = choose(frames, np.random.default_rng(3), 40, 0.125)
    seen = _proposals(monkeypatch)
    c = choose(frames, np.random.default_rng(3), 40, 0.125, min_cells)
    assert (c.params, c.score, c.distinct) == (plain.params, plain.score, plain.distinct)
    assert len(seen) == 40
    floor = min_cells * 0.125 * len(frames)
    ok = [s for s in seen if s[1] >= floor]
    if min_cells == 0:
        assert c.enough is None
    else:
        assert ok, "no proposal with enough cells: choose frames that give some"
        want = max(range(len(ok)), key=lambda i: (ok[i][2], i))
        assert c.enough is not None
        assert (c.enough.params, c.enough.distinct) == (ok[want][0], ok[want][1])
        assert c.enough.score == ok[want][2]


@pytest.mark.parametrize("min_cells,factor", [(0.0, 0.125), (0.9, 0.125), (0.9, 1.0)])
def test_min_cells_refuses_a_choice_with_too_few_cells(min_cells, factor):
    """The paper's best here puts the 120 sampled frames into a few cells. With min_cells
    0 it is taken; with 0.9 the best proposal with at least 0.9 x target cells is
    (target 15), or, when no proposal has that many (target 120), the current
    downscale stays."""
    from types import SimpleNamespace

    from goexplore.dynamic import DynamicState

    cfg = Config(
        cells="downscale-dynamic",
        dynamic_iterations=40,
        dynamic_min_cells=min_cells,
        split_factor=factor,
    )
    frames = _two_scenes()
    best = choose(frames, np.random.default_rng(3), 40, factor, 0.9)
    assert best.distinct < 0.9 * factor * len(frames)  # the pathology the flag is for
    assert (best.enough is None) == (factor == 1.0)
    current = (3, 2, 4)
    d = DynamicState.start(cfg, 0)
    d.rep = DynamicDownscaleCells(current)
    d.observe([d.codec.compress(f) for f in frames], cap=1000)
    applied = []
    d.apply = lambda whl, archive, **kw: applied.append(whl) or archive
    d.recompute(cfg, SimpleNamespace(n=5), np.random.default_rng(3), 100)
    (ev,) = d.history
    got = (ev["width"], ev["height"], ev["levels"])
    if min_cells == 0:
        assert got == best.params and applied == [best.params]
        assert "refused" not in ev and "kept_over" not in ev
    elif best.enough is not None:
        assert got == best.enough.params and applied == [best.enough.params]
        assert ev["sample_cells"] == best.enough.distinct >= min_cells * ev["target"]
        assert ev["refused"]["sample_cells"] == best.distinct and "kept_over" not in ev
    else:
        assert got == current and applied == [] and not ev["changed"]
        assert ev["kept_over"]["sample_cells"] == best.distinct and "refused" not in ev
        assert ev["sample_cells"] == len(set(_rows(frames, current)))


def test_min_cells_leaves_a_run_whose_choices_have_enough_cells_as_it_is():
    """Just below the smallest cells/target ratio of a run's choices, --dynamic-min-cells
    gives that run exactly (the search is unchanged); just above it, it refuses a
    choice and the run differs."""
    flags = dict(TOY_DYN, dynamic_every=3_000)
    plain = run_ours("toy", 1, 30_000, 1, **flags)
    later = plain.dynamic.history[1:]  # the first choice, from one cell, is always taken
    assert len(later) >= 2
    low = min(e["sample_cells"] / e["target"] for e in later)
    assert low < 1, "every choice reached its target: no room to refuse one"
    same = run_ours("toy", 1, 30_000, 1, **flags, dynamic_min_cells=low * 0.999)
    assert same.dynamic.history == plain.dynamic.history
    _same_archive(same, plain)
    other = run_ours("toy", 1, 30_000, 1, **flags, dynamic_min_cells=min(1.0, low * 1.001))
    hist = other.dynamic.history
    assert any("refused" in e or "kept_over" in e for e in hist)
    assert hist != plain.dynamic.history


@pytest.mark.parametrize("floor", [0.0, 0.5, 1.0])
def test_target_floor_raises_the_target_to_a_fraction_of_the_current_cells(floor):
    """--dynamic-target-floor: the choice aims at max(split_factor x frames, floor x the
    cells the current downscale gives the sample), those counted here with cv2's keys;
    the first choice (no downscale yet) aims at the paper's target."""
    from types import SimpleNamespace

    from goexplore.dynamic import DynamicState

    cfg = Config(cells="downscale-dynamic", dynamic_iterations=30, dynamic_target_floor=floor)
    rng = np.random.default_rng(11)
    base = rng.integers(0, 256, (8, 40, 30), dtype=np.uint8)
    frames = base[rng.integers(0, 8, 120)] + rng.integers(0, 4, (120, 40, 30), dtype=np.uint8)
    current = (25, 30, 200)  # fine: nearly every frame its own cell
    d = DynamicState.start(cfg, 0)
    d.apply = lambda whl, archive, **kw: archive
    for rep in (None, current):
        d.rep = DynamicDownscaleCells(rep)
        d.observe([d.codec.compress(f) for f in frames], cap=1000)
        stack = d.sample_stack()
        d.recompute(cfg, SimpleNamespace(n=5), np.random.default_rng(3), 100)
        ev = d.history[-1]
        n = len(stack)
        cells_now = len(set(_rows(stack, current))) if rep else 0
        target = max(cfg.split_factor * n, floor * cells_now)
        assert ev["target"] == pytest.approx(target, abs=1e-3)
        want = choose(stack, np.random.default_rng(3), 30, target / n)
        assert (ev["width"], ev["height"], ev["levels"]) == want.params
        assert ev["sample_cells"] == want.distinct
    if floor == 1.0:  # never coarser on the sample than a fine current downscale, nearly
        assert cells_now > 4 * cfg.split_factor * n and ev["sample_cells"] > cells_now / 2


def test_best_entries_keeps_the_accept_rules_best_in_entry_order():
    from goexplore.dynamic import best_entries

    rng = np.random.default_rng(0)
    n = 50
    e = Entries.empty(2)
    e = Entries(
        dict(
            e.arrays,
            score=rng.choice([0.0, 100.0, 400.0], n),
            traj_len=rng.integers(1, 6, n).astype(np.int64),
        ),
        [b"s"] * n,
        [b"f"] * n,
    )
    got = best_entries(e, 12).tolist()
    # oracle: sort by (-score, length, index), take 12, back in entry order
    want = sorted(
        sorted(range(n), key=lambda i: (-e.arrays["score"][i], e.arrays["traj_len"][i], i))[:12]
    )
    assert got == want
    assert best_entries(e, 80).tolist() == list(range(n))


def test_max_shadow_bounds_the_merged_away_entries():
    free = run_ours("toy", 2, 30_000, 1, **TOY_DYN)
    capped = run_ours("toy", 2, 30_000, 1, **dict(TOY_DYN, dynamic_max_shadow=3))
    assert len(free.dynamic.shadow) > 3
    assert 0 < len(capped.dynamic.shadow) <= 3
    _weights_are_current(capped)
    played, failures = verify_archive(
        "toy", capped.cells, capped.archive, capped.explog, end_on_life=False
    )
    assert failures == [] and played > 0


# the region term: a coarse 2x2 downscale of the toy's 24x33 frames groups its cells
TOY_REGION = dict(TOY_DYN, region_power=1.0, region_cells="2x2x4")


def _check_regions_against_frames(p):
    """Each cell's region size is the number of live cells whose frames share its
    coarse key (computed here from scratch with the reference downscale), and
    each weight is the weight without the term divided by that size."""
    a, d = p.archive, p.dynamic
    whl = parse_downscale(p.cfg.region_cells)
    live = [i for i in range(a.n) if not a.is_done[i]]
    key = {i: reference_key(d.codec.decompress(d.frames[i]), *whl) for i in live}
    if p.cfg.region_radius:  # a key's region: the first region whose first key is near
        firsts = d.regions.firsts.astype(np.int64)
        limit = p.cfg.region_radius * whl[2] * whl[0] * whl[1]
        for j in range(1, len(firsts)):  # a region starts only far from every earlier one
            assert (np.abs(firsts[:j] - firsts[j]).sum(1) > limit).all()
        for i in live:
            dist = np.abs(firsts - np.frombuffer(key[i], np.uint8)).sum(1)
            key[i] = int(np.flatnonzero(dist <= limit)[0])
    if p.cfg.region_score:  # a region is also one score
        key = {i: (key[i], float(a.score[i])) for i in live}
    count = Counter(key.values())
    sizes = a.region_sizes()
    assert [int(sizes[i]) for i in live] == [count[key[i]] for i in live]
    ids = np.arange(a.n)
    without = dataclasses.replace(a.params, region=0.0)
    base = cell_weights(
        without,
        seen=a.seen[ids],
        chosen=a.chosen[ids],
        since_new=a.chosen_since_new[ids],
        steps=a.steps[ids],
        missing_lr=a.missing_lr[ids],
        missing_ud=a.missing_ud[ids],
        holds_most=a.holds_most[ids],
        level=a.level[ids],
        max_level=a.max_level,
        is_done=a.is_done[ids],
        ahead=a.ahead[ids],
    )
    want = base / np.maximum(sizes, 1) ** p.cfg.region_power
    if p.cfg.region_chosen_power:  # picks of the region's cells, summed here by frame key
        picks = Counter()
        for i in live:
            picks[key[i]] += int(a.chosen[i])
        region_picks = np.array([picks[key[i]] if i in key else 0 for i in range(a.n)])
        want = want / (1.0 + region_picks) ** p.cfg.region_chosen_power
    np.testing.assert_allclose(a.weights_of(ids), want, rtol=1e-12)
    return count


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_region_term_divides_by_the_cells_of_each_region_for_1_and_2_workers(power):
    flags = dict(TOY_REGION, region_power=power)
    runs = [run_ours("toy", 2, 30_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    assert sum(e["changed"] for e in p.dynamic.history) >= 2  # regions rebuilt after re-keying
    count = _check_regions_against_frames(p)
    assert len(count) >= 3 and len(set(count.values())) >= 2, count  # sizes differ
    _same_archive(p, runs[1])
    _check_regions_against_frames(runs[1])
    for q in runs:
        _weights_are_current(q)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


def test_region_term_changes_the_search_and_survives_a_resume(tmp_path):
    plain = run_ours("toy", 2, 30_000, 1, **TOY_DYN)
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **TOY_REGION)
    full = _run(cfg, tmp_path / "full")
    assert archive_table(full)["cells"] != archive_table(plain)["cells"]
    _run(cfg, tmp_path / "same", stop_after=6)
    q = load_run(tmp_path / "same")
    _check_regions_against_frames(q)  # rebuilt from the checkpoint's frames
    same = _run(cfg, tmp_path / "same", resume="auto")
    _same_archive(full, same)
    assert same.dynamic.history == full.dynamic.history
    assert same.dynamic.frames == full.dynamic.frames
    np.testing.assert_array_equal(same.archive.region_sizes(), full.archive.region_sizes())
    _weights_are_current(same)


@pytest.mark.parametrize("region_power", [1.0, 0.0])
def test_region_chosen_term_divides_by_the_picks_of_each_region_and_survives_a_resume(
    tmp_path, region_power
):
    flags = dict(TOY_REGION, region_power=region_power, region_chosen_power=0.5)
    runs = [run_ours("toy", 2, 30_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    count = _check_regions_against_frames(p)
    assert len(count) >= 3
    a = p.archive
    picks = np.bincount(a.region[: a.n], weights=a.chosen[: a.n])
    assert len(set(picks[a.region[: a.n]].tolist())) >= 2  # regions' picks differ
    _same_archive(p, runs[1])
    for q in runs:
        _weights_are_current(q)
    without = run_ours("toy", 2, 30_000, 1, **dict(flags, region_chosen_power=0.0))
    assert archive_table(without)["cells"] != archive_table(p)["cells"]  # the term acts
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **flags)
    _run(cfg, tmp_path / "same", stop_after=6)
    _check_regions_against_frames(load_run(tmp_path / "same"))  # the picks from the checkpoint
    same = _run(cfg, tmp_path / "same", resume="auto")
    _same_archive(p, same)
    _weights_are_current(same)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


# regions as look-alike screens: a 6x6 downscale at full grey depth, within 5% per pixel
TOY_RADIUS = dict(TOY_DYN, region_power=1.0, region_cells="6x6x255", region_radius=0.05)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.lists(st.integers(0, 6), min_size=4, max_size=4), min_size=1, max_size=40),
    radius=st.sampled_from([0.1, 0.25, 0.5]),
)
def test_regions_by_radius_match_a_plain_grouping_and_a_regrouping_from_their_firsts(keys, radius):
    """Each key joins the first earlier region whose first key is within radius x levels
    per pixel on average (a plain loop here), and the same keys grouped again from the
    first keys alone, in any order, land in the same regions."""
    whl = (2, 2, 6)
    regions = Regions(whl, radius)
    got = [int.from_bytes(regions.region(bytes(k)), "little") for k in keys]
    firsts: list[list[int]] = []
    want = []
    for k in keys:
        near = [
            j for j, f in enumerate(firsts) if sum(abs(a - b) for a, b in zip(f, k)) <= radius * 24
        ]
        if not near:
            firsts.append(k)
        want.append(near[0] if near else len(firsts) - 1)
    assert got == want
    np.testing.assert_array_equal(regions.firsts, np.array(firsts, np.uint8).reshape(-1, 4))
    again = Regions(whl, radius, regions.firsts)
    for i in reversed(range(len(keys))):
        assert int.from_bytes(again.region(bytes(keys[i])), "little") == got[i]
    assert again.n == regions.n  # no new region


def test_region_firsts_that_do_not_fit_the_region_cells_are_an_error():
    cfg = Config(env="toy", **TOY_RADIUS)
    d = DynamicState.start(cfg, 0)
    d.region_firsts = np.zeros((3, 16), np.uint8)  # 4x4 keys, but the config makes 6x6
    with pytest.raises(CheckpointError, match="'region_firsts' rows hold 16 values.*6x6x255"):
        d.use_regions(cfg)


def test_region_radius_groups_look_alike_frames_for_1_and_2_workers_and_across_a_resume(
    tmp_path,
):
    runs = [run_ours("toy", 2, 30_000, w, **TOY_RADIUS) for w in (1, 2)]
    p = runs[0]
    assert sum(e["changed"] for e in p.dynamic.history) >= 2  # regions rebuilt after re-keying
    count = _check_regions_against_frames(p)
    assert len(count) >= 3 and len(set(count.values())) >= 2, count
    by_key = run_ours("toy", 2, 30_000, 1, **dict(TOY_RADIUS, region_radius=0.0))
    assert len(count) < len(_check_regions_against_frames(by_key))  # regions merge keys
    _same_archive(p, runs[1])
    np.testing.assert_array_equal(p.dynamic.regions.firsts, runs[1].dynamic.regions.firsts)
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **TOY_RADIUS)
    full = _run(cfg, tmp_path / "full")
    _run(cfg, tmp_path / "same", stop_after=6)
    _check_regions_against_frames(load_run(tmp_path / "same"))  # firsts from the checkpoint
    same = _run(cfg, tmp_path / "same", resume="auto")
    _same_archive(full, same)
    np.testing.assert_array_equal(same.archive.region_sizes(), full.archive.region_sizes())
    np.testing.assert_array_equal(same.dynamic.regions.firsts, full.dynamic.regions.firsts)
    _weights_are_current(same)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


def test_region_score_groups_each_screen_by_score_for_1_and_2_workers_and_across_a_resume(
    tmp_path,
):
    flags = dict(TOY_REGION, region_score=True)
    runs = [run_ours("toy", 2, 30_000, w, **flags) for w in (1, 2)]
    p = runs[0]
    assert sum(e["changed"] for e in p.dynamic.history) >= 2  # regions rebuilt after re-keying
    count = _check_regions_against_frames(p)  # sizes by (frame region, score), from scratch
    assert len({screen for screen, _ in count}) >= 3
    assert len(count) > len({screen for screen, _ in count})  # some screen at two scores
    assert len(set(count.values())) >= 2
    _same_archive(p, runs[1])
    _check_regions_against_frames(runs[1])
    without = run_ours("toy", 2, 30_000, 1, **TOY_REGION)
    assert archive_table(without)["cells"] != archive_table(p)["cells"]  # the grouping acts
    cfg = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **flags)
    _run(cfg, tmp_path / "same", stop_after=6)
    _check_regions_against_frames(load_run(tmp_path / "same"))  # scores from the checkpoint
    same = _run(cfg, tmp_path / "same", resume="auto")
    _same_archive(p, same)
    np.testing.assert_array_equal(same.archive.region_sizes(), p.archive.region_sizes())
    _weights_are_current(same)
    # switched on in a branch of a run without it: regions by score from the first pick
    source = Config(env="toy", seed=2, total_frames=30_000, n_workers=1, **TOY_REGION)
    _run(source, tmp_path / "source", stop_after=6)
    branch, _ = prepare(
        source.replace(region_score=True), tmp_path / "b", str(tmp_path / "source"), branch=True
    )
    try:
        assert branch.cfg.region_score
        count = _check_regions_against_frames(branch)
        assert len(count) > len({screen for screen, _ in count})
    finally:
        unlock_run_dir(branch.lock)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0


@pytest.mark.parametrize(
    "flags,message",
    [
        (dict(cells="downscale-dynamic", region_score=True), "region-score: only with --region-"),
        (dict(cells="downscale-dynamic", region_score=1), "region-score: must be true or false"),
        (
            dict(cells="downscale-dynamic", region_power=1.0, region_radius=1.0),
            "region-radius: must be in",
        ),
        (
            dict(cells="downscale-dynamic", region_radius=0.1),
            "region-radius: only with --region-power",
        ),
        (dict(region_power=1.0), "region-power: needs --cells downscale-dynamic"),
        (dict(region_chosen_power=0.5), "region-chosen-power: needs --cells downscale-dynamic"),
        (
            dict(cells="downscale-dynamic", region_chosen_power=-1.0),
            "region-chosen-power: must be a finite",
        ),
        (dict(cells="downscale-dynamic", region_cells="4x4"), "region-cells: must be WIDTHx"),
        (dict(cells="downscale-dynamic", region_cells="0x4x8"), "width and height must be"),
        (dict(cells="downscale-dynamic", region_power=-1.0), "region-power: must be a finite"),
        (dict(dynamic_start="11x8"), "dynamic-start: must be WIDTHx"),
        (dict(dynamic_start="11x8x8"), "dynamic-start: needs --cells downscale-dynamic"),
        (dict(dynamic_target_floor=1.5), r"dynamic-target-floor: must be in \[0, 1\]"),
        (dict(dynamic_min_cells=-0.1), r"dynamic-min-cells: must be in \[0, 1\]"),
        (dict(cells="downscale-dynamic", cell_score_bin=-1), "cell-score-bin: must be a whole"),
        (dict(cells="downscale-dynamic", cell_score_bin=0.5), "cell-score-bin: must be a whole"),
        (dict(cell_score_bin=100), "cell-score-bin: needs --cells downscale-dynamic"),
        (dict(cells="downscale-dynamic", max_score_only=True), "max-score-only: needs --cell-"),
        (dict(cells="downscale-dynamic", max_score_only=1), "max-score-only: must be true or"),
    ],
)
def test_region_flags_are_checked(flags, message):
    with pytest.raises(ConfigError, match=message):
        Config(env="toy", **flags).validate()
