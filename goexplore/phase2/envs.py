"""The env Phase 2 trains and evaluates in: a goexplore env as a Gymnasium env whose
episodes start along a demo (the backward curriculum) or from reset, under sticky
actions and random no-ops.

Observations (``obs``), chosen by the env unless given:

* ``atari84``: the grey screen resized to 84x84 (INTER_AREA), one channel; the
  policy stacks 4 of them (Atari);
* ``minigrid``: what the agent sees, MiniGrid's own 7x7 egocentric view (object,
  colour, state per square; the carried object in the agent's square), and its
  compass direction one-hot: the standard MiniGrid input, for a small network;
* ``facts``: the env's integer facts (any env that reports facts);
* ``frame84``: the env's frame resized to 84x84 (anything else).

Sticky actions: for Atari, ALE's own ``repeat_action_probability`` (each emulator
frame repeats the previous action with that probability: the standard protocol,
Machado et al. 2018); for other envs, each agent step repeats the previous action
with that probability. No-ops: an episode from reset starts with a random number,
0..``noops``, of action 0 (Atari's NOOP).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from goexplore.errors import GoExploreError

OBS_KINDS = ("atari84", "minigrid", "facts", "frame84")
ATARI_MAX_STEPS = 27_000  # agent steps: ALE's 108,000-frame cap, the standard evaluation limit


def is_atari(env: Any) -> bool:
    from goexplore.envs.atari import AtariEnv

    return isinstance(env, AtariEnv)


def default_obs(env: Any) -> str:
    if is_atari(env):
        return "atari84"
    if getattr(env, "minigrid", False):
        return "minigrid"
    if env.fact_names:
        return "facts"
    return "frame84"


def make_base_env(name: str, env_kwargs: str, sticky: float) -> Any:
    """The goexplore env; Atari with ALE's sticky actions built in."""
    from goexplore.plugins import make_env, parse_kwargs

    kw = parse_kwargs(env_kwargs)
    from goexplore.envs.atari import GAMES

    if name in GAMES:
        kw["sticky"] = sticky
    return make_env(name, kw)


class Observer:
    """Env -> policy observation, for one observation kind."""

    def __init__(self, kind: str, env: Any):
        if kind not in OBS_KINDS:
            raise GoExploreError(f"obs {kind!r}: choose one of {', '.join(OBS_KINDS)}")
        self.kind = kind
        if kind in ("atari84", "frame84"):
            self.space = gym.spaces.Box(0, 255, (84, 84, 1), np.uint8)
        elif kind == "minigrid":
            if default_obs(env) != "minigrid":
                raise GoExploreError("obs 'minigrid' needs a MiniGrid env")
            u = env.unwrapped
            n = u.agent_view_size**2 * 3 + 4
            self.space = gym.spaces.Box(0, 255, (n,), np.float32)
        else:
            if not env.fact_names:
                raise GoExploreError("obs 'facts': the env reports no facts")
            n = len(env.fact_names)
            self.space = gym.spaces.Box(-(2**15), 2**15 - 1, (n,), np.float32)

    def __call__(self, env: Any, frame: np.ndarray) -> np.ndarray:
        k = self.kind
        if k in ("atari84", "frame84"):
            import cv2

            f = np.asarray(frame)
            if f.dtype != np.uint8:
                f = np.clip(f, 0, 255).astype(np.uint8)
            if f.ndim == 1:
                f = f.reshape(1, -1)
            return cv2.resize(f, (84, 84), interpolation=cv2.INTER_AREA)[..., None]
        if k == "minigrid":
            u = env.unwrapped
            view = u.gen_obs()["image"].ravel().astype(np.float32)
            compass = np.zeros(4, np.float32)
            compass[u.agent_dir] = 1.0
            return np.concatenate([view, compass])
        return np.asarray(env.facts(), np.float32)


@dataclass
class Demo:
    """A demo as Phase 2 needs it: per step, the state, the observation, lives."""

    actions: np.ndarray  # agent steps
    rewards: np.ndarray  # per step
    states: list[bytes]  # states[t]: the env's state after t steps (0: reset)
    obs: np.ndarray  # obs[t]: the policy observation after t steps
    lives: np.ndarray  # lives[t]
    source: str

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def score(self) -> float:
        return float(self.rewards.sum())

    def remaining(self, t: int) -> float:
        return float(self.rewards[t:].sum())


def record_demo(env: Any, observer: Observer, actions: np.ndarray, source: str) -> Demo:
    """Play ``actions`` from reset in ``env`` (no sticky actions: a demo is the
    deterministic trajectory), keeping every step's state, observation and lives."""
    frame = env.reset()
    states, obs, lives = [env.clone_state()], [observer(env, frame)], [env.lives()]
    rewards = np.zeros(len(actions), np.float64)
    for t, a in enumerate(np.asarray(actions).tolist()):
        frame, r, _, now = env.step(int(a))
        rewards[t] = r
        states.append(env.clone_state())
        obs.append(observer(env, frame))
        lives.append(now)
    return Demo(
        np.asarray(actions, np.uint8), rewards, states, np.stack(obs), np.asarray(lives), source
    )


class Phase2Env(gym.Env):
    """Episodes start at the curriculum's point along a sampled demo (restored to the
    demo's state there), or from reset (no demos, or the point at 0), with random
    no-ops. An episode ends at game over, at a life loss with ``end_on_life``, when
    it has earned what the demo earned from its start, less ``margin`` of it (a
    success: a reward that shrinks with time, as MiniGrid's, needs a margin), or after the
    demo's remaining steps plus ``slack`` (from reset without demos: ``max_steps``).
    Every episode's end reports ``info["episode_end"] = {demo, start, success, return}``.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        name: str,
        env_kwargs: str = "",
        *,
        demos: list[Demo] | None = None,
        curriculum=None,
        obs: str | None = None,
        sticky: float = 0.25,
        noops: int = 0,
        end_on_life: bool = False,
        reward_scale: float = 1.0,
        slack: float = 1.0,
        max_steps: int | None = None,
        target: float | None = None,
        margin: float = 0.0,
    ):
        self.env = make_base_env(name, env_kwargs, sticky)
        self.atari = is_atari(self.env)
        self.observer = Observer(obs or default_obs(self.env), self.env)
        self.observation_space = self.observer.space
        self.action_space = gym.spaces.Discrete(int(self.env.n_actions))
        self.demos = demos or []
        self.curriculum = curriculum
        self.sticky, self.noops, self.end_on_life = sticky, noops, end_on_life
        self.reward_scale, self.slack = reward_scale, slack
        #: an episode succeeds when its return reaches the target less this share of it
        self.margin = margin
        self.max_steps = max_steps or (ATARI_MAX_STEPS if self.atari else None)
        #: the score that counts as a success from reset (default: the best demo's)
        self.target = (
            target if target is not None else max((d.score for d in self.demos), default=None)
        )
        self.rng = np.random.default_rng()
        self._prev = 0
        self._ep: dict = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        i, t = -1, 0
        if self.demos:
            i = int(self.rng.integers(len(self.demos)))
            t = self.curriculum.start(i, self.rng) if self.curriculum is not None else 0
        if t > 0:
            d = self.demos[i]
            self.env.restore_state(d.states[t])  # the screen shows it only after a step
            ob, lives = d.obs[t], int(d.lives[t])
            target, limit = d.remaining(t), int((len(d) - t) * (1 + self.slack)) + 10
        else:
            if self.atari:
                self.env.reset_seed = int(self.rng.integers(2**31))
            frame = self.env.reset()
            for _ in range(int(self.rng.integers(self.noops + 1)) if self.noops else 0):
                frame, _, _, _ = self.env.step(0)
            ob, lives = self.observer(self.env, frame), self.env.lives()
            d = self.demos[i] if i >= 0 else None
            target = d.score if d is not None else self.target
            limit = (
                int(len(d) * (1 + self.slack)) + 10 if d is not None and not self.atari else None
            )
            if self.max_steps is not None:
                limit = self.max_steps if limit is None else min(limit, self.max_steps)
        self._prev = 0
        self._ep = {
            "demo": i,
            "start": t,
            "target": target,
            "limit": limit,
            "lives": lives,
            "ret": 0.0,
            "steps": 0,
        }
        return ob, {}

    def step(self, action):
        a = int(action)
        if not self.atari and self.sticky and self.rng.random() < self.sticky:
            a = self._prev  # ALE does this itself, per emulator frame
        self._prev = a
        frame, r, terminated, lives = self.env.step(a)
        e = self._ep
        e["ret"] += r
        e["steps"] += 1
        lost = self.end_on_life and lives < e["lives"]
        e["lives"] = lives
        tgt = e["target"]
        success = tgt is not None and tgt > 0 and e["ret"] >= tgt - self.margin * tgt
        done = bool(terminated) or lost or (success and e["demo"] >= 0)
        truncated = not done and e["limit"] is not None and e["steps"] >= e["limit"]
        info: dict = {}
        if done or truncated:
            info["episode_end"] = {
                "demo": e["demo"],
                "start": e["start"],
                "success": bool(success),
                "return": e["ret"],
                "steps": e["steps"],
            }
        return self.observer(self.env, frame), r * self.reward_scale, done, truncated, info

    def render(self):
        return self.env.render_rgb()

    def close(self):
        self.env.close()
