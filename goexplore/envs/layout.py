"""Where an env's rooms sit on a map, and where a cell's (x, y) facts land on
a room's screenshot: what the report draws its maps with.

An env offers its map as an optional attribute ``room_layout`` (a
:class:`RoomLayout`, or None): the built-in games from their table
(:data:`goexplore.envs.atari.GAMES`), the toy, and MiniGrid envs (one room: the
whole grid, drawn from ``render_rgb``; the facts ``x`` and ``y`` are grid cells).
A layout with one room needs no room fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def layout_of(env) -> RoomLayout | None:
    """The map of ``env`` (its ``room_layout``), or None where it has none or where
    its facts cannot place a cell on it (it needs x, y, and a room fact unless the
    map has one room)."""
    layout = getattr(env, "room_layout", None)
    if layout is None:
        return None
    names = set(env.fact_names)
    if not {"x", "y"} <= names or (len(layout.rooms) > 1 and env.room_fact is None):
        return None
    return layout


def grid_layout(width: int, height: int, tile: int) -> RoomLayout:
    """One room: a ``width`` x ``height`` grid of ``tile``-pixel squares, a cell at
    the square's centre (MiniGrid's ``get_frame(tile_size=tile)``); a small grid is
    drawn upscaled to about 320 pixels."""
    return RoomLayout(
        grid=((0,),),
        crop=(0, height * tile, 0, width * tile),
        x_scale=tile,
        x_offset=tile / 2,
        y_scale=tile,
        y_offset=tile / 2,
        scale=max(1, 320 // (max(width, height) * tile)),
    )
