"""Test oracles: literal, slow transcriptions of the reference script's own
loops, against which the optimised code is checked (they live with the tests,
not in the package)."""

from __future__ import annotations

import numpy as np


def reference_sample(seen: np.ndarray, is_done: np.ndarray, n: int, rng) -> list[int]:
    """The reference script's selection (a Python walk over every cell); returns
    ids in our numbering (the DONE cell is skipped, as the reference's key list does)."""
    live = [i for i in range(len(seen)) if not is_done[i]]
    w = np.array([1.0 / np.sqrt(seen[i] + 1.0) for i in live])
    csum = np.cumsum(w)
    return [
        live[min(int(np.searchsorted(csum, u)), len(live) - 1)] for u in rng.random(n) * csum[-1]
    ]
