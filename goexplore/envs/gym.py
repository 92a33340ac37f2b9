"""Any Gymnasium env as a :class:`~goexplore.envs.base.RestorableEnv`.

The adapter takes Gymnasium's 5-tuple ``step`` (an episode ends at termination or
truncation), lives from ``info["lives"]`` when the env reports them, and per-step
integer *facts* (for ``--cells facts``) from ``info`` or from a function of
``(obs, info)``. It holds the env's state in one of three ways (``state=``):

* ``"env"``: the env's own ``get_state()`` / ``set_state(state)`` (bytes or a numpy
  array), on the unwrapped env;
* ``"minigrid"``: a built-in codec for MiniGrid (grid, agent, carried object, step
  count and random generator, as bytes and JSON);
* ``"replay"``: *return by replay*, for any deterministic env without saved state.
  The state is the action prefix from the seeded reset, and a restore replays it.
  Replayed steps cost time: :attr:`GymnasiumEnv.replayed_steps` counts them apart
  from exploration steps.

``"auto"`` (the default) picks ``"minigrid"`` for MiniGrid envs, ``"env"`` where the
env has ``get_state``/``set_state``, and ``"replay"`` otherwise. Nothing is pickled.

Observations: a 2-D grey frame is used as is, an H×W×3 RGB frame is converted to
grey (for the downscale cells), a dict observation uses its ``"image"`` entry, and
anything else (a vector) is passed on as given; vector observations want
``--cells facts``. Limits are checked up front, each with a named error: a discrete
action space of at most 256 actions, and facts within int16.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from goexplore.errors import EnvError

STATE_MODES = ("auto", "env", "minigrid", "replay")
MAX_ACTIONS = 256  # actions travel and are logged as one byte
FACT_MIN, FACT_MAX = -(2**15), 2**15 - 1  # facts are stored as int16
MINIGRID_FACTS = ("x", "y", "dir", "carrying", "doors_open", "keys_left")
MINIGRID_TILE = 16  # pixels per grid square in render_rgb (and the report's map)

FactsFn = Callable[[Any, Mapping], Mapping[str, int]]

_REPLAY = b"GXR1"
_ENVSTATE = b"GXE1"
_MINIGRID = b"GXM1"
_HEADER = struct.Struct("<4sI")  # magic, length of the JSON part


def _is_minigrid(env: Any) -> bool:
    return type(env.unwrapped).__module__.startswith("minigrid.")


def _grey(frame: np.ndarray) -> np.ndarray:
    import cv2

    if frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)


def to_frame(obs: Any) -> np.ndarray:
    """What the cells see of an observation (see the module's docstring)."""
    if isinstance(obs, Mapping):
        if "image" not in obs:
            raise EnvError(
                "a dict observation needs an 'image' entry to give a frame; "
                f"it has {sorted(obs)} (use --cells facts with a facts function)"
            )
        obs = obs["image"]
    a = np.asarray(obs)
    if a.ndim == 3 and a.shape[-1] == 3:
        return _grey(a)
    if a.ndim == 3 and a.shape[-1] == 1:
        return a[..., 0]
    return a


class GymnasiumEnv:
    """A :class:`~goexplore.envs.base.RestorableEnv` over a Gymnasium env.

    ``env`` is a Gymnasium env or a registered id (made with ``gym.make``);
    ``facts`` is a sequence of ``info`` keys or a function ``(obs, info) -> {name: int}``
    (then ``fact_names`` gives the names, in order); ``seed`` seeds every reset."""

    def __init__(
        self,
        env: Any,
        *,
        state: str = "auto",
        seed: int = 0,
        facts: Sequence[str] | FactsFn | None = None,
        fact_names: Sequence[str] | None = None,
        room_fact: str | None = None,
        level_fact: str | None = None,
        name: str | None = None,
        **make_kwargs: Any,
    ):
        import gymnasium as gym

        if isinstance(env, str):
            try:
                env = gym.make(env, **make_kwargs)
            except gym.error.Error as e:
                raise EnvError(f"gym:{env}: {e}") from None
        elif make_kwargs:
            raise EnvError(f"keyword arguments {sorted(make_kwargs)} need an env id, not an env")
        self._env = env
        self.name = name or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
        space = env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise EnvError(
                f"{self.name}: the action space must be Discrete (Go-Explore explores with "
                f"random discrete actions), got {space}"
            )
        if not 1 <= int(space.n) <= MAX_ACTIONS:
            raise EnvError(
                f"{self.name}: {int(space.n)} actions; at most {MAX_ACTIONS} are allowed"
            )
        self.n_actions = int(space.n)
        self._start = int(space.start)
        if state not in STATE_MODES:
            raise EnvError(f"state: must be one of {', '.join(STATE_MODES)}, got {state!r}")
        u = env.unwrapped
        if state == "auto":
            if _is_minigrid(env):
                state = "minigrid"
            elif callable(getattr(u, "get_state", None)) and callable(
                getattr(u, "set_state", None)
            ):
                state = "env"
            else:
                state = "replay"
        if state == "minigrid" and not _is_minigrid(env):
            raise EnvError(f"{self.name}: state 'minigrid' needs a MiniGrid env")
        if state == "env" and not callable(getattr(u, "get_state", None)):
            raise EnvError(f"{self.name}: state 'env' needs get_state()/set_state() on the env")
        self.state_mode = state
        self._minigrid = _is_minigrid(env)
        self.seed = int(seed)
        self._facts_fn: FactsFn | None = None
        if callable(facts):
            if not fact_names:
                raise EnvError("a facts function needs fact_names (the names it returns, in order)")
            self._facts_fn = facts
            names: tuple[str, ...] = tuple(fact_names)
        elif facts is not None:
            names = tuple(facts)
        elif self._minigrid:
            names = MINIGRID_FACTS
        else:
            names = ()
        self.fact_names = names
        self.room_fact = (
            room_fact if room_fact is not None else ("room" if "room" in names else None)
        )
        self.level_fact = (
            level_fact if level_fact is not None else ("level" if "level" in names else None)
        )
        for f in (self.room_fact, self.level_fact):
            if f is not None and f not in names:
                raise EnvError(f"{self.name}: {f!r} is not one of the facts {list(names)}")
        self.frameskip = None  # one agent step is one env step
        self.room_layout = None  # the report's map: MiniGrid's grid, where x and y are facts
        if self._minigrid and {"x", "y"} <= set(names):
            from goexplore.envs.layout import grid_layout

            u = env.unwrapped
            self.room_layout = grid_layout(u.width, u.height, MINIGRID_TILE)
        self.replayed_steps = 0  # env steps spent on restores (state "replay")
        self._prefix = bytearray()  # actions since reset (state "replay")
        self._lives = 0
        self._facts: tuple[int, ...] = ()
        self._started = False  # reset once (Gymnasium refuses a step before any reset)

    @property
    def minigrid(self) -> bool:
        """A MiniGrid env (its facts, codec and map are built in)."""
        return self._minigrid

    @property
    def unwrapped(self) -> Any:
        """The Gymnasium env under every wrapper."""
        return self._env.unwrapped

    # --- what a demo dataset records about the env -----------------------------------------
    @property
    def requirements(self) -> tuple[str, ...]:
        return ("gymnasium", "minigrid") if self._minigrid else ("gymnasium",)

    @property
    def settings(self) -> dict:
        return {"reset_seed": self.seed, "state": self.state_mode}

    def gym_spec(self) -> Any:
        """The wrapped env's Gymnasium spec (None: it was not made from an id)."""
        return self._env.spec

    # --- the protocol ---------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        obs, info = self._env.reset(seed=self.seed)
        self._started = True
        self._prefix = bytearray()
        self._observe(obs, info)
        return self._last_frame

    def step(self, action: int) -> tuple[np.ndarray, float, bool, int]:
        if not 0 <= action < self.n_actions:
            raise EnvError(f"{self.name}: action {action} out of range 0..{self.n_actions - 1}")
        obs, reward, terminated, truncated, info = self._env.step(self._start + int(action))
        self._prefix.append(action)
        self._observe(obs, info)
        return self._last_frame, float(reward), bool(terminated or truncated), self._lives

    def clone_state(self) -> bytes:
        if self.state_mode == "replay":
            return _HEADER.pack(_REPLAY, 0) + bytes(self._prefix)
        if self.state_mode == "minigrid":
            return _minigrid_state(self._env.unwrapped)
        raw = self._env.unwrapped.get_state()
        meta: dict[str, Any]
        if isinstance(raw, np.ndarray):
            meta = {"dtype": raw.dtype.str, "shape": list(raw.shape)}
            raw = raw.tobytes()
        elif isinstance(raw, (bytes, bytearray)):
            meta = {"dtype": None}
        else:
            raise EnvError(
                f"{self.name}: get_state() must return bytes or a numpy array, "
                f"got {type(raw).__name__}"
            )
        head = json.dumps(meta).encode()
        return _HEADER.pack(_ENVSTATE, len(head)) + head + bytes(raw)

    def restore_state(self, state: bytes) -> None:
        magic, n = _HEADER.unpack_from(state)
        body = memoryview(state)[_HEADER.size :]
        if magic == _REPLAY and self.state_mode == "replay":
            self._env.reset(seed=self.seed)
            self._started = True
            for a in bytes(body):
                self._env.step(self._start + a)
            self.replayed_steps += len(body)
            self._prefix = bytearray(body)
            return
        if not self._started:
            self._env.reset(seed=self.seed)
            self._started = True
        if magic == _MINIGRID and self.state_mode == "minigrid":
            _set_minigrid_state(self._env.unwrapped, body, n)
        elif magic == _ENVSTATE and self.state_mode == "env":
            meta = json.loads(bytes(body[:n]))
            raw = bytes(body[n:])
            value: Any = raw
            if meta["dtype"] is not None:
                value = np.frombuffer(raw, np.dtype(meta["dtype"])).reshape(meta["shape"]).copy()
            self._env.unwrapped.set_state(value)
        else:
            raise EnvError(f"{self.name}: not a state of this env (state mode {self.state_mode})")

    def lives(self) -> int:
        return self._lives

    def facts(self) -> tuple[int, ...]:
        return self._facts

    def render_rgb(self) -> np.ndarray:
        u = self._env.unwrapped
        if self._minigrid:
            return u.get_frame(highlight=False, tile_size=MINIGRID_TILE)
        frame = self._env.render() if self._env.render_mode == "rgb_array" else None
        if frame is None:
            f = np.asarray(self._last_frame)
            if f.ndim == 1:
                f = f.reshape(1, -1)
            f = np.clip(f, 0, 255).astype(np.uint8)
            return np.repeat(f[..., None], 3, axis=2)
        return np.asarray(frame)

    def close(self) -> None:
        self._env.close()

    # --- helpers --------------------------------------------------------------------------
    def _observe(self, obs: Any, info: Mapping) -> None:
        self._last_frame = to_frame(obs)
        lives = info.get("lives", 0) if isinstance(info, Mapping) else 0
        self._lives = int(lives)
        if not self.fact_names:
            return
        if self._facts_fn is not None:
            got = self._facts_fn(obs, info)
        elif self._minigrid and self.fact_names == MINIGRID_FACTS:
            got = minigrid_facts(self._env.unwrapped)
        else:
            got = info
        out = []
        for name in self.fact_names:
            if name not in got:
                raise EnvError(f"{self.name}: fact {name!r} missing (got {sorted(got)})")
            v = got[name]
            try:
                iv = int(v)
            except (TypeError, ValueError):
                raise EnvError(
                    f"{self.name}: fact {name!r} must be an integer, got {v!r}"
                ) from None
            if iv != v or not FACT_MIN <= iv <= FACT_MAX:
                raise EnvError(
                    f"{self.name}: fact {name!r} = {v!r} is not an integer within int16 "
                    f"({FACT_MIN}..{FACT_MAX}); bin or rescale it in the facts function"
                )
            out.append(iv)
        self._facts = tuple(out)


# --- MiniGrid ---------------------------------------------------------------------------------
def minigrid_facts(u: Any) -> dict[str, int]:
    """Where the agent is and what it has done: position, direction, the carried
    object (0: none, else 1 + its type index), open doors and keys left on the grid
    (one pass over the grid's objects: 50x cheaper than encoding the grid)."""
    from minigrid.core.constants import OBJECT_TO_IDX

    doors = keys = 0
    for o in u.grid.grid:
        if o is not None:
            t = o.type
            if t == "door":
                doors += o.is_open
            elif t == "key":
                keys += 1
    carrying = 0 if u.carrying is None else 1 + OBJECT_TO_IDX[u.carrying.type]
    return {
        "x": int(u.agent_pos[0]),
        "y": int(u.agent_pos[1]),
        "dir": int(u.agent_dir),
        "carrying": carrying,
        "doors_open": int(doors),
        "keys_left": keys,
    }


def _where(u: Any, obj: Any) -> list:
    """Where a world object referred to by the env is: carried, on the grid, inside a
    box on the grid, or nowhere (then its encoding, to make a new one)."""
    if obj is u.carrying:
        return ["carrying"]
    w = u.grid.width
    for i, o in enumerate(u.grid.grid):
        if o is obj:
            return ["grid", i % w, i // w]
    for x, y, box in _boxes(u.grid):
        if box.contains is obj:
            return ["box", x, y]
    return ["free", *(int(v) for v in obj.encode())]


def _boxes(grid: Any) -> Iterator[tuple[int, int, Any]]:
    from minigrid.core.world_object import Box

    for i, obj in enumerate(grid.grid):
        if isinstance(obj, Box):
            yield i % grid.width, i // grid.width, obj


def _minigrid_state(u: Any) -> bytes:
    """The grid (what ``Grid.encode`` keeps), what boxes hold (it does not), the
    agent, its carried object, the step count, the random generator, and the
    env's own references to world objects (KeyCorridor's and ObstructedMaze's
    target ball: success is ``carrying == obj``, which compares identities)."""
    from minigrid.core.world_object import WorldObj

    grid = u.grid.encode()
    carrying = u.carrying
    meta = {
        "shape": list(grid.shape),
        "agent_pos": [int(v) for v in u.agent_pos],
        "agent_dir": int(u.agent_dir),
        "carrying": None if carrying is None else [int(v) for v in carrying.encode()],
        "carrying_holds": None
        if getattr(carrying, "contains", None) is None
        else [int(v) for v in carrying.contains.encode()],
        "boxes": [
            [x, y, *(int(v) for v in box.contains.encode())]
            for x, y, box in _boxes(u.grid)
            if box.contains is not None
        ],
        "refs": {
            name: _where(u, v)
            for name, v in vars(u).items()
            if isinstance(v, WorldObj) and name != "carrying"
        },
        "step_count": int(u.step_count),
        "rng": u.np_random.bit_generator.state,
    }
    head = json.dumps(meta).encode()
    return _HEADER.pack(_MINIGRID, len(head)) + head + grid.tobytes()


def _set_minigrid_state(u: Any, body: memoryview, n: int) -> None:
    from minigrid.core.grid import Grid
    from minigrid.core.world_object import WorldObj

    meta = json.loads(bytes(body[:n]))
    grid = np.frombuffer(bytes(body[n:]), np.uint8).reshape(meta["shape"])
    u.grid, _ = Grid.decode(grid)
    w = u.grid.width
    for i, obj in enumerate(u.grid.grid):
        if obj is not None:  # where the env placed it (decode leaves it unset)
            obj.cur_pos = np.array((i % w, i // w))
    for x, y, *enc in meta.get("boxes", ()):
        u.grid.get(x, y).contains = WorldObj.decode(*enc)
    u.agent_pos = tuple(meta["agent_pos"])
    u.agent_dir = meta["agent_dir"]
    c = meta["carrying"]
    u.carrying = None if c is None else WorldObj.decode(*c)
    if u.carrying is not None:
        u.carrying.cur_pos = np.array([-1, -1])
        holds = meta.get("carrying_holds")
        if holds is not None:
            u.carrying.contains = WorldObj.decode(*holds)
    for name, (kind, *at) in meta.get("refs", {}).items():
        if kind == "carrying":
            obj = u.carrying
        elif kind == "grid":
            obj = u.grid.get(*at)
        elif kind == "box":
            obj = u.grid.get(*at).contains
        else:
            obj = WorldObj.decode(*at)
        setattr(u, name, obj)
    u.step_count = meta["step_count"]
    u.np_random.bit_generator.state = meta["rng"]
