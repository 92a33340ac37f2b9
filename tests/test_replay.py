"""Every cell's trajectory, rebuilt from the experience log and replayed from
reset in a fresh env, reaches the cell with exactly its archived score."""

from __future__ import annotations

import pytest
from conftest import run_ours

from goexplore.demos import verify_archive, verify_cell
from goexplore.cells import DONE_KEY


def _verify_all(p):
    a = p.archive
    bad = []
    for i in range(a.n):
        ok, why = verify_cell(
            p.cfg.env,
            p.cells,
            p.explog.trajectory(int(a.traj_last[i])),
            key=a.key_of(i),
            score=float(a.score[i]),
            length=int(a.traj_len[i]),
            is_done=a.key_of(i) == DONE_KEY,
        )
        if not ok:
            bad.append((i, why))
    assert not bad, f"{len(bad)} of {a.n} cells fail replay, e.g. {bad[:3]}"


def test_every_toy_cell_replays(tmp_path):
    p = run_ours("toy", 3, 40_000, 1, tmp_path / "run", explog_chunk=4096)
    assert p.explog.n_flushed > 0  # trajectories cross flushed chunks on disk
    assert p.archive.max_archive_score > 0
    _verify_all(p)


def test_every_montezuma_cell_replays():
    p = run_ours("montezuma", 1, 8_000, 2)
    assert p.archive.n > 50
    played, failures = verify_archive(p.cfg.env, p.cells, p.archive, p.explog)
    assert not failures, f"{len(failures)} of {p.archive.n} cells fail replay, e.g. {failures[:3]}"
    best = p.archive.best_cell()  # and the best one alone, from reset
    ok, why = verify_cell(
        p.cfg.env,
        p.cells,
        p.explog.trajectory(int(p.archive.traj_last[best])),
        key=p.archive.key_of(best),
        score=float(p.archive.score[best]),
        length=int(p.archive.traj_len[best]),
        is_done=False,
    )
    assert ok, why


@pytest.mark.slow
def test_every_montezuma_cell_replays_200k(tmp_path):
    p = run_ours("montezuma", 0, 200_000, 2, tmp_path / "run")
    assert p.archive.max_archive_score > 0  # got past the first rewards
    played, failures = verify_archive(p.cfg.env, p.cells, p.archive, p.explog)
    assert not failures, f"{len(failures)} of {p.archive.n} cells fail replay, e.g. {failures[:3]}"
    assert played >= int(p.archive.traj_len[: p.archive.n].max())


def test_one_pass_archive_replay_agrees_with_cell_by_cell(tmp_path):
    p = run_ours("toy", 4, 30_000, 1)
    played, failures = verify_archive(p.cfg.env, p.cells, p.archive, p.explog)
    assert failures == []
    _verify_all(p)
    # each logged step on a cell's path is played once: fewer than replaying each cell
    assert played < int(p.archive.traj_len[: p.archive.n].sum())
    # tampering is caught, for the right cell
    i = p.archive.best_cell()
    p.archive.score[i] += 1
    played, failures = verify_archive(p.cfg.env, p.cells, p.archive, p.explog)
    assert [f[0] for f in failures] == [i] and "score" in failures[0][1]


def test_replay_detects_a_wrong_score():
    p = run_ours("toy", 3, 20_000, 1)
    a = p.archive
    i = a.best_cell()
    acts = p.explog.trajectory(int(a.traj_last[i]))
    ok, why = verify_cell(
        "toy",
        p.cells,
        acts,
        key=a.key_of(i),
        score=float(a.score[i]) + 1,
        length=int(a.traj_len[i]),
        is_done=False,
    )
    assert not ok and "score" in why
    ok, why = verify_cell(
        "toy",
        p.cells,
        acts[:-1],
        key=a.key_of(i),
        score=float(a.score[i]),
        length=int(a.traj_len[i]),
        is_done=False,
    )
    assert not ok
