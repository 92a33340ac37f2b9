"""How much worker time the per-batch barrier costs, by worker count (a simulation).

Phase 1 applies each batch's 100 episodes before it samples the next batch (the
reference's semantics), so at the end of every batch some workers wait for the
last episodes. This replays the process backend's dispatch policy (guided
chunks of about remaining / 2W tasks, at most 12, a second chunk queued only
while 8W or more tasks remain) on episode lengths taken from a real run's
experience log, and reports the share of worker time spent waiting.

    .venv/bin/python benchmarks/batch_tail.py --run-dir runs/montezuma-seed0
    .venv/bin/python benchmarks/batch_tail.py            # a synthetic length mix

Options: --step-us (cost of one agent step, default 446: this project's 2-core
machine), --latency-us (master round trip, default 300), --batches.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCH = 100
MAX_CHUNK = 12


def episode_lengths(run_dir: str | None, rng) -> np.ndarray:
    if run_dir is None:
        return np.concatenate(
            [rng.integers(1, 30, 600), rng.integers(30, 100, 250), np.full(150, 100)]
        )
    from goexplore.phase1 import load_run

    log = load_run(Path(run_dir)).explog.all_entries()
    prev = log["prev"]
    starts = np.flatnonzero(prev != np.arange(len(prev)) - 1)  # an episode starts a new chain
    return np.diff(np.append(starts, len(prev)))


def simulate(lengths, workers: int, step_s: float, latency_s: float, batches: int, rng) -> float:
    idle = total = 0.0
    for _ in range(batches):
        dur = rng.choice(lengths, BATCH) * step_s
        todo = list(range(BATCH))
        queue: list[list] = [[] for _ in range(workers)]

        def feed(w, now, todo=todo, queue=queue):
            limit = 2 if len(todo) >= 8 * workers else 1
            while todo and len(queue[w]) < limit:
                k = max(1, min(MAX_CHUNK, len(todo) // (2 * workers)))
                queue[w].append((now + latency_s, todo[:k]))
                del todo[:k]

        events = []
        for w in range(workers):
            feed(w, 0.0)
            if queue[w]:
                arrive, chunk = queue[w][0]
                heapq.heappush(events, (arrive + dur[chunk].sum(), w))
        end = 0.0
        while events:
            t, w = heapq.heappop(events)
            queue[w].pop(0)
            feed(w, t)
            end = max(end, t)
            if queue[w]:
                arrive, chunk = queue[w][0]
                heapq.heappush(events, (max(arrive, t) + dur[chunk].sum(), w))
        total += workers * end
        idle += workers * end - dur.sum()
    return idle / total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--step-us", type=float, default=446.0)
    ap.add_argument("--latency-us", type=float, default=300.0)
    ap.add_argument("--batches", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lengths = episode_lengths(args.run_dir, rng)
    print(f"episodes: {len(lengths):,}, mean length {lengths.mean():.1f} steps")
    for w in (1, 2, 4, 8, 16, 32):
        share = simulate(lengths, w, args.step_us * 1e-6, args.latency_us * 1e-6, args.batches, rng)
        print(f"  {w:>2} workers: {100 * share:5.1f}% of worker time waiting at the batch barrier")
    return 0


if __name__ == "__main__":
    sys.exit(main())
