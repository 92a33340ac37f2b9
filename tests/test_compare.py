"""``goexplore compare``: several run dirs on one page (synthetic run dirs, known numbers)."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from goexplore.errors import GoExploreError
from goexplore.report.compare import (
    Figures,
    add_parser,
    band,
    budgets_reached,
    common_grid,
    compare,
    first_level_step,
    load_runs,
    step_values,
    table,
)

M = 1_000_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(frames, score, done, cells, rooms, level="absent"):
    r = {
        "batch": frames // 1000,
        "frames": frames,
        "steps_per_s": 2000.0,
        "best_done_score": done,
        "max_archive_score": score,
        "n_cells": cells,
        "rooms_found": rooms,
    }
    if level != "absent":
        r["max_level"] = level
    return r


# seed 0 of montezuma / montezuma-dk: finished (final.json), reaches level 1 at 1.3M
ROWS_A = [
    _row(400_000, 0.0, None, 50, 1, 0),
    _row(900_000, 100.0, 0.0, 120, 2, 0),
    _row(1_300_000, 400.0, 100.0, 200, 4, 1),
    _row(1_900_000, 2500.0, 400.0, 310, 6, 1),
]
FINAL_A = {
    "env": "montezuma",
    "seed": 0,
    "frames_total": 2_050_000,
    "explog_entries": 4_100,
    "frames_unit": "agent_steps",
    "best_done_score": 400.0,
    "max_archive_score": 2600.0,
    "n_cells": 333,
    "rooms_found": 7,
    "max_level": 1,
    "verified": True,
    "protocol": "Phase 1 deterministic search with emulator restore (no sticky actions): "
    "not comparable with sticky-action RL scores",
}
# seed 1 of the same group: in progress (no final.json), a row exactly at 1M, never level 1
ROWS_B = [
    _row(500_000, 0.0, None, 40, 1, 0),
    _row(1_000_000, 300.0, 0.0, 150, 3, 0),
    _row(1_600_000, 600.0, 300.0, 260, 5, 0),
]
# an old pitfall run: no preset in config.json, no max_level in rows, no rooms
ROWS_OLD = [
    _row(300_000, 0.0, None, 30, None),
    _row(700_000, 2000.0, 0.0, 90, None),
    _row(1_200_000, 3000.0, 2000.0, 140, None),
]


def make_run(
    root: Path,
    name: str,
    rows: list[dict],
    *,
    env="montezuma",
    seed=0,
    preset: str | None = None,
    final: dict | None = None,
) -> Path:
    d = root / name
    d.mkdir(parents=True)
    cfg = {"env": env, "seed": seed, "total_frames": 2 * M, "n_workers": 2}
    if preset is not None:
        cfg["preset"] = preset
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if final is not None:
        (d / "final.json").write_text(json.dumps(final))
    return d


@pytest.fixture
def three_runs(tmp_path):
    return [
        make_run(tmp_path, "dk-seed0", ROWS_A, seed=0, preset="montezuma-dk", final=FINAL_A),
        make_run(tmp_path, "dk-seed1", ROWS_B, seed=1, preset="montezuma-dk"),
        make_run(tmp_path, "old-pitfall", ROWS_OLD, env="pitfall", seed=3),
    ]


def expected_at(rows: list[dict], budget: int) -> dict:
    """Independent: the last row at or before the budget, by a plain scan."""
    return [r for r in rows if r["frames"] <= budget][-1]


# --- the table ------------------------------------------------------------------------------


def test_table_values_at_budgets(three_runs):
    runs = load_runs(three_runs)
    assert [r.path.name for r in runs] == ["dk-seed0", "dk-seed1", "old-pitfall"]
    budgets = budgets_reached(runs)
    assert budgets == [M, 2 * M]  # A's final.json says 2.05M; nobody reached 5M
    rows = {t.run_dir.name: t for t in table(runs, budgets)}

    for name, src, reached in (
        ("dk-seed0", ROWS_A, [M, 2 * M]),
        ("dk-seed1", ROWS_B, [M]),
        ("old-pitfall", ROWS_OLD, [M]),
    ):
        for b in budgets:
            got = rows[name].at[b]
            if b not in reached:
                assert got is None, (name, b)
                continue
            e = expected_at(src, b)
            assert got == Figures(
                e["frames"],
                e["max_archive_score"],
                e["best_done_score"],
                e["n_cells"],
                e["rooms_found"],
                e.get("max_level"),
            ), (name, b)
    # the same, spelled out: a row exactly at the budget counts; 2M for A is its 1.9M row
    assert rows["dk-seed0"].at[M].best_score == 100.0 and rows["dk-seed0"].at[M].cells == 120
    assert rows["dk-seed1"].at[M].best_score == 300.0 and rows["dk-seed1"].at[M].frames == M
    assert rows["dk-seed0"].at[2 * M].best_score == 2500.0 and rows["dk-seed0"].at[2 * M].level == 1
    assert rows["dk-seed1"].at[2 * M] is None  # stopped at 1.6M

    a, b, old = rows["dk-seed0"], rows["dk-seed1"], rows["old-pitfall"]
    assert (a.final, a.final_from, a.verified) == (
        Figures(2_050_000, 2600.0, 400.0, 333, 7, 1),
        "final.json",
        True,
    )
    assert (b.final, b.final_from, b.verified) == (
        Figures(1_600_000, 600.0, 300.0, 260, 5, 0),
        "metrics.jsonl",
        None,
    )
    assert (a.first_level1_step, b.first_level1_step) == (1_300_000, None)
    assert (a.preset, old.preset, old.env) == ("montezuma-dk", "reference", "pitfall")
    assert old.final.level is None and old.final.rooms is None and old.first_level1_step is None


def test_first_level_step():
    rows = [
        {"frames": 10, "max_level": None},
        {"frames": 20, "max_level": 0},
        {"frames": 30, "max_level": 1},
        {"frames": 40, "max_level": 2},
    ]
    assert first_level_step(rows) == 30
    assert first_level_step(rows, level=2) == 40
    assert first_level_step([{"frames": 10, "max_level": 0}, {"frames": 50, "max_level": 2}]) == 50
    assert first_level_step([{"frames": 10}, {"frames": 20}]) is None  # an old run
    assert first_level_step([]) is None


# --- step functions and bands ---------------------------------------------------------------


def test_step_values_last_row_at_or_before_and_only_up_to_the_last_row():
    f, v = np.array([10.0, 20.0, 30.0]), np.array([1.0, 2.0, 3.0])
    got = step_values(f, v, np.array([0, 9, 10, 15, 20, 29, 30, 31]))
    np.testing.assert_array_equal(got, [np.nan, np.nan, 1, 1, 2, 2, 3, np.nan])
    assert np.isnan(step_values(np.zeros(0), np.zeros(0), np.array([1.0, 2.0]))).all()


def test_band_median_min_max():
    curves = [
        (np.array([0.0, 10, 20]), np.array([1.0, 5, 9])),
        (np.array([5.0, 15]), np.array([2.0, 4])),
        (np.array([10.0, 30]), np.array([3.0, 7])),
    ]
    grid = np.array([0.0, 5, 10, 15, 20, 25, 30, 35])
    # each run's step function on the grid, written out by hand:
    #   run 1:   1    1    5    5    9    -    -    -
    #   run 2:   -    2    2    4    -    -    -    -
    #   run 3:   -    -    3    3    3    3    7    -
    b = band(curves, grid)
    nan = np.nan
    np.testing.assert_array_equal(b.median, [1, 1.5, 3, 4, 6, 3, 7, nan])
    np.testing.assert_array_equal(b.lo, [1, 1, 2, 3, 3, 3, 7, nan])
    np.testing.assert_array_equal(b.hi, [1, 2, 5, 5, 9, 3, 7, nan])
    np.testing.assert_array_equal(b.n, [1, 2, 3, 3, 2, 1, 1, 0])
    # the default grid is every step at which some run has a row
    np.testing.assert_array_equal(common_grid(curves), [0, 5, 10, 15, 20, 30])
    np.testing.assert_array_equal(band(curves).median, [1, 1.5, 3, 4, 6, 7])


def test_band_skips_null_values():
    # best_done_score is null until the first episode ends: that run does not count there
    curves = [
        (np.array([0.0, 10]), np.array([np.nan, 4.0])),
        (np.array([0.0, 10]), np.array([2.0, 6.0])),
    ]
    b = band(curves)
    np.testing.assert_array_equal(b.median, [2.0, 5.0])
    np.testing.assert_array_equal(b.lo, [2.0, 4.0])
    np.testing.assert_array_equal(b.n, [1, 2])


# --- the page -------------------------------------------------------------------------------


def test_page_and_pngs(three_runs, tmp_path):
    out = tmp_path / "cmp"
    res = compare(three_runs, out)
    assert res.html == out / "index.html" and res.budgets == [M, 2 * M]
    names = sorted(p.name for p in res.pngs)
    assert names == ["best_done_score.png", "best_score.png", "cells.png", "level.png", "rooms.png"]
    for p in res.pngs:
        assert p.parent == out and p.read_bytes()[:8] == PNG_MAGIC
    html = res.html.read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert sorted(srcs) == names  # every PNG, by relative name only
    for d in three_runs:
        assert f"<code>{d}</code>" in html
    assert "no sticky actions" in html and "not comparable" in html
    assert "<h3>1M agent steps (1,000,000)</h3>" in html and "<h3>2M agent steps" in html
    assert "5M agent steps" not in html
    # seed 1 at 2M: not reached, every figure a dash; the old run's level is a dash too
    assert re.search(r"dk-seed1</code>.*?<td>1</td>(<td>-</td>){5}</tr>", html)
    assert "2,600" in html and '<span class="ok">yes</span>' in html
    assert "pitfall / reference" in html
    assert re.search(r"no data \(not logged.*?pitfall / reference", html)  # level figure
    assert [t.run_dir for t in res.rows] == three_runs


def test_old_runs_only_and_the_command(tmp_path, capsys):
    old = [make_run(tmp_path, f"old{s}", ROWS_OLD, env="pitfall", seed=s) for s in (0, 1)]
    ap = argparse.ArgumentParser()
    add_parser(ap.add_subparsers(dest="command"))
    assert ap.parse_args(["compare", "x"]).out == "compare-out"
    out = tmp_path / "page"
    out.mkdir()
    (out / "level.png").write_bytes(PNG_MAGIC)  # a stale figure of an earlier comparison
    args = ap.parse_args(["compare", *map(str, old), "--out", str(out)])
    assert args.func(args) == 0
    assert str(out / "index.html") in capsys.readouterr().out
    html = (out / "index.html").read_text()
    # no levels and no rooms logged: those figures are left out, and the page says so
    assert sorted(p.name for p in out.glob("*.png")) == [
        "best_done_score.png",
        "best_score.png",
        "cells.png",
    ]
    assert sorted(re.findall(r'src="([^"]*)"', html)) == [
        "best_done_score.png",
        "best_score.png",
        "cells.png",
    ]
    assert html.count("no run logged it") == 2
    assert "pitfall / reference" in html
    assert "<h3>1M agent steps" in html and "<h3>2M" not in html  # they stop at 1.2M
    # at 1M: the 700k row; no rooms, no level (and no first step at level 1) in old pitfall runs
    assert re.search(
        r"old1</code></td><td class='l'>pitfall / reference</td><td>1</td>"
        r"<td>2,000</td><td>0</td><td>90</td><td>-</td><td>-</td></tr>",
        html,
    )
    assert re.search(
        r"old1</code>.*?<td>1,200,000</td><td>3,000</td><td>2,000</td><td>140</td>"
        r"<td>-</td><td>-</td><td>-</td><td>-</td>",
        html,
    )


# --- reading run dirs: what is tolerated, what is refused -----------------------------------


def test_a_cut_short_last_line_is_skipped(tmp_path):
    d = make_run(tmp_path, "crashed", ROWS_B)
    with open(d / "metrics.jsonl", "a") as f:
        f.write('{"batch": 2000, "frames": 2000')  # a crash while the row was written
    (run,) = load_runs([d])
    assert [r["frames"] for r in run.rows] == [r["frames"] for r in ROWS_B]
    assert run.notes and "cut short" in run.notes[0]


def _no_config(tmp):
    d = make_run(tmp, "r", ROWS_A)
    (d / "config.json").unlink()
    return [d], tmp / "out", f"{d}: not a run dir (no config.json)"


def _no_metrics(tmp):
    d = make_run(tmp, "r", ROWS_A)
    (d / "metrics.jsonl").unlink()
    return [d], tmp / "out", f"{d}: not a run dir (no metrics.jsonl)"


def _bad_line(tmp):
    d = make_run(tmp, "r", ROWS_A)
    lines = (d / "metrics.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-5] + "oops"
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return [d], tmp / "out", f"{d / 'metrics.jsonl'}, line 3: malformed"


def _bad_last_line(tmp):
    d = make_run(tmp, "r", ROWS_A)
    with open(d / "metrics.jsonl", "a") as f:
        f.write("not json\n")  # a whole line (newline written): not a crash, refused
    return [d], tmp / "out", f"{d / 'metrics.jsonl'}, line 5: malformed"


def _frames_not_int(tmp):
    d = make_run(tmp, "r", ROWS_A[:1] + [dict(ROWS_A[1], frames="900000")])
    return [d], tmp / "out", f"{d / 'metrics.jsonl'}, line 2: malformed"


def _frames_go_back(tmp):
    d = make_run(tmp, "r", [ROWS_A[1], ROWS_A[0]])
    return [d], tmp / "out", f"{d / 'metrics.jsonl'}, line 2: malformed"


def _score_not_a_number(tmp):
    d = make_run(tmp, "r", [dict(ROWS_A[0], max_archive_score="high")])
    return [d], tmp / "out", f"{d / 'metrics.jsonl'}, line 1: malformed"


def _not_a_dir(tmp):
    f = tmp / "metrics.jsonl"
    f.write_text("{}\n")
    return [f], tmp / "out", f"{f}: not a directory"


def _missing(tmp):
    return [tmp / "nowhere"], tmp / "out", f"{tmp / 'nowhere'}: no such run dir"


def _out_is_a_file(tmp):
    d = make_run(tmp, "r", ROWS_A)
    (tmp / "out").write_text("")
    return [d], tmp / "out", f"{tmp / 'out'}: exists and is a file"


def _no_runs(tmp):
    return [], tmp / "out", "no run dirs given"


def _bad_config(tmp):
    d = make_run(tmp, "r", ROWS_A)
    (d / "config.json").write_text("[1, 2]")
    return [d], tmp / "out", f"{d / 'config.json'}: unreadable run config (not a JSON object)"


@pytest.mark.parametrize(
    "case",
    [
        _no_config,
        _no_metrics,
        _bad_line,
        _bad_last_line,
        _frames_not_int,
        _frames_go_back,
        _score_not_a_number,
        _not_a_dir,
        _missing,
        _out_is_a_file,
        _no_runs,
        _bad_config,
    ],
)
def test_errors_name_the_path(tmp_path, case):
    dirs, out, expected = case(tmp_path)
    with pytest.raises(GoExploreError) as e:
        compare(dirs, out)
    assert expected in str(e.value)
    assert not out.is_dir()  # nothing written


def test_the_same_run_twice_is_refused(tmp_path):
    d = make_run(tmp_path, "r", ROWS_A)
    with pytest.raises(GoExploreError, match="given twice"):
        load_runs([d, d.parent / "." / "r"])


def test_figures_finite_for_json(three_runs):
    # the table is plain data: numbers or None, nothing NaN that a caller would trip over
    runs = load_runs(three_runs)
    for t in table(runs, budgets_reached(runs)):
        for f in [*t.at.values(), t.final]:
            if f is not None:
                assert all(
                    v is None or math.isfinite(v)
                    for v in (f.best_score, f.best_done_score, f.cells, f.rooms, f.level)
                )


def test_runs_of_one_preset_with_other_settings_are_their_own_group(tmp_path):
    """A run whose config differs from its preset (a study's variant, or a run made
    before the preset changed) is not drawn in the preset's band; the settings that
    differ name its group, and resumable ones (budget, workers) do not count."""
    from goexplore.presets import apply_preset

    def full(seed, **changed):
        cfg = apply_preset("downscale-dynamic", {"env": "montezuma", "seed": seed}).to_json()
        return {**cfg, **changed}

    runs = []
    for name, cfg in (
        ("preset-s0", full(0)),
        ("preset-s1", full(1, n_workers=7, total_frames=5 * M)),  # resumable: same group
        ("seen-only-s0", full(0, since_new_weight=0.0)),
        ("split-s0", full(0, split_factor=0.5, episode_end="life")),
    ):
        d = make_run(tmp_path, name, ROWS_B)
        (d / "config.json").write_text(json.dumps(cfg))
        runs.append(d)
    got = {r.path.name: r.group for r in load_runs(runs)}
    assert got == {
        "preset-s0": ("montezuma", "downscale-dynamic"),
        "preset-s1": ("montezuma", "downscale-dynamic"),
        "seen-only-s0": ("montezuma", "downscale-dynamic --since-new-weight 0"),
        "split-s0": ("montezuma", "downscale-dynamic --split-factor 0.5 --episode-end life"),
    }
    page = compare(runs, tmp_path / "out").html.read_text()
    assert "downscale-dynamic --since-new-weight 0" in page


def test_a_short_run_ends_with_a_metrics_row_and_compares(tmp_path):
    """A 3,000-step run is 30 batches of 100 steps... at most: with the default
    cadence of 10 batches it may end between two rows. Its last row is at the
    run's last step, and ``compare`` takes it."""
    from runutil import cli

    from goexplore.store import RunDir

    runs = []
    for seed in (0, 1):
        d = tmp_path / f"short{seed}"
        r = cli(["run", "--env", "toy", "--seed", str(seed), "--total-frames", "3000",
                 "--batch-cells", "7", "--n-workers", "1", "--run-dir", str(d)])  # fmt: skip
        assert r.returncode == 0, r.stderr
        rows = RunDir(d).read_metrics()
        final = json.loads((d / "final.json").read_text())
        assert rows and rows[-1]["frames"] == final["frames_total"] >= 3000
        assert rows[-1]["batch"] == final["batches"] and final["batches"] % 10 != 0
        runs.append(d)
    r = cli(["compare", *map(str, runs), "--out", str(tmp_path / "page")])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "page" / "index.html").exists()


# --- --until: the runs as they stood at a budget ------------------------------------------

ROWS_LONG = [
    _row(f, 100.0 * i, 50.0 * i, 100 * i, i, 0)
    for i, f in enumerate(
        (400_000, 1_000_000, 1_700_000, 2_600_000, 3_000_000, 3_400_000, 5_200_000), 1
    )
]


def test_until_cuts_longer_runs_and_leaves_shorter_ones(tmp_path):
    final_long = dict(FINAL_A, frames_total=5_300_000, max_archive_score=9_999.0, verified=True)
    long_ = make_run(tmp_path, "long", ROWS_LONG, seed=2, preset="montezuma-dk", final=final_long)
    short = make_run(tmp_path, "short", ROWS_A, seed=0, preset="montezuma-dk", final=FINAL_A)
    res = compare([long_, short], tmp_path / "cmp", until=3 * M)
    assert res.budgets == [M, 2 * M, 3 * M]  # 3M is a budget; 5M is past the cut
    rows = {t.run_dir.name: t for t in res.rows}
    lo, sh = rows["long"], rows["short"]
    for b in res.budgets:
        e = expected_at(ROWS_LONG, b)
        assert lo.at[b] is not None and lo.at[b].frames == e["frames"]
        assert lo.at[b].best_score == e["max_archive_score"]
    # the long run's final figures: its last row at or before 3M, not final.json's 9,999
    e = expected_at(ROWS_LONG, 3 * M)
    assert (lo.final.frames, lo.final.best_score, lo.final_from, lo.verified) == (
        3_000_000,
        e["max_archive_score"],
        "until",
        None,
    )
    # the short run (2.05M) is as without --until, and did not reach 3M
    assert (sh.final_from, sh.final.best_score, sh.at[3 * M]) == ("final.json", 2600.0, None)
    html = res.html.read_text()
    assert "<h3>3M agent steps (3,000,000)</h3>" in html and "5M agent steps" not in html
    assert "9,999" not in html and "at or before --until" in html
    assert "compared to 3,000,000 with --until" in html
    # the curves read the same cut rows
    (cut,) = [r for r in load_runs([long_], 3 * M)]
    assert [r["frames"] for r in cut.rows] == [
        r["frames"] for r in ROWS_LONG if r["frames"] <= 3 * M
    ]
    assert (cut.final, cut.frames_total) == (None, 3 * M)


@pytest.mark.parametrize("text", ["0", "-5", "2.5", "abc", "nan", "inf"])
def test_until_refuses_what_is_not_a_step_count(text, capsys):
    ap = argparse.ArgumentParser()
    add_parser(ap.add_subparsers(dest="command"))
    assert ap.parse_args(["compare", "x", "--until", "3e6"]).until == 3 * M
    with pytest.raises(SystemExit):
        ap.parse_args(["compare", "x", "--until", text])
    assert "positive whole number of agent steps" in capsys.readouterr().err


def test_until_in_the_api_is_checked(tmp_path):
    d = make_run(tmp_path, "a", ROWS_A)
    with pytest.raises(GoExploreError, match="--until must be a positive"):
        load_runs([d], 0)
