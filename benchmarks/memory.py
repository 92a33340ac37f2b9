"""Peak memory of the master process over a long run.

    .venv/bin/python benchmarks/memory.py --env toy --frames 10000000 --json memory.json

Runs Phase 1 in this process (the master; with --n-workers >= 2 the workers
are separate processes and not counted) through the same path as ``goexplore
run`` (prepare -> execute, so checkpoints, log chunks and the final replay
verification are included), samples the resident set size after every batch,
and reports:

* peak RSS while exploring, and the overall peak (``ru_maxrss``, which also
  covers the final verification's trajectory walks);
* growth over the RSS before the first batch, per archive cell and per logged
  step (experience-log entry): the log is flushed to disk in chunks, so per
  logged step this should tend to zero;
* RSS at 10 %, 50 % and 100 % of the budget, to show whether it levels off.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.config import Config
from goexplore.runner import execute, prepare

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="toy")
    ap.add_argument("--frames", type=int, default=10_000_000)
    ap.add_argument("--n-workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt-every", type=int, default=1_000_000)
    ap.add_argument("--explog-chunk", type=int, default=Config.explog_chunk)
    ap.add_argument("--run-dir", default=None, help="default: a temporary directory, removed after")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)

    cfg = Config(
        env=args.env,
        seed=args.seed,
        total_frames=args.frames,
        n_workers=args.n_workers,
        ckpt_every=args.ckpt_every,
        explog_chunk=args.explog_chunk,
        log_every_batches=10,
    )
    tmp = None
    if args.run_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="goexplore-memory-")
        run_dir = Path(tmp.name) / "run"
    else:
        run_dir = Path(args.run_dir)
    phase1, _ = prepare(cfg, run_dir, None)
    base = rss()
    samples = []

    def on_progress(p):
        samples.append((p.frames, p.cells, phase1.explog.count, rss()))

    t0 = time.time()
    final = execute(phase1, on_progress=on_progress, log=lambda *a: None)
    wall = time.time() - t0
    peak_all = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak_explore = max(s[3] for s in samples)
    a = phase1.archive
    cells, logged = a.n, phase1.explog.count
    ckpt = phase1.run_dir.latest_checkpoint()
    ckpt_cell_bytes = sum((ckpt / f).stat().st_size for f in ("archive.npz", "states.bin")) / cells
    growth = peak_all - base

    def at(frac):
        target = frac * args.frames
        s = next((s for s in samples if s[0] >= target), samples[-1])
        return {"frames": s[0], "cells": s[1], "rss_mb": round(s[3] / MB, 1)}

    out = {
        "env": args.env,
        "n_workers": args.n_workers,
        "frames": phase1.frames,
        "wall_s": round(wall, 1),
        "cells": cells,
        "explog_entries": logged,
        "explog_chunks_flushed": phase1.explog.n_flushed,
        "explog_chunk": cfg.explog_chunk,
        "rss_before_run_mb": round(base / MB, 1),
        "peak_rss_exploring_mb": round(peak_explore / MB, 1),
        "peak_rss_overall_mb": round(peak_all / MB, 1),
        "growth_mb": round(growth / MB, 1),
        "explog_active_chunk_mb": round(cfg.explog_chunk * 14 / MB, 1),
        "checkpoint_bytes_per_cell": round(ckpt_cell_bytes, 1),
        "growth_bytes_per_cell": round(growth / cells, 1),
        "growth_bytes_per_logged_step": round(growth / logged, 3),
        "explore_growth_bytes_per_logged_step": round((peak_explore - base) / logged, 3),
        "rss_at": {"10%": at(0.1), "50%": at(0.5), "100%": at(1.0)},
        "best_done_score": final["best_done_score"] if final else None,
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
