"""Plot Phase 2 runs side by side: success from reset (and the curriculum's progress)
against policy steps, from each run's curriculum.jsonl.

    python benchmarks/plot_phase2.py OUT.png RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main() -> None:
    out, runs = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    fig, ax = plt.subplots(figsize=(8, 4), constrained_layout=True)
    for i, run in enumerate(runs):
        rows = [json.loads(x) for x in (run / "curriculum.jsonl").read_text().splitlines() if x]
        x = [r["frames"] for r in rows]
        # no point before the first episode from reset has ended
        succ = [
            r["success_from_reset"] if r["success_from_reset"] is not None else float("nan")
            for r in rows
        ]
        colour = f"C{i}"
        ax.plot(x, succ, color=colour, label=f"{run.name}: success from reset")
        if rows[0]["progress"] is not None:
            ax.plot(x, [r["progress"] for r in rows], color=colour, ls=":", lw=1,
                    label=f"{run.name}: curriculum progress")  # fmt: skip
    ax.set_xlabel("policy steps")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
