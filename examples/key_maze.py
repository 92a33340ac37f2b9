"""A user's own environment, in its own file: a small key-and-door maze as a
Gymnasium env that goexplore explores without a change to goexplore.

The agent (A) starts top left; the goal (G) is behind a locked door (D), which
opens when the agent walks into it holding the key (K). Reaching the goal ends the
episode with reward 1; 500 steps end it with nothing. Random play almost never
gets there; Go-Explore does in well under 100,000 steps.

What goexplore needs from it, and where it is here:

* a discrete action space and a deterministic ``reset(seed=...)`` / ``step``;
* ``get_state()`` / ``set_state(state)`` returning and taking bytes or a numpy
  array: the whole state, so a restore in a fresh instance continues exactly
  (``goexplore check-env key_maze:make_env`` checks it; without them goexplore
  returns to a state by replaying its actions, which costs time);
* integer facts in ``info`` for ``--cells facts``, named when the env is wrapped.

Run it (from the repository root):

    PYTHONPATH=examples goexplore check-env key_maze:make_env --cells facts
    PYTHONPATH=examples goexplore run --env key_maze:make_env --cells facts \\
        --episode-end game --n-workers 2 --total-frames 200000 --run-dir runs/key_maze
    python examples/explore_key_maze.py runs/key_maze_api
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

MAZE = (
    "###############",
    "#A..#....#....#",
    "#.#.#.##.#.##.#",
    "#.#...#..D..#G#",
    "#.#####.##..#.#",
    "#.....#..#..#.#",
    "####.##.K#....#",
    "#.......##....#",
    "###############",
)
MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))  # up, right, down, left
TILE = 8  # pixels per square in the frame


def _find(ch: str) -> tuple[int, int]:
    for y, row in enumerate(MAZE):
        if ch in row:
            return row.index(ch), y
    raise ValueError(ch)


class KeyMaze(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, max_steps: int = 500, render_mode: str | None = "rgb_array"):
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.walls = np.array([[c == "#" for c in row] for row in MAZE])
        self.start, self.key, self.door, self.goal = (_find(c) for c in "AKDG")
        h, w = self.walls.shape
        self.observation_space = gym.spaces.Box(0, 255, (h * TILE, w * TILE), np.uint8)
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self._s = np.zeros(5, np.int16)  # x, y, has_key, door_open, steps

    # --- the whole state, for goexplore ----------------------------------------------
    def get_state(self) -> np.ndarray:
        return self._s.copy()

    def set_state(self, state: np.ndarray) -> None:
        self._s[:] = state

    # --- Gymnasium ---------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._s[:] = (*self.start, 0, 0, 0)
        return self._frame(), self._info()

    def step(self, action):
        x, y, has_key, door_open, t = (int(v) for v in self._s)
        dx, dy = MOVES[int(action)]
        nx, ny = x + dx, y + dy
        if (nx, ny) == self.door and not door_open:
            if has_key:
                door_open = 1  # the door opens; the agent stays in front of it
            nx, ny = x, y
        elif self.walls[ny, nx]:
            nx, ny = x, y
        if (nx, ny) == self.key:
            has_key = 1
        t += 1
        self._s[:] = (nx, ny, has_key, door_open, t)
        reached = (nx, ny) == self.goal
        return self._frame(), float(reached), reached, t >= self.max_steps, self._info()

    def render(self):
        return np.repeat(self._frame()[..., None], 3, axis=2)

    # --- helpers -----------------------------------------------------------------------
    def _info(self) -> dict:
        x, y, has_key, door_open, _ = (int(v) for v in self._s)
        return {"x": x, "y": y, "has_key": has_key, "door_open": door_open}

    def _frame(self) -> np.ndarray:
        x, y, has_key, door_open, _ = (int(v) for v in self._s)
        g = np.where(self.walls, 90, 0).astype(np.uint8)
        if not has_key:
            g[self.key[1], self.key[0]] = 200
        if not door_open:
            g[self.door[1], self.door[0]] = 150
        g[self.goal[1], self.goal[0]] = 120
        g[y, x] = 255
        return np.kron(g, np.ones((TILE, TILE), np.uint8))


def make_env(max_steps: int = 500):
    """The factory ``--env key_maze:make_env`` names: the maze in goexplore's
    Gymnasium adapter, with the facts its info reports."""
    from goexplore import GymnasiumEnv

    return GymnasiumEnv(
        KeyMaze(max_steps), facts=("x", "y", "has_key", "door_open"), name="key_maze"
    )
