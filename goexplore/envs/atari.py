"""Atari games through ale-py, in the reference configuration.

ALE v5 ROMs, frameskip 4, ``repeat_action_probability=0`` (no sticky actions),
grayscale frames, minimal action set, reset with seed 0, and ALE's
108,000-frame episode cap disabled (``max_num_frames_per_episode=0``): Phase 1
enters episodes mid-way by restore and its trajectories can be long.

``step`` talks to the emulator directly (four ``ale.act`` calls, then the
grayscale screen into a reused buffer): exactly what Gymnasium's ``AtariEnv.step``
computes, without its per-step overhead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FRAMESKIP = 4


@dataclass(frozen=True)
class Game:
    name: str        # our short name (CLI)
    rom: str         # ale-py ROM id
    env_id: str      # Gymnasium id, for reference


def _game(name: str, rom: str, title: str) -> Game:
    return Game(name, rom, f"ALE/{title}-v5")


GAMES: dict[str, Game] = {g.name: g for g in (
    _game("montezuma", "montezuma_revenge", "MontezumaRevenge"),
    _game("pitfall", "pitfall", "Pitfall"),
    _game("private_eye", "private_eye", "PrivateEye"),
    _game("venture", "venture", "Venture"),
    _game("gravitar", "gravitar", "Gravitar"),
    _game("solaris", "solaris", "Solaris"),
    _game("freeway", "freeway", "Freeway"),
    _game("berzerk", "berzerk", "Berzerk"),
    _game("bowling", "bowling", "Bowling"),
    _game("centipede", "centipede", "Centipede"),
    _game("skiing", "skiing", "Skiing"),
)}

# RAM addresses (Montezuma's Revenge). Byte 3 is the room; the reference reads
# it for every game as a diagnostic, so "rooms" means RAM[3] everywhere.
ROOM_RAM = 3
MONTEZUMA_RAM = {"x": 42, "y": 43, "level": 57, "inventory": 65}


class AtariEnv:
    """A :class:`~goexplore.envs.base.RestorableEnv` over ale-py."""

    def __init__(self, game: str = "montezuma"):
        from ale_py import ALEState
        from ale_py.env import AtariEnv as _GymAtari

        if game not in GAMES:
            raise ValueError(f"unknown game {game!r}; choose one of {', '.join(GAMES)}")
        self.game = GAMES[game]
        self._gym = _GymAtari(game=self.game.rom, frameskip=FRAMESKIP,
                              repeat_action_probability=0.0, obs_type="grayscale",
                              full_action_space=False, max_num_frames_per_episode=0)
        self._ale = self._gym.ale
        self._ALEState = ALEState
        self._actions = list(self._gym._action_set)
        self.n_actions = len(self._actions)
        self._screen = np.empty((210, 160), dtype=np.uint8)
        self._is_montezuma = game == "montezuma"
        self.fact_names = ("room",) + (tuple(MONTEZUMA_RAM) if self._is_montezuma else ())

    @property
    def ale(self):
        return self._ale

    def reset(self) -> np.ndarray:
        self._gym.reset(seed=0)
        self._ale.getScreenGrayscale(self._screen)
        return self._screen

    def step(self, action: int):
        ale, a = self._ale, self._actions[action]
        reward = 0.0
        for _ in range(FRAMESKIP):
            reward += ale.act(a)
        ale.getScreenGrayscale(self._screen)
        return self._screen, reward, ale.game_over(with_truncation=False), ale.lives()

    def clone_state(self) -> bytes:
        return self._ale.cloneState().serialize()

    def restore_state(self, state: bytes) -> None:
        self._ale.restoreState(self._ALEState(state))

    def lives(self) -> int:
        return self._ale.lives()

    def facts(self) -> tuple[int, ...]:
        ram = self._ale.getRAM()
        if self._is_montezuma:
            return (int(ram[ROOM_RAM]), int(ram[42]), int(ram[43]), int(ram[57]), int(ram[65]))
        return (int(ram[ROOM_RAM]),)

    def render_rgb(self) -> np.ndarray:
        return self._ale.getScreenRGB()

    def close(self) -> None:
        self._gym.close()
