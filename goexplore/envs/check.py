"""Does an env meet what Go-Explore needs? (``goexplore check-env``, ``check_env``)

Go-Explore returns to a cell by restoring its state, so a state that forgets part
of the world (a door, a key, a timer) silently corrupts every result. The checks:

* the env's attributes: ``n_actions`` in 1..256, fact names, room and level facts;
* ``reset()`` is deterministic: two fresh instances give the same frame, facts and
  the same steps under the same actions;
* for each checked state: clone -> restore -> clone is byte-stable, and the state
  restored **in a fresh instance** continues exactly as in the instance that made
  it (frames, rewards, termination, lives, facts) for ``steps`` actions;
* the states include deep ones, found by a short Go-Explore run of the env itself,
  not only states of random play from reset (a door random play never opens is
  exactly what a leaky state forgets);
* frames suit the cells (a 2-D uint8 frame for the downscale cells), facts are in
  range, and keys have the representation's size.

Each problem is one line saying what was wrong and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from goexplore.envs.gym import FACT_MAX, FACT_MIN
from goexplore.errors import GoExploreError


@dataclass
class EnvCheck:
    """What :func:`check_env` found."""

    env: str
    problems: list[str] = field(default_factory=list)
    states_checked: int = 0
    deep_states: int = 0  # of them, from the short Go-Explore run
    cells_found: int = 0  # by the short Go-Explore run
    steps_compared: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        head = (
            f"{self.env}: {'OK' if self.ok else 'PROBLEMS'} — {self.states_checked} states "
            f"({self.deep_states} from a short Go-Explore run, {self.cells_found} cells), "
            f"{self.steps_compared:,} steps compared"
        )
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


def _frame_problem(frame, cells: str) -> str | None:
    a = np.asarray(frame)
    if cells in ("downscale", "downscale-dynamic"):
        if a.ndim != 2 or a.dtype != np.uint8:
            return (
                f"frame: the {cells} cells need a 2-D uint8 (grey) frame, got "
                f"{a.dtype} of shape {a.shape}; return a grey frame, or use --cells facts"
            )
    return None


def _play(env, state: bytes | None, actions) -> list[tuple]:
    if state is not None:
        env.restore_state(state)
    out = []
    for a in actions:
        frame, reward, terminated, lives = env.step(int(a))
        out.append(
            (
                np.array(frame, copy=True),
                float(reward),
                bool(terminated),
                int(lives),
                tuple(env.facts()),
            )
        )
        if terminated:
            break
    return out


def _first_difference(a: list[tuple], b: list[tuple]) -> str | None:
    names = ("frame", "reward", "termination", "lives", "facts")
    for t, (x, y) in enumerate(zip(a, b)):
        for name, u, v in zip(names, x, y):
            same = np.array_equal(u, v) if name == "frame" else u == v
            if not same:
                return f"step {t + 1}: {name} differs"
    if len(a) != len(b):
        return f"one episode ended after {min(len(a), len(b))} steps, the other did not"
    return None


def check_env(
    env: str | Callable[..., Any],
    *,
    env_kwargs: str | dict | None = None,
    cells: str = "downscale",
    steps: int = 50,
    states: int = 12,
    explore_frames: int = 20_000,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> EnvCheck:
    """Check the env ``env`` (a name as ``--env`` takes, or a factory) with ``cells``.

    ``states`` states are checked: reset, random play from reset, and the deepest
    cells of a short Go-Explore run of ``explore_frames`` agent steps; each is
    continued for ``steps`` random actions in the instance that made it and in a
    fresh one."""
    from goexplore.config import Config
    from goexplore.plugins import kwargs_text, make_env, parse_kwargs, register_env

    name = (
        env
        if isinstance(env, str)
        else register_env(getattr(env, "__name__", "env").replace(":", "_") or "env", env)
    )
    kw = parse_kwargs(env_kwargs)
    report = EnvCheck(name)
    say = log or (lambda line: None)

    def fresh():
        return make_env(name, kw)

    rng = np.random.default_rng(seed)
    a_env = fresh()
    try:
        n = getattr(a_env, "n_actions", None)
        if not isinstance(n, (int, np.integer)) or not 1 <= n <= 256:
            report.problems.append(f"n_actions: must be an integer in 1..256, got {n!r}")
            return report
        names = tuple(a_env.fact_names)
        for attr in ("room_fact", "level_fact"):
            f = getattr(a_env, attr, None)
            if f is not None and f not in names:
                report.problems.append(f"{attr}: {f!r} is not one of the facts {list(names)}")
        # reset determinism, frames, facts and keys
        frame0 = np.array(a_env.reset(), copy=True)
        facts0 = tuple(a_env.facts())
        p = _frame_problem(frame0, cells)
        if p:
            report.problems.append(p)
        for nm, v in zip(names, facts0):
            if not isinstance(v, (int, np.integer)) or not FACT_MIN <= v <= FACT_MAX:
                report.problems.append(f"fact {nm!r} = {v!r}: facts must be integers within int16")
        if len(facts0) != len(names):
            report.problems.append(
                f"facts(): {len(facts0)} values for {len(names)} fact names {list(names)}"
            )
        cfg = Config(env=name, env_kwargs=kwargs_text(kw), cells=cells, seed=seed)
        cfg_problems = cfg.problems()
        if cfg_problems:
            report.problems += cfg_problems
            return report
        actions = rng.integers(0, n, steps)
        b_env = fresh()
        try:
            frame_b = b_env.reset()
            if not np.array_equal(frame0, frame_b) or tuple(b_env.facts()) != facts0:
                report.problems.append("reset: two fresh instances start differently")
            a_env.reset()
            da = _first_difference(_play(a_env, None, actions), _play(b_env, None, actions))
            if da:
                report.problems.append(
                    f"reset is not deterministic: the same actions give a different {da}"
                )
            report.steps_compared += len(actions)
        finally:
            b_env.close()
        if report.problems:
            return report
        # the states: reset, random play, and a short Go-Explore run's deepest cells, each
        # reached by playing its actions from reset (the truth a restore must match)
        pool: list[tuple[str, np.ndarray]] = [("reset", np.zeros(0, np.int64))]
        for depth in (10, 50, 200):
            pool.append((f"random play ({depth} steps)", rng.integers(0, n, depth)))
        deep = _deep_prefixes(cfg, explore_frames, max(1, states - len(pool)), report)
        say(
            f"check-env: a short Go-Explore run of {explore_frames:,} steps found "
            f"{report.cells_found} cells"
        )
        pool += deep
        report.deep_states = len(deep)
        for where, prefix in pool[:states]:
            problem = _check_state(fresh, a_env, prefix, rng.integers(0, n, steps), report)
            report.states_checked += 1
            if problem:
                report.problems.append(f"state from {where}: {problem}")
                if len(report.problems) >= 5:
                    break
    finally:
        a_env.close()
    return report


def _check_state(fresh, a_env, prefix, actions, report: EnvCheck) -> str | None:
    """Reach the state by playing ``prefix`` from reset in a fresh instance, clone it
    and continue with ``actions`` there (the truth); then restore the clone in the
    long-lived instance and in another fresh one and continue alike."""
    t_env = fresh()
    try:
        t_env.reset()
        for a in prefix:
            *_, terminated, _lives = t_env.step(int(a))
            if terminated:
                return None  # the prefix ended the episode: nothing to continue
        state = t_env.clone_state()
        truth = _play(t_env, None, actions)
    finally:
        t_env.close()
    a_env.restore_state(state)
    s1 = a_env.clone_state()
    a_env.restore_state(s1)
    if a_env.clone_state() != s1:
        return "clone -> restore -> clone is not byte-stable"
    report.steps_compared += len(truth)
    for how, env, close in (
        ("in the same instance", a_env, False),
        ("in a fresh instance", None, True),
    ):
        if env is None:
            env = fresh()
            env.reset()
            env.step(int(actions[0]))  # moved away from its reset
        try:
            d = _first_difference(truth, _play(env, state, actions))
        finally:
            if close:
                env.close()
        if d:
            return (
                f"restored {how}, it continues differently from the original ({d}): the "
                "state misses part of the world (clone_state must capture all that step() reads)"
            )
    return None


def _deep_prefixes(cfg, frames: int, n: int, report: EnvCheck) -> list[tuple[str, np.ndarray]]:
    from goexplore.phase1 import Phase1

    try:
        p = Phase1(cfg.replace(total_frames=frames, n_workers=1, ckpt_every=0), None)
        p.seed_root()
        p.run()
    except GoExploreError as e:
        report.problems.append(f"a short Go-Explore run failed: {e}")
        return []
    a = p.archive
    live = np.flatnonzero(~a.is_done[: a.n])
    report.cells_found = len(live)
    order = live[np.lexsort((live, -a.traj_len[live]))][:n]  # deepest first
    return [
        (
            f"Go-Explore cell {int(i)} ({int(a.traj_len[i])} steps deep)",
            p.explog.trajectory(int(a.traj_last[i])),
        )
        for i in order
    ]
