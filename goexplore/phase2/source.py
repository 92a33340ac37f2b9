"""Where Phase 2's demos come from: a Phase 1 run dir (its best trajectories, picked
as ``goexplore demo`` picks them) or a demo dataset written by ``goexplore demo``.

Either way each demo is replayed from reset in a fresh env and refused unless it
earns its recorded score; the replay keeps every step's state and observation.
``target_score`` cuts each demo at the first step where its score reaches the
target (Montezuma's first key: 100), the shortest prefix that does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goexplore.errors import GoExploreError
from goexplore.phase2.envs import Demo, Observer, record_demo


@dataclass
class Source:
    env: str  # the env's name, as config.json records it
    env_kwargs: str
    episode_end: str  # "life" or "game": how the demos' episodes ended
    trajectories: list[tuple[np.ndarray, float, str]]  # (actions, recorded score, source)


def read_source(
    source: str | Path, k: int, root: Path | None = None, target_score: float | None = None
) -> Source:
    """The best ``k`` scoring trajectories of a run dir (with ``target_score``: the
    ``k`` shortest that reach it), or a dataset's demos (``source``: a Minari id such
    as ``goexplore/toy/run-v0``, under ``root``)."""
    p = Path(source)
    if (p / "config.json").exists():
        return _from_run(p, k, target_score)
    from goexplore.export.minari import check_dataset_id

    try:
        check_dataset_id(str(source))
    except GoExploreError:
        raise GoExploreError(
            f"{source}: not found as a run dir (no config.json there), nor a demo dataset "
            "id (NAMESPACE/NAME-vN, e.g. goexplore/key_maze/run-v0, with --dataset-root)"
        ) from None
    return _from_dataset(str(source), k, root)


def _from_run(run_dir: Path, k: int, target_score: float | None = None) -> Source:
    from goexplore.export.picks import LogTree, candidates, choose
    from goexplore.phase1 import load_run

    phase1 = load_run(run_dir)
    cfg = phase1.cfg
    if target_score is not None:
        # each cell keeps the shortest trajectory to its best score: the shortest
        # trajectories that reach the target end in the shortest such cells
        a = phase1.archive
        ok = np.flatnonzero(a.score[: a.n] >= target_score)
        if not len(ok):
            raise GoExploreError(
                f"{run_dir}: no trajectory reaches score {target_score:g} "
                f"(best {a.max_archive_score:g})"
            )
        ok = ok[np.lexsort((ok, a.traj_len[ok]))][:k]
        trajs = [
            (
                phase1.explog.trajectory(int(a.traj_last[i])),
                float(a.score[i]),
                f"{run_dir}: cell {int(i)}",
            )
            for i in ok
        ]
        return Source(cfg.env, cfg.env_kwargs, cfg.episode_end, trajs)
    tree = LogTree(phase1.explog.all_entries())
    pool = candidates(tree, phase1.archive, "done") or candidates(tree, phase1.archive, "best")
    if not pool:
        raise GoExploreError(
            f"{run_dir}: no scoring trajectory (every cell and episode end has score 0); "
            "Phase 2 needs a demo that scores"
        )
    picks = choose(tree, pool, min(k, len(pool)), diverse=True)
    trajs = [(phase1.explog.trajectory(p.last), p.score, f"{run_dir}: {p.source}") for p in picks]
    return Source(cfg.env, cfg.env_kwargs, cfg.episode_end, trajs)


def _from_dataset(dataset_id: str, k: int, root: Path | None) -> Source:
    from goexplore.export.minari import load_demos

    demos = load_demos(dataset_id, root)
    meta = demos.metadata
    if not len(demos):
        raise GoExploreError(f"dataset {dataset_id!r} holds no demos")
    trajs = []
    for e, ep in enumerate(demos.dataset.iterate_episodes()):
        if e >= k:
            break
        trajs.append(
            (np.asarray(ep.actions), float(np.sum(ep.rewards)), f"{dataset_id} episode {e}")
        )
    cfg = meta.get("run_config", {})
    return Source(
        str(meta["game"]),
        str(meta.get("env_kwargs", cfg.get("env_kwargs", "")) or ""),
        str(meta.get("episode_end", "life")),
        trajs,
    )


def build_demos(
    src: Source, observer_kind: str | None, target_score: float | None = None
) -> tuple[list[Demo], str]:
    """Replay the source's trajectories into demos (no sticky actions), each checked
    against its recorded score; returns (demos, the observation kind)."""
    from goexplore.phase2.envs import default_obs, make_base_env

    env = make_base_env(src.env, src.env_kwargs, 0.0)
    try:
        kind = observer_kind or default_obs(env)
        observer = Observer(kind, env)
        demos = []
        for actions, score, where in src.trajectories:
            d = record_demo(env, observer, actions, where)
            if abs(d.score - score) > 1e-6 * max(1.0, abs(score)):
                raise GoExploreError(
                    f"{where}: replays to score {d.score:g} from reset, recorded {score:g}; "
                    "refusing a demo that does not reproduce"
                )
            if target_score is not None:
                cum = np.cumsum(d.rewards)
                hit = np.flatnonzero(cum >= target_score)
                if not len(hit):
                    continue  # this demo never reaches the target
                n = int(hit[0]) + 1
                d = Demo(
                    d.actions[:n], d.rewards[:n], d.states[: n + 1], d.obs[: n + 1],
                    d.lives[: n + 1], f"{where}, cut at score {float(cum[n - 1]):g}",
                )  # fmt: skip
            if d.score <= 0:
                continue
            demos.append(d)
    finally:
        env.close()
    if not demos:
        raise GoExploreError(
            "no demo scores"
            + (f" {target_score:g}" if target_score is not None else " above 0")
            + "; nothing to robustify"
        )
    demos.sort(key=len)
    return demos, kind
