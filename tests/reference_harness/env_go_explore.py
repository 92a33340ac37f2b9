"""Stand-in for the (unshipped) ``env_go_explore`` harness module imported by
``shared/reference/go_explore_reference.py``.

Only what the reference script uses is provided: ``ENV_IDS``, ``parse_args``,
``make_restore_env`` and ``RunLogger``.  The env is built exactly like the
``goexplore`` package builds its own (raw ``AtariEnv``, no TimeLimit wrapper,
deterministic: no sticky actions, no ALE episode frame cap), so the reference
and our implementation explore the very same emulator.

``RunLogger.finalize`` dumps the final archive as JSON (no pickle) to
``<run_dir>/reference_final.json`` and the experience log (all entries) to
``<run_dir>/reference_explog.npz`` for the fidelity tests.
"""
from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

ENV_IDS = {
    "montezuma": "ALE/MontezumaRevenge-v5",
    "pitfall": "ALE/Pitfall-v5",
    "private_eye": "ALE/PrivateEye-v5",
    "venture": "ALE/Venture-v5",
    "gravitar": "ALE/Gravitar-v5",
    "solaris": "ALE/Solaris-v5",
    "freeway": "ALE/Freeway-v5",
    "berzerk": "ALE/Berzerk-v5",
    "bowling": "ALE/Bowling-v5",
    "centipede": "ALE/Centipede-v5",
    "skiing": "ALE/Skiing-v5",
}

# ENV_IDS name -> ale-py ROM id
ROM_IDS = {
    "montezuma": "montezuma_revenge",
    "pitfall": "pitfall",
    "private_eye": "private_eye",
    "venture": "venture",
    "gravitar": "gravitar",
    "solaris": "solaris",
    "freeway": "freeway",
    "berzerk": "berzerk",
    "bowling": "bowling",
    "centipede": "centipede",
    "skiing": "skiing",
}

DONE_KEY = (b"DONE", True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Go-Explore reference (stand-in harness)")
    p.add_argument("--env", default="montezuma", choices=sorted(ENV_IDS))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--total-frames", type=int, default=None)
    p.add_argument("--n-workers", type=int, default=None)
    p.add_argument("--run-dir", default=None)
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--resume", default=None)
    return p.parse_args(argv)


def make_restore_env(env_key):
    """Raw deterministic ALE env (gymnasium API) exposing ``.ale`` for
    cloneState/restoreState.  Deliberately NOT wrapped in a TimeLimit."""
    from ale_py.env import AtariEnv

    if env_key not in ROM_IDS:
        raise KeyError(f"unknown env {env_key!r}; known: {sorted(ROM_IDS)}")
    return AtariEnv(
        game=ROM_IDS[env_key],
        frameskip=4,
        repeat_action_probability=0.0,
        obs_type="grayscale",
        full_action_space=False,
        max_num_frames_per_episode=0,  # 0 disables ALE's 108k-frame cap
    )


def _key_str(key):
    if tuple(key) == DONE_KEY:
        return "DONE"
    return bytes(key[0]).hex()


class RunLogger:
    def __init__(self, run_dir, ckpt_every=0):
        self.run_dir = run_dir
        self.ckpt_every = ckpt_every
        self.n_log = 0
        self.n_checkpoint = 0
        if run_dir:
            os.makedirs(run_dir, exist_ok=True)

    def resolve_resume(self, arg):
        if arg is None:
            return None
        raise NotImplementedError("the stand-in harness does not support --resume")

    def log(self, frames, metrics):
        self.n_log += 1
        if not self.run_dir:
            return
        rec = {"frames": int(frames)}
        rec.update({k: (v.item() if isinstance(v, np.generic) else v) for k, v in metrics.items()})
        with open(os.path.join(self.run_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")

    def checkpoint(self, frames, state_fn, gate=None):
        self.n_checkpoint += 1  # no-op: reference resume is not tested

    def finalize(self, frames, values, state_fn, k=1):
        st = state_fn()
        arch = st["archive"]
        cells = []
        for key, c in arch["cells"].items():
            cells.append({
                "key": _key_str(key),
                "done": bool(key[1]),
                "score": float(c["score"]),
                "traj_len": int(c["traj_len"]),
                "traj_last": int(c["traj_last"]),
                "seen": int(c["seen"]),
                "chosen": int(c["chosen"]),
                "chosen_since_new": int(c["chosen_since_new"]),
                "lives": int(c["lives"]),
            })
        ex = st["explog"]
        out = {
            "frames": int(st["frames"]),
            "batch": int(st["batch"]),
            "values": [float(v) for v in values],
            "k": int(k),
            "cells": cells,
            "rooms": sorted(int(r) for r in arch["rooms"]),
            "done_scores": [float(s) for s in arch["done_scores"]],
            "explog_count": int(ex["count"]),
            "n_log": self.n_log,
            "n_checkpoint": self.n_checkpoint,
        }
        if not self.run_dir:
            return out

        # Rebuild the whole experience log: flushed chunks (run_dir/explog)
        # followed by the in-RAM current chunk.
        parts = {"prev": [], "act": [], "rew": [], "done": []}
        n_flushed = int(ex["n_flushed"])
        chunk_dir = os.path.join(self.run_dir, "explog")
        for i in range(n_flushed):
            path = os.path.join(chunk_dir, f"chunk_{i:05d}.npz")
            if not os.path.exists(path):
                raise RuntimeError(f"explog chunk missing: {path}")
            with np.load(path) as z:
                for name in parts:
                    parts[name].append(np.asarray(z[name]))
        for name in parts:
            parts[name].append(np.asarray(ex[f"cur_{name}"]))
        arrays = {name: np.concatenate(v) for name, v in parts.items()}
        if len(arrays["prev"]) != out["explog_count"]:
            raise RuntimeError(f"explog length {len(arrays['prev'])} != count {out['explog_count']}"
                               f" (flushed chunks: {sorted(glob.glob(os.path.join(chunk_dir, '*')))})")
        np.savez(os.path.join(self.run_dir, "reference_explog.npz"), **arrays)

        tmp = os.path.join(self.run_dir, "reference_final.json.tmp")
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, os.path.join(self.run_dir, "reference_final.json"))
        return out
