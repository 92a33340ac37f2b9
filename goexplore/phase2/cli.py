"""The ``robustify`` and ``evaluate`` subcommands (torch is imported only when they run)."""

from __future__ import annotations

import json
from pathlib import Path

from goexplore.phase2.curriculum import AT_POINT, START_FROM_END, STEP_FRACTION, THRESHOLD, WINDOW


def add_parsers(sub) -> None:
    r = sub.add_parser(
        "robustify",
        help="Phase 2: train a policy from a run's demos (backward curriculum, PPO) that "
        "plays from reset under sticky actions",
    )
    r.add_argument("source", help="a run dir, or a demo dataset id (see --dataset-root)")
    r.add_argument("--out", required=True, metavar="DIR", help="output dir (policy, checkpoints)")
    r.add_argument("--frames", type=int, default=1_000_000, help="policy steps (default 1,000,000)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--sticky", type=float, default=0.25, help="sticky-action probability (default 0.25)"
    )
    r.add_argument(
        "--noops", type=int, default=-1, help="random no-ops at a reset (default 30 Atari, 0 else)"
    )
    r.add_argument("--demos", type=int, default=4, metavar="K", help="demos to sample (default 4)")
    r.add_argument(
        "--target-score",
        type=float,
        default=None,
        metavar="S",
        help="demos: the shortest trajectories reaching score S, cut where they reach it "
        "(e.g. 100: Montezuma's first key)",
    )
    r.add_argument(
        "--no-demo", action="store_true", help="the control: every episode starts from reset"
    )
    r.add_argument(
        "--success-margin",
        type=float,
        default=-1.0,
        help="a success may fall short of the demo's score by this share (default 0 for "
        "Atari, 0.1 for others: MiniGrid's reward shrinks with time)",
    )
    r.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    r.add_argument("--n-envs", type=int, default=8, help="parallel envs (default 8)")
    r.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help=f"success share that moves a start point back (default {THRESHOLD})",
    )
    r.add_argument("--window", type=int, default=WINDOW, help=f"episodes judged (default {WINDOW})")
    r.add_argument(
        "--start-from-end",
        type=int,
        default=START_FROM_END,
        help=f"first start point, in steps before the demo's end (default {START_FROM_END})",
    )
    r.add_argument(
        "--step-fraction",
        type=float,
        default=STEP_FRACTION,
        help=f"how far a start point moves back, as a share of the demo (default {STEP_FRACTION})",
    )
    r.add_argument(
        "--at-point",
        type=float,
        default=AT_POINT,
        help=f"share of episodes started at the point; the rest start later along the demo "
        f"(default {AT_POINT})",
    )
    r.add_argument(
        "--ckpt-every", type=int, default=100_000, help="checkpoint every N steps (default 100k)"
    )
    r.add_argument("--dataset-root", default=None, help="root of a dataset SOURCE")
    r.add_argument("--resume", action="store_true", help="continue the run in --out")
    r.add_argument(
        "--tensorboard", action="store_true", help="the curriculum curve as TensorBoard scalars"
    )
    r.set_defaults(func=cmd_robustify)

    e = sub.add_parser(
        "evaluate",
        help="Phase 2: play a robustified policy from reset under sticky actions (RL protocol)",
    )
    e.add_argument("policy_dir")
    e.add_argument("--episodes", type=int, default=30, help="episodes (default 30)")
    e.add_argument("--sticky", type=float, default=0.25, help="sticky actions (default 0.25)")
    e.add_argument(
        "--noops", type=int, default=None, help="random no-ops (default: as trained: 30 Atari)"
    )
    e.add_argument("--seed", type=int, default=1_000_000, help="first episode's seed")
    e.add_argument(
        "--deterministic", action="store_true", help="take the likeliest action (default: sample)"
    )
    e.add_argument("--json", default=None, metavar="PATH", help="write the result as JSON")
    e.add_argument("--video", default=None, metavar="MP4", help="film the first episode")
    e.set_defaults(func=cmd_evaluate)


def cmd_robustify(args) -> int:
    from goexplore.phase2.robustify import Settings, robustify

    s = Settings(
        source=args.source,
        frames=args.frames,
        seed=args.seed,
        sticky=args.sticky,
        noops=args.noops,
        demos=args.demos,
        target_score=args.target_score,
        no_demo=args.no_demo,
        success_margin=args.success_margin,
        device=args.device,
        n_envs=args.n_envs,
        threshold=args.threshold,
        window=args.window,
        start_from_end=args.start_from_end,
        step_fraction=args.step_fraction,
        at_point=args.at_point,
        ckpt_every=args.ckpt_every,
        dataset_root=args.dataset_root,
        tensorboard=args.tensorboard,
    )
    doc = robustify(s, Path(args.out), resume=args.resume, log=lambda m: print(m, flush=True))
    where = (
        "from reset"
        if doc["reached_reset"]
        else "not yet from reset"
        if doc["curriculum"]
        else "control"
    )
    print(
        f"done: {doc['frames_trained']:,} policy steps; curriculum {where}\n"
        f"  policy  {Path(args.out) / 'policy.json'}\n"
        f"  next:   goexplore evaluate {args.out} --episodes 30"
    )
    return 0


def cmd_evaluate(args) -> int:
    from goexplore.phase2.evaluate import evaluate, write_json

    res = evaluate(
        Path(args.policy_dir),
        episodes=args.episodes,
        sticky=args.sticky,
        noops=args.noops,
        seed=args.seed,
        deterministic=args.deterministic,
        video=Path(args.video) if args.video else None,
    )
    if args.json:
        write_json(res, Path(args.json))
    print(
        f"{res['env']}: {res['episodes']} episodes from reset, sticky {res['sticky']}, "
        f"no-ops up to {res['noops']}\n"
        f"  mean score {res['mean_score']:g}  median {res['median_score']:g}  "
        f"success rate {res['success_rate']:.2f} (score >= {res['success_score']:g})  "
        f"mean length {res['mean_length']:,.0f}\n"
        f"  ({res['protocol']})"
    )
    if args.json:
        print(f"  json: {args.json}")
    print(json.dumps({k: res[k] for k in ("mean_score", "success_rate")}))
    return 0
