"""Montezuma without domain knowledge: does the cell representation see the keys?

For each checkpoint of a ``downscale-dynamic`` run dir: the representation then, the
cells holding a key, how many of those would be the same cell with the screen's
inventory row blanked (rows 22-45, where the game draws the held items: there a
state holding a key and one holding none, at the same spot and score, share one cell,
which keeps only one of them), and the rooms where some cell holds two or more keys
(the level exits behind room 17's two doors). Per run, a summary, with the rooms of the
two-key entries that lost a merge and wait for a finer representation (the latest
checkpoint holds them all): a state found and then merged away is among them.

    python benchmarks/keys_in_cells.py RUN_DIR [RUN_DIR ...] [--latest]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore.cells.domain import keys_held
from goexplore.phase1 import Phase1
from goexplore.store import RunDir

#: Montezuma's inventory row: below the lives (rows 15-19), above the room (row 47 on).
INVENTORY_ROWS = slice(22, 46)


def blind_share(p: Phase1, cells: np.ndarray) -> float:
    """The share of ``cells`` whose key is unchanged with the inventory row blanked."""
    d = p.dynamic
    frames = np.stack([d.codec.decompress(d.frames[i]) for i in cells.tolist()])
    blank = frames.copy()
    blank[:, INVENTORY_ROWS] = 0
    return float((d.rep.keys(frames) == d.rep.keys(blank)).all(1).mean())


def two_key_rooms(facts: np.ndarray, names) -> set[int]:
    """The rooms of the entries (rows of RAM facts) holding two or more keys."""
    keys = keys_held(facts[:, names.index("inventory")])
    return set(facts[keys >= 2, names.index("room")].tolist())


def row(p: Phase1) -> tuple[str, float | None, set[int]]:
    """A checkpoint's line, its blind share and the rooms with a two-key cell."""
    a, names = p.archive, p.fact_names
    n = a.n
    live = ~a.is_done[:n]
    keys = keys_held(a.facts[:n, names.index("inventory")])
    holding = np.flatnonzero(live & (keys > 0))
    blind = blind_share(p, holding) if len(holding) else None
    two = two_key_rooms(a.facts[:n][live], names)
    shape = "x".join(map(str, p.dynamic.rep.params or ()))
    line = (
        f"  {p.frames:>11,}  {shape:>9}  {a.max_archive_score:>6,.0f}  {live.sum():5,d}"
        f"  {len(holding):5,d}  {'     -' if blind is None else f'{blind:6.1%}'}"
        f"  {sorted(two) or 'none'}"
    )
    return line, blind, two


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument("--latest", action="store_true", help="only the latest checkpoint")
    args = ap.parse_args(argv)
    for path in args.run_dirs:
        rd = RunDir(path)
        cfg = rd.read_config()
        if cfg is None or cfg.cells != "downscale-dynamic" or "montezuma" not in cfg.env:
            raise SystemExit(f"{path}: not a Montezuma downscale-dynamic run dir")
        ckpts = [rd.latest_checkpoint()] if args.latest else rd.checkpoints()
        print(f"{path.name}:")
        print("        steps      shape    best  cells  w/key  blind  rooms with two keys")
        shares, rooms = [], set()
        for ckpt in ckpts:
            p = Phase1(cfg, rd)
            p.restore(ckpt)
            line, blind, two = row(p)
            print(line)
            shares += [] if blind is None else [blind]
            rooms |= two
        if shares:
            print(
                f"  blind: median {np.median(shares):.1%} over {len(shares)} checkpoints "
                f"({min(shares):.1%} to {max(shares):.1%}); two-key cells ever in rooms "
                f"{sorted(rooms) or 'none'}; two-key merged-away entries in rooms "
                f"{sorted(two_key_rooms(p.dynamic.shadow.arrays['facts'], p.fact_names)) or 'none'}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
