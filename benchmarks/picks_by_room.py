"""Where the picks go in a run's latest checkpoint: per room, its share of the cells and
its expected share of the picks (the selection weight, with the score filter's batches
counted exactly: each draws its threshold from a uniformly chosen cell), rooms 1-4 taken
together, and the cells holding the archive's best score. With ``--rooms``, also a row
per room: its cells, the regions they fall in (the region term's, where the run has one),
its share of the picks, the medians of the counters the weight is made of, its best
score and, for Montezuma, its cells holding a key and the most keys one holds (the level
exits behind room 17's two doors, so two keys must be carried there).

    python benchmarks/picks_by_room.py RUN_DIR [RUN_DIR ...] [--rooms]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.cells.domain import keys_held
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


def room_rows(archive, room: np.ndarray, share: np.ndarray, keys: np.ndarray | None) -> list[str]:
    """One line per room of the live cells: cells, regions, picks, median counters, and
    (``keys``: keys held per cell) the cells holding a key and the most keys held."""
    n = archive.n
    live = ~archive.is_done[:n]
    region = archive.region[:n]
    seen, since_new = archive.seen[:n], archive.chosen_since_new[:n]
    head = "  room  cells  regions  picks  seen  since-new  best score"
    lines = [head + ("  with a key  most keys" if keys is not None else "")]
    for r in sorted(set(room[live].tolist())):
        m = live & (room == r)
        line = (
            f"  {r:4d}  {m.sum():5,d}  {len(np.unique(region[m])):7d}  {share[m].sum():5.1%}"
            f"  {np.median(seen[m]):4.0f}  {np.median(since_new[m]):9.0f}"
            f"  {archive.score[:n][m].max():10,.0f}"
        )
        if keys is not None:
            line += f"  {(keys[m] > 0).sum():10,d}  {keys[m].max():9d}"
        lines.append(line)
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--rooms", action="store_true", help="also a row per room")
    args = ap.parse_args(argv)
    for d in args.run_dirs:
        p = load_run(d)
        a, names = p.archive, p.fact_names
        n = a.n
        live = ~a.is_done[:n]
        room = a.facts[:n, names.index(p.room_fact)]
        share = pick_shares(a)
        first = live & np.isin(room, [1, 2, 3, 4])
        top = live & (a.score[:n] == a.max_archive_score)
        rooms = sorted(set(room[live].tolist()))
        print(
            f"{d.name} at {p.frames:,} steps: {live.sum():,} cells in {len(rooms)} rooms; "
            f"rooms 1-4: {first.sum() / live.sum():.1%} of the cells, {share[first].sum():.1%} "
            f"of the picks; best score {a.max_archive_score:,.0f}: {top.sum()} cells, "
            f"{share[top].sum():.1%} of the picks"
        )
        if args.rooms:
            inventory = a.facts[:n, names.index("inventory")] if "inventory" in names else None
            keys = None if inventory is None else keys_held(inventory)  # Montezuma's RAM
            print("\n".join(room_rows(a, room, share, keys)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
