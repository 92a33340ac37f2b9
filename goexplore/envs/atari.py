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

from goexplore.envs.layout import RoomLayout

FRAMESKIP = 4
#: the emulator settings of every game (the reference's); demos record them for replay
ALE_SETTINGS = {
    "obs_type": "grayscale",
    "frameskip": FRAMESKIP,
    "repeat_action_probability": 0.0,
    "full_action_space": False,
    "max_num_frames_per_episode": 0,
}


@dataclass(frozen=True)
class Game:
    """Everything the project knows about one game, in one place."""

    name: str  # our short name (CLI)
    rom: str  # ale-py ROM id
    env_id: str  # Gymnasium id (the demos' env spec)
    #: per-step facts read from RAM: (name, address), in the order ``facts()`` returns them
    ram: tuple[tuple[str, int], ...] = ()
    room_fact: str | None = None  # the fact that is the game's room ("rooms found")
    level_fact: str | None = None  # the fact that is the game's level
    layout: RoomLayout | None = None  # where its rooms sit (the report's map)
    dk_cells: str | None = None  # its domain-knowledge cell representation (--cells)


def _game(name: str, rom: str, title: str, ram=(), room=None, level=None, **more) -> Game:
    return Game(name, rom, f"ALE/{title}-v5", tuple(ram), room, level, **more)


# RAM facts, checked against the games in tests/test_domain_cells.py:
# Montezuma: room RAM[3], player x RAM[42] and y RAM[43] (screen pixels), level RAM[57]
#   (0 on the first level), inventory bitmask RAM[65] (keys: see goexplore.cells.domain).
# Pitfall: scene RAM[1] (an 8-bit shift register: 255 scenes, 196 at the start), x RAM[97],
#   y RAM[105] (32 on the surface, larger going down), treasures RAM[113] (31 at the
#   start: the game counts the 32 treasures down from 31).
#: Montezuma's rooms on one level, as the original code lays them out (-1: none)
MONTEZUMA_PYRAMID = (
    (-1, -1, -1, 0, 1, 2, -1, -1, -1),
    (-1, -1, 3, 4, 5, 6, 7, -1, -1),
    (-1, 8, 9, 10, 11, 12, 13, 14, -1),
    (15, 16, 17, 18, 19, 20, 21, 22, 23),
)
#: Montezuma's map. Calibrated on this emulator (``tests/test_report.py`` keeps it
#: honest): Panama Joe's sprite covers screen columns ``x - 1 .. x + 6`` and rows
#: ``310 - y .. 323 - y`` when standing, so its centre is ``(x + 2.5, 316.5 - y)``.
#: The playfield of a room is screen rows 47..206 (the score, lives and inventory
#: are above it), 160 x 160 pixels.
MONTEZUMA_LAYOUT = RoomLayout(
    grid=MONTEZUMA_PYRAMID,
    crop=(47, 207, 0, 160),
    x_scale=1.0,
    x_offset=2.5,
    y_scale=-1.0,
    y_offset=316.5,
)
MONTEZUMA_RAM = (("room", 3), ("x", 42), ("y", 43), ("level", 57), ("inventory", 65))
PITFALL_RAM = (("scene", 1), ("x", 97), ("y", 105), ("treasures", 113))

GAMES: dict[str, Game] = {
    g.name: g
    for g in (
        _game(
            "montezuma",
            "montezuma_revenge",
            "MontezumaRevenge",
            MONTEZUMA_RAM,
            "room",
            "level",
            layout=MONTEZUMA_LAYOUT,
            dk_cells="montezuma-dk",
        ),
        _game("pitfall", "pitfall", "Pitfall", PITFALL_RAM, "scene", dk_cells="pitfall-dk"),
        _game("private_eye", "private_eye", "PrivateEye"),
        _game("venture", "venture", "Venture"),
        _game("gravitar", "gravitar", "Gravitar"),
        _game("solaris", "solaris", "Solaris"),
        _game("freeway", "freeway", "Freeway"),
        _game("berzerk", "berzerk", "Berzerk"),
        _game("bowling", "bowling", "Bowling"),
        _game("centipede", "centipede", "Centipede"),
        _game("skiing", "skiing", "Skiing"),
    )
}


def quiet_ale() -> None:
    """Silence ALE's start-up banner ("A.L.E: ... [Powered by Stella]") and its
    info lines in this process; errors still print."""
    from ale_py import ALEInterface, LoggerMode

    ALEInterface.setLoggerMode(LoggerMode.Error)


class AtariEnv:
    """A :class:`~goexplore.envs.base.RestorableEnv` over ale-py."""

    def __init__(self, game: str = "montezuma", sticky: float = 0.0):
        """``sticky``: ALE's repeat_action_probability (0: the Phase 1 setting; the
        standard stochastic protocol, which Phase 2 trains and evaluates under, is 0.25)."""
        from ale_py import ALEState
        from ale_py.env import AtariEnv as _GymAtari

        if game not in GAMES:
            raise ValueError(f"unknown game {game!r}; choose one of {', '.join(GAMES)}")
        if not 0.0 <= sticky < 1.0:
            raise ValueError(f"sticky {sticky}: a probability in [0, 1)")
        quiet_ale()
        self.game = GAMES[game]
        self.sticky = sticky
        self.reset_seed = 0  # the seed of every reset (Phase 2 varies it per episode)
        self._gym = _GymAtari(
            game=self.game.rom, **{**ALE_SETTINGS, "repeat_action_probability": sticky}
        )
        self._ale = self._gym.ale
        self._ALEState = ALEState
        self._actions = list(self._gym._action_set)
        self.n_actions = len(self._actions)
        self.frameskip = FRAMESKIP  # emulator frames per agent step
        self._screen = np.empty((210, 160), dtype=np.uint8)
        self.fact_names = tuple(name for name, _ in self.game.ram)
        self.room_fact, self.level_fact = self.game.room_fact, self.game.level_fact
        self.room_layout = self.game.layout
        self._ram_addr = np.array([a for _, a in self.game.ram], np.intp)

    @property
    def ale(self):
        return self._ale

    # --- what a demo dataset records about the env --------------------------------------
    #: the packages a replay of this env needs
    requirements = ("ale-py", "gymnasium")

    @property
    def settings(self) -> dict:
        """The emulator settings every step was played with."""
        return {**ALE_SETTINGS, "repeat_action_probability": self.sticky, "reset_seed": 0}

    def gym_spec(self):
        """The Gymnasium spec of this env as played: the game's id with our settings."""
        from dataclasses import replace

        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        spec = gym.spec(self.game.env_id)
        kwargs = {**spec.kwargs, **ALE_SETTINGS, "repeat_action_probability": self.sticky}
        return replace(spec, kwargs=kwargs, max_episode_steps=None)

    def reset(self) -> np.ndarray:
        self._gym.reset(seed=self.reset_seed)
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
        if not len(self._ram_addr):
            return ()
        return tuple(self._ale.getRAM()[self._ram_addr].tolist())

    def render_rgb(self) -> np.ndarray:
        return self._ale.getScreenRGB()

    def close(self) -> None:
        self._gym.close()
