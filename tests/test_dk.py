"""Everything that holds for the reference holds for a domain-knowledge preset:
the same archive whatever the number of workers, replay from reset of every
cell, pickle-free checkpoints, resume, and kill -9 (test_crash.py) - on the
toy world with every selection term switched on, and on Montezuma with the
``montezuma-dk`` preset."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import archive_table, run_ours
from runutil import assert_same_run, cli, run_args

from goexplore.demos import verify_archive
from goexplore.phase1 import load_run
from goexplore.presets import PRESETS

# the toy world has Montezuma's facts (room, x, y, level, inventory): the DK key applies.
# Every selection term is on, and episodes end only at game over.
TOY_DK = dict(
    cells="montezuma-dk",
    cell_x_bin=2,
    cell_y_bin=2,
    seen_weight=1.0,
    chosen_weight=0.3,
    chosen_power=1.0,
    since_new_weight=0.2,
    steps_weight=0.1,
    steps_power=0.7,
    horiz_weight=0.1,
    vert_weight=0.05,
    keys_weight=1.0,
    keys_ahead_weight=0.5,
    score_weight=0.3,
    score_filter=0.5,
    seen_start=True,
    low_level_weight=0.1,
    episode_end="game",
)
MONTEZUMA_DK = {k: v for k, v in PRESETS["montezuma-dk"].settings.items() if k != "env"}


def _flags(d: dict) -> list[str]:
    return [a for k, v in d.items() for a in ("--" + k.replace("_", "-"), str(v))]


def _same_archive(p, q):
    a, b = archive_table(p), archive_table(q)
    assert a["cells"] == b["cells"] and a["done_scores"] == b["done_scores"]
    assert a["rooms"] == b["rooms"]
    for k in a["explog"]:
        np.testing.assert_array_equal(a["explog"][k], b["explog"][k])
    assert p.archive.states == q.archive.states
    n = p.archive.n
    np.testing.assert_array_equal(p.archive.steps[:n], q.archive.steps[:n])


def _weights_are_current(p):
    """The incrementally kept weights equal a recomputation from the counters."""
    a = p.archive
    csum = a.cumulative_weights().copy()
    full = a.weights_of(np.arange(a.n))
    np.testing.assert_array_equal(a.weight[: a.n], full)
    np.testing.assert_array_equal(csum, np.cumsum(full))


def test_toy_dk_same_archive_for_1_2_3_workers():
    runs = [run_ours("toy", 4, 25_000, w, **TOY_DK) for w in (1, 2, 3)]
    assert runs[0].archive.n > 50
    assert runs[0].archive.steps[: runs[0].archive.n].sum() > 0
    assert runs[0].archive.holds_most[: runs[0].archive.n].any()
    assert runs[0].archive.ahead[: runs[0].archive.n].any()
    assert len(set(runs[0].archive.score[: runs[0].archive.n].tolist())) > 2  # ranks differ
    for p in runs[1:]:
        _same_archive(runs[0], p)
    for p in runs:
        _weights_are_current(p)


def test_toy_dk_every_cell_replays(tmp_path):
    p = run_ours("toy", 1, 20_000, 1, **TOY_DK)
    played, failures = verify_archive("toy", p.cells, p.archive, p.explog, end_on_life=False)
    assert failures == [] and played > 0
    # episodes crossed life losses (game-over mode): some trajectories lose a life midway
    lives = p.archive.lives[: p.archive.n]
    assert lives.min() < lives.max()


def test_montezuma_dk_preset_every_cell_replays_and_workers_agree():
    one = run_ours("montezuma", 0, 6_000, 1, **MONTEZUMA_DK)
    two = run_ours("montezuma", 0, 6_000, 2, **MONTEZUMA_DK)
    _same_archive(one, two)
    _weights_are_current(one)
    played, failures = verify_archive("montezuma", one.cells, one.archive, one.explog)
    assert failures == [] and played > 0
    assert one.archive.key_size == 8


def test_dk_checkpoint_loads_with_pickle_disabled(tmp_path):
    from test_checkpoint import NO_PICKLE

    p = run_ours("toy", 0, 15_000, 1, tmp_path / "run", **TOY_DK)
    p.checkpoint()
    out = subprocess.run(
        [sys.executable, "-c", NO_PICKLE, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert int(out[0]) == p.archive.n
    q = load_run(tmp_path / "run")
    _same_archive(p, q)
    _weights_are_current(q)
    np.testing.assert_array_equal(
        q.archive.weight[: q.archive.n], p.archive.weights_of(np.arange(p.archive.n))
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_toy_dk_resume_equals_uninterrupted(tmp_path, workers):
    base = dict(env="toy", seed=3, frames=30_000, workers=workers, ckpt_every=3_000, chunk=1_500)
    extra = _flags(TOY_DK)
    r = cli(run_args(tmp_path / "full", resume=False, extra=extra, **base))
    assert r.returncode == 0, r.stdout + r.stderr
    part = dict(base, frames=12_000)
    r = cli(run_args(tmp_path / "part", resume=False, extra=extra, **part))
    assert r.returncode == 0, r.stdout + r.stderr
    # resume needs no DK flags: the run dir's config is the starting point
    r = cli(run_args(tmp_path / "part", **base))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "episode_end" in (tmp_path / "part" / "config.json").read_text()
    assert_same_run(tmp_path / "part", tmp_path / "full")
