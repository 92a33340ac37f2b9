"""``goexplore evaluate``: a robustified policy playing from reset under the standard
stochastic protocol: sticky actions (0.25 by default) and, for Atari, up to 30
random no-ops at the start; an Atari episode runs to game over or 27,000 agent
steps (108,000 frames). These are RL-protocol scores, unlike Phase 1's."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from goexplore.errors import GoExploreError
from goexplore.phase2.robustify import PROTOCOL, _load_weights, build_model, load_policy, make_venv


def evaluate(
    policy_dir: Path,
    *,
    episodes: int = 30,
    sticky: float = 0.25,
    noops: int | None = None,
    seed: int = 1_000_000,
    deterministic: bool = False,
    video: Path | None = None,
    log=print,
) -> dict:
    """Play ``episodes`` from reset; the result as ``--json`` writes it."""
    if episodes < 1:
        raise GoExploreError(f"--episodes {episodes}: must be at least 1")
    if not 0 <= sticky < 1:
        raise GoExploreError(f"--sticky {sticky}: a probability in [0, 1)")
    doc, weights = load_policy(Path(policy_dir))
    spec = {**doc, "sticky": sticky, "noops": doc["noops"] if noops is None else noops}
    venv = make_venv(spec, 1, [], None, seed, evaluate=True)
    model = build_model(spec, venv, seed, "cpu")
    _load_weights(model, weights)
    inner = venv.unwrapped.envs[0]  # the Phase2Env under the frame stack
    writer = None
    if video is not None:
        from goexplore.report.media import VideoWriter

        writer = VideoWriter(Path(video), None, 1000)
    t0 = time.perf_counter()
    scores, lengths = [], []
    try:
        for ep in range(episodes):
            venv.seed(seed + ep)
            obs = venv.reset()
            if writer is not None and ep == 0:
                writer(inner.render())
            while True:
                action, _ = model.predict(obs, deterministic=deterministic)
                obs, _, dones, infos = venv.step(action)
                if writer is not None and ep == 0 and not dones[0]:
                    writer(inner.render())
                if dones[0]:
                    end = infos[0]["episode_end"]
                    scores.append(float(end["return"]))
                    lengths.append(int(end["steps"]))
                    break
            log(f"episode {ep + 1}/{episodes}: score {scores[-1]:g} in {lengths[-1]:,} steps")
    finally:
        if writer is not None:
            writer.close()
        venv.close()
    target = doc["target"]
    result = {
        "policy_dir": str(Path(policy_dir).resolve()),
        "env": doc["env"],
        "episodes": episodes,
        "mean_score": float(np.mean(scores)),
        "median_score": float(statistics.median(scores)),
        "std_score": float(np.std(scores)),
        "min_score": min(scores),
        "max_score": max(scores),
        "success_rate": float(np.mean([s >= target * (1 - doc["margin"]) for s in scores])),
        "success_score": target * (1 - doc["margin"]),
        "mean_length": float(np.mean(lengths)),
        "scores": scores,
        "sticky": sticky,
        "noops": spec["noops"],
        "deterministic": deterministic,
        "frames_trained": doc["frames_trained"],
        "no_demo": doc.get("no_demo", False),
        "protocol": PROTOCOL,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    return result


def write_json(result: dict, path: Path) -> None:
    from goexplore.store import write_text_atomic

    write_text_atomic(Path(path), json.dumps(result, indent=1) + "\n")
