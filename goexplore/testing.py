"""Helpers for testing and benchmarking goexplore, shipped with it.

* :func:`synthetic_archive`: an archive of ``n`` random cells, for scale tests and
  benchmarks of selection and checkpoints;
* :func:`synthetic_counters`: the per-cell arrays of such an archive for given keys;
* :func:`check_env`: does an env meet what Go-Explore needs (:mod:`goexplore.envs.check`).
"""

from __future__ import annotations

import numpy as np

from goexplore.envs.check import EnvCheck, check_env

__all__ = ["EnvCheck", "check_env", "synthetic_archive", "synthetic_counters"]


def synthetic_archive(
    n: int, key_size: int = 88, n_facts: int = 5, state_bytes: int = 110, seed: int = 0
):
    """An archive of ``n`` cells with random distinct keys (values 0..8), random
    counters and random state blobs of about ``state_bytes`` (a dictionary-
    compressed ALE state is ~100-120 bytes)."""
    from goexplore.archive import Archive
    from goexplore.cells import DONE_KEY

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 9, (n, key_size), dtype=np.uint8)
    done = n // 2
    keys[done] = 0
    arrays = synthetic_counters(rng, keys, n_facts)
    arrays["facts"] = rng.integers(0, 24, (n, n_facts)).astype(np.int16)
    arrays["is_done"][done] = True
    lens = rng.integers(state_bytes - 30, state_bytes + 30, n)
    blob = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8).tobytes()
    ends = np.cumsum(lens).tolist()
    states = [b"\x01" + blob[a:b] for a, b in zip([0] + ends[:-1], ends)]
    a = Archive.from_arrays(key_size, n_facts, arrays, states, where="synthetic")
    assert a.key_of(done) == DONE_KEY
    return a


def synthetic_counters(rng: np.random.Generator, keys: np.ndarray, n_facts: int) -> dict:
    """Checkpoint arrays (:meth:`goexplore.archive.Archive.from_arrays`) for cells with
    ``keys``: random scores, trajectory lengths and counters, 5 lives, zero facts."""
    n = len(keys)
    return {
        "keys": keys,
        "score": rng.integers(0, 50, n).astype(np.float64) * 100,
        "traj_len": rng.integers(1, 5000, n),
        "traj_last": rng.integers(0, 10 * n, n),
        "seen": rng.geometric(0.02, n) - 1,
        "chosen": rng.integers(0, 100, n),
        "chosen_since_new": rng.integers(0, 50, n),
        "lives": np.full(n, 5, np.int16),
        "facts": np.zeros((n, n_facts), np.int16),
        "is_done": np.zeros(n, np.bool_),
    }
