"""A tiny deterministic world with clone/restore: the worked example of the
env protocol, and what most unit tests explore (fast, no emulator).

The world is a 3x3 grid of rooms, each 11 wide and 8 high. The player starts
in the middle of room 0 (top left) with 3 lives. Actions: 0 stay, 1 up,
2 right, 3 left, 4 down. Walking off a room's edge enters the neighbouring
room (the world's outer edge is a wall). Each room holds one treasure
(reward = 10 x (room + 1), collected once) and a few fixed pits: stepping into
a pit costs a life and puts the player back where it entered the room; losing
the last life ends the game. The frame (24x33, three pixels per grid square)
shows the room's number as its background shade, the pits, the uncollected
treasure and the player, so the default 11x8 downscale keys one cell per
player position and progress state.
"""

from __future__ import annotations

import numpy as np

ROOM_W, ROOM_H = 11, 8
GRID = 3  # 3 x 3 rooms
SCALE = 3  # pixels per grid square
N_ROOMS = GRID * GRID
START_LIVES = 3
_MOVES = ((0, 0), (0, -1), (1, 0), (-1, 0), (0, 1))

# Fixed layout, the same every time (a seeded generator only builds it).
_rng = np.random.default_rng(12345)
TREASURES = [
    (int(_rng.integers(1, ROOM_W - 1)), int(_rng.integers(1, ROOM_H - 1))) for _ in range(N_ROOMS)
]
PITS = [
    {(int(_rng.integers(1, ROOM_W - 1)), int(_rng.integers(1, ROOM_H - 1))) for _ in range(3)}
    - {TREASURES[r], (ROOM_W // 2, ROOM_H // 2)}
    for r in range(N_ROOMS)
]
del _rng

_STATE_FIELDS = 7  # room, x, y, entry_x, entry_y, lives, collected-bitmask


class ToyEnv:
    """A :class:`~goexplore.envs.base.RestorableEnv` with a trivial state."""

    n_actions = len(_MOVES)
    fact_names = ("room", "x", "y", "level", "inventory")
    room_fact, level_fact = "room", "level"

    def __init__(self, game: str = "toy"):
        from goexplore.envs.layout import RoomLayout

        self.game = game
        self.room_layout = RoomLayout(
            grid=tuple(tuple(r * GRID + c for c in range(GRID)) for r in range(GRID)),
            crop=(0, ROOM_H * SCALE, 0, ROOM_W * SCALE),
            x_scale=SCALE,
            x_offset=SCALE / 2,
            y_scale=SCALE,
            y_offset=SCALE / 2,
            scale=5,
        )
        self._frame = np.empty((ROOM_H * SCALE, ROOM_W * SCALE), dtype=np.uint8)
        self._s = np.zeros(_STATE_FIELDS, dtype=np.int64)
        self.reset()

    # --- protocol -------------------------------------------------------
    def reset(self) -> np.ndarray:
        self._s[:] = (0, ROOM_W // 2, ROOM_H // 2, ROOM_W // 2, ROOM_H // 2, START_LIVES, 0)
        return self._render()

    def step(self, action: int):
        if not 0 <= action < self.n_actions:
            raise ValueError(f"action {action} out of range 0..{self.n_actions - 1}")
        room, x, y, ex, ey, lives, got = (int(v) for v in self._s)
        if lives <= 0:  # game over is absorbing
            return self._render(), 0.0, True, 0
        dx, dy = _MOVES[action]
        x, y = x + dx, y + dy
        rx, ry = room % GRID, room // GRID
        if x < 0 and rx > 0:
            room, x = room - 1, ROOM_W - 1
        elif x >= ROOM_W and rx < GRID - 1:
            room, x = room + 1, 0
        elif y < 0 and ry > 0:
            room, y = room - GRID, ROOM_H - 1
        elif y >= ROOM_H and ry < GRID - 1:
            room, y = room + GRID, 0
        x, y = min(max(x, 0), ROOM_W - 1), min(max(y, 0), ROOM_H - 1)
        if room != self._s[0]:
            ex, ey = x, y
        reward = 0.0
        if (x, y) == TREASURES[room] and not got >> room & 1:
            got |= 1 << room
            reward = 10.0 * (room + 1)
        if (x, y) in PITS[room]:
            lives -= 1
            x, y = ex, ey
        self._s[:] = (room, x, y, ex, ey, lives, got)
        return self._render(), reward, lives <= 0, lives

    def clone_state(self) -> bytes:
        return self._s.tobytes()

    def restore_state(self, state: bytes) -> None:
        if len(state) != self._s.nbytes:
            raise ValueError(f"toy state must be {self._s.nbytes} bytes, got {len(state)}")
        self._s[:] = np.frombuffer(state, dtype=np.int64)
        # like the ALE, the frame is NOT refreshed until the next step

    def lives(self) -> int:
        return int(self._s[5])

    def facts(self) -> tuple[int, ...]:
        room, x, y, _, _, _, got = (int(v) for v in self._s)
        return (room, x, y, 0, got)

    def render_rgb(self) -> np.ndarray:
        return np.repeat(self._frame[:, :, None], 3, axis=2)

    def close(self) -> None:
        pass

    # --- drawing ----------------------------------------------------------
    def _render(self) -> np.ndarray:
        room, x, y, _, _, _, got = (int(v) for v in self._s)
        f = self._frame
        f[:] = 20 * room
        for px, py in PITS[room]:
            self._square(px, py, 200)
        if not got >> room & 1:
            tx, ty = TREASURES[room]
            self._square(tx, ty, 230)
        self._square(x, y, 255)
        return f

    def _square(self, gx: int, gy: int, value: int) -> None:
        self._frame[gy * SCALE : (gy + 1) * SCALE, gx * SCALE : (gx + 1) * SCALE] = value
