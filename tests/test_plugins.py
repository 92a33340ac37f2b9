"""Your own env: names in every form, in every process and command; the Gymnasium
adapter; facts cells; check-env; the Python API."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from runutil import ROOT, cli_env
from test_envs import _play

import goexplore
from goexplore.cells.facts import FactCells, parse_bins
from goexplore.config import Config
from goexplore.envs.gym import GymnasiumEnv, to_frame
from goexplore.errors import ConfigError, EnvError
from goexplore.plugins import make_env

TESTS = Path(__file__).parent
pytest.importorskip("minigrid")


def ge(*args, pythonpath=True, timeout=300):
    env = cli_env()
    if pythonpath:
        env["PYTHONPATH"] = str(TESTS) + os.pathsep + env["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_env_names_resolve_in_every_form():
    assert make_env("toy").n_actions > 0
    mg = make_env("gym:MiniGrid-DoorKey-5x5-v0")
    assert isinstance(mg, GymnasiumEnv) and mg.state_mode == "minigrid"
    assert mg.fact_names == ("x", "y", "dir", "carrying", "doors_open", "keys_left")
    assert make_env("plugin_envs:make_maze", '{"goal_reward": 2}').goal_reward == 2


@pytest.mark.parametrize(
    "name, kwargs, error, words",
    [
        ("nomodule_here:make", None, ConfigError, "PYTHONPATH"),
        ("plugin_envs:nothing", None, ConfigError, "has no attribute 'nothing'"),
        ("plugin_envs:make_not_an_env", None, EnvError, "neither a Gymnasium env nor"),
        ("plugin_envs:make_maze", '{"goal_reward": ', ConfigError, "not valid JSON"),
        ("plugin_envs:make_maze", "[1]", ConfigError, "must be a JSON object"),
        ("plugin_envs:make_maze", '{"size": 3}', ConfigError, "rejects env-kwargs"),
        ("plugin_envs:make_gym_box_actions", None, EnvError, "must be Discrete"),
        ("gym:NoSuchEnv-v0", None, EnvError, "NoSuchEnv"),
        ("what", None, ConfigError, "gym:ID for a Gymnasium env, or module:factory"),
    ],
)
def test_a_bad_env_is_one_named_error(name, kwargs, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace("[", r"\[")):
        make_env(name, kwargs)


def test_a_fact_out_of_int16_is_a_named_error():
    env = make_env("plugin_envs:make_gym_huge_fact")
    env.reset()
    with pytest.raises(EnvError, match="fact 'x' = 70000 is not an integer within int16"):
        env.step(0)


@pytest.mark.parametrize("mode", ["minigrid", "replay"])
def test_the_gymnasium_adapter_restores_exactly(mode):
    """A state cloned after a random prefix, restored in a fresh instance, continues
    exactly as the original does (frames, rewards, termination, facts)."""
    rng = np.random.default_rng(1)
    a = GymnasiumEnv("MiniGrid-DoorKey-5x5-v0", state=mode)
    a.reset()
    _play(a, rng.integers(0, a.n_actions, 30))
    state = a.clone_state()
    actions = rng.integers(0, a.n_actions, 40)
    truth = _play(a, actions)
    b = GymnasiumEnv("MiniGrid-DoorKey-5x5-v0", state=mode)
    b.reset()
    b.restore_state(state)
    again = _play(b, actions)
    assert len(again) == len(truth)
    for x, y in zip(truth, again):
        assert np.array_equal(x[0], y[0]) and x[1:] == y[1:]
    assert b.replayed_steps == (30 if mode == "replay" else 0)
    assert b.fact_names == a.fact_names == ("x", "y", "dir", "carrying", "doors_open", "keys_left")
    b.restore_state(state)
    assert b.clone_state() == state  # clone -> restore -> clone is byte-stable


def test_rgb_frames_become_grey_for_the_downscale_cells():
    rgb = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    grey = to_frame(rgb)
    want = rgb.astype(float) @ np.array([0.299, 0.587, 0.114])
    assert grey.shape == (6, 5) and grey.dtype == np.uint8
    assert np.abs(grey.astype(float) - want).max() <= 1.0
    assert to_frame({"image": rgb}).shape == (6, 5)


def test_facts_cells_key_on_binned_facts():
    cfg = Config(env="plugin_envs:make_maze", cells="facts", fact_bins="x=2,door_open=0")
    rep = FactCells.from_config(cfg, ("x", "y", "has_key", "door_open"))
    key = rep.keyer()(None, (5, 3, 1, 1))
    assert rep.key_size == 6 and rep.values(key) == {"x": 2, "y": 3, "has_key": 1}
    assert rep.describe(key) == "x=4-5 y=3 has_key=1"
    assert parse_bins(" x=2, y=1 ") == {"x": 2, "y": 1}
    with pytest.raises(ConfigError, match="NAME=BIN"):
        parse_bins("x:2")
    bad = Config(env="plugin_envs:make_maze", cells="facts", fact_bins="z=2").problems()
    assert any("z not among the env's facts (x, y, has_key, door_open)" in p for p in bad)
    assert any(
        "reports no facts" in p for p in Config(env="gym:CartPole-v1", cells="facts").problems()
    )


def test_a_plugin_env_runs_in_worker_processes_and_every_command_reads_it(tmp_path):
    """module:factory with kwargs, two worker processes: the goal is found; config.json
    holds strings; replay shows the goal's trajectory (not the root cell); report and
    verify read the run; and one worker gives the same run."""
    runs = {}
    for workers in (2, 1):
        d = tmp_path / f"w{workers}"
        p = ge(
            "run", "--env", "plugin_envs:make_maze", "--env-kwargs", '{"goal_reward": 0.7}',
            "--cells", "facts", "--total-frames", "100000", "--n-workers", str(workers),
            "--run-dir", str(d),
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        runs[workers] = json.loads((d / "final.json").read_text())
    d, final = tmp_path / "w2", runs[2]
    assert re.search(r"best score +0\.7 ", p.stdout)  # the goal's score, though no cell has it
    assert final["best_done_score"] == final["best_score"] == 0.7 > final["max_archive_score"]
    assert final["emulator_frames_total"] is None and final["replayed_steps"] is None
    assert final["verification"]["sample"]["ok"] and len(final["verification"]["sample"]["cells"])
    assert final["verified"] is True
    for k in ("n_cells", "best_done_score", "max_archive_score", "explog_entries", "batches"):
        assert runs[1][k] == runs[2][k], k
    cfg = json.loads((d / "config.json").read_text())
    assert (cfg["env"], cfg["env_kwargs"]) == ("plugin_envs:make_maze", '{"goal_reward": 0.7}')
    r = ge("replay", str(d))
    assert r.returncode == 0 and "archived score 0.7," in r.stdout and "VERIFIED" in r.stdout
    assert ge("replay", str(d), "--cell", "all").returncode == 0
    assert ge("verify", str(d)).returncode == 0
    rep = ge("report", str(d), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    demo = ge("demo", str(d), "--top", "1", "--out", str(tmp_path / "demos"))
    assert demo.returncode == 0, demo.stderr  # a non-integer score (float32 in the log)
    # without the module on PYTHONPATH: one clear error, nothing written
    p = ge("run", "--env", "plugin_envs:make_maze", "--cells", "facts", "--run-dir",
           str(tmp_path / "x"), pythonpath=False)  # fmt: skip
    assert p.returncode == 2 and "PYTHONPATH" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "x").exists()


def test_check_env_finds_a_state_that_forgets_the_door():
    good = goexplore.check_env("plugin_envs:make_maze", cells="facts", explore_frames=5000)
    assert good.ok, good.text()
    assert good.deep_states > 0 and good.states_checked >= 8
    leaky = goexplore.check_env("plugin_envs:make_leaky_maze", cells="facts", explore_frames=5000)
    assert not leaky.ok
    assert "misses part of the world" in leaky.text()
    mg = ge(
        "check-env", "gym:MiniGrid-DoorKey-5x5-v0", "--cells", "facts", "--explore-frames", "3000"
    )
    assert mg.returncode == 0 and "OK" in mg.stdout, mg.stdout + mg.stderr
    bad = ge("check-env", "gym:CartPole-v1")
    assert bad.returncode == 1 and "2-D uint8" in bad.stdout


def test_the_python_api_explores_a_factory(tmp_path):
    from plugin_envs import make_maze

    seen = []
    run = goexplore.explore(
        make_maze, cells="facts", steps=100_000, run_dir=tmp_path / "r", progress=seen.append
    )
    final = json.loads((tmp_path / "r" / "final.json").read_text())
    assert run.verified and run.best_score == final["best_score"] == 1.0
    assert run.n_cells == final["n_cells"] > 1 and run.steps == final["frames_total"]
    # the callback heard every batch, in order, up to the end
    assert [p.frames for p in seen] == sorted(p.frames for p in seen)
    assert len(seen) == final["batches"] and seen[-1].frames == run.steps
    with pytest.raises(ConfigError, match="n_workers=1"):
        goexplore.explore(make_maze, cells="facts", n_workers=2, run_dir=tmp_path / "s")
    with pytest.raises(ConfigError, match="unknown settings"):
        goexplore.explore("toy", run_dir=tmp_path / "t", celz="facts")
    with pytest.raises(ConfigError, match="steps="):
        goexplore.explore("toy", run_dir=tmp_path / "t", total_frames=10)


def _play_from_reset(env, actions):
    env.reset()
    score, out = 0.0, None
    for a in actions.tolist():
        out = env.step(int(a))
        score += out[1]
    return score, out


def test_a_run_read_back_gives_trajectories_cells_and_restores_that_replay(tmp_path):
    """load(): the best trajectory and the cell table agree with a replay from reset
    in a fresh env, and an env restored to a cell continues as the replayed one does."""
    d = tmp_path / "r"
    assert ge(
        "run", "--env", "plugin_envs:make_maze", "--cells", "facts", "--total-frames", "60000",
        "--run-dir", str(d),
    ).returncode == 0  # fmt: skip
    run = goexplore.load(d)
    assert run.config.env == "plugin_envs:make_maze" and "cells" in repr(run)
    best = run.best()
    assert best.actions.dtype == np.uint8 and len(best) == len(best.actions) > 0
    env = run.make_env()
    score, (_, _, done, _) = _play_from_reset(env, best.actions)
    assert score == best.score == run.best_score and done == best.ends_episode
    table = run.cells()
    n = run.n_cells
    assert all(len(col) == n for col in table.values())
    assert {"cell", "key", "score", "length", "x", "y"} <= set(table)
    rng = np.random.default_rng(0)
    live = np.flatnonzero(~table["ends_episode"])
    for i in rng.choice(live, 6, replace=False).tolist():
        t = run.trajectory(i)
        assert len(t) == table["length"][i]
        score, _ = _play_from_reset(env, t.actions)
        assert score == table["score"][i]
        assert list(env.facts()) == [int(table[f][i]) for f in run.fact_names]
        # restoring the archived state continues exactly as the replayed env does
        there = run.env_at(i)
        for a in rng.integers(env.n_actions, size=20).tolist():
            f1, r1, d1, _ = env.step(a)
            f2, r2, d2, _ = there.step(a)
            assert (r1, d1, env.facts()) == (r2, d2, there.facts())
            np.testing.assert_array_equal(f1, f2)
            if d1:
                break
        there.close()
    env.close()
    with pytest.raises(goexplore.GoExploreError, match="out of range"):
        run.trajectory(n)


def test_an_env_that_saves_its_own_state_is_used_through_get_state():
    env = make_env("plugin_envs:make_gym_counter")
    assert env.state_mode == "env" and env.fact_names == ("pos",)
    env.reset()
    env.step(1), env.step(1)
    state = env.clone_state()
    env.step(1)
    other = make_env("plugin_envs:make_gym_counter")
    other.restore_state(state)
    assert other.step(1)[0].argmax() == 3 and other.facts() == (3,)
    assert goexplore.check_env("plugin_envs:make_gym_counter", explore_frames=2000).ok


def test_the_minigrid_preset_solves_doorkey_and_every_command_reads_the_run(tmp_path):
    """--preset minigrid on DoorKey-5x5: the goal is found and replay-verified; the
    report draws the grid map; the demo dataset records MiniGrid's spec and package,
    and its actions, stepped in the env Minari rebuilds from that spec, earn its rewards."""
    from goexplore.export.build import export_demos
    from goexplore.export.minari import load_demos

    d = tmp_path / "r"
    p = ge(
        "run", "--env", "gym:MiniGrid-DoorKey-5x5-v0", "--preset", "minigrid",
        "--total-frames", "100000", "--n-workers", "1", "--run-dir", str(d),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    final = json.loads((d / "final.json").read_text())
    cfg = json.loads((d / "config.json").read_text())
    assert (cfg["cells"], cfg["episode_end"], cfg["preset"]) == ("facts", "game", "minigrid")
    assert final["best_done_score"] > 0.5 and final["verified"]
    rep = ge("report", str(d), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0 and "map: 1 room(s) reached" in rep.stdout + rep.stderr
    assert (tmp_path / "rep" / "map.png").stat().st_size > 0
    res = export_demos(d, tmp_path / "ds", top=2, log=lambda *a: None)
    demos = load_demos(res.dataset_id, root=tmp_path / "ds")
    info = demos.dataset.storage.metadata["goexplore"]
    assert info["env_id"] == "MiniGrid-DoorKey-5x5-v0"
    assert any(r.startswith("minigrid==") for r in info["requirements"])
    assert info["env_settings"] == {"reset_seed": 0, "state": "minigrid"}
    env = demos.dataset.recover_environment()
    for ep in demos.dataset.iterate_episodes():
        env.reset(seed=0)
        rewards = [env.step(int(a))[1] for a in ep.actions]
        np.testing.assert_allclose(rewards, ep.rewards, rtol=1e-6)
        assert sum(rewards) > 0.5
    env.close()
    bad = ge("run", "--env", "montezuma", "--preset", "minigrid", "--run-dir", str(tmp_path / "x"))
    assert bad.returncode == 2 and "made for --env gym:MiniGrid-*" in bad.stderr


def _face(u, target) -> None:
    """Stand the agent on a free square next to ``target``'s position, facing it."""
    tx, ty = (int(v) for v in target)
    for d, (dx, dy) in enumerate(((1, 0), (0, 1), (-1, 0), (0, -1))):
        x, y = tx - dx, ty - dy
        cell = u.grid.get(x, y)
        if cell is None or cell.can_overlap():
            u.agent_pos, u.agent_dir = (x, y), d
            return
    raise AssertionError(f"no free square next to {target}")


@pytest.mark.parametrize(
    "env_id", ["MiniGrid-KeyCorridorS6R3-v0", "MiniGrid-ObstructedMaze-1Dlhb-v0"]
)
def test_the_minigrid_codec_keeps_box_contents_and_the_envs_own_object_references(env_id):
    """A state restored into an instance reset to another layout: the target ball is
    the env's own object again (success compares identities), and boxes hold what
    they held. The same moves made in the original and the restored env (face the
    ball and pick it up; open every box) give the same reward and the same world."""
    from goexplore.envs.gym import GymnasiumEnv

    a = make_env(f"gym:{env_id}")
    a.reset()
    b = GymnasiumEnv(env_id, seed=7)
    b.reset()  # another layout: the restore must replace all of it
    b.restore_state(a.clone_state())
    ua, ub = a._env.unwrapped, b._env.unwrapped
    assert ub.obj is ub.grid.get(*ub.obj.cur_pos)  # the ball on the grid, not a copy
    c = GymnasiumEnv(env_id, seed=3)  # a restored state cloned again (Go-Explore's case)
    c.reset()
    c.restore_state(b.clone_state())
    uc = c._env.unwrapped
    assert uc.obj is uc.grid.get(*uc.obj.cur_pos) and c.clone_state() == b.clone_state()
    boxes = [(x, y) for x, y in np.argwhere(ua.grid.encode()[..., 0] == 7).tolist()]
    for x, y in boxes:  # OBJECT_TO_IDX["box"] == 7
        ha, hb = ua.grid.get(x, y).contains, ub.grid.get(x, y).contains
        assert (ha is None) == (hb is None) and (ha is None or ha.encode() == hb.encode())
    assert env_id.endswith("1Dlhb-v0") == bool(boxes)  # the maze hides its key in a box
    for x, y in boxes:
        for u in (ua, ub):
            u.grid.get(x, y).toggle(u, (x, y))  # a box opens into what it held
    np.testing.assert_array_equal(ua.grid.encode(), ub.grid.encode())
    for u in (ua, ub):
        _face(u, ua.obj.cur_pos)
    ra, rb = a.step(3), b.step(3)  # pickup
    assert ra[1] == rb[1] > 0 and ra[2] and rb[2]


def test_minigrid_facts_count_what_the_grid_encoding_shows():
    """The fast facts agree with MiniGrid's own grid encoding along random play."""
    from minigrid.core.constants import OBJECT_TO_IDX

    from goexplore.envs.gym import minigrid_facts

    for env_id in ("MiniGrid-DoorKey-8x8-v0", "MiniGrid-MultiRoom-N4-S5-v1"):
        env = make_env(f"gym:{env_id}")
        env.reset()
        u = env._env.unwrapped
        rng = np.random.default_rng(1)
        opened = 0
        for _ in range(600):
            env.step(int(rng.integers(env.n_actions)))
            g = u.grid.encode()
            doors = g[..., 0] == OBJECT_TO_IDX["door"]
            f = minigrid_facts(u)
            assert f["doors_open"] == int((doors & (g[..., 2] == 0)).sum())
            assert f["keys_left"] == int((g[..., 0] == OBJECT_TO_IDX["key"]).sum())
            opened = max(opened, f["doors_open"])
        assert opened > 0 or env_id.startswith("MiniGrid-DoorKey")  # some door got opened
