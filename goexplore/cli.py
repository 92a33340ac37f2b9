"""goexplore: Go-Explore Phase 1 — run | presets | replay | demo | report | compare | verify |
bench | games.

Every user error prints one clear message and exits with code 2."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import fields
from pathlib import Path

from goexplore.config import Config
from goexplore.errors import GoExploreError

EXIT_USAGE = 2


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _workers(text: str) -> int:
    if text.strip().lower() == "auto":
        return 0
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None


def _add_config_args(p: argparse.ArgumentParser) -> None:
    for f in fields(Config):
        if f.name in ("env", "preset"):
            continue
        kind = _bool if isinstance(f.default, bool) else type(f.default)
        kind = _workers if f.name == "n_workers" else kind
        shown = f"{f.default:,}" if type(f.default) is int else f"{f.default}"
        shown = "auto" if f.name == "n_workers" else shown
        p.add_argument(
            "--" + f.name.replace("_", "-"),
            type=kind,
            default=None,
            metavar="true|false" if kind is _bool else None,
            help=f"{f.metadata['help']} (default {shown})",
        )


def _given(args) -> dict:
    return {
        f.name: getattr(args, f.name)
        for f in fields(Config)
        if f.name != "preset" and getattr(args, f.name, None) is not None
    }


def _config_from(args, branch_base: Config | None = None) -> Config:
    """Defaults, then ``--preset``, then the flags given; when resuming a run
    dir that holds a config, that config replaces the defaults and the preset
    (so a resume needs only the flags that change), as does the source run's
    config of a branch (``branch_base``)."""
    from goexplore.presets import apply_preset
    from goexplore.store import RunDir

    given = _given(args)
    saved, where = branch_base, getattr(args, "branch_from", None)
    if saved is None and getattr(args, "resume", None) is not None and args.run_dir:
        saved, where = RunDir(Path(args.run_dir)).read_config(), args.run_dir
    if saved is not None:
        if args.preset is not None and args.preset != saved.preset:
            raise GoExploreError(
                f"--preset {args.preset}: the run in {where} was started with "
                f"preset {saved.preset!r}"
            )
        return saved.replace(**given)
    return apply_preset(args.preset or "reference", given)


def cmd_run(args) -> int:
    from goexplore.progress import ProgressReporter
    from goexplore.runner import branch_source, execute, prepare

    source = saved = None
    if args.branch_from is not None:
        if args.resume is not None:
            raise GoExploreError("--branch-from starts a new run dir: leave out --resume")
        if not args.run_dir:
            raise GoExploreError("--branch-from: give the new run's --run-dir")
        source, saved = branch_source(args.branch_from, args.fallback)
    cfg = _config_from(args, saved)
    cfg.validate()
    run_dir = Path(
        args.run_dir or f"runs/{re.sub(r'[^A-Za-z0-9_.-]+', '-', cfg.env)}-seed{cfg.seed}"
    )
    resume = args.resume if source is None else str(source)
    phase1, ckpt = prepare(cfg, run_dir, resume, fallback=args.fallback, branch=source is not None)
    where = f"resumed from {ckpt}" if ckpt else "fresh start"
    if saved is not None:
        changed = ", ".join(saved.differs_from(cfg)) or "nothing"
        where = f"branched from {ckpt}; changed: {changed}"
    print(
        f"goexplore run: {cfg.env}  preset {cfg.preset}  seed {cfg.seed}  budget "
        f"{cfg.total_frames:,} agent steps  workers {cfg.n_workers or 'auto'}  "
        f"backend {cfg.backend}  run dir {run_dir}  "
        f"({where})",
        flush=True,
    )
    tb = _tensorboard(run_dir, phase1.frames) if args.tensorboard else None
    with ProgressReporter(cfg.total_frames, start=phase1.frames) as reporter:

        def on_progress(p):
            reporter.update(p)
            if tb is not None:
                tb.update(p)

        try:
            final = execute(phase1, on_progress=on_progress, log=reporter.print)
        finally:
            if tb is not None:
                tb.close()
    if final is None:
        return 130
    best = final["best_done_score"]
    print(
        f"\ndone: {final['frames_total']:,} agent steps in {final['wall_s']:.0f}s\n"
        f"  best score                 {final['best_score']:g}  (of any trajectory)\n"
        f"  best end-of-episode score  {best if best is not None else 'none yet'}\n"
        f"  max archive score          {final['max_archive_score']:g}  (of a cell)\n"
        + f"  cells                      {final['n_cells']:,}\n"
        + (
            f"  rooms                      {final['rooms_found']}\n"
            if final.get("rooms_found") is not None
            else ""
        )
        + (
            f"  highest level (from 0)     {final['max_level']}\n"
            if final.get("max_level") is not None
            else ""
        )
        + (
            f"  steps replayed by restores {final['replayed_steps']:,} (besides the steps above)\n"
            if final.get("replayed_steps") is not None
            else ""
        )
        + "".join(f"  warning: {w}\n" for w in final.get("warnings", []))
        + f"  replay-verified            {final['verified']}\n"
        f"  run dir                    {run_dir}\n"
        f"  (scores: {final['protocol']})"
    )
    return 0 if final["verified"] else 1


def _tensorboard(run_dir: Path, frames: int):
    """The metrics as TensorBoard scalars in RUN_DIR/tb, or None (with a message)."""
    from goexplore.report.tensorboard import INSTALL_HINT, MetricsToTensorBoard

    try:
        tb = MetricsToTensorBoard(run_dir / "metrics.jsonl", run_dir / "tb", after_frames=frames)
    except ImportError:
        print(
            f"--tensorboard: skipped, no TensorBoard writer is installed ({INSTALL_HINT})",
            file=sys.stderr,
            flush=True,
        )
        return None
    print(
        f"TensorBoard scalars: {run_dir / 'tb'}  (view: tensorboard --logdir {run_dir / 'tb'})",
        flush=True,
    )
    return tb


def cmd_report(args) -> int:
    from goexplore.report import build_report

    if args.top < 1:
        raise GoExploreError(f"--top {args.top}: must be at least 1")
    rep = build_report(Path(args.run_dir), args.out, top=args.top, video=not args.no_video)
    files = [rep.curves_png] + [rep.out_dir / m.file for m in rep.maps]
    files += [p for p in (rep.mp4, rep.gif) if p is not None]
    print(f"report: {rep.html}  ({rep.seconds:.0f}s)\n  also: " + ", ".join(p.name for p in files))
    return 0


def cmd_verify(args) -> int:
    from goexplore.verify import verify_run

    report = verify_run(Path(args.run_dir))  # not a run dir: GoExploreError, exit 2
    print(report.text())
    return 0 if report.ok else 1


def cmd_presets(args) -> int:
    from goexplore.presets import PRESETS, describe

    if args.name:
        if args.name not in PRESETS:
            raise GoExploreError(
                f"preset {args.name!r}: unknown; choose one of: {', '.join(PRESETS)}"
            )
        p = PRESETS[args.name]
        print(f"{p.name}: {p.summary}")
        for k, v in p.settings.items():
            print(f"  --{k.replace('_', '-')} {v}")
        return 0
    print(describe())
    print(
        "\nUse: goexplore run --preset NAME [flags]  (flags override the preset; "
        "`goexplore presets NAME` shows its settings)"
    )
    return 0


def cmd_games(args) -> int:
    from goexplore.envs import GAMES

    print(f"{'name':<13} {'ALE id':<28} notes")
    for name, g in GAMES.items():
        notes = ["default"] if name == "montezuma" else []
        notes += ["room map"] if g.layout is not None else []
        notes += [f"--cells {g.dk_cells}"] if g.dk_cells else []
        notes += [f"RAM facts: {', '.join(n for n, _ in g.ram)}"] if g.ram else []
        note = "; ".join(notes)
        print(f"{name:<13} {g.env_id:<28} {note}")
    print(f"{'toy':<13} {'(built in)':<28} tiny deterministic world for tests and examples")
    print("\nAll Atari games: frameskip 4, no sticky actions, minimal action set, reset seed 0.")
    print(
        "Any other env: --env gym:ID (a registered Gymnasium id) or --env module:factory; "
        "check it first with `goexplore check-env` (docs/custom-envs.md)."
    )
    return 0


def cmd_check_env(args) -> int:
    from goexplore.envs.check import check_env

    for name in ("steps", "states", "explore_frames"):
        if getattr(args, name) < 1:
            raise GoExploreError(f"--{name.replace('_', '-')}: must be a positive integer")
    report = check_env(
        args.env,
        env_kwargs=args.env_kwargs,
        cells=args.cells,
        steps=args.steps,
        states=args.states,
        explore_frames=args.explore_frames,
        seed=args.seed,
        log=print,
    )
    print(report.text())
    return 0 if report.ok else 1


def cmd_replay(args) -> int:
    from goexplore.phase1 import load_run

    phase1 = load_run(Path(args.run_dir))
    a = phase1.archive
    if args.cell == "all":
        from goexplore.demos import verify_archive

        played, failures = verify_archive(
            phase1.cfg.env,
            phase1.cells,
            a,
            phase1.explog,
            end_on_life=phase1.cfg.episode_end == "life",
            env_kwargs=phase1.cfg.env_kwargs,
        )
        for i, why in failures[:20]:
            print(f"cell {i}: MISMATCH: {why}")
        print(
            f"{a.n - len(failures)} of {a.n} cells VERIFIED by replay from reset "
            f"({played:,} steps played once each along the trajectory tree)"
        )
        return 0 if not failures else 1
    if args.cell == "best":
        i = a.best_trajectory()
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
    ok, why = phase1.verify_cell(i)
    print(
        f"cell {i}: archived score {a.score[i]:g}, {a.traj_len[i]} steps — "
        f"{'VERIFIED' if ok else 'MISMATCH'}: {why}"
    )
    if args.out:
        import numpy as np

        np.save(args.out, phase1.explog.trajectory(int(a.traj_last[i])))
        print(f"actions written to {args.out}")
    return 0 if ok else 1


def cmd_demo(args) -> int:
    from goexplore.export.build import export_demos

    res = export_demos(
        Path(args.run_dir),
        Path(args.out),
        top=args.top,
        select=args.select,
        diverse=args.diverse,
        dataset_id=args.dataset_id,
        obs=args.obs,
        state_every=args.state_every,
        video=args.video,
    )
    scores = ", ".join(f"{d['score']:g}" for d in res.demos)
    lengths = ", ".join(f"{d['length']:,}" for d in res.demos)
    print(
        f"dataset {res.dataset_id}: {len(res.demos)} demos, {res.steps_total:,} steps, "
        f"{res.bytes_total:,} bytes ({res.bytes_total / max(res.steps_total, 1):,.0f} B/step), "
        f"{res.seconds:.1f}s\n  scores  {scores}\n  lengths {lengths}\n  folder  {res.path}\n"
        f"load it:\n  MINARI_DATASETS_PATH={res.root.resolve()} python -c "
        f"\"import minari; ds = minari.load_dataset('{res.dataset_id}')\"\n"
        f"  or, checked file by file with emulator states: goexplore.export.minari.load_demos("
        f"'{res.dataset_id}', root='{res.root.resolve()}')"
    )
    return 0


def cmd_bench(args) -> int:
    from goexplore import bench
    from goexplore.envs import game_names

    problems = []
    if args.env not in game_names():
        problems.append(
            f"--env: unknown game {args.env!r}; choose one of: {', '.join(game_names())}"
        )
    for name in ("n_workers", "frames", "select_cells", "ckpt_cells"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')}: must be a positive integer")
    if args.segments is not None and args.segments < 1:
        problems.append("--segments: must be a positive integer")
    if args.bare_seconds <= 0:
        problems.append("--bare-seconds: must be positive")
    if problems:
        raise GoExploreError("invalid bench options:\n  " + "\n  ".join(problems))
    return bench.main(args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="goexplore", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    sub = ap.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="explore (Phase 1) and write a run dir")
    r.add_argument("--env", default=None, help="game (see `goexplore games`; default montezuma)")
    r.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="start from a documented bundle of settings (see `goexplore presets`; "
        "default reference); the flags below override it",
    )
    _add_config_args(r)
    r.add_argument(
        "--run-dir", default=None, help="where the run lives (default runs/<env>-seed<seed>)"
    )
    r.add_argument(
        "--resume",
        default=None,
        metavar="auto|PATH",
        help="continue: 'auto' (this run dir's latest checkpoint, if any), "
        "a run dir, or a checkpoint dir",
    )
    r.add_argument(
        "--branch-from",
        default=None,
        metavar="PATH",
        help="start a new run dir from another run's checkpoint (a run dir: its latest; or a "
        "checkpoint dir), keeping its settings but the selection flags given",
    )
    r.add_argument(
        "--fallback",
        action="store_true",
        help="with --resume or --branch-from: if the checkpoint is damaged, continue from "
        "the newest intact older one (default: refuse, naming the damaged files)",
    )
    r.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write the metrics as TensorBoard scalars into RUN_DIR/tb "
        "(needs tensorboardX: pip install 'goexplore[tensorboard]')",
    )
    r.set_defaults(func=cmd_run)

    g = sub.add_parser("games", help="list the supported games")
    g.set_defaults(func=cmd_games)

    ce = sub.add_parser(
        "check-env",
        help="check that an env restores exactly (deep states included); exit 1 on a problem",
    )
    ce.add_argument("env", help="a built-in game, gym:ID, or module:factory")
    ce.add_argument("--env-kwargs", default="", help="arguments for the factory, a JSON object")
    ce.add_argument("--cells", default="downscale", help="the cells it will be explored with")
    ce.add_argument("--steps", type=int, default=50, help="steps compared after each restore")
    ce.add_argument("--states", type=int, default=12, help="states checked (default 12)")
    ce.add_argument(
        "--explore-frames",
        type=int,
        default=20_000,
        help="agent steps of the short Go-Explore run that finds deep states (default 20,000)",
    )
    ce.add_argument("--seed", type=int, default=0)
    ce.set_defaults(func=cmd_check_env)

    ps = sub.add_parser("presets", help="list the presets (documented bundles of settings)")
    ps.add_argument("name", nargs="?", default=None, help="show this preset's settings")
    ps.set_defaults(func=cmd_presets)

    p = sub.add_parser(
        "replay", help="rebuild a cell's trajectory and verify it by replay from reset"
    )
    p.add_argument("run_dir")
    p.add_argument(
        "--cell",
        default="best",
        help="best (default: the highest-scoring trajectory, an episode's end included), "
        "done, a cell index, or all",
    )
    p.add_argument("--out", default=None, help="also save the actions (.npy)")
    p.set_defaults(func=cmd_replay)

    d = sub.add_parser(
        "demo",
        help="export a run's best trajectories as a Minari dataset (replay-verified from reset)",
    )
    d.add_argument("run_dir")
    d.add_argument("--top", type=int, required=True, metavar="K", help="how many demos")
    d.add_argument(
        "--select",
        choices=("done", "best"),
        default="done",
        help="done: the best end-of-episode trajectories (default); best: the best cells",
    )
    d.add_argument(
        "--diverse",
        action="store_true",
        help="prefer trajectories that share the least of their path with those already picked",
    )
    d.add_argument(
        "--out", required=True, metavar="DIR", help="datasets root (MINARI_DATASETS_PATH)"
    )
    d.add_argument(
        "--dataset-id",
        default=None,
        metavar="ID",
        help="Minari id NAMESPACE/NAME-vN (default goexplore/<game>/<run dir name>-v0)",
    )
    d.add_argument(
        "--obs",
        choices=("gray84", "rgb"),
        default="gray84",
        help="observations: 84x84 grayscale (default) or full RGB frames",
    )
    d.add_argument(
        "--state-every",
        type=int,
        default=100,
        metavar="N",
        help="store the emulator state every N steps (default 100)",
    )
    d.add_argument("--video", action="store_true", help="also write an MP4 per demo")
    d.set_defaults(func=cmd_demo)

    rp = sub.add_parser(
        "report", help="an HTML report of a run: curves, room map, best trajectory video, top cells"
    )
    rp.add_argument("run_dir")
    rp.add_argument("--out", default=None, help="output folder (default RUN_DIR/report)")
    rp.add_argument("--top", type=int, default=10, help="cells in the top-cells table (default 10)")
    rp.add_argument("--no-video", action="store_true", help="skip the best trajectory's MP4/GIF")
    rp.set_defaults(func=cmd_report)

    from goexplore.report.compare import add_parser as add_compare_parser

    add_compare_parser(sub)

    from goexplore.phase2.cli import add_parsers as add_phase2_parsers

    add_phase2_parsers(sub)

    v = sub.add_parser(
        "verify",
        help="check a run dir's integrity: checksums of checkpoints and "
        "log chunks, and every reference between them "
        "(exit 0 intact, 1 damaged)",
    )
    v.add_argument("run_dir")
    v.set_defaults(func=cmd_verify)

    b = sub.add_parser(
        "bench",
        help="throughput against the bare emulator, master cost, bytes, "
        "memory, selection and checkpoint times (see goexplore.bench)",
    )
    b.add_argument("--env", default="montezuma", help="game (default montezuma)")
    b.add_argument("--n-workers", type=int, default=2, help="worker processes (default 2)")
    b.add_argument(
        "--frames",
        type=int,
        default=2_000_000,
        help="agent steps of the pipeline run (default 2,000,000)",
    )
    b.add_argument(
        "--segments",
        type=int,
        default=None,
        help="pipeline segments, with a bare-emulator measurement between each "
        "(default: one per 250,000 steps, at most 8)",
    )
    b.add_argument(
        "--bare-seconds",
        type=float,
        default=5.0,
        help="seconds of each bare-emulator measurement (default 5)",
    )
    b.add_argument(
        "--select-cells",
        type=int,
        default=100_000,
        help="cells of the synthetic archive for the selection timing (default 100,000)",
    )
    b.add_argument(
        "--ckpt-cells",
        type=int,
        default=1_000_000,
        help="cells of the synthetic archive checkpointed and resumed (default 1,000,000)",
    )
    b.add_argument("--json", default=None, metavar="PATH", help="also write the figures as JSON")
    b.set_defaults(func=cmd_bench)
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
