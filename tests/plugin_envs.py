"""Envs for the plug-in tests, imported by name (``plugin_envs:make_maze``) the way a
user's module is: a key-and-door maze as a RestorableEnv, a variant whose state
forgets the door, and factories that go wrong in the ways users' do."""

from __future__ import annotations

import struct

import numpy as np

# 7x7: walls '#', key 'k', door 'D' (opens when walked into holding the key), goal 'G'
LAYOUT = (
    "#######",
    "#.k#..#",
    "#..#..#",
    "#..D.G#",
    "#..#..#",
    "#S.#..#",
    "#######",
)
MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))  # up, right, down, left


class Maze:
    """Reward 1 at the goal, which ends the episode (a goal-terminated env)."""

    n_actions = 4
    fact_names = ("x", "y", "has_key", "door_open")
    room_fact = None
    level_fact = None

    def __init__(self, goal_reward: float = 1.0, leaky: bool = False):
        self.goal_reward = goal_reward
        self.leaky = leaky
        self.frame = np.zeros((7, 7), np.uint8)
        self.reset()

    def _start(self):
        self.x, self.y, self.has_key, self.door_open = 1, 5, 0, 0

    def reset(self):
        self._start()
        return self._draw()

    def _draw(self):
        f = self.frame
        for y, row in enumerate(LAYOUT):
            for x, c in enumerate(row):
                f[y, x] = {
                    "#": 50,
                    "k": 0 if self.has_key else 200,
                    "D": 0 if self.door_open else 100,
                }.get(c, 0)
        f[self.y, self.x] = 255
        return f

    def step(self, action: int):
        if not 0 <= action < 4:
            raise ValueError(f"action {action} out of range")
        dx, dy = MOVES[action]
        nx, ny = self.x + dx, self.y + dy
        c = LAYOUT[ny][nx]
        if c == "D" and not self.door_open and self.has_key:
            self.door_open = 1
        if c != "#" and (c != "D" or self.door_open):
            self.x, self.y = nx, ny
        if LAYOUT[self.y][self.x] == "k":
            self.has_key = 1
        done = LAYOUT[self.y][self.x] == "G"
        return self._draw(), self.goal_reward if done else 0.0, done, 1

    def clone_state(self) -> bytes:
        door = 0 if self.leaky else self.door_open
        return struct.pack("<4B", self.x, self.y, self.has_key, door)

    def restore_state(self, state: bytes) -> None:
        self.x, self.y, self.has_key, door = struct.unpack("<4B", state)
        if not self.leaky:
            self.door_open = door

    def lives(self) -> int:
        return 1

    def facts(self):
        return (self.x, self.y, self.has_key, self.door_open)

    def render_rgb(self):
        return np.repeat(self._draw()[..., None], 3, axis=2)

    def close(self) -> None:
        pass


def make_maze(goal_reward: float = 1.0) -> Maze:
    return Maze(goal_reward)


def make_leaky_maze() -> Maze:
    """Its state forgets the door: restored in a fresh instance, the door is shut."""
    return Maze(leaky=True)


def make_not_an_env():
    return object()


def make_gym_huge_fact():
    """A Gymnasium env with its fact in info, out of int16 range after one step."""
    import gymnasium as gym

    class Huge(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (4, 4), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros((4, 4), np.uint8), {"x": 0}

        def step(self, action):
            return np.zeros((4, 4), np.uint8), 0.0, False, False, {"x": 70_000}

    from goexplore.envs.gym import GymnasiumEnv

    return GymnasiumEnv(Huge(), facts=["x"])


def make_gym_box_actions():
    import gymnasium as gym

    return gym.make("MountainCarContinuous-v0")


def make_gym_counter():
    """A Gymnasium env that saves its state itself (get_state / set_state, a numpy
    array): a position on a line, with a reward on reaching 5."""
    import gymnasium as gym

    class Counter(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (1, 8), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def _obs(self):
            o = np.zeros((1, 8), np.uint8)
            o[0, self.pos] = 255
            return o

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.pos = 0
            return self._obs(), {"pos": self.pos}

        def step(self, action):
            self.pos = int(np.clip(self.pos + (1 if action else -1), 0, 7))
            done = self.pos == 5
            return self._obs(), float(done), done, False, {"pos": self.pos}

        def get_state(self):
            return np.array([self.pos], np.int64)

        def set_state(self, state):
            self.pos = int(state[0])

    from goexplore.envs.gym import GymnasiumEnv

    return GymnasiumEnv(Counter(), facts=["pos"])
