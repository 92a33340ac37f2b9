"""Checkpoints: no pickle anywhere, and save -> load reproduces the run."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
from conftest import archive_table, run_ours

from goexplore.phase1 import load_run

NO_PICKLE = r"""
import pickle, _pickle, sys
def refuse(*a, **k):
    raise RuntimeError("pickle was used")
pickle.loads = pickle.load = _pickle.loads = _pickle.load = refuse
pickle.Unpickler = _pickle.Unpickler = refuse
from goexplore.phase1 import load_run
p = load_run(sys.argv[1])
a = p.archive
print(a.n, a.states[0][:1].hex(), float(a.score[:a.n].max()), p.explog.count)
"""


def test_checkpoint_loads_with_pickle_disabled(tmp_path):
    p = run_ours("toy", 0, 20_000, 1, tmp_path / "run")
    p.checkpoint()
    out = subprocess.run(
        [sys.executable, "-c", NO_PICKLE, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert int(out[0]) == p.archive.n
    assert float(out[2]) == p.archive.max_archive_score
    assert int(out[3]) == p.explog.count


def test_checkpoint_files_hold_no_objects(tmp_path):
    p = run_ours("toy", 0, 20_000, 1, tmp_path / "run")
    ckpt = p.checkpoint()
    for name in ("archive.npz", "explog_tail.npz"):
        with np.load(ckpt / name, allow_pickle=False) as z:
            for k in z.files:
                assert z[k].dtype != object
        with zipfile.ZipFile(ckpt / name) as zf:
            for info in zf.infolist():
                assert b"\x80" != zf.read(info)[:1]  # no pickle stream
    json.loads((ckpt / "meta.json").read_text())
    # emulator states are serialized state bytes, compressed (codec tag + zstd)
    states = (ckpt / "states.bin").read_bytes()
    assert len(states) < p.archive.n * 200


def test_save_load_reproduces_the_archive(tmp_path):
    p = run_ours("montezuma", 0, 4000, 1, tmp_path / "run")
    p.checkpoint()
    q = load_run(tmp_path / "run")
    a, b = archive_table(p), archive_table(q)
    assert a["cells"] == b["cells"] and a["done_scores"] == b["done_scores"]
    for k in a["explog"]:
        np.testing.assert_array_equal(a["explog"][k], b["explog"][k])
    assert p.archive.states == q.archive.states
    assert p.rng.bit_generator.state == q.rng.bit_generator.state
