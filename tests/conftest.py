"""Shared fixtures: the reference script's run (once per session) and ours."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "reference_harness"))

# Fidelity budget: the smallest total_frames that gives 20 reference batches
# on Montezuma with seed 0 (batch 19 ends at 66,055 agent steps).
FIDELITY_ENV, FIDELITY_SEED, FIDELITY_FRAMES = "montezuma", 0, 66_056


def archive_table(phase1) -> dict:
    """Our final state in the reference harness's JSON layout."""
    from goexplore.cells import DONE_KEY

    a = phase1.archive
    cells = []
    for i in range(a.n):
        k = a.key_of(i)
        cells.append(
            {
                "key": "DONE" if k == DONE_KEY else k.hex(),
                "done": k == DONE_KEY,
                "score": float(a.score[i]),
                "traj_len": int(a.traj_len[i]),
                "traj_last": int(a.traj_last[i]),
                "seen": int(a.seen[i]),
                "chosen": int(a.chosen[i]),
                "chosen_since_new": int(a.chosen_since_new[i]),
                "lives": int(a.lives[i]),
            }
        )
    log = phase1.explog.all_entries()
    return {
        "frames": phase1.frames,
        "batch": phase1.batch,
        "cells": cells,
        "rooms": sorted(a.rooms),
        "done_scores": list(a.done_scores)[-200:],
        "n_done_episodes": a.n_done_episodes,
        "explog_count": phase1.explog.count,
        "explog": log,
    }


def run_ours(env: str, seed: int, total_frames: int, n_workers: int, run_dir=None, **kw):
    from goexplore.config import Config
    from goexplore.phase1 import Phase1
    from goexplore.store import RunDir

    cfg = Config(env=env, seed=seed, total_frames=total_frames, n_workers=n_workers, **kw)
    rd = None
    if run_dir is not None:
        rd = RunDir(Path(run_dir))
        rd.create(cfg)
    p = Phase1(cfg, rd)
    p.seed_root()
    p.run()
    return p


@pytest.fixture(scope="session")
def reference_montezuma(tmp_path_factory):
    from reference_runner import reference_script, run_reference

    try:
        reference_script()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return run_reference(
        FIDELITY_ENV,
        FIDELITY_SEED,
        FIDELITY_FRAMES,
        2,
        tmp_path_factory.mktemp("reference"),
        timeout=900,
    )


def assert_same_archive(ours: dict, ref: dict) -> None:
    assert ours["frames"] == ref["frames"]
    assert ours["batch"] == ref["batch"]
    assert len(ours["cells"]) == len(ref["cells"])
    fields = (
        "key",
        "done",
        "score",
        "traj_len",
        "traj_last",
        "seen",
        "chosen",
        "chosen_since_new",
        "lives",
    )
    for i, (a, b) in enumerate(zip(ours["cells"], ref["cells"])):
        for f in fields:
            assert a[f] == b[f], (
                f"cell {i} ({b['key'][:16]}...): {f} is {a[f]!r}, reference {b[f]!r}"
            )
    assert ours["rooms"] == ref["rooms"]
    assert ours["done_scores"] == ref["done_scores"]
    if "metrics" in ref:  # the reference counts every finished episode, in its log
        assert ref["metrics"] and ref["metrics"][-1]["batch"] == ref["batch"]
        assert ours["n_done_episodes"] == ref["metrics"][-1]["game_return_count"]
        assert ours["n_done_episodes"] > len(ours["done_scores"]) == 200  # the log is bounded
    assert ours["explog_count"] == ref["explog_count"]
    for name in ("prev", "act", "rew", "done"):
        np.testing.assert_array_equal(ours["explog"][name], ref["explog"][name], err_msg=name)
