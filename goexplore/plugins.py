"""Naming envs and cell representations: one resolver for every process and command.

An env name (``--env``, config.json's ``env``) takes one of three forms:

* a built-in name: ``montezuma``, ``pitfall``, ... (:data:`goexplore.envs.GAMES`),
  ``toy``, or a name a package registers under the entry-point group
  ``goexplore.envs``;
* ``gym:ID``: any registered Gymnasium env id, through
  :class:`goexplore.envs.gym.GymnasiumEnv`;
* ``module:factory`` (``mymaze:make_env``, ``mypkg.envs:make_maze``): the module
  must be importable (installed, or on ``PYTHONPATH``) in every process that runs
  the env. The factory returns a :class:`~goexplore.envs.base.RestorableEnv` or a
  Gymnasium env (wrapped in the adapter).

``env_kwargs`` (``--env-kwargs JSON``, a JSON object) are passed to the factory.

A cell representation (``--cells``) takes the same forms: a built-in name
(:data:`goexplore.cells.REGISTRY`), a name under the entry-point group
``goexplore.cells``, or ``module:attr``, where ``attr`` is a class with
``from_config(cfg)`` or a function ``(cfg) -> CellRepresentation``.

Names are strings all the way: config.json records them, and each process
resolves them again. Nothing is pickled.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from goexplore.errors import ConfigError, EnvError

ENV_GROUP = "goexplore.envs"
CELLS_GROUP = "goexplore.cells"

#: envs registered in this process (:func:`register_env`): in-process runs only
_LOCAL_ENVS: dict[str, Callable[..., Any]] = {}


def register_env(name: str, factory: Callable[..., Any]) -> str:
    """Make ``factory`` known as ``name`` in this process (the Python API's envs).
    Worker processes cannot see it: a run with more than one worker needs an
    importable ``module:factory`` or an entry point. Returns the name."""
    if not name or ":" in name:
        raise ConfigError(f"register_env: {name!r} must be a non-empty name without ':'")
    _LOCAL_ENVS[name] = factory
    return name


def parse_kwargs(text: str | Mapping | None, what: str = "env-kwargs") -> dict:
    """``--env-kwargs``: a JSON object (``""``: none)."""
    if text is None or text == "":
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what}: not valid JSON ({e.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what}: must be a JSON object like '{{\"size\": 15}}', got {text!r}")
    return value


def kwargs_text(kw: Mapping) -> str:
    """env-kwargs as config.json records them (``""``: none)."""
    return json.dumps(dict(kw), sort_keys=True) if kw else ""


def entry_points(group: str) -> dict[str, Any]:
    from importlib.metadata import entry_points as eps

    return {ep.name: ep for ep in eps(group=group)}


def import_attr(spec: str, what: str) -> Any:
    """``module:attr`` imported; a named error when it cannot be."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"{what}: {spec!r} is not of the form module:factory")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        path = os.environ.get("PYTHONPATH", "")
        raise ConfigError(
            f"{what}: cannot import module {module!r} for {spec!r} ({e}); it must be "
            f"installed or on PYTHONPATH in every process (PYTHONPATH={path!r}; "
            "for a module in the current directory: PYTHONPATH=.)"
        ) from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(f"{what}: module {module!r} has no attribute {attr!r}") from None


def builtin_env_names() -> list[str]:
    from goexplore.envs.atari import GAMES

    return [*GAMES, "toy"]


def env_factory(name: str) -> Callable[..., Any]:
    """What builds the env called ``name`` (see the module's docstring)."""
    from goexplore.envs.atari import GAMES

    if not isinstance(name, str) or not name:
        raise ConfigError(f"env: must be a non-empty name, got {name!r}")
    if name == "toy":
        from goexplore.envs.toy import ToyEnv

        return lambda **kw: ToyEnv("toy", **kw)
    if name in GAMES:
        from goexplore.envs.atari import AtariEnv

        return lambda **kw: AtariEnv(name, **kw)
    if name.startswith("gym:"):
        env_id = name[4:]
        if not env_id:
            raise ConfigError("env: gym: needs a Gymnasium id, e.g. gym:MiniGrid-DoorKey-8x8-v0")
        return lambda **kw: _gym_env(env_id, name, kw)
    if ":" in name:
        return import_attr(name, "env")
    if name in _LOCAL_ENVS:
        return _LOCAL_ENVS[name]
    registered = entry_points(ENV_GROUP)
    if name in registered:
        return registered[name].load()
    raise ConfigError(
        f"env: unknown env {name!r}; use a built-in name ({', '.join(builtin_env_names())}"
        + (", " + ", ".join(registered) if registered else "")
        + "), gym:ID for a Gymnasium env, or module:factory (an env registered in one "
        "process with register_env is unknown to worker processes)"
    )


def _gym_env(env_id: str, name: str, kw: dict) -> Any:
    from goexplore.envs.gym import GymnasiumEnv

    _import_env_family(env_id)
    adapter = {k: kw.pop(k) for k in ("state", "seed") if k in kw}
    return GymnasiumEnv(env_id, name=name, **adapter, **kw)


def _import_env_family(env_id: str) -> None:
    """Register the envs of a known family (its import registers them)."""
    if env_id.startswith(("MiniGrid-", "BabyAI-")):
        try:
            importlib.import_module("minigrid")
        except ImportError:
            raise EnvError(
                f"gym:{env_id} needs MiniGrid: pip install 'goexplore[minigrid]'"
            ) from None


def make_env(name: str, kwargs: str | Mapping | None = None) -> Any:
    """Build the env ``name`` with ``kwargs``; a Gymnasium env is wrapped in the adapter.
    The result is checked against the protocol (a named error, not a traceback)."""
    from goexplore.envs.base import RestorableEnv

    kw = parse_kwargs(kwargs)
    factory = env_factory(name)
    try:
        env = factory(**kw)
    except (ConfigError, EnvError):
        raise
    except TypeError as e:
        if kw:
            raise ConfigError(f"env {name!r}: the factory rejects env-kwargs {kw}: {e}") from None
        raise EnvError(f"env {name!r}: the factory failed: TypeError: {e}") from e
    except Exception as e:
        raise EnvError(f"env {name!r}: the factory failed: {type(e).__name__}: {e}") from e
    if _is_gym_env(env):
        from goexplore.envs.gym import GymnasiumEnv

        env = GymnasiumEnv(env, name=name)
    if not isinstance(env, RestorableEnv):
        missing = [
            m
            for m in ("n_actions", "fact_names", "reset", "step", "clone_state", "restore_state")
            if not hasattr(env, m)
        ]
        raise EnvError(
            f"env {name!r}: the factory returned a {type(env).__name__}, which is neither a "
            f"Gymnasium env nor a RestorableEnv (missing: {', '.join(missing) or 'see base.py'})"
        )
    return env


def env_fact_names(name: str, kwargs: str | Mapping | None = None) -> tuple[str, ...]:
    """The facts the env ``name`` reports; built-in games from their table (no
    emulator started), any other env by building it once."""
    from goexplore.envs.atari import GAMES

    if name in GAMES:
        return tuple(n for n, _ in GAMES[name].ram)
    if name == "toy":
        from goexplore.envs.toy import ToyEnv

        return ToyEnv.fact_names
    env = make_env(name, kwargs)
    try:
        return tuple(env.fact_names)
    finally:
        env.close()


def _is_gym_env(obj: Any) -> bool:
    try:
        import gymnasium as gym
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return False
    return isinstance(obj, gym.Env)


def cells_factory(name: str) -> Any:
    """The class (or function) behind the cell representation ``name``."""
    from goexplore.cells import REGISTRY

    if name in REGISTRY:
        module, attr = REGISTRY[name].split(":")
        return getattr(importlib.import_module(module), attr)
    if ":" in name:
        return import_attr(name, "cells")
    registered = entry_points(CELLS_GROUP)
    if name in registered:
        return registered[name].load()
    raise ConfigError(
        f"cells: unknown representation {name!r}; choose one of: "
        + ", ".join([*REGISTRY, *registered])
        + ", or module:factory"
    )
