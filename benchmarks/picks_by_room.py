"""Where the picks go in a run's latest checkpoint: per room, its share of the cells and
its expected share of the picks (the selection weight, with the score filter's batches
counted exactly: each draws its threshold from a uniformly chosen cell), rooms 1-4 taken
together, and the cells holding the archive's best score.

    python benchmarks/picks_by_room.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.phase1 import load_run


def pick_shares(archive) -> np.ndarray:
    """Each cell's probability of being one pick of a batch."""
    n = archive.n
    w = archive.weights_of(np.arange(n))
    p = w / w.sum()
    f = archive.params.score_filter
    if not f:
        return p
    live = ~archive.is_done[:n]
    score = archive.score[:n]
    values, counts = np.unique(score[live], return_counts=True)
    filtered = np.zeros(n)
    for s, c in zip(values.tolist(), counts.tolist()):  # threshold s drawn c/live times
        m = np.where(score >= s, w, 0.0)
        filtered += (c / live.sum()) * m / m.sum()
    return (1 - f) * p + f * filtered


def main(argv: list[str]) -> int:
    for d in argv:
        p = load_run(Path(d))
        a, names = p.archive, p.fact_names
        n = a.n
        live = ~a.is_done[:n]
        room = a.facts[:n, names.index(p.room_fact)]
        share = pick_shares(a)
        first = live & np.isin(room, [1, 2, 3, 4])
        top = live & (a.score[:n] == a.max_archive_score)
        rooms = sorted(set(room[live].tolist()))
        print(
            f"{Path(d).name} at {p.frames:,} steps: {live.sum():,} cells in {len(rooms)} rooms; "
            f"rooms 1-4: {first.sum() / live.sum():.1%} of the cells, {share[first].sum():.1%} "
            f"of the picks; best score {a.max_archive_score:,.0f}: {top.sum()} cells, "
            f"{share[top].sum():.1%} of the picks"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
