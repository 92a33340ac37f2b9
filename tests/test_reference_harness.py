"""Self-check of the reference-script harness (tests/reference_harness +
tests/reference_runner.py): the reference runs, its archive is replayable
from reset(seed=0), and it is deterministic across runs and worker counts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "reference_harness"))

from reference_runner import reference_actions, reference_script, run_reference

try:
    reference_script()
except FileNotFoundError as e:  # pragma: no cover - environment dependent
    pytest.skip(str(e), allow_module_level=True)

from env_go_explore import make_restore_env

ENV, SEED, FRAMES = "montezuma", 0, 3000


def _key(frame) -> bytes:
    small = cv2.resize(np.asarray(frame), (11, 8), interpolation=cv2.INTER_AREA)
    return ((small / 255.0) * 8).astype(np.uint8).tobytes()


@pytest.fixture(scope="module")
def ref2(tmp_path_factory):
    return run_reference(ENV, SEED, FRAMES, 2, tmp_path_factory.mktemp("ref_w2"))


def test_root_cell_and_frames(ref2):
    assert ref2["frames"] >= FRAMES
    assert ref2["batch"] >= 1
    root = ref2["cells"][0]
    assert root["traj_len"] == 0 and root["traj_last"] == -1
    assert root["score"] == 0.0 and not root["done"]
    assert ref2["explog_count"] == len(ref2["explog"]["prev"]) > 0
    keys = [(c["key"], c["done"]) for c in ref2["cells"]]
    assert len(set(keys)) == len(keys)


def test_cells_replay_from_reset(ref2):
    env = make_restore_env(ENV)
    try:
        checked = 0
        for i, cell in enumerate(ref2["cells"]):
            if cell["done"]:
                assert cell["key"] == "DONE"
                continue
            actions = reference_actions(ref2, i)
            assert len(actions) == cell["traj_len"], i
            frame, _ = env.reset(seed=0)
            total = 0.0
            for a in actions:
                frame, r, _term, _trunc, _ = env.step(a)
                total += float(r)
            assert _key(frame).hex() == cell["key"], f"cell {i}: replay reached a different cell"
            assert total == cell["score"], f"cell {i}: replay score {total} != {cell['score']}"
            if actions:
                assert env.ale.lives() == cell["lives"], i
            checked += 1
        assert checked >= 2
    finally:
        env.close()


def _strip(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "explog"}


def test_deterministic_same_seed(ref2, tmp_path):
    again = run_reference(ENV, SEED, FRAMES, 2, tmp_path / "again")
    assert json.dumps(_strip(again), sort_keys=True) == json.dumps(_strip(ref2), sort_keys=True)
    for k in ("prev", "act", "rew", "done"):
        np.testing.assert_array_equal(again["explog"][k], ref2["explog"][k])


def test_worker_count_invariant(ref2, tmp_path):
    one = run_reference(ENV, SEED, FRAMES, 1, tmp_path / "w1")
    assert one["cells"] == ref2["cells"]
    assert one["frames"] == ref2["frames"] and one["batch"] == ref2["batch"]
    for k in ("prev", "act", "rew", "done"):
        np.testing.assert_array_equal(one["explog"][k], ref2["explog"][k])
