"""How well regions follow a game's rooms (Montezuma's rooms, Pitfall's scenes), and
where the picks of a run's latest checkpoint would go with the region term: for each
``--shape``, the number of regions, the share of the cells whose room is their region's
most common room, the regions per room, the time from a cell's stored frame to its
region (a run pays it per new or improved cell), and rooms 1-4's share of the expected
picks (and the best-score cells') with the archive's own weights divided by the region
sizes to ``--power``. A shape ``WxHxL@R`` groups by ``--region-radius R`` (the cells
taken in archive order, as a run would meet them).

    python benchmarks/regions_by_room.py RUN_DIR [--shape 4x4x8 --shape 16x16x255@0.01 ...]
      [--power 1 ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.config import parse_downscale
from goexplore.dynamic import Regions, frame_keys
from goexplore.phase1 import load_run


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--shape", action="append", default=None, help="WxHxL (repeatable)")
    ap.add_argument("--power", action="append", type=float, default=None)
    args = ap.parse_args(argv)
    shapes = args.shape or ["3x3x8", "4x4x8", "8x8x8"]
    powers = args.power or [0.5, 1.0]
    p = load_run(args.run_dir)
    a, d = p.archive, p.dynamic
    if d is None:
        raise SystemExit(f"{args.run_dir}: not a downscale-dynamic run")
    n = a.n
    live = np.flatnonzero(~a.is_done[:n])
    if p.room_fact is None:  # a game without rooms (Venture): regions only, as one room
        room = np.zeros(len(live), np.int64)
    else:
        room = a.facts[:n, p.fact_names.index(p.room_fact)][live]
    a.params = dataclasses.replace(a.params, region=0.0)  # the weights without the term
    w = a.weights_of(np.arange(n))[live]
    first = np.isin(room, [1, 2, 3, 4])
    top = a.score[live] == a.max_archive_score
    print(
        f"{args.run_dir.name} at {p.frames:,} steps: {len(live):,} cells, "
        f"{len(set(room.tolist()))} rooms; without regions rooms 1-4 take "
        f"{w[first].sum() / w.sum():.1%} of the picks, "
        f"the best-score cells {w[top].sum() / w.sum():.1%}"
    )
    frames = [d.frames[i] for i in live.tolist()]
    for shape in shapes:
        cells, _, radius = shape.partition("@")
        regions = Regions(parse_downscale(cells), float(radius or 0))
        keys = frame_keys(regions.rep, frames, np.zeros(len(live), bool), d.codec)
        ids: dict[bytes, int] = {}
        g = np.array([ids.setdefault(regions.region(k), len(ids)) for k in keys])
        size = np.bincount(g)
        common = sum(Counter(room[g == j].tolist()).most_common(1)[0][1] for j in range(len(size)))
        per_room = np.mean([len(set(g[room == r].tolist())) for r in set(room.tolist())])
        t = time.perf_counter()  # a run's cost per new or improved cell: frame to region
        for f in frames[:2000]:
            regions.key(d.codec.decompress(f))
        us = (time.perf_counter() - t) / len(frames[:2000]) * 1e6
        line = [
            f"  {shape}: {len(size)} regions, "
            f"{common / len(live):.1%} of cells in their region's room, "
            f"{per_room:.1f} regions per room, {us:.0f} us per new cell"
        ]
        for pw in powers:
            ww = w * size[g] ** -pw
            line.append(
                f"power {pw:g}: rooms 1-4 {ww[first].sum() / ww.sum():.1%}, "
                f"best-score cells {ww[top].sum() / ww.sum():.1%}"
            )
        print("; ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
