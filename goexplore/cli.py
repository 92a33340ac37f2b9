"""The ``goexplore`` command: run | replay | games (and the tools added later).

Every user error prints one clear message and exits with code 2."""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from goexplore.config import Config
from goexplore.errors import GoExploreError

EXIT_USAGE = 2


def _add_config_args(p: argparse.ArgumentParser) -> None:
    for f in fields(Config):
        if f.name == "env":
            continue
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None,
                       help=f"{f.metadata['help']} (default {f.default:,})" if isinstance(f.default, int)
                       else f"{f.metadata['help']} (default {f.default})")


def _config_from(args) -> Config:
    given = {f.name: getattr(args, f.name) for f in fields(Config)
             if getattr(args, f.name, None) is not None}
    return Config(**given)


def cmd_run(args) -> int:
    from goexplore.progress import ProgressReporter
    from goexplore.runner import execute, prepare

    cfg = _config_from(args)
    cfg.validate()
    run_dir = Path(args.run_dir or f"runs/{cfg.env}-seed{cfg.seed}")
    phase1, ckpt = prepare(cfg, run_dir, args.resume)
    where = f"resumed from {ckpt}" if ckpt else "fresh start"
    print(f"goexplore run: {cfg.env}  seed {cfg.seed}  budget {cfg.total_frames:,} agent steps  "
          f"workers {cfg.n_workers}  run dir {run_dir}  ({where})", flush=True)
    with ProgressReporter(cfg.total_frames, start=phase1.frames) as reporter:
        final = execute(phase1, on_progress=reporter.update, log=reporter.print)
    if final is None:
        return 130
    best = final["best_done_score"]
    print(f"\ndone: {final['frames_total']:,} agent steps in {final['wall_s']:.0f}s\n"
          f"  best end-of-episode score  {best if best is not None else 'none yet'}\n"
          f"  max archive score          {final['max_archive_score']:g}\n"
          f"  cells                      {final['n_cells']:,}\n"
          f"  rooms                      {final['rooms_found']}\n"
          f"  replay-verified            {final['verified']}\n"
          f"  run dir                    {run_dir}\n"
          f"  (scores: {final['protocol']})")
    return 0 if final["verified"] else 1


def cmd_games(args) -> int:
    from goexplore.envs import GAMES
    print(f"{'name':<13} {'ALE id':<28} notes")
    for name, g in GAMES.items():
        note = "default; room map and RAM facts" if name == "montezuma" else ""
        print(f"{name:<13} {g.env_id:<28} {note}")
    print(f"{'toy':<13} {'(built in)':<28} tiny deterministic world for tests and examples")
    print("\nAll Atari games: frameskip 4, no sticky actions, minimal action set, reset seed 0.")
    return 0


def cmd_replay(args) -> int:
    from goexplore.demos import verify_cell
    from goexplore.explore import DONE_KEY
    from goexplore.phase1 import load_run

    phase1 = load_run(Path(args.run_dir))
    a = phase1.archive
    if args.cell == "best":
        i = a.best_cell()
    elif args.cell == "done":
        i = a.done_id
        if i < 0:
            raise GoExploreError("this run has no end-of-episode (DONE) cell yet")
    else:
        try:
            i = int(args.cell)
        except ValueError:
            raise GoExploreError(f"--cell {args.cell!r}: give best, done or a cell index") from None
        if not 0 <= i < a.n:
            raise GoExploreError(f"--cell {i}: out of range; the archive has cells 0..{a.n - 1}")
    actions = phase1.explog.trajectory(int(a.traj_last[i]))
    ok, why = verify_cell(phase1.cfg.env, phase1.cells, actions, key=a.key_of(i),
                          score=float(a.score[i]), length=int(a.traj_len[i]),
                          is_done=a.key_of(i) == DONE_KEY)
    print(f"cell {i}: archived score {a.score[i]:g}, {a.traj_len[i]} steps — "
          f"{'VERIFIED' if ok else 'MISMATCH'}: {why}")
    if args.out:
        import numpy as np
        np.save(args.out, actions)
        print(f"actions written to {args.out}")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="goexplore", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="explore (Phase 1) and write a run dir")
    r.add_argument("--env", default=None, help="game (see `goexplore games`; default montezuma)")
    _add_config_args(r)
    r.add_argument("--run-dir", default=None, help="where the run lives (default runs/<env>-seed<seed>)")
    r.add_argument("--resume", default=None, metavar="auto|PATH",
                   help="continue: 'auto' (this run dir's latest checkpoint, if any), "
                        "a run dir, or a checkpoint dir")
    r.set_defaults(func=cmd_run)

    g = sub.add_parser("games", help="list the supported games")
    g.set_defaults(func=cmd_games)

    p = sub.add_parser("replay", help="rebuild a cell's trajectory and verify it by replay from reset")
    p.add_argument("run_dir")
    p.add_argument("--cell", default="best", help="best (default), done, or a cell index")
    p.add_argument("--out", default=None, help="also save the actions (.npy)")
    p.set_defaults(func=cmd_replay)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except GoExploreError as e:
        print(f"goexplore: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
