"""goexplore: fast, verifiable Go-Explore.

The Python API (the command line is ``goexplore``):

* :func:`explore`: run Phase 1 on an env into a run dir, and :func:`load` to read one
  back, as a :class:`Run` (best trajectory, cell table, restoring an env to a cell;
  :mod:`goexplore.api`);
* :func:`check_env`: does an env meet what Go-Explore needs (:mod:`goexplore.envs.check`);
* :class:`GymnasiumEnv`: any Gymnasium env as a restorable env (:mod:`goexplore.envs.gym`);
* :func:`make_env`, :func:`register_env`: env names (:mod:`goexplore.plugins`);
* :class:`Config`: every setting (:mod:`goexplore.config`).
"""

from goexplore.api import Run, Trajectory, explore, load
from goexplore.config import Config
from goexplore.envs.check import EnvCheck, check_env
from goexplore.envs.gym import GymnasiumEnv
from goexplore.errors import GoExploreError
from goexplore.plugins import make_env, register_env

__version__ = "0.1.0"

__all__ = [
    "Config",
    "EnvCheck",
    "GoExploreError",
    "GymnasiumEnv",
    "Run",
    "Trajectory",
    "check_env",
    "explore",
    "load",
    "make_env",
    "register_env",
]
