"""montezuma-dk: how the selection weight falls on cells by the keys they hold, in one
checkpoint of a run dir. Groups: cells alone at their place (level, room, x, y); cells
holding more keys than every other cell at their place; cells tying for the most; cells
holding fewer. Then per number of keys held: cells, share of the weight, rooms.

    python benchmarks/keys_share.py RUN_DIR [CHECKPOINT_NAME]   (default: the latest)
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.phase1 import Phase1
from goexplore.store import RunDir


def main(argv: list[str]) -> int:
    rd = RunDir(Path(argv[0]))
    p = Phase1(rd.read_config(), rd)
    ckpt = rd.ckpt_dir / argv[1] if len(argv) > 1 else rd.latest_checkpoint()
    p.restore(ckpt)
    a = p.archive
    if a._places is None:
        print("this run's selection has no place terms (not montezuma-dk-like cells)")
        return 2
    w = a.weights_of(np.arange(a.n))
    total = w.sum()
    cell_place = a._places.cell_place
    at = collections.Counter((q.level, q.room, q.x, q.y) for q in cell_place.values())
    groups: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    keys: dict[int, list] = collections.defaultdict(lambda: [0, 0.0, set()])
    for i, q in cell_place.items():
        if at[(q.level, q.room, q.x, q.y)] == 1:
            g = "alone at its place"
        elif a.ahead[i]:
            g = "more keys than every other cell at its place"
        elif a.holds_most[i]:
            g = "ties for the most keys at its place"
        else:
            g = "fewer keys than another cell at its place"
        groups[g][0] += 1
        groups[g][1] += w[i]
        k = keys[q.items]
        k[0] += 1
        k[1] += w[i]
        k[2].add(q.room)
    n = len(cell_place)
    print(f"{ckpt.name}: {n:,} cells, level {a.max_level}, best {a.max_archive_score:,.0f}")
    for g, (c, s) in sorted(groups.items(), key=lambda r: -r[1][0]):
        print(f"  {g:46s} {c:6,} cells ({c / n:6.1%})  {s / total:6.1%} of the weight")
    for k, (c, s, rooms) in sorted(keys.items()):
        print(
            f"  holding {k} keys: {c:6,} cells, {s / total:6.1%} of the weight, "
            f"rooms {sorted(rooms)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
