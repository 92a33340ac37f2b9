"""The Python API: explore an env from Python, and read a run back.

    import goexplore

    run = goexplore.explore("gym:MiniGrid-DoorKey-8x8-v0", cells="facts",
                            steps=200_000, run_dir="runs/doorkey")
    best = run.best()                  # .score, .actions (numpy), .cell, .ends_episode
    table = run.cells()                # columns: cell, key, score, length, ..., one per fact
    env = run.env_at(best.cell)        # a fresh env restored to that cell's state
    run = goexplore.load("runs/doorkey")   # later, or in another process

``env`` is a name as ``--env`` takes (a built-in game, ``gym:ID``, ``module:factory``)
or a factory (a callable returning a :class:`~goexplore.envs.base.RestorableEnv` or a
Gymnasium env). A factory lives in this process only, so it explores with one
worker, and :func:`load` in another process needs its name as ``module:factory``;
for several workers, name it so. Any other config field is a keyword (``seed``,
``fact_bins``, ``episode_end``, ``n_workers``, ...; ``steps`` is the config's
``total_frames``, counted in agent steps). The run dir is the CLI's:
``goexplore report``, ``replay``, ``demo`` and ``compare`` read it.

Worker processes are started with multiprocessing's ``spawn``: a script that runs
with ``n_workers > 1`` needs the usual ``if __name__ == "__main__":`` guard around
its top-level code, as any multiprocessing program does. Nothing else is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from goexplore.errors import ConfigError, GoExploreError

if TYPE_CHECKING:
    from goexplore.config import Config
    from goexplore.phase1 import Phase1, Progress


@dataclass(frozen=True)
class Trajectory:
    """A replay-verifiable trajectory from reset: the actions that reach ``cell``."""

    cell: int  # the archive cell it reaches (the end-of-episode cell: ends_episode)
    score: float  # the score it earns, summed over its steps
    actions: np.ndarray  # uint8, one per agent step
    ends_episode: bool  # its last step ends the episode (a goal, or a game over)

    def __len__(self) -> int:
        return len(self.actions)


class Run:
    """A run dir, finished or not, as its latest checkpoint holds it."""

    def __init__(self, run_dir: str | Path, phase1: Phase1 | None = None):
        from goexplore.formats import read_final
        from goexplore.phase1 import load_run

        self.run_dir = Path(run_dir)
        self._p = phase1 if phase1 is not None else load_run(self.run_dir)
        #: final.json's content (None while the run is unfinished)
        self.final: dict | None = read_final(self.run_dir / "final.json")

    # --- what it found --------------------------------------------------------------------
    @property
    def config(self) -> Config:
        return self._p.cfg

    @property
    def steps(self) -> int:
        """Agent steps explored so far."""
        return self._p.frames

    @property
    def best_score(self) -> float:
        """The best score of any trajectory (a cell's, or an episode end's)."""
        return self._p.archive.best_score

    @property
    def verified(self) -> bool | None:
        """The end-of-run replay verification passed (None: the run is unfinished)."""
        return None if self.final is None else bool(self.final["verified"])

    @property
    def n_cells(self) -> int:
        return self._p.archive.n

    @property
    def fact_names(self) -> tuple[str, ...]:
        return self._p.fact_names

    def best(self) -> Trajectory:
        """The highest-scoring trajectory (shortest among ties): to the best cell, or to
        the end of an episode where that scored more."""
        return self.trajectory(self._p.archive.best_trajectory())

    def trajectory(self, cell: int) -> Trajectory:
        """The trajectory that reaches ``cell`` (an index into :meth:`cells`)."""
        a = self._p.archive
        i = self._cell(cell)
        acts = self._p.explog.trajectory(int(a.traj_last[i]))
        return Trajectory(i, float(a.score[i]), np.asarray(acts, np.uint8), bool(a.is_done[i]))

    def cells(self) -> dict[str, np.ndarray]:
        """The archive as columns of equal length (``pandas.DataFrame(run.cells())``
        makes a table of it): ``cell``, ``key`` (hex), ``score``, ``length`` (agent
        steps from reset), ``ends_episode``, ``seen``, ``chosen``, then one column per
        fact (:attr:`fact_names`) as the cell's trajectory left it."""
        a, n = self._p.archive, self._p.archive.n
        cols: dict[str, np.ndarray] = {
            "cell": np.arange(n),
            "key": np.array([a.key_of(i).hex() for i in range(n)]),
            "score": a.score[:n].copy(),
            "length": a.traj_len[:n].copy(),
            "ends_episode": a.is_done[:n].copy(),
            "seen": a.seen[:n].copy(),
            "chosen": a.chosen[:n].copy(),
        }
        for j, name in enumerate(self.fact_names):
            cols.setdefault(name, a.facts[:n, j].copy())
        return cols

    def describe(self, cell: int) -> str:
        """The cell's key in words (the representation's description)."""
        from goexplore.cells import DONE_KEY

        i = self._cell(cell)
        key = self._p.archive.key_of(i)
        return "end of episode" if key == DONE_KEY else self._p.cells.describe(key)

    # --- going back -----------------------------------------------------------------------
    def make_env(self) -> Any:
        """A fresh env of the run's kind (its name and env-kwargs)."""
        from goexplore.plugins import make_env

        return make_env(self.config.env, self.config.env_kwargs)

    def restore(self, env: Any, cell: int) -> None:
        """Put ``env`` (one of this run's kind) in ``cell``'s archived state. As after
        any restore, the env's frame and facts show the state only after the next
        step (ALE refreshes its screen then)."""
        i = self._cell(cell)
        env.restore_state(self._p.codec.decompress(self._p.archive.state(i)))

    def env_at(self, cell: int) -> Any:
        """A fresh env (reset once) restored to ``cell``'s state; close it when done."""
        env = self.make_env()
        env.reset()
        self.restore(env, cell)
        return env

    def _cell(self, cell: int) -> int:
        n = self._p.archive.n
        try:
            i = int(cell)
        except (TypeError, ValueError):
            raise GoExploreError(f"cell: an index 0..{n - 1}, got {cell!r}") from None
        if not 0 <= i < n:
            raise GoExploreError(f"cell {i}: out of range; the archive has cells 0..{n - 1}")
        return i

    def __repr__(self) -> str:
        state = "finished" if self.final is not None else "unfinished"
        return (
            f"Run({str(self.run_dir)!r}: {self.config.env}, {self.steps:,} agent steps, "
            f"{self.n_cells:,} cells, best score {self.best_score:g}, {state})"
        )


def load(run_dir: str | Path) -> Run:
    """A run dir, read from its latest checkpoint (finished, interrupted or running)."""
    return Run(run_dir)


def explore(
    env: str | Callable[..., Any],
    *,
    run_dir: str | Path,
    steps: int = 1_000_000,
    preset: str = "reference",
    env_kwargs: dict | str | None = None,
    resume: bool = False,
    progress: Callable[[Progress], None] | None = None,
    log: Callable[[str], None] | None = None,
    **settings: Any,
) -> Run:
    """Explore ``env`` for ``steps`` agent steps into ``run_dir`` (see the module's
    docstring); with ``resume``, continue the run there. ``progress(p)`` hears every
    batch (a :class:`goexplore.phase1.Progress`: ``frames``, ``cells``, ``best_done``,
    ``max_score``, ``steps_per_s``, ...); ``log(line)`` hears notes and warnings.
    Raises a :class:`~goexplore.errors.GoExploreError` on bad input, or when
    interrupted (the run dir then holds a checkpoint to resume)."""
    from dataclasses import fields

    from goexplore.config import Config
    from goexplore.plugins import kwargs_text, parse_kwargs, register_env
    from goexplore.presets import apply_preset
    from goexplore.runner import execute, prepare

    if "total_frames" in settings:
        raise ConfigError("total_frames: give the budget as steps= (agent steps)")
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
    unknown = sorted(set(settings) - {f.name for f in fields(Config)})
    if unknown:
        raise ConfigError(
            f"unknown settings {unknown}; any field of goexplore.Config is allowed "
            "(`goexplore run --help` lists them)"
        )
    given = {
        "env": env,
        "total_frames": steps,
        "env_kwargs": kwargs_text(parse_kwargs(env_kwargs)),
        **settings,
    }
    cfg = apply_preset(preset, given).validate()
    quiet = log or (lambda line: None)
    phase1, _ = prepare(cfg, Path(run_dir), "auto" if resume else None, log=quiet)
    final = execute(phase1, on_progress=progress, log=quiet)
    if final is None:
        raise GoExploreError(f"the run in {run_dir} was interrupted; continue it with resume=True")
    return Run(run_dir, phase1)
