"""``goexplore demo``: pick a run's best trajectories, replay each from reset
in a fresh env while recording what a trainer needs, refuse any that does not
reach its recorded score, and write them as one Minari dataset."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goexplore.errors import GoExploreError
from goexplore.export.minari import (
    OBS_KINDS,
    Demo,
    check_dataset_id,
    dataset_dir,
    default_dataset_id,
    make_staging,
    write_dataset,
)
from goexplore.export.picks import LogTree, Pick, candidates, choose

DEFAULT_STATE_EVERY = 100


@dataclass
class ExportResult:
    dataset_id: str
    root: Path
    path: Path
    demos: list[dict]
    seconds: float
    bytes_total: int
    steps_total: int


def record(
    env_name: str,
    actions: np.ndarray,
    *,
    obs: str,
    state_every: int,
    end_on_life: bool,
    video: Path | None = None,
    env_kwargs: str = "",
) -> tuple[Demo, float, int | None, bool]:
    """Play ``actions`` from reset in a fresh env, keeping observations, lives
    and a state every ``state_every`` steps. Returns (demo, replayed score,
    step of an episode end before the last step or None, last step ended it)."""
    import cv2

    from goexplore.envs import make_env

    env = make_env(env_name, env_kwargs)
    writer = None
    if video is not None:
        from goexplore.report.media import VideoWriter

        writer = VideoWriter(video, None, len(actions) + 1)

    def observe(frame: np.ndarray) -> np.ndarray:
        if obs == "rgb":
            return np.array(env.render_rgb(), copy=True)
        return cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)

    try:
        frame = env.reset()
        observations = [observe(frame)]
        lives = [env.lives()]
        steps, states = [0], [env.clone_state()]
        if writer:
            writer(env.render_rgb())
        rewards = np.zeros(len(actions), np.float64)
        early, done = None, False
        for t, a in enumerate(np.asarray(actions).tolist()):
            frame, r, terminated, now = env.step(int(a))
            rewards[t] = r
            done = bool(terminated) or (end_on_life and now < lives[-1])
            if done and t < len(actions) - 1 and early is None:
                early = t
            observations.append(observe(frame))
            lives.append(now)
            if (t + 1) % state_every == 0 and t + 1 < len(actions):
                steps.append(t + 1)
                states.append(env.clone_state())
            if writer:
                writer(env.render_rgb())
        demo = Demo(
            actions=np.asarray(actions, np.int64),
            rewards=rewards,
            observations=np.stack(observations),
            lives=np.asarray(lives, np.int64),
            done=done,
            state_steps=np.asarray(steps, np.int64),
            states=states,
            meta={},
        )
        return demo, float(rewards.sum()), early, done
    finally:
        if writer:
            writer.close()
        env.close()


def export_demos(
    run_dir: Path,
    out: Path,
    *,
    top: int,
    select: str = "done",
    diverse: bool = False,
    dataset_id: str | None = None,
    obs: str = "gray84",
    state_every: int = DEFAULT_STATE_EVERY,
    video: bool = False,
    log=print,
) -> ExportResult:
    from goexplore.phase1 import PROTOCOL, load_run

    if obs not in OBS_KINDS:
        raise GoExploreError(f"--obs {obs!r}: choose one of: {', '.join(OBS_KINDS)}")
    if state_every < 1:
        raise GoExploreError(f"--state-every {state_every}: must be at least 1")
    if top < 1:
        raise GoExploreError(f"--top {top}: must be at least 1")
    t0 = time.perf_counter()
    phase1 = load_run(Path(run_dir))
    cfg = phase1.cfg
    dataset_id = dataset_id or default_dataset_id(cfg.env, Path(run_dir))
    check_dataset_id(dataset_id)
    out = Path(out)
    if dataset_dir(out, dataset_id).exists():
        raise GoExploreError(
            f"dataset {dataset_id!r} already exists in {out}; choose another --dataset-id "
            "(or version) or remove it"
        )
    created = not out.exists()
    staging = make_staging(out)  # fails early, by name, on an unwritable --out
    ok = False
    try:
        tree = LogTree(phase1.explog.all_entries())
        pool = candidates(tree, phase1.archive, select)
        what = "end-of-episode trajectories" if select == "done" else "cells"
        if not pool:
            raise GoExploreError(
                f"{run_dir}: no scoring {what} (every one has score 0); nothing to export"
            )
        if top > len(pool):
            raise GoExploreError(
                f"--top {top}: {run_dir} has only {len(pool)} scoring {what} "
                f"(best {pool[0].score:g}); ask for at most {len(pool)}"
            )
        picks = choose(tree, pool, top, diverse)
        demos, videos, failures = [], [], []
        for i, p in enumerate(picks):
            actions = phase1.explog.trajectory(p.last)
            vid = staging / f"demo_{i:02d}.mp4" if video else None
            demo, score, early, done = record(
                cfg.env,
                actions,
                obs=obs,
                state_every=state_every,
                end_on_life=cfg.episode_end == "life",
                video=vid,
                env_kwargs=cfg.env_kwargs,
            )
            why = _mismatch(p, score, early, done)
            if why:
                failures.append(f"demo {i} ({p.source}): {why}")
                continue
            demo.meta.update(_demo_meta(p))
            demos.append(demo)
            if vid is not None:
                videos.append(vid)
            shared = f", shares {p.shared:,} steps with earlier picks" if diverse and i else ""
            log(
                f"demo {i + 1}/{len(picks)}: {p.source}, {p.length:,} steps, score {p.score:g} "
                f"VERIFIED by replay from reset{shared}"
            )
        if failures:
            raise GoExploreError(
                "refusing to export demos that do not replay to their recorded score "
                "(nothing was written):\n  " + "\n  ".join(failures)
            )
        about = env_about(cfg.env, cfg.env_kwargs)
        spec = about.spec
        meta = {
            "description": (
                f"Go-Explore Phase 1 demos of {cfg.env} from run {Path(run_dir).resolve().name}: "
                f"{len(demos)} trajectories ({select}{', diverse' if diverse else ''}), "
                f"replay-verified from reset. {PROTOCOL}."
            ),
            "format": "goexplore-demos/1",
            "game": cfg.env,
            "env_id": spec.id if spec is not None else None,
            "env_kwargs": cfg.env_kwargs,
            "env_settings": about.settings,
            "observations": (
                "full RGB screens (the env's render_rgb)"
                if obs == "rgb"
                else "84x84 grayscale: cv2.resize(grayscale screen, (84, 84), INTER_AREA), as "
                "gymnasium AtariPreprocessing(frame_skip=1, screen_size=84, noop_max=0)"
                if spec is not None and spec.id.startswith("ALE/")
                else "84x84: cv2.resize(the frame the env returns, (84, 84), INTER_AREA)"
            ),
            "episode_end": cfg.episode_end,
            "state_every": state_every,
            "select": select,
            "diverse": diverse,
            "demos": [d.meta for d in demos],
            "run_dir": str(Path(run_dir).resolve()),
            "run_config": cfg.to_json(),
            "protocol": PROTOCOL,
            "requirements": about.requirements,
        }
        path = write_dataset(
            out,
            dataset_id,
            demos,
            env_spec=spec,
            obs=obs,
            n_actions=about.n_actions,
            metadata=meta,
            videos=videos,
            staging=staging,
        )
        ok = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not ok:
            shutil.rmtree(out, ignore_errors=True)  # made by us, holds nothing else
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return ExportResult(
        dataset_id,
        out,
        path,
        [d.meta for d in demos],
        time.perf_counter() - t0,
        size,
        sum(len(d.actions) for d in demos),
    )


def _mismatch(p: Pick, score: float, early: int | None, done: bool) -> str:
    problems = []
    # the experience log keeps rewards as float32: a non-integer score summed from it
    # differs from the replay's float64 sum in the last digits (Atari's integer
    # scores are equal exactly)
    if abs(score - p.score) > 1e-6 * max(1.0, abs(score)):
        problems.append(f"replayed score {score:g} != recorded {p.score:g}")
    if early is not None:
        problems.append(f"the episode ended at step {early}, before the last step")
    if done != p.done:
        problems.append(
            "the last step ends the episode, the run recorded no end"
            if done
            else "the last step does not end the episode as recorded"
        )
    return "; ".join(problems)


def _demo_meta(p: Pick) -> dict:
    return {
        "score": p.score,
        "length": p.length,
        "ends_episode": p.done,
        "source": p.source,
        "explog_entry": p.last,
        "cell": -1 if p.cell is None else p.cell,
        "shared_steps": p.shared,
    }


@dataclass(frozen=True)
class EnvAbout:
    """What a dataset records about the env its demos were played in (the env says)."""

    n_actions: int
    settings: dict
    requirements: list[str]
    spec: object  # a Gymnasium EnvSpec, or None


def env_about(name: str, env_kwargs: str = "") -> EnvAbout:
    """Ask the env: its actions, settings, packages (pinned to the installed
    versions) and Gymnasium spec. An env that says nothing records none."""
    from importlib.metadata import PackageNotFoundError, version

    from goexplore.envs import make_env

    env = make_env(name, env_kwargs)
    try:
        reqs = []
        for pkg in getattr(env, "requirements", ()):
            try:
                reqs.append(f"{pkg}=={version(pkg)}")
            except PackageNotFoundError:
                reqs.append(pkg)
        spec_fn = getattr(env, "gym_spec", None)
        return EnvAbout(
            int(env.n_actions),
            dict(getattr(env, "settings", {})),
            reqs,
            spec_fn() if spec_fn is not None else None,
        )
    finally:
        env.close()
