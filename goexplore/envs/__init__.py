"""Environments: the protocol, the Atari adapter and the toy world."""

from __future__ import annotations

from goexplore.envs.atari import GAMES
from goexplore.envs.base import RestorableEnv

TOY_GAMES = ("toy",)


def game_names() -> list[str]:
    """Every name ``make_env`` accepts."""
    return list(GAMES) + list(TOY_GAMES)


def make_env(name: str) -> RestorableEnv:
    """Build the environment called ``name`` (see :func:`game_names`)."""
    if name in TOY_GAMES:
        from goexplore.envs.toy import ToyEnv

        return ToyEnv(name)
    if name in GAMES:
        from goexplore.envs.atari import AtariEnv

        return AtariEnv(name)
    raise ValueError(f"unknown env {name!r}; choose one of: {', '.join(game_names())}")


__all__ = ["RestorableEnv", "make_env", "game_names", "GAMES"]
