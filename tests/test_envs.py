"""Conformance of every env adapter with the RestorableEnv protocol."""

from __future__ import annotations

import numpy as np
import pytest

from goexplore.errors import ConfigError
from goexplore.envs import GAMES, RestorableEnv, game_names, make_env

FAST = ["toy", "montezuma"]
ALL_ATARI = [g for g in GAMES if g != "montezuma"]


def _play(env, actions):
    out = []
    for a in actions:
        frame, r, term, lives = env.step(int(a))
        out.append((frame.copy(), r, term, lives, env.facts()))
        if term:
            break
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1:] == y[1:]


def _conformance(name, n=60):
    env = make_env(name)
    assert isinstance(env, RestorableEnv)
    rng = np.random.default_rng(0)
    acts = rng.integers(env.n_actions, size=3 * n)
    f0 = env.reset().copy()
    first = _play(env, acts[:n])
    f1 = env.reset().copy()
    np.testing.assert_array_equal(f0, f1)  # reset is deterministic
    _same(_play(env, acts[:n]), first)
    s = env.clone_state()
    env.restore_state(s)
    assert env.clone_state() == s  # clone->restore->clone stable
    ahead = _play(env, acts[n:])
    _play(env, acts[:7])  # wander off, then come back
    env.restore_state(s)
    _same(_play(env, acts[n:]), ahead)  # restore then replay: identical
    env2 = make_env(name)  # a state moves between envs
    env2.reset()
    env2.restore_state(s)
    _same(_play(env2, acts[n:]), ahead)
    assert len(env.facts()) == len(env.fact_names)
    assert env.room_fact is None or env.room_fact in env.fact_names
    assert env.level_fact is None or env.level_fact in env.fact_names
    env.close()
    env2.close()


@pytest.mark.parametrize("name", FAST)
def test_conformance(name):
    _conformance(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_ATARI)
def test_conformance_all_games(name):
    _conformance(name, n=40)


def test_atari_step_equals_gymnasium():
    """Our direct ALE stepping gives exactly Gymnasium's AtariEnv.step."""
    from ale_py.env import AtariEnv as GymAtari

    ours = make_env("montezuma")
    ref = GymAtari(
        game="montezuma_revenge",
        frameskip=4,
        repeat_action_probability=0.0,
        obs_type="grayscale",
        full_action_space=False,
        max_num_frames_per_episode=0,
    )
    np.testing.assert_array_equal(ours.reset(), ref.reset(seed=0)[0])
    rng = np.random.default_rng(1)
    for a in rng.integers(ours.n_actions, size=300).tolist():
        f, r, t, lives = ours.step(a)
        g, r2, t2, _, info = ref.step(a)
        np.testing.assert_array_equal(f, g)
        assert (r, t, lives) == (r2, t2, info["lives"])


def test_unknown_env_lists_choices():
    with pytest.raises(ConfigError, match="montezuma.*gym:ID.*module:factory"):
        make_env("nope")
    assert "toy" in game_names() and "montezuma" in game_names()
