"""Cell representations: what makes two states "the same cell".

A representation turns what an exploration step sees (the frame and the env's
per-step facts, :meth:`goexplore.envs.base.RestorableEnv.facts`) into a cell
key of ``key_size`` bytes. It is chosen by ``Config.cells`` and recorded in
config.json. Adding one is one module plus one line in :data:`REGISTRY`; outside
this package, ``--cells module:factory`` or an entry point (:mod:`goexplore.plugins`).

Some keys depend on the path that led to a state, not only on the state: the
Montezuma domain-knowledge key remembers the room each held key was taken in.
Such a representation sets ``needs_context``; an episode then starts from the
chosen cell's own key (:meth:`CellRepresentation.keyer`), which holds that
context, and carries it along step by step. The DONE cell's key is ``b""``.

:meth:`CellRepresentation.place` tells selection and the report where a cell
is: ``(level, room, x, y, items, group)`` in the representation's own units,
or None for keys without a position (the downscaled frame).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from goexplore.config import Config

#: name -> "module:class" (imported on first use)
REGISTRY: dict[str, str] = {
    "downscale": "goexplore.cells.downscale:DownscaleCells",
    "downscale-dynamic": "goexplore.cells.dynamic:DynamicDownscaleCells",
    "montezuma-dk": "goexplore.cells.domain:MontezumaCells",
    "pitfall-dk": "goexplore.cells.domain:PitfallCells",
    "facts": "goexplore.cells.facts:FactCells",
}

DONE_KEY = b""  # the virtual end-of-episode cell (never sampled)

Keyer = Callable[[np.ndarray, tuple], bytes]


class Place(NamedTuple):
    """Where a cell is, for selection's map terms and the report's map."""

    level: int
    room: int
    x: int  # bin
    y: int  # bin
    items: int  # how many of the game's items (keys, treasures) the cell holds
    group: bytes  # the items' identity: cells differing only in it share a position


@runtime_checkable
class CellRepresentation(Protocol):
    name: str
    key_size: int
    #: keys depend on the chosen cell's key (a context carried along the path)
    needs_context: bool

    @classmethod
    def from_config(cls, cfg: Config) -> CellRepresentation: ...

    @staticmethod
    def problems(env: str, fact_names: tuple[str, ...]) -> list[str]:
        """Why this representation cannot key this env ([] when it can)."""

    def keyer(self, start_key: bytes = b"") -> Keyer:
        """A key function for one episode that starts in the cell ``start_key``
        (``b""``: from reset). Call it once per step, in order."""

    def describe(self, key: bytes) -> str:
        """A short human-readable description of a key (reports)."""

    def place(self, key: bytes) -> Place | None:
        """The cell's position, or None where keys have none."""


def score_keyer(rep: object, start_key: bytes = b"") -> Callable[[np.ndarray, tuple, float], bytes]:
    """``rep``'s key function for one episode as ``key(frame, facts, score)``, ``score``
    the episode's running score: representations that key on the score
    (``keys_score``) take it; for the others it is dropped."""
    key = rep.keyer(start_key)  # type: ignore[attr-defined]
    if getattr(rep, "keys_score", False):
        return key
    return lambda frame, facts, score: key(frame, facts)


def representation_class(name: str) -> Any:
    """The class (or factory function) of the representation ``name``."""
    from goexplore.plugins import cells_factory

    return cells_factory(name)


def make_cells(cfg: Config, fact_names: tuple[str, ...] = ()) -> CellRepresentation:
    """The representation ``cfg.cells`` with ``cfg``'s parameters; ``fact_names``
    (the env's) for representations that key on named facts."""
    from goexplore.errors import ConfigError

    made = representation_class(cfg.cells)
    if getattr(made, "uses_fact_names", False):
        rep = made.from_config(cfg, fact_names)
    elif hasattr(made, "from_config"):
        rep = made.from_config(cfg)
    else:
        rep = made(cfg)
    missing = [m for m in ("key_size", "keyer", "describe") if not hasattr(rep, m)]
    if missing:
        raise ConfigError(
            f"cells {cfg.cells!r}: {type(rep).__name__} is not a cell representation "
            f"(missing: {', '.join(missing)}; see goexplore.cells.CellRepresentation)"
        )
    return rep


def neighbour_room(rep: object, room: int, dx: int, dy: int) -> int | None:
    """The room next to ``room`` in direction (dx, dy) on the representation's
    room grid, or None (no grid, or off the grid)."""
    grid = getattr(rep, "room_grid", None)
    if not grid:
        return None
    for r, row in enumerate(grid):
        if room in row:
            c = row.index(room)
            r2, c2 = r + dy, c + dx
            if 0 <= r2 < len(grid) and 0 <= c2 < len(grid[r2]) and grid[r2][c2] >= 0:
                return grid[r2][c2]
            return None
    return None


__all__ = [
    "CellRepresentation",
    "DONE_KEY",
    "Keyer",
    "Place",
    "REGISTRY",
    "make_cells",
    "neighbour_room",
    "representation_class",
    "score_keyer",
]
