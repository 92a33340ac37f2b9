"""Domain-knowledge cells and the RAM facts they read, checked on the games."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from goexplore.cells import REGISTRY, make_cells, representation_class
from goexplore.cells.domain import MontezumaCells, PitfallCells, keys_held
from goexplore.config import Config
from goexplore.envs import GAMES, make_env

KEY_DOOR = Path(__file__).parent / "data" / "montezuma_key_door.txt"
RIGHT, LEFT = 3, 4  # minimal action set indices (NOOP, FIRE, UP, RIGHT, LEFT, ...)


def _actions() -> list[int]:
    return [int(a) for a in KEY_DOOR.read_text().splitlines()[1].split()]


def test_montezuma_facts_at_reset_and_walking():
    env = make_env("montezuma")
    try:
        env.reset()
        env.step(0)
        assert env.fact_names == ("room", "x", "y", "level", "inventory")
        room, x, y, level, inv = env.facts()
        assert (room, level, inv) == (1, 0, 0) and y == 235
        xs = [env.step(RIGHT) and env.facts()[1] for _ in range(3)]
        assert xs == [x + 4, x + 8, x + 12]  # 4 pixels per agent step
    finally:
        env.close()


def test_montezuma_key_and_door_show_in_ram_and_in_the_key():
    """The first key sets inventory bit 0x02 with +100 in room 1; the door clears it
    with +300. The domain-knowledge key counts the key and remembers room 1."""
    env, keyer = make_env("montezuma"), MontezumaCells().keyer()
    try:
        env.reset()
        events, key = [], None
        for t, a in enumerate(_actions()):
            _, r, _, _ = env.step(a)
            f = env.facts()
            key = keyer(None, f)
            if r:
                events.append((t, r, f[0], f[4], key[4], bytes(key[5 : 5 + key[4]])))
            assert f[3] == 0  # still the first level
        assert events == [(221, 100.0, 1, 0x02, 1, b"\x01"), (507, 300.0, 1, 0, 0, b"")]
    finally:
        env.close()


def test_key_rooms_carry_over_from_the_chosen_cell():
    rep = MontezumaCells(x_bin=8, y_bin=16)
    start = bytes((0, 4, 3, 10, 2, 5, 7, 255))  # holds two keys, from rooms 5 and 7
    k = rep.keyer(start)
    two, three, one = 0x02 | 0x04, 0x02 | 0x04 | 0x08, 0x02
    assert k(None, (9, 80, 200, 0, two)) == bytes((0, 9, 10, 12, 2, 5, 7, 255))
    assert k(None, (9, 80, 200, 0, three)) == bytes((0, 9, 10, 12, 3, 5, 7, 9))
    assert k(None, (11, 16, 148, 1, one)) == bytes((1, 11, 2, 9, 1, 5, 255, 255))
    # from reset: no keys, whatever bits outside the key mask are set
    assert rep.keyer()(None, (1, 77, 235, 0, 0x81))[4] == 0
    assert "keys: room 5, room 7" in rep.describe(start)
    assert rep.place(start)[:5] == (0, 4, 3, 10, 2)


def test_keys_held_counts_as_the_key_does():
    """The array reading of an inventory byte gives the key's count for all 256 bytes."""
    inventory = np.arange(256, dtype=np.int64)
    fresh = [MontezumaCells().keyer()(None, (1, 77, 235, 0, v))[4] for v in range(256)]
    assert keys_held(inventory).tolist() == fresh
    assert keys_held(np.array([0x81, 0x0E, 0x04])).tolist() == [0, 3, 1]


def test_pitfall_facts_and_key():
    env = make_env("pitfall")
    try:
        env.reset()
        env.step(0)
        scene, x, y, treasures = env.facts()
        assert (scene, y, treasures) == (196, 32, 31)
        for _ in range(60):  # walk off the left edge
            env.step(LEFT)
        assert env.facts()[0] == 226  # the shift register's left neighbour
        key = PitfallCells().keyer()(None, env.facts())
        assert key[0] == 226 and key[1] == 31 and len(key) == PitfallCells.key_size
    finally:
        env.close()


def test_games_without_facts_have_no_rooms():
    assert GAMES["venture"].ram == () and GAMES["venture"].room_fact is None
    env = make_env("venture")
    try:
        env.reset()
        env.step(0)
        assert env.fact_names == () and env.facts() == () and env.room_fact is None
    finally:
        env.close()


def test_registry_and_config_choose_the_representation():
    want = {"downscale", "downscale-dynamic", "montezuma-dk", "pitfall-dk", "facts"}
    assert set(REGISTRY) == want
    assert isinstance(make_cells(Config()), representation_class("downscale"))
    rep = make_cells(Config(cells="montezuma-dk", cell_x_bin=4, cell_y_bin=8))
    assert (rep.x_bin, rep.y_bin) == (4, 8)


@pytest.mark.parametrize(
    "changes,words",
    [
        ({"cells": "nope"}, "unknown representation"),
        ({"cells": "pitfall-dk"}, "needs the facts (scene"),  # env montezuma
        ({"env": "venture", "cells": "montezuma-dk"}, "has (none)"),
        ({"cells": "montezuma-dk", "cell_x_bin": 0}, "cell-x-bin"),
        ({"episode_end": "death"}, "episode-end"),
        ({"seen_weight": 0.0}, "at least one of"),
        ({"horiz_weight": -1.0}, "horiz-weight"),
    ],
)
def test_bad_cell_settings_are_named(changes, words):
    problems = Config(**changes).problems()
    assert any(words in p for p in problems), problems


def test_no_emulator_banner(tmp_path):
    """ALE prints "A.L.E: ... [Powered by Stella]" when an emulator starts, in every
    process; goexplore silences it through ale-py's logger setting."""
    import subprocess
    import sys

    code = (
        "from goexplore.envs import make_env\n"
        "e = make_env('montezuma'); e.reset(); e.step(0); print('stepped')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "stepped" in r.stdout, r.stderr
    assert "Stella" not in r.stdout + r.stderr and "A.L.E" not in r.stdout + r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "goexplore.cli",
            "run",
            "--env",
            "montezuma",
            "--total-frames",
            "100",
            "--batch-cells",
            "2",
            "--n-workers",
            "2",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "Stella" not in r.stdout + r.stderr
