"""Domain-knowledge cells from the game's RAM facts (Go-Explore 2019/2021).

Montezuma's Revenge: ``(level, room, x bin, y bin, keys held, the room each
held key was taken in)``. Pitfall: ``(scene, treasures left, x bin, y bin)``.
The facts come from the game table (:mod:`goexplore.envs.atari`), never from
addresses here.

Bins: the papers cut the player's position into 16-pixel squares of a frame
whose x axis is doubled (``x_repeat=2``, ``--resolution 16`` in the original
code), that is 8 native pixels across and 16 down. RAM x and y count native
pixels (``goexplore/envs/atari.py`` calibrates them against the screen),
so the defaults are ``cell_x_bin = 8`` and ``cell_y_bin = 16``.

Which room each key came from is not in RAM: it is the history of the path.
The key remembers it (one byte per held key, in pickup order), and an episode
starts from the chosen cell's key (:meth:`MontezumaCells.keyer`): when the key
count rises, the current room is appended; when a key is used, the last ones
are dropped (the original pixel-based code keeps the first-held keys in the
same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from goexplore.cells import Place
from goexplore.envs.atari import MONTEZUMA_PYRAMID

#: RAM[65] bits that are keys: the original code's KEY_BITS. On this emulator the
#: first key sets 0x02 and using it on a door clears it (tests/test_domain_cells.py).
MONTEZUMA_KEY_BITS = 0x02 | 0x04 | 0x08
MAX_KEYS = 3
NO_ROOM = 255

PYRAMID = MONTEZUMA_PYRAMID  # the room grid (goexplore.envs.atari)

_POPCOUNT = bytes(bin(i).count("1") for i in range(256))


def keys_held(inventory) -> np.ndarray:
    """The keys held in each Montezuma inventory byte (RAM[65]), as the cell key counts
    them: for reading archives, whatever their cells."""
    return np.frombuffer(_POPCOUNT, np.uint8)[np.asarray(inventory) & MONTEZUMA_KEY_BITS]


def _bin_problem(name: str, v) -> list[str]:
    if not isinstance(v, int) or not 1 <= v <= 255:
        return [f"{name.replace('_', '-')}: must be an integer bin size in 1..255, got {v!r}"]
    return []


def _needs(env: str, fact_names, want: tuple[str, ...], rep: str) -> list[str]:
    if tuple(fact_names[: len(want)]) != want:
        return [
            f"cells {rep}: needs the facts ({', '.join(want)}); the game {env!r} "
            f"has ({', '.join(fact_names) or 'none'})"
        ]
    return []


@dataclass(frozen=True)
class _RamCells:
    """What the RAM-fact representations share: the bins and the facts they need."""

    x_bin: int = 8
    y_bin: int = 16

    name = ""
    FACTS: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.cell_x_bin, cfg.cell_y_bin)

    @classmethod
    def problems(cls, env: str, fact_names) -> list[str]:
        return _needs(env, fact_names, cls.FACTS, cls.name)

    def _bins(self, x: int, y: int) -> str:
        return (
            f"x {x * self.x_bin}-{(x + 1) * self.x_bin - 1}, "
            f"y {y * self.y_bin}-{(y + 1) * self.y_bin - 1}"
        )


@dataclass(frozen=True)
class MontezumaCells(_RamCells):
    """(level, room, x // x_bin, y // y_bin, keys, key rooms...) as 8 bytes."""

    name = "montezuma-dk"
    needs_context = True
    key_size = 5 + MAX_KEYS
    room_grid = PYRAMID
    FACTS = ("room", "x", "y", "level", "inventory")

    def keyer(self, start_key: bytes = b""):
        """Key function for an episode starting in the cell ``start_key``; its
        facts are (room, x, y, level, inventory) in the game table's order."""
        rooms = list(start_key[5 : 5 + start_key[4]]) if len(start_key) == self.key_size else []
        xb, yb, mask, pop = self.x_bin, self.y_bin, MONTEZUMA_KEY_BITS, _POPCOUNT
        pad = (NO_ROOM,) * MAX_KEYS

        def key(frame, facts) -> bytes:
            room, x, y, level, inv = facts
            n = min(pop[inv & mask], MAX_KEYS)
            if n != len(rooms):
                if n > len(rooms):
                    rooms.extend([room] * (n - len(rooms)))
                else:
                    del rooms[n:]
            return bytes((level, room, x // xb, y // yb, n, *rooms, *pad[n:]))

        return key

    def describe(self, key: bytes) -> str:
        if not key:
            return "DONE"
        level, room, x, y, n = key[:5]
        held = ", ".join(f"room {r}" for r in key[5 : 5 + n]) or "none"
        return f"level {level}, room {room}, {self._bins(x, y)}, keys: {held}"

    def place(self, key: bytes) -> Place | None:
        if len(key) != self.key_size:
            return None
        return Place(key[0], key[1], key[2], key[3], key[4], key[4:])


@dataclass(frozen=True)
class PitfallCells(_RamCells):
    """(scene, treasures left, x // x_bin, y // y_bin) as 4 bytes."""

    name = "pitfall-dk"
    needs_context = False
    key_size = 4
    room_grid = None  # scenes form a ring of a shift register, not a grid
    FACTS = ("scene", "x", "y", "treasures")

    def keyer(self, start_key: bytes = b""):
        xb, yb = self.x_bin, self.y_bin

        def key(frame, facts) -> bytes:
            scene, x, y, treasures = facts
            return bytes((scene, treasures, x // xb, y // yb))

        return key

    def describe(self, key: bytes) -> str:
        if not key:
            return "DONE"
        scene, treasures, x, y = key
        return f"scene {scene}, treasures counter {treasures}, {self._bins(x, y)}"

    def place(self, key: bytes) -> Place | None:
        if len(key) != self.key_size:
            return None
        scene, treasures, x, y = key
        return Place(0, scene, x, y, 255 - treasures, bytes((treasures,)))


def check_bins(cfg) -> list[str]:
    return _bin_problem("cell_x_bin", cfg.cell_x_bin) + _bin_problem("cell_y_bin", cfg.cell_y_bin)
