"""Environments: the protocol, the Atari adapter, the Gymnasium adapter and the toy world.

Env names resolve in :mod:`goexplore.plugins` (built-in names, ``gym:ID``,
``module:factory``, entry points), the same way in every process."""

from __future__ import annotations

from goexplore.envs.atari import GAMES
from goexplore.envs.base import RestorableEnv
from goexplore.plugins import builtin_env_names, make_env

TOY_GAMES = ("toy",)


def game_names() -> list[str]:
    """Every built-in name ``make_env`` accepts (it also takes gym:ID and module:factory)."""
    return builtin_env_names()


__all__ = ["RestorableEnv", "make_env", "game_names", "GAMES"]
