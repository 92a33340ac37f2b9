"""Selection per batch at 100k cells: the reference weight against the
montezuma-dk preset's weight (all its terms, map terms kept as cells arrive)
and against every term on (the preset plus the chosen, since-new, steps,
vertical-neighbour, keys-ahead, score-rank, region and region-chosen terms with
regions split by score, and the score filter), in one run, alternating, so the
machine's noise hits all alike.

    python benchmarks/selection_weights.py [--cells 100000] [--rounds 3] [--json PATH]

Target: <= 1 ms per batch at 100k cells (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the oracle

from oracles import reference_sample

from goexplore.bench import selection_bench, selection_dk_bench

EVERY_TERM = {
    "chosen_weight": 1.0,
    "since_new_weight": 1.0,
    "steps_weight": 1.0,
    "vert_weight": 0.1,
    "keys_ahead_weight": 1.0,
    "score_weight": 1.0,
    "score_filter": 0.5,
    "region_power": 1.0,
    "region_chosen_power": 0.5,
    "region_score": True,
}


def reference_walk_ms(archive) -> float:
    """The reference script's Python walk over every cell, at the same size."""
    t = time.perf_counter()
    reference_sample(archive.seen[: archive.n], archive.is_done[: archive.n], 100,
                     np.random.default_rng(0))  # fmt: skip
    return 1e3 * (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ref, dk, every = [], [], []
    for r in range(args.rounds):
        ref.append(selection_bench(args.cells, seed=r))
        ref[-1]["reference_ms_per_batch"] = reference_walk_ms(ref[-1].pop("archive"))
        dk.append(selection_dk_bench(args.cells, seed=r))
        every.append(selection_dk_bench(args.cells, seed=r, overrides=EVERY_TERM))
        print(
            f"round {r + 1}: reference {ref[-1]['ms_per_batch']:.3f} ms, montezuma-dk "
            f"{dk[-1]['ms_per_batch']:.3f} ms, every term {every[-1]['ms_per_batch']:.3f} ms "
            f"(mean {every[-1]['ms_per_batch_mean']:.3f}, max {every[-1]['ms_per_batch_max']:.3f}) "
            "per batch "
            f"({dk[-1]['us_per_new_cell']:.1f} / {every[-1]['us_per_new_cell']:.1f} µs "
            f"per new cell for the map terms)",
            flush=True,
        )
    out = {
        "cells": args.cells,
        "rounds": args.rounds,
        "reference_ms_per_batch": statistics.median(r["ms_per_batch"] for r in ref),
        "montezuma_dk_ms_per_batch": statistics.median(r["ms_per_batch"] for r in dk),
        "montezuma_dk_us_per_new_cell": statistics.median(r["us_per_new_cell"] for r in dk),
        "every_term_ms_per_batch": statistics.median(r["ms_per_batch"] for r in every),
        "every_term_ms_per_batch_mean": statistics.median(r["ms_per_batch_mean"] for r in every),
        "every_term_ms_per_batch_max": max(r["ms_per_batch_max"] for r in every),
        "every_term_us_per_new_cell": statistics.median(r["us_per_new_cell"] for r in every),
        "every_term": EVERY_TERM,
        "reference_python_walk_ms": statistics.median(r["reference_ms_per_batch"] for r in ref),
        "target_ms": 1.0,
        "loadavg": list(os.getloadavg()),
        "machine": platform.platform(),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
