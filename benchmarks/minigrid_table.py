"""MiniGrid: agent steps to the first success, per env and seed, with --preset minigrid.

    python benchmarks/minigrid_table.py OUT_DIR [--envs A,B] [--seeds 0,1,2]
        [--max-steps 3000000] [--piece 250000]

Each (env, seed) runs in OUT_DIR/<env>-seed<s>: seed s is both the run's seed and the
env's reset seed (a different layout per seed). A run goes on in pieces of --piece
agent steps (resumed from its checkpoint, so an interrupted table continues where it
stopped) until an episode ends with a positive reward or --max-steps is spent. The
first success is the end of the first batch whose best end-of-episode score is
positive (a batch is about 10,000 steps). Results go to OUT_DIR/table.json and a
Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import goexplore

ENVS = (
    "MiniGrid-DoorKey-16x16-v0",
    "MiniGrid-MultiRoom-N6-v0",
    "MiniGrid-KeyCorridorS6R3-v0",
    "MiniGrid-ObstructedMaze-Full-v1",
)


def run_one(out: Path, env_id: str, seed: int, max_steps: int, piece: int) -> dict:
    run_dir = out / f"{env_id}-seed{seed}"
    first = {"steps": None}

    def progress(p) -> None:
        if first["steps"] is None and p.best_done is not None and p.best_done > 0:
            first["steps"] = p.frames

    rec_path = run_dir.parent / f"{run_dir.name}.json"
    if rec_path.exists():
        return json.loads(rec_path.read_text())
    wall, steps, run = 0.0, 0, None
    while steps < max_steps:
        steps = min(max_steps, steps + piece)
        t0 = time.perf_counter()
        run = goexplore.explore(
            f"gym:{env_id}",
            preset="minigrid",
            seed=seed,
            env_kwargs={"seed": seed},
            n_workers=1,
            steps=steps,
            ckpt_every=piece,
            run_dir=run_dir,
            resume=(run_dir / "config.json").exists(),
            progress=progress,
        )
        wall += time.perf_counter() - t0
        if first["steps"] is not None:
            break
    assert run is not None
    rec = {
        "env": env_id,
        "seed": seed,
        "first_success_steps": first["steps"],
        "steps": run.steps,
        "best_score": run.best_score,
        "cells": run.n_cells,
        "verified": run.verified,
        "wall_s": round(wall, 1),
    }
    rec_path.write_text(json.dumps(rec) + "\n")
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--envs", default=",".join(ENVS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--max-steps", type=int, default=3_000_000)
    ap.add_argument("--piece", type=int, default=250_000)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for env_id in args.envs.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            rec = run_one(args.out, env_id, seed, args.max_steps, args.piece)
            print(json.dumps(rec), flush=True)
            rows.append(rec)
    (args.out / "table.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n| env | solved | steps to first success: median (range) | wall s per run |")
    print("|---|---|---|---|")
    for env_id in args.envs.split(","):
        rs = [r for r in rows if r["env"] == env_id]
        got = [r["first_success_steps"] for r in rs if r["first_success_steps"] is not None]
        span = f"{statistics.median(got):,.0f} ({min(got):,}–{max(got):,})" if got else "not solved"
        walls = ", ".join(f"{r['wall_s']:.0f}" for r in rs)
        print(f"| {env_id} | {len(got)}/{len(rs)} | {span} | {walls} |")


if __name__ == "__main__":
    main()
