"""The Python API: explore an env from Python, as ``goexplore run`` does.

    import goexplore

    result = goexplore.explore("gym:MiniGrid-DoorKey-8x8-v0", cells="facts",
                               total_frames=200_000, run_dir="runs/doorkey")
    print(result.best_score, result.verified)

``env`` is a name as ``--env`` takes (a built-in game, ``gym:ID``, ``module:factory``)
or a factory (a callable returning a :class:`~goexplore.envs.base.RestorableEnv` or a
Gymnasium env). A factory lives in this process only, so it explores with one
worker; for several, name it as ``module:factory``. Any other config field is a
keyword (``seed``, ``fact_bins``, ``episode_end``, ...). The run dir is the same as
the CLI's: ``goexplore report``, ``replay``, ``demo`` and ``compare`` read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goexplore.errors import ConfigError


@dataclass(frozen=True)
class Result:
    """A finished run: its dir and final.json's content."""

    run_dir: Path
    final: dict

    @property
    def best_score(self) -> float:
        """The best score a replay-verified trajectory reached (a cell's or an episode end's)."""
        done = self.final.get("best_done_score")
        best = float(self.final["max_archive_score"])
        return max(best, float(done)) if done is not None else best

    @property
    def verified(self) -> bool:
        return bool(self.final["verified"])

    @property
    def cells(self) -> int:
        return int(self.final["n_cells"])


def explore(
    env: str | Callable[..., Any],
    *,
    run_dir: str | Path,
    total_frames: int = 1_000_000,
    preset: str = "reference",
    env_kwargs: dict | str | None = None,
    resume: bool = False,
    log: Callable[[str], None] | None = None,
    **settings: Any,
) -> Result:
    """Explore ``env`` for ``total_frames`` agent steps into ``run_dir`` (see the module's
    docstring); with ``resume``, continue the run there. Raises a
    :class:`~goexplore.errors.GoExploreError` on bad input, or when interrupted."""
    from goexplore.plugins import kwargs_text, parse_kwargs, register_env
    from goexplore.presets import apply_preset
    from goexplore.runner import execute, prepare

    if not isinstance(env, str):
        if not callable(env):
            raise ConfigError(f"env: a name or a factory, got {type(env).__name__}")
        if settings.get("n_workers", 1) not in (0, 1):
            raise ConfigError(
                "n_workers: an env given as a Python factory explores in this process only "
                "(n_workers=1); for more workers, name it as module:factory"
            )
        settings["n_workers"] = 1
        env = register_env(getattr(env, "__name__", "env").strip("<>") or "env", env)
    from dataclasses import fields

    from goexplore.config import Config

    unknown = sorted(set(settings) - {f.name for f in fields(Config)})
    if unknown:
        raise ConfigError(
            f"unknown settings {unknown}; any field of goexplore.Config is allowed "
            "(`goexplore run --help` lists them)"
        )
    kw = parse_kwargs(env_kwargs)
    given = {
        "env": env,
        "total_frames": total_frames,
        "env_kwargs": kwargs_text(kw),
        **settings,
    }
    cfg = apply_preset(preset, given).validate()
    quiet = log or (lambda line: None)
    phase1, _ = prepare(cfg, Path(run_dir), "auto" if resume else None, log=quiet)
    final = execute(phase1, log=quiet)
    if final is None:
        raise ConfigError(f"the run in {run_dir} was interrupted; continue it with resume=True")
    return Result(Path(run_dir), final)
