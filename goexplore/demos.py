"""Rebuild trajectories from the experience log and verify them by replay
from reset in a fresh environment: the check behind every reported score."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.cells import score_keyer
from goexplore.envs import make_env


@dataclass
class Replay:
    score: float
    length: int
    key: bytes | None  # cell key of the last frame (None if the last step ended a life)
    done: bool  # the last step lost a life or ended the game
    early_done_at: int | None  # a step before the last that lost a life (should be None)
    frames: list | None = None  # RGB frames (reset + every step) when asked for


def replay(
    env_name: str,
    actions,
    cells,
    *,
    keep_frames: bool = False,
    end_on_life: bool = True,
    env_kwargs: str = "",
) -> Replay:
    """Play ``actions`` from reset; sum the raw rewards and key the final frame
    (keying every step: a representation may carry context along the path).
    An episode ends at game over, and at a life loss with ``end_on_life``."""
    env = make_env(env_name, env_kwargs)
    try:
        frame = env.reset()
        lives = env.lives()
        key_of = score_keyer(cells)
        score, done, early, key = 0.0, False, None, None
        frames = [env.render_rgb().copy()] if keep_frames else None
        n = len(actions)
        for t, a in enumerate(np.asarray(actions).tolist()):
            frame, reward, terminated, now = env.step(int(a))
            score += reward
            done = bool(terminated) or (end_on_life and now < lives)
            if done and t < n - 1 and early is None:
                early = t
            lives = now
            key = None if done else key_of(frame, env.facts(), score)
            if keep_frames:
                frames.append(env.render_rgb().copy())
        if n == 0:
            key = key_of(frame, env.facts(), score)
        return Replay(score, n, key, done, early, frames)
    finally:
        env.close()


def verify_cell(
    env_name: str,
    cells,
    actions,
    *,
    key: bytes,
    score: float,
    length: int,
    is_done: bool,
    end_on_life: bool = True,
    env_kwargs: str = "",
) -> tuple[bool, str]:
    """Does the trajectory reach this cell with this score? (ok, explanation)"""
    r = replay(env_name, actions, cells, end_on_life=end_on_life, env_kwargs=env_kwargs)
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


def verify_archive(
    env_name: str, cells, archive, explog, end_on_life: bool = True, env_kwargs: str = ""
) -> tuple[int, list[tuple[int, str]]]:
    """Replay-verify EVERY cell in one pass: the cells' trajectories form a tree
    in the experience log, and a depth-first walk from reset plays each of its
    steps once, going back to a branch point by restoring a state this very
    replay produced (never an archived one). A key is computed from the
    previous step's key (which holds any context the representation carries).
    Returns (steps played, failures)."""
    from goexplore.cells import DONE_KEY

    targets: dict[int, list[int]] = {}
    for i in range(archive.n):
        targets.setdefault(int(archive.traj_last[i]), []).append(i)
    children: dict[int, list[int]] = {}
    seen = {-1}
    for node in targets:
        while node not in seen:
            seen.add(node)
            prev = explog.entry(node)[0]
            children.setdefault(prev, []).append(node)
            node = prev
    failures: list[tuple[int, str]] = []

    def check(i: int, score: float, depth: int, key, done: bool, early: bool) -> None:
        want_done = archive.key_of(i) == DONE_KEY
        problems = []
        if depth != int(archive.traj_len[i]):
            problems.append(f"length {depth} != archived {int(archive.traj_len[i])}")
        if score != float(archive.score[i]):
            problems.append(f"replayed score {score:g} != archived {float(archive.score[i]):g}")
        if early:
            problems.append("a life was lost before the end")
        if want_done != done or (not want_done and key != archive.key_of(i)):
            problems.append("the final frame does not belong to the cell")
        if problems:
            failures.append((i, "; ".join(problems)))

    env = make_env(env_name, env_kwargs)
    try:
        frame = env.reset()
        root_key = cells.keyer()(frame, env.facts())
        for i in targets.get(-1, []):
            check(i, 0.0, 0, root_key, False, False)
        # stack of (node, state to restore or None, score, lives, depth, early, last key)
        stack = [(c, None, 0.0, env.lives(), 0, False, b"") for c in reversed(children.get(-1, []))]
        if len(stack) > 1:
            root = env.clone_state()
            stack = [(c, root, *rest) for c, _, *rest in stack]
        played = 0
        while stack:
            node, state, score, lives, depth, early, last = stack.pop()
            if state is not None:
                env.restore_state(state)
            frame, reward, terminated, now = env.step(explog.entry(node)[1])
            played += 1
            done = bool(terminated) or (end_on_life and now < lives)
            score += reward
            key = None if done else score_keyer(cells, last)(frame, env.facts(), score)
            depth += 1
            for i in targets.get(node, []):
                check(i, score, depth, key, done, early)
            kids = children.get(node, [])
            if not kids:
                continue
            early = early or done
            if key is not None:
                last = key
            branch = env.clone_state() if len(kids) > 1 else None
            for c in reversed(kids[1:]):
                stack.append((c, branch, score, now, depth, early, last))
            stack.append((kids[0], None, score, now, depth, early, last))
        return played, failures
    finally:
        env.close()
