"""The run configuration: one frozen, typed record; every field has a one-line
help used by the CLI. ``validate`` reports every problem at once.

The defaults are the reference configuration (docs/concepts.md, "What exact means")."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields
from typing import Any

from goexplore.errors import ConfigError


def _f(default: Any, help: str, **kw: Any) -> Any:
    return field(default=default, metadata={"help": help, **kw})


EPISODE_ENDS = ("life", "game")
BACKENDS = ("processes", "ray")  # goexplore.backends.base.REGISTRY, less the inline one
COUNT_WEIGHTS = ("seen_weight", "chosen_weight", "since_new_weight", "steps_weight")
WEIGHTS = COUNT_WEIGHTS + (
    "seen_power",
    "chosen_power",
    "since_new_power",
    "steps_power",
    "horiz_weight",
    "vert_weight",
    "keys_weight",
    "keys_ahead_weight",
    "score_weight",
    "low_level_weight",
    "region_power",
    "region_chosen_power",
    "lives_power",
)


def parse_downscale(text: object) -> tuple[int, int, int]:
    """``"WxHxL"`` as (width, height, levels); ValueError saying what is allowed."""
    parts = text.split("x") if isinstance(text, str) else []
    try:
        w, h, levels = (int(x) for x in parts)
    except ValueError:
        raise ValueError(f"must be WIDTHxHEIGHTxLEVELS, e.g. 4x4x8, got {text!r}") from None
    if w < 1 or h < 1 or not 1 <= levels <= 255:
        raise ValueError(f"width and height must be >= 1 and levels in 1..255, got {text!r}")
    return w, h, levels


@dataclass(frozen=True)
class Config:
    env: str = _f(
        "montezuma",
        "env to explore: a built-in game (see `goexplore games`), gym:ID, or module:factory",
    )
    env_kwargs: str = _f(
        "", "arguments for the env's factory, a JSON object (e.g. '{\"size\": 15}')"
    )
    seed: int = _f(0, "master seed: same seed, same archive")
    total_frames: int = _f(
        5_000_000, "budget in agent steps executed by workers (x4 emulator frames on Atari)"
    )
    n_workers: int = _f(
        0,
        "workers; 0 or auto: this machine's cores (processes), the cluster's CPUs (ray); "
        "1 explores in-process; results never depend on it",
    )
    backend: str = _f(
        "processes", "where workers run: processes (this machine) or ray (a Ray cluster)"
    )
    ray_address: str = _f(
        "", "with --backend ray: 'auto' or HOST:PORT joins a running cluster; '' starts Ray here"
    )
    batch_cells: int = _f(100, "cells sampled (with replacement) per batch")
    explore_steps: int = _f(100, "max agent steps per exploration episode")
    action_repeat_p: float = _f(0.95, "probability of keeping the current random action")
    cell_width: int = _f(11, "downscaled cell width")
    cell_height: int = _f(8, "downscaled cell height")
    cell_levels: int = _f(8, "grey levels of the cell key: floor(levels * p / 255)")
    preset: str = _f(
        "reference", "the preset these settings started from (a label; see `goexplore presets`)"
    )
    cells: str = _f(
        "downscale",
        "cell representation: downscale, downscale-dynamic, montezuma-dk, pitfall-dk, facts, "
        "or module:factory",
    )
    fact_bins: str = _f(
        "", "facts cells: bin size per fact, e.g. x=2,y=2 (default 1 each; 0 leaves a fact out)"
    )
    cell_x_bin: int = _f(
        8, "domain-knowledge cells: RAM x pixels per bin (paper: 16 on a 2x-wide frame)"
    )
    cell_y_bin: int = _f(16, "domain-knowledge cells: RAM y pixels per bin (paper: 16)")
    dynamic_first: int = _f(
        10_000, "downscale-dynamic: agent steps before the first choice (paper: 10,000)"
    )
    dynamic_every: int = _f(
        500_000, "downscale-dynamic: agent steps between choices (paper: 10M, in 500M-step runs)"
    )
    dynamic_max_cells: int = _f(
        50_000, "downscale-dynamic: choose again at once above this many cells (paper: 50,000)"
    )
    dynamic_sample: int = _f(
        10_000, "downscale-dynamic: recent frames kept for the choice (paper: 10,000)"
    )
    dynamic_sample_p: float = _f(
        0.01, "downscale-dynamic: probability that a step's frame joins the sample (paper: 0.01)"
    )
    dynamic_iterations: int = _f(
        100, "downscale-dynamic: random-search proposals per choice (paper: 3,000)"
    )
    split_factor: float = _f(
        0.125, "downscale-dynamic: target cells per sampled frame (paper: 0.125)"
    )
    dynamic_keep: float = _f(
        0.0,
        "downscale-dynamic: keep the current downscale unless the search's best scores "
        "more than (1 + this) times it on the same sample (paper: 0, always take the best)",
    )
    dynamic_min_cells: float = _f(
        0.0,
        "downscale-dynamic: a choice must put the sample into at least this fraction of its "
        "target cells, else the search's best proposal that does is taken, or the current "
        "downscale stays (0: off, as the paper)",
    )
    dynamic_start: str = _f(
        "",
        "downscale-dynamic: the downscale WIDTHxHEIGHTxLEVELS used before the first choice "
        "('': one cell, as the paper; e.g. 11x8x8, the reference's); pair it with a later "
        "--dynamic-first",
    )
    cell_score_bin: int = _f(
        0,
        "downscale-dynamic: also key cells on score // BIN, so states that look alike but "
        "differ in score (a key held, an item taken) stay apart (the original code's "
        "--use_scores; 0: off)",
    )
    dynamic_target_floor: float = _f(
        0.0,
        "downscale-dynamic: a choice targets at least this fraction of the cells the current "
        "downscale gives the sample, so the target grows with the archive "
        "(0: off, the paper's split-factor target alone; 1: never coarser on the sample)",
    )
    dynamic_max_shadow: int = _f(
        0,
        "downscale-dynamic: merged-away entries kept for later re-keyings, the highest "
        "scoring (then shortest) first (0: all, as the paper; each holds ~1 kB)",
    )
    episode_end: str = _f(
        "life", "an exploration episode ends at a life loss ('life') or game over ('game')"
    )
    stop_at_life_loss: bool = _f(
        False,
        "with --episode-end game: a life loss stops the exploration (not the episode), so "
        "no steps are spent after a death; the state after it stays a cell to go on from",
    )
    stop_at_life_loss_until: int = _f(
        0,
        "with --stop-at-life-loss true: stop at a life loss only in the batches that start "
        "before this many agent steps, then play explorations on to game over (0: all run)",
    )
    seen_weight: float = _f(
        1.0, "selection: weight of 1/(seen+1)^power (seen: episodes that visited the cell)"
    )
    seen_power: float = _f(0.5, "selection: power of the seen term")
    chosen_weight: float = _f(
        0.0, "selection: weight of 1/(chosen+1)^power (times the cell was picked)"
    )
    chosen_power: float = _f(0.5, "selection: power of the chosen term")
    since_new_weight: float = _f(
        0.0, "selection: weight of 1/(picks since it last led to something new+1)^power"
    )
    since_new_power: float = _f(0.5, "selection: power of the chosen-since-new term")
    steps_weight: float = _f(0.0, "selection: weight of 1/(agent steps taken in the cell+1)^power")
    steps_power: float = _f(0.5, "selection: power of the steps term")
    horiz_weight: float = _f(
        0.0, "selection (cells with a position): weight per missing left/right neighbour"
    )
    vert_weight: float = _f(
        0.0, "selection (cells with a position): weight per missing up/down neighbour"
    )
    keys_weight: float = _f(
        0.0, "selection (cells with a position): weight of holding the most items at its place"
    )
    keys_ahead_weight: float = _f(
        0.0,
        "selection (cells with a position): weight of holding more items than every other "
        "cell at its place (0 for a cell alone there)",
    )
    score_weight: float = _f(
        0.0,
        "selection: weight of 1/sqrt(score rank) (rank 1: the archive's highest score; "
        "equal scores share a rank; the original code's score_high)",
    )
    score_filter: float = _f(
        0.0,
        "selection: probability that a batch picks only among cells scoring at least as "
        "much as a random cell (the original code's ScoreBasedFilter: 0.5)",
    )
    max_score_only: bool = _f(
        False,
        "selection (with --cell-score-bin): among cells whose keys differ only in the score, "
        "only the highest-scoring can be picked (the original code's MaxScoreReset: each "
        "keeps its own counters)",
    )
    region_power: float = _f(
        0.0,
        "selection (downscale-dynamic): the weight times (cells in the cell's region)^-power; "
        "a region: the cells whose frames share one coarse downscale (--region-cells); 0: off",
    )
    region_chosen_power: float = _f(
        0.0,
        "selection (downscale-dynamic): the weight times (1 + the picks of the cells in the "
        "cell's region, each counted since the cell was last set)^-power: regions picked "
        "often weigh less than new ones; 0: off",
    )
    region_cells: str = _f(
        "4x4x8",
        "downscale-dynamic: the coarse downscale WIDTHxHEIGHTxLEVELS that groups cells into "
        "regions for --region-power and --region-chosen-power (levels as --cell-levels)",
    )
    region_radius: float = _f(
        0.0,
        "downscale-dynamic: 0: a region is one --region-cells key; r > 0: regions are "
        "look-alike screens: a frame joins the first region whose first frame's key differs "
        "from its own by at most r of the grey range per pixel on average, else starts one",
    )
    region_score: bool = _f(
        False,
        "downscale-dynamic, with a region term: a region is also one score, so the cells of "
        "a screen group by the score their state holds and a screen reached with a score new "
        "there weighs as much as one seen before",
    )
    low_level_weight: float = _f(
        1.0, "selection: weight factor low_level_weight^(max level - level)"
    )
    lives_power: float = _f(
        0.0,
        "selection: the weight times (1 + lives the cell's state has left)^power, so with "
        "--episode-end game a place reached with more lives is picked more; 0: off",
    )
    reset_on_update: bool = _f(True, "reset a cell's counters when its entry improves")
    seen_start: bool = _f(
        False,
        "selection: seen also counts the cell an episode starts from, once (the Nature "
        "paper's rule); the reference counts it only when the episode visits it again",
    )
    log_every_batches: int = _f(10, "batches between metrics rows")
    ckpt_every: int = _f(1_000_000, "agent steps between checkpoints (0: only at the end)")
    explog_chunk: int = _f(1 << 22, "experience-log entries per on-disk chunk")

    # fields that may differ between a run and its resumption
    RESUMABLE = (
        "total_frames",
        "n_workers",
        "backend",
        "ray_address",
        "ckpt_every",
        "log_every_batches",
    )
    # fields a branch (``run --branch-from``) may also change: the selection's, all
    # computed from what every checkpoint holds (the counters, scores, keys, facts)
    BRANCHABLE = WEIGHTS + (
        "score_filter",
        "seen_start",
        "reset_on_update",
        "max_score_only",
        "region_score",
    )

    def problems(self) -> list[str]:
        p = []
        if not 0 <= self.seed < 2**63:
            p.append(f"seed: must be in 0 .. 2**63-1, got {self.seed}")
        if not isinstance(self.n_workers, int) or self.n_workers < 0:
            p.append(f"n-workers: must be a positive integer or 0 (auto), got {self.n_workers!r}")
        for name in (
            "total_frames",
            "batch_cells",
            "explore_steps",
            "cell_width",
            "cell_height",
            "log_every_batches",
            "explog_chunk",
            "dynamic_first",
            "dynamic_every",
            "dynamic_max_cells",
            "dynamic_sample",
            "dynamic_iterations",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                p.append(f"{name.replace('_', '-')}: must be a positive integer, got {v!r}")
        if not 1 <= self.cell_levels <= 255:
            p.append(f"cell-levels: must be in 1..255, got {self.cell_levels}")
        if not 0.0 <= self.action_repeat_p <= 1.0:
            p.append(
                f"action-repeat-p: must be a probability in [0, 1], got {self.action_repeat_p}"
            )
        for name in ("dynamic_sample_p", "split_factor"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
                p.append(f"{name.replace('_', '-')}: must be in (0, 1], got {v!r}")
        for name in ("dynamic_target_floor", "dynamic_min_cells"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                p.append(f"{name.replace('_', '-')}: must be in [0, 1] (0: off), got {v!r}")
        if not isinstance(self.dynamic_max_shadow, int) or self.dynamic_max_shadow < 0:
            p.append(
                f"dynamic-max-shadow: must be an integer >= 0 (0: no bound), "
                f"got {self.dynamic_max_shadow!r}"
            )
        if self.ckpt_every < 0:
            p.append(f"ckpt-every: must be >= 0, got {self.ckpt_every}")
        if self.backend not in BACKENDS:
            p.append(f"backend: must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        elif self.ray_address and self.backend != "ray":
            p.append("ray-address: only with --backend ray")
        p += self._cell_problems()
        if self.episode_end not in EPISODE_ENDS:
            p.append(
                f"episode-end: must be one of {', '.join(EPISODE_ENDS)}, got {self.episode_end!r}"
            )
        for name in (*WEIGHTS, "dynamic_keep"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0.0 <= v < float("inf"):
                p.append(f"{name.replace('_', '-')}: must be a finite number >= 0, got {v!r}")
        if not any(
            getattr(self, n) > 0
            for n in COUNT_WEIGHTS
            if isinstance(getattr(self, n), (int, float))
        ):
            p.append(
                "selection: at least one of "
                + ", ".join("--" + n.replace("_", "-") for n in COUNT_WEIGHTS)
                + " must be positive (else cells can get weight 0)"
            )
        if self.stop_at_life_loss is True and self.episode_end != "game":
            p.append(
                "stop-at-life-loss: needs --episode-end game (a life loss already ends "
                f"the episode), got --episode-end {self.episode_end}; with --episode-end life, "
                "add --stop-at-life-loss false"
            )
        until = self.stop_at_life_loss_until
        if isinstance(until, bool) or not isinstance(until, int) or until < 0:
            p.append(
                f"stop-at-life-loss-until: must be a whole number of agent steps >= 0 "
                f"(0: the whole run), got {until!r}"
            )
        elif until > 0 and self.stop_at_life_loss is not True:
            p.append(
                "stop-at-life-loss-until: needs --stop-at-life-loss true "
                f"(got --stop-at-life-loss {self.stop_at_life_loss})"
            )
        for name in (
            "reset_on_update",
            "seen_start",
            "stop_at_life_loss",
            "max_score_only",
            "region_score",
        ):
            if not isinstance(getattr(self, name), bool):
                p.append(
                    f"{name.replace('_', '-')}: must be true or false, got {getattr(self, name)!r}"
                )
        p += self._region_problems()
        if not isinstance(self.score_filter, (int, float)) or not 0.0 <= self.score_filter <= 1:
            p.append(f"score-filter: must be a probability in [0, 1], got {self.score_filter!r}")
        if not isinstance(self.preset, str) or not self.preset:
            p.append(f"preset: must be a non-empty name, got {self.preset!r}")
        return p

    def _region_problems(self) -> list[str]:
        try:
            parse_downscale(self.region_cells)
        except ValueError as e:
            return [f"region-cells: {e}"]
        r = self.region_radius
        if not isinstance(r, (int, float)) or not 0.0 <= r < 1.0:
            return [f"region-radius: must be in [0, 1) (0: one region per key), got {r!r}"]
        if r and not (self.region_power or self.region_chosen_power):
            return ["region-radius: only with --region-power or --region-chosen-power"]
        if self.region_score is True and not (self.region_power or self.region_chosen_power):
            return ["region-score: only with --region-power or --region-chosen-power"]
        for name in ("region_power", "region_chosen_power"):
            power = getattr(self, name)
            if isinstance(power, (int, float)) and power > 0 and self.cells != "downscale-dynamic":
                return [
                    f"{name.replace('_', '-')}: needs --cells downscale-dynamic (regions group "
                    f"cells by their frames), got --cells {self.cells}"
                ]
        b = self.cell_score_bin
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            return [f"cell-score-bin: must be a whole number >= 0 (0: off), got {b!r}"]
        if b and self.cells != "downscale-dynamic":
            return [f"cell-score-bin: needs --cells downscale-dynamic, got --cells {self.cells}"]
        if self.max_score_only is True and not b:
            return ["max-score-only: needs --cell-score-bin > 0 (keys that hold the score)"]
        if self.dynamic_start:
            try:
                parse_downscale(self.dynamic_start)
            except ValueError as e:
                return [f"dynamic-start: {e}"]
            if self.cells != "downscale-dynamic":
                return [f"dynamic-start: needs --cells downscale-dynamic, got --cells {self.cells}"]
        return []

    def _cell_problems(self) -> list[str]:
        from goexplore.cells import representation_class
        from goexplore.cells.domain import check_bins
        from goexplore.cells.facts import parse_bins
        from goexplore.errors import GoExploreError
        from goexplore.plugins import env_fact_names

        try:
            names = env_fact_names(self.env, self.env_kwargs)
        except GoExploreError as e:
            return [str(e) if str(e).startswith("env") else f"env: {e}"]
        try:
            cls = representation_class(self.cells)
            parse_bins(self.fact_bins)
            if getattr(cls, "uses_fact_names", False):
                cls.from_config(self, names)
        except GoExploreError as e:
            return [str(e)]
        p = check_bins(self)
        problems = getattr(cls, "problems", None)
        return p + (problems(self.env, names) if callable(problems) else [])

    def validate(self) -> Config:
        p = self.problems()
        if p:
            raise ConfigError("invalid configuration:\n  " + "\n  ".join(p))
        return self

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Config:
        """A config from its JSON; fields it lacks (it was written by an older
        version) take their defaults, which are the reference behaviour."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ConfigError(f"unknown config fields {sorted(unknown)}; known: {sorted(names)}")
        return cls(**d)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    def differs_from(self, other: Config, also: tuple[str, ...] = ()) -> list[str]:
        """Fields (other than the resumable ones and ``also``) that differ."""
        return [
            f.name
            for f in fields(self)
            if f.name not in self.RESUMABLE
            and f.name not in also
            and getattr(self, f.name) != getattr(other, f.name)
        ]

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)
