"""Rebuild trajectories from the experience log and verify them by replay
from reset in a fresh environment: the check behind every reported score."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.envs import make_env


@dataclass
class Replay:
    score: float
    length: int
    key: bytes | None          # cell key of the last frame (None if the last step ended a life)
    done: bool                 # the last step lost a life or ended the game
    early_done_at: int | None  # a step before the last that lost a life (should be None)
    frames: list | None = None # RGB frames (reset + every step) when asked for


def replay(env_name: str, actions, cells, *, keep_frames: bool = False) -> Replay:
    """Play ``actions`` from reset; sum the raw rewards and key the final frame."""
    env = make_env(env_name)
    try:
        frame = env.reset()
        lives = env.lives()
        score, done, early = 0.0, False, None
        frames = [env.render_rgb().copy()] if keep_frames else None
        n = len(actions)
        for t, a in enumerate(np.asarray(actions).tolist()):
            frame, reward, terminated, now = env.step(int(a))
            score += reward
            done = bool(terminated) or now < lives
            if done and t < n - 1 and early is None:
                early = t
            lives = now
            if keep_frames:
                frames.append(env.render_rgb().copy())
        key = None if done else cells.key(frame)
        return Replay(score, n, key, done, early, frames)
    finally:
        env.close()


def verify_cell(env_name: str, cells, actions, *, key: bytes, score: float, length: int,
                is_done: bool) -> tuple[bool, str]:
    """Does the trajectory reach this cell with this score? (ok, explanation)"""
    r = replay(env_name, actions, cells)
    problems = []
    if r.length != length:
        problems.append(f"length {r.length} != archived {length}")
    if r.score != score:
        problems.append(f"replayed score {r.score:g} != archived {score:g}")
    if r.early_done_at is not None:
        problems.append(f"a life was lost at step {r.early_done_at}, before the end")
    if is_done and not r.done:
        problems.append("the trajectory of the DONE cell does not end an episode")
    if not is_done and r.key != key:
        problems.append("the final frame's cell key differs from the archived key")
    if problems:
        return False, "; ".join(problems)
    return True, f"replayed {r.length} steps from reset: score {r.score:g} as archived"
