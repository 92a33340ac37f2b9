"""Benchmark the Go-Explore cell key: cv2 reference vs DownscaleCells (key and keys).

    .venv/bin/python benchmarks/bench_cells.py [--game montezuma_revenge] [--frames 2000]

Plays random actions to collect real grayscale frames, checks that every key is
bit-identical to the reference, then prints microseconds per frame (best of
``--repeat`` runs; wall clock and this thread's CPU time, which is less disturbed
by other processes on a busy machine) and the speedups.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import goexplore.cells.downscale as cells_mod
from goexplore.cells.downscale import DownscaleCells, reference_key


def collect(game: str, n: int, seed: int = 0) -> np.ndarray:
    from ale_py.env import AtariEnv

    env = AtariEnv(
        game=game,
        frameskip=4,
        repeat_action_probability=0.0,
        obs_type="grayscale",
        max_num_frames_per_episode=0,
    )
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    frames = [obs]
    while len(frames) < n:
        obs, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        frames.append(obs)
        if term or trunc:
            obs, _ = env.reset()
            frames.append(obs)
    env.close()
    return np.stack(frames[:n])


def best_of(fn, repeat: int) -> tuple[float, float]:
    """(wall, cpu) seconds of the fastest of ``repeat`` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--game", default="montezuma_revenge")
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256, help="frames per keys() call")
    args = ap.parse_args()

    frames = collect(args.game, args.frames)
    n = len(frames)
    cells = DownscaleCells()
    print(f"{n} real {args.game} frames {frames.shape[1:]}, key 11x8, 8 levels")

    # exactness and how often the fast path defers to cv2
    plan = cells_mod._plan(*frames.shape[1:], cells.height, cells.width, cells.levels)
    fallback = sum(plan.key(f) is None for f in frames)
    ref = [reference_key(f) for f in frames]
    assert [cells.key(f) for f in frames] == ref, "key() differs from the reference"
    batch = np.concatenate(
        [cells.keys(frames[s : s + args.batch]) for s in range(0, n, args.batch)]
    )
    assert [row.tobytes() for row in batch] == ref, "keys() differs from the reference"
    print(
        f"bit-identical on all {n} frames; cv2 fallback on {fallback} ({100 * fallback / n:.2f}%)"
    )

    key = cells.key
    runs = {
        "reference_key (cv2)": lambda: [reference_key(f) for f in frames],
        "DownscaleCells.key": lambda: [key(f) for f in frames],
        f"DownscaleCells.keys (batch {args.batch})": lambda: [
            cells.keys(frames[s : s + args.batch]) for s in range(0, n, args.batch)
        ],
    }
    results = {}
    for name, fn in runs.items():
        fn()  # warm up (plan, buffers, caches)
        wall, cpu = best_of(fn, args.repeat)
        results[name] = (wall / n * 1e6, cpu / n * 1e6)
    base_wall, base_cpu = results["reference_key (cv2)"]
    print(f"{'':38s} {'wall us/frame':>14s} {'speedup':>8s} {'cpu us/frame':>13s} {'speedup':>8s}")
    for name, (wall, cpu) in results.items():
        print(
            f"{name:38s} {wall:14.2f} {base_wall / wall:7.1f}x {cpu:13.2f} {base_cpu / cpu:7.1f}x"
        )


if __name__ == "__main__":
    main()
