"""Where a game's rooms sit on a map, and where a cell's (x, y) facts land on
a room's screenshot.

Montezuma's Revenge, level 1: 24 rooms in a pyramid of rows of 3, 5, 7 and 9
rooms (room 1, the start, is the top row's middle; the layout is the one the
original Go-Explore code draws its maps with). The room number is RAM[3]; the
player's position RAM[42] (x) and RAM[43] (y). Calibrated on this emulator
(``tests/test_report.py`` keeps it honest): Panama Joe's sprite covers screen
columns ``x - 1 .. x + 6`` and rows ``310 - y .. 323 - y`` when standing, so
its centre is ``(x + 2.5, 316.5 - y)``. The playfield of a room is screen rows
47..206 (the score, lives and inventory are above it), 160 x 160 pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.envs.atari import MONTEZUMA_PYRAMID


@dataclass(frozen=True)
class RoomLayout:
    """A grid of rooms (-1: no room) and how to draw a room and a position."""

    grid: tuple[tuple[int, ...], ...]
    crop: tuple[int, int, int, int]  # top, bottom, left, right of the room on screen
    x_scale: float
    x_offset: float
    y_scale: float
    y_offset: float
    scale: int = 1  # integer upscale of the screenshot (tiny screens)

    @property
    def rows(self) -> int:
        return len(self.grid)

    @property
    def cols(self) -> int:
        return len(self.grid[0])

    @property
    def room_h(self) -> int:
        return (self.crop[1] - self.crop[0]) * self.scale

    @property
    def room_w(self) -> int:
        return (self.crop[3] - self.crop[2]) * self.scale

    @property
    def rooms(self) -> list[int]:
        return sorted(r for row in self.grid for r in row if r >= 0)

    def slot(self, room: int) -> tuple[int, int] | None:
        """(row, column) of a room in the grid, None if the room is not on it."""
        for i, row in enumerate(self.grid):
            if room in row:
                return i, row.index(room)
        return None

    def room_image(self, rgb: np.ndarray) -> np.ndarray:
        """The room's part of a full screenshot, upscaled to the map's size."""
        t, b, l, r = self.crop
        img = rgb[t:b, l:r]
        if self.scale > 1:
            img = np.repeat(np.repeat(img, self.scale, axis=0), self.scale, axis=1)
        return img

    def pixel(self, x, y):
        """Facts (x, y) -> pixel (column, row) inside the room's image."""
        px = (np.asarray(x, float) * self.x_scale + self.x_offset - self.crop[2]) * self.scale
        py = (np.asarray(y, float) * self.y_scale + self.y_offset - self.crop[0]) * self.scale
        return px, py


MONTEZUMA = RoomLayout(
    grid=MONTEZUMA_PYRAMID,
    crop=(47, 207, 0, 160),
    x_scale=1.0,
    x_offset=2.5,
    y_scale=-1.0,
    y_offset=316.5,
)


def _toy_layout() -> RoomLayout:
    from goexplore.envs.toy import GRID, ROOM_H, ROOM_W, SCALE

    grid = tuple(tuple(r * GRID + c for c in range(GRID)) for r in range(GRID))
    return RoomLayout(
        grid=grid,
        crop=(0, ROOM_H * SCALE, 0, ROOM_W * SCALE),
        x_scale=SCALE,
        x_offset=SCALE / 2,
        y_scale=SCALE,
        y_offset=SCALE / 2,
        scale=5,
    )


def layout_for(env_name: str, fact_names: tuple[str, ...]) -> RoomLayout | None:
    """The room layout of a game, or None where its rooms are not known."""
    if not {"room", "x", "y"} <= set(fact_names):
        return None
    if env_name == "montezuma":
        return MONTEZUMA
    if env_name == "toy":
        return _toy_layout()
    return None
