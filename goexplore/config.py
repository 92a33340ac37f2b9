"""The run configuration: one frozen, typed record; every field has a one-line
help used by the CLI. ``validate`` reports every problem at once.

The defaults are the reference configuration (DESIGN.md section 2)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields

from goexplore.errors import ConfigError


def _f(default, help: str, **kw):
    return field(default=default, metadata={"help": help, **kw})


@dataclass(frozen=True)
class Config:
    env: str = _f("montezuma", "game to explore (see `goexplore games`)")
    seed: int = _f(0, "master seed: same seed, same archive")
    total_frames: int = _f(5_000_000, "budget in agent steps executed by workers (x4 emulator frames)")
    n_workers: int = _f(1, "worker processes (1 explores in-process)")
    batch_cells: int = _f(100, "cells sampled (with replacement) per batch")
    explore_steps: int = _f(100, "max agent steps per exploration episode")
    action_repeat_p: float = _f(0.95, "probability of keeping the current random action")
    cell_width: int = _f(11, "downscaled cell width")
    cell_height: int = _f(8, "downscaled cell height")
    cell_levels: int = _f(8, "grey levels of the cell key: floor(levels * p / 255)")
    log_every_batches: int = _f(10, "batches between metrics rows")
    ckpt_every: int = _f(1_000_000, "agent steps between checkpoints (0: only at the end)")
    explog_chunk: int = _f(1 << 22, "experience-log entries per on-disk chunk")

    # fields that may differ between a run and its resumption
    RESUMABLE = ("total_frames", "n_workers", "ckpt_every", "log_every_batches")

    def problems(self) -> list[str]:
        from goexplore.envs import game_names

        p = []
        if self.env not in game_names():
            p.append(f"env: unknown game {self.env!r}; choose one of: {', '.join(game_names())}")
        if not 0 <= self.seed < 2**63:
            p.append(f"seed: must be in 0 .. 2**63-1, got {self.seed}")
        for name in ("total_frames", "n_workers", "batch_cells", "explore_steps",
                     "cell_width", "cell_height", "log_every_batches", "explog_chunk"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                p.append(f"{name.replace('_', '-')}: must be a positive integer, got {v!r}")
        if not 1 <= self.cell_levels <= 255:
            p.append(f"cell-levels: must be in 1..255, got {self.cell_levels}")
        if not 0.0 <= self.action_repeat_p <= 1.0:
            p.append(f"action-repeat-p: must be a probability in [0, 1], got {self.action_repeat_p}")
        if self.ckpt_every < 0:
            p.append(f"ckpt-every: must be >= 0, got {self.ckpt_every}")
        return p

    def validate(self) -> "Config":
        p = self.problems()
        if p:
            raise ConfigError("invalid configuration:\n  " + "\n  ".join(p))
        return self

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Config":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ConfigError(f"unknown config fields {sorted(unknown)}; known: {sorted(names)}")
        return cls(**d)

    def replace(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes)

    def differs_from(self, other: "Config") -> list[str]:
        """Fields (other than the resumable ones) that differ."""
        return [f.name for f in fields(self) if f.name not in self.RESUMABLE
                and getattr(self, f.name) != getattr(other, f.name)]

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)
