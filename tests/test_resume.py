"""A run stopped after a checkpoint and resumed — in the same run dir or a
fresh one — finishes exactly like an uninterrupted run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import archive_table

from goexplore.config import Config
from goexplore.runner import execute, prepare

VOLATILE = {"wall_s"}


def _final(run_dir):
    d = json.loads((run_dir / "final.json").read_text())
    return {k: v for k, v in d.items() if k not in VOLATILE}


def _run(cfg, run_dir, resume=None, stop_after=None):
    p, _ = prepare(cfg, run_dir, resume)
    if stop_after is not None:  # stop at a batch boundary
        p.run(should_stop=lambda: p.batch >= stop_after)
        p.checkpoint()
        return p
    final = execute(p, log=lambda *_: None)
    assert final is not None
    return p


def _same(p, q, dp, dq):
    a, b = archive_table(p), archive_table(q)
    assert a["cells"] == b["cells"]
    assert a["done_scores"] == b["done_scores"] and a["rooms"] == b["rooms"]
    for k in a["explog"]:
        np.testing.assert_array_equal(a["explog"][k], b["explog"][k])
    assert p.archive.states == q.archive.states
    assert _final(dp) == _final(dq)
    rows_p = [
        {k: v for k, v in r.items() if k not in ("steps_per_s", "time")}
        for r in p.run_dir.read_metrics()
    ]
    rows_q = [
        {k: v for k, v in r.items() if k not in ("steps_per_s", "time")}
        for r in q.run_dir.read_metrics()
    ]
    assert rows_p == rows_q


@pytest.mark.parametrize(
    "env,frames,workers",
    [
        ("toy", 60_000, 1),
        ("toy", 60_000, 2),
        pytest.param("montezuma", 24_000, 2, marks=pytest.mark.slow),
    ],
)
def test_resume_same_and_fresh_dir(tmp_path, env, frames, workers):
    cfg = Config(
        env=env,
        seed=5,
        total_frames=frames,
        n_workers=workers,
        ckpt_every=frames // 6,
        explog_chunk=3000,
        log_every_batches=2,
    )
    full = _run(cfg, tmp_path / "full")

    # stopped after 4 batches, resumed in the same dir
    _run(cfg, tmp_path / "same", stop_after=4)
    same = _run(cfg, tmp_path / "same", resume="auto")
    _same(full, same, tmp_path / "full", tmp_path / "same")

    # stopped, then resumed into a fresh run dir (chunks found in the first one)
    _run(cfg, tmp_path / "first", stop_after=5)
    fresh = _run(cfg, tmp_path / "second", resume=str(tmp_path / "first"))
    assert fresh.explog.n_flushed > 0
    _same(full, fresh, tmp_path / "full", tmp_path / "second")


def test_resume_with_a_larger_budget_extends_the_run(tmp_path):
    cfg = Config(env="toy", seed=2, total_frames=20_000, explog_chunk=3000)
    _run(cfg, tmp_path / "r")
    longer = _run(cfg.replace(total_frames=40_000), tmp_path / "r", resume="auto")
    ref = _run(cfg.replace(total_frames=40_000), tmp_path / "ref")
    assert archive_table(longer)["cells"] == archive_table(ref)["cells"]


def test_resume_into_fresh_dir_names_a_missing_chunk(tmp_path):
    from goexplore.errors import CheckpointError

    cfg = Config(env="toy", seed=1, total_frames=30_000, explog_chunk=3000)
    _run(cfg, tmp_path / "first", stop_after=3)
    chunk = tmp_path / "first" / "explog" / "chunk_00001.npz"
    assert chunk.exists()
    chunk.unlink()
    with pytest.raises(CheckpointError, match="chunk_00001"):
        _run(cfg, tmp_path / "second", resume=str(tmp_path / "first"))
