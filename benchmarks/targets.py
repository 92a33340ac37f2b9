"""The performance targets, and a check of a ``goexplore bench --json`` report
against them (``make bench`` runs it; exit 1 if a target is missed).

    python benchmarks/targets.py bench.json
"""

from __future__ import annotations

import json
import sys

TARGETS = {
    "ratio": (">=", 0.92),  # pipeline / bare emulator, steps/s per core
    "master_cpu_us_per_step": ("<=", 2.0),
    "worker_to_master_bytes_per_step": ("<=", 64.0),
    "archive_bytes_per_cell": ("<=", 300.0),
    "selection_ms_per_batch": ("<=", 1.0),  # at 100k cells
    "selection_dk_ms_per_batch": ("<=", 1.0),
    "checkpoint_resume_s": ("<=", 30.0),  # a 1M-cell archive
}


def check(report: dict) -> list[tuple[str, float, str, bool]]:
    """(figure, value, target, met) for every target the report has."""
    out = []
    for key, (op, bound) in TARGETS.items():
        if key in report and report[key] is not None:
            v = report[key]
            out.append((key, v, f"{op} {bound:g}", v >= bound if op == ">=" else v <= bound))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        rows = check(json.load(f))
    for key, v, target, met in rows:
        print(f"  {key:<36}{v:>12.3f}   target {target}: {'met' if met else 'NOT met'}")
    return 0 if all(met for *_, met in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
