"""Figures of run dirs at agent-step budgets, as the study pages give them: per run, the
best score (the archive's best cell, or an episode end where that is higher), rooms and
cells at the last metrics row at or before each budget, and the step of the first
metrics row at each listed level (e.g. level 1).

    python benchmarks/study_table.py RUN_DIR [RUN_DIR ...] [--at 1e6,2e6,3e6] [--level 1]
      [--median]   (also the median best score over the runs, per budget)
      [--finds]    (also, per run, each metrics row where the best score rose)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def best(row: dict) -> float:
    done = row.get("best_done_score")
    top = row.get("max_archive_score", 0.0)
    return max(top, done) if done is not None else top


def at(rs: list[dict], budget: int) -> dict | None:
    before = [r for r in rs if r["frames"] <= budget]
    if not before or rs[-1]["frames"] < budget * 0.99:
        return None  # the run has not got there
    return before[-1]


def first_level(rs: list[dict], level: int) -> int | None:
    return next((r["frames"] for r in rs if (r.get("max_level") or 0) >= level), None)


def finds(rs: list[dict]) -> str:
    out, top = [], None
    for r in rs:
        if top is None or best(r) > top:
            top = best(r)
            out.append(f"{top:,.0f} at {r['frames'] / 1e6:.2f}M")
    return ", ".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--at", default="1e6,2e6,3e6")
    ap.add_argument("--level", type=int, default=None)
    ap.add_argument("--median", action="store_true")
    ap.add_argument("--finds", action="store_true")
    args = ap.parse_args()
    budgets = [int(float(x)) for x in args.at.split(",")]
    head = ["run"] + [f"{b / 1e6:g}M best / rooms / cells" for b in budgets]
    if args.level is not None:
        head.append(f"first level {args.level}")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    scores: dict[int, list[float]] = {b: [] for b in budgets}
    for d in args.runs:
        rs = rows(d)
        cols = [d.name]
        for b in budgets:
            r = at(rs, b)
            if r is None:
                cols.append("–")
                continue
            scores[b].append(best(r))
            cols.append(f"{best(r):,.0f} / {r['rooms_found']} / {r['n_cells']:,}")
        if args.level is not None:
            s = first_level(rs, args.level)
            cols.append("not reached" if s is None else f"{s:,}")
        print("| " + " | ".join(cols) + " |")
    if args.median:
        med = [
            f"{statistics.median(v):,.0f} ({len(v)} runs)" if v else "–" for v in scores.values()
        ]
        print("| median best | " + " | ".join(med) + (" | |" if args.level is not None else " |"))
    if args.finds:
        print()
        for d in args.runs:
            print(f"- {d.name}: {finds(rows(d))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
