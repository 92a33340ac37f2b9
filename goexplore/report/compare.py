"""``goexplore compare RUN_DIR... --out DIR``: several runs on one page.

Reads existing run dirs (config.json, metrics.jsonl, final.json when the run
finished) and runs nothing. The page, ``DIR/index.html``, shows:

* curves over agent steps, one PNG per quantity (best score in the archive,
  best end-of-episode score, cells, rooms, level). Runs of the same group
  (env, preset and the settings that differ from it, e.g. ``downscale-dynamic
  --since-new-weight 0``) are drawn as one band: the median across the group's runs and
  a shaded min–max. A run's value at step s is its last metrics row with
  frames <= s (a step function); a run contributes only from its first to its
  last row, so the band narrows where runs have ended;
* a table per common budget (1M, 2M, 5M, 10M, 20M agent steps, those that at
  least one run reached): each run's figures at the budget, read from its last
  metrics row at or before it ("-" for a run that did not reach the budget);
* each run's final figures (final.json, or its last metrics row while the run is
  in progress or was interrupted), the step at which it first had
  max_level >= 1, and whether final.json says its best trajectories
  replay-verified from reset;
* which protocol the scores come from, and the run dirs compared.

``--until STEPS`` compares the runs as they stood at STEPS agent steps: a run that went
further counts only its metrics rows at or before STEPS (curves, tables, and its final
figures, which then come from its last such row), and STEPS is one of the budgets.

Runs written before ``preset`` and ``max_level`` existed count as preset
"reference" and have no level curve ("-" in the tables). The page is plain
HTML that links its PNGs by relative name, so DIR can be moved as a whole.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np

from goexplore import formats
from goexplore.errors import GoExploreError, StorageError

BUDGETS = (1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000)
DEFAULT_PRESET = "reference"
DEFAULT_OUT = "compare-out"
DASH = "-"

# (metrics.jsonl field, figure title, PNG name); the first four are the
# fields every row has; rooms and level are absent or null for some games
QUANTITIES = (
    ("max_archive_score", "best score in the archive (max_archive_score)", "best_score.png"),
    ("best_done_score", "best end-of-episode score (best_done_score)", "best_done_score.png"),
    ("n_cells", "cells in the archive", "cells.png"),
    ("rooms_found", "rooms found", "rooms.png"),
    ("max_level", "highest level reached (max_level)", "level.png"),
)

PROTOCOL_NOTE = (
    "Scores are Phase 1 results: a deterministic search that restores the "
    "emulator to archived states, with no sticky actions "
    "(repeat_action_probability 0). They are not comparable with scores of RL "
    "policies evaluated with sticky actions. Steps are agent steps (4 emulator "
    "frames each on Atari)."
)


# --- reading run dirs -------------------------------------------------------------------------


@dataclass
class Run:
    """One run dir as read from disk."""

    path: Path
    env: str
    preset: str
    seed: int | None
    rows: list[dict] = field(repr=False)
    final: dict | None = field(repr=False)
    notes: list[str] = field(default_factory=list)
    cut: int | None = None  # --until: the run went past this many steps and stops here

    def until(self, steps: int) -> Run:
        """The run as it stood at ``steps`` agent steps (itself if it had not gone past)."""
        if self.frames_total <= steps:
            return self
        rows = [r for r in self.rows if r["frames"] <= steps]
        return Run(self.path, self.env, self.preset, self.seed, rows, None, self.notes, steps)

    @property
    def group(self) -> tuple[str, str]:
        return self.env, self.preset

    @property
    def frames_total(self) -> int:
        """Agent steps the run executed (to ``cut`` at most): final.json's count, else
        its last row's."""
        if self.cut is not None:
            return self.cut
        if self.final is not None and isinstance(self.final.get("frames_total"), int):
            return self.final["frames_total"]
        return self.rows[-1]["frames"] if self.rows else 0


def read_metrics(path: Path) -> tuple[list[dict], list[str]]:
    """The rows of a metrics.jsonl and notes about it (the run dir's one reader,
    :func:`goexplore.formats.read_metrics`)."""
    return formats.read_metrics(path)


def _flag_value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def changed_flags(cfg: dict, preset: str) -> str:
    """The settings of ``cfg`` (a config.json) that differ from what ``preset`` gives,
    as flags (" --since-new-weight 0"); "" for an unknown preset. Only fields
    config.json holds count, and not those that may change on resume."""
    from goexplore.config import Config
    from goexplore.errors import ConfigError
    from goexplore.presets import PRESETS, apply_preset

    if preset not in PRESETS:
        return ""
    try:
        base = json.loads(json.dumps(apply_preset(preset, {"env": cfg.get("env")}).to_json()))
    except (ConfigError, TypeError, ValueError):
        return ""
    skip = {"env", "seed", "preset", *Config.RESUMABLE}
    return "".join(
        f" --{k.replace('_', '-')} {_flag_value(cfg[k])}"
        for k in base
        if k in cfg and k not in skip and cfg[k] != base[k]
    )


def load_run(path: Path) -> Run:
    """Read one run dir; a GoExploreError naming the path if it is not one."""
    path = Path(path)
    if not path.exists():
        raise GoExploreError(f"{path}: no such run dir")
    if not path.is_dir():
        raise GoExploreError(f"{path}: not a directory (give a run dir)")
    for name in ("config.json", "metrics.jsonl"):
        if not (path / name).is_file():
            raise GoExploreError(f"{path}: not a run dir (no {name})")
    cfg = formats.read_config_object(path / "config.json")
    env = cfg.get("env")
    if not isinstance(env, str) or not env:
        raise GoExploreError(f"{path / 'config.json'}: 'env' must be a game name, got {env!r}")
    preset = cfg.get("preset", DEFAULT_PRESET)
    if preset is None:
        preset = DEFAULT_PRESET
    if not isinstance(preset, str):
        raise GoExploreError(f"{path / 'config.json'}: 'preset' must be a string, got {preset!r}")
    seed = cfg.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise GoExploreError(f"{path / 'config.json'}: 'seed' must be an integer, got {seed!r}")
    preset = preset + changed_flags(cfg, preset)
    branch = formats.read_branch(path / "branch.json")
    if branch is not None:  # not the same search as a run with its settings from the start
        at = float(f"{branch['frames']:.2g}")  # seeds branched a few steps apart: one group
        preset += f" branched at {at / 1e6:g}M"
    rows, notes = read_metrics(path / "metrics.jsonl")
    final = formats.read_final(path / "final.json")
    return Run(path, env, preset, seed, rows, final, notes)


def load_runs(run_dirs: list[Path], until: int | None = None) -> list[Run]:
    """Every run dir read (each as it stood at ``until`` agent steps, if given), ordered
    by group (env, preset), then seed, then path."""
    if not run_dirs:
        raise GoExploreError("compare: no run dirs given (give one or more RUN_DIRs)")
    if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < 1):
        raise GoExploreError(
            f"compare: --until must be a positive number of agent steps, got {until!r}"
        )
    seen: dict[Path, Path] = {}
    runs = []
    for p in map(Path, run_dirs):
        key = p.resolve()
        if key in seen:
            raise GoExploreError(f"{p}: given twice (also as {seen[key]})")
        seen[key] = p
        run = load_run(p)
        runs.append(run if until is None else run.until(until))
    return sorted(runs, key=lambda r: (r.env, r.preset, r.seed is None, r.seed or 0, str(r.path)))


# --- step functions and bands ---------------------------------------------------------------


def series(rows: list[dict], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(frames, values) of one field over a run's rows; NaN where it is null or absent."""
    frames = np.array([r["frames"] for r in rows], dtype=np.float64)
    values = np.array([np.nan if r.get(name) is None else r[name] for r in rows], dtype=np.float64)
    return frames, values


def step_values(frames: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A run's value at each grid step: its last row with frames <= step. NaN
    before its first row and after its last (the run does not contribute)."""
    grid = np.asarray(grid, dtype=np.float64)
    out = np.full(grid.shape, np.nan)
    if len(frames) == 0:
        return out
    idx = np.searchsorted(frames, grid, side="right") - 1
    ok = (idx >= 0) & (grid <= frames[-1])
    out[ok] = values[idx[ok]]
    return out


def common_grid(curves: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Every step at which some run has a row: the step functions, and so their
    median, min and max, only change there."""
    parts = [f for f, _ in curves if len(f)]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0)


@dataclass
class Band:
    """Median, min and max across runs on a grid of agent steps; NaN where no run
    contributes. ``n`` counts the runs that contribute at each step."""

    grid: np.ndarray
    median: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray


def band(curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray | None = None) -> Band:
    """The band of several runs' step functions (each a (frames, values) pair).
    The median of an even number of runs is the mean of the middle two."""
    grid = common_grid(curves) if grid is None else np.asarray(grid, dtype=np.float64)
    m = (
        np.vstack([step_values(f, v, grid) for f, v in curves])
        if curves
        else np.full((0, len(grid)), np.nan)
    )
    n = (~np.isnan(m)).sum(axis=0)
    med, lo, hi = (np.full(grid.shape, np.nan) for _ in range(3))
    cols = n > 0
    if cols.any():
        sub = m[:, cols]
        med[cols] = np.nanmedian(sub, axis=0)
        lo[cols] = np.nanmin(sub, axis=0)
        hi[cols] = np.nanmax(sub, axis=0)
    return Band(grid, med, lo, hi, n)


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """A run's figures at one point: a metrics row, or final.json."""

    frames: int
    best_score: float | None  # max_archive_score: best score in the archive
    best_done_score: float | None  # best end-of-episode score
    cells: int | None
    rooms: int | None
    level: int | None  # max_level (None: not logged by this run or game)

    @classmethod
    def of(cls, d: dict, frames: int) -> Figures:
        return cls(
            frames,
            d.get("max_archive_score"),
            d.get("best_done_score"),
            d.get("n_cells"),
            d.get("rooms_found"),
            d.get("max_level"),
        )


@dataclass(frozen=True)
class TableRow:
    run_dir: Path
    env: str
    preset: str
    seed: int | None
    at: dict[int, Figures | None]  # budget -> figures there (None: run did not reach it)
    first_level1_step: int | None  # first row with max_level >= 1
    final: Figures | None  # None: no final.json and no metrics row yet
    final_from: str  # "final.json", "metrics.jsonl" (in progress / interrupted) or "until"
    verified: bool | None  # final.json's verdict; None without final.json


def row_at(rows: list[dict], step: int) -> dict | None:
    """The last metrics row with frames <= step (None if there is none)."""
    i = int(np.searchsorted([r["frames"] for r in rows], step, side="right")) - 1
    return rows[i] if i >= 0 else None


def first_level_step(rows: list[dict], level: int = 1) -> int | None:
    """Frames of the first row with max_level >= level (None if no row has it)."""
    for r in rows:
        v = r.get("max_level")
        if v is not None and v >= level:
            return r["frames"]
    return None


def budgets_reached(runs: list[Run], budgets: tuple[int, ...] = BUDGETS) -> list[int]:
    """The budgets that at least one run reached."""
    most = max((r.frames_total for r in runs), default=0)
    return [b for b in budgets if most >= b]


def table(runs: list[Run], budgets: list[int]) -> list[TableRow]:
    """Each run's figures at the budgets, its first step at level >= 1, its final figures.

    A run reached a budget when it executed that many agent steps (final.json's
    frames_total, else its last row); its figures there are its last row at or
    before the budget. Rows are logged every few batches, so that row can be up
    to one logging interval before the budget."""
    out = []
    for run in runs:
        at: dict[int, Figures | None] = {}
        for b in budgets:
            r = row_at(run.rows, b) if run.frames_total >= b else None
            at[b] = None if r is None else Figures.of(r, r["frames"])
        if run.final is not None:
            fin = dict(run.final)
            if "max_level" not in fin and run.rows:  # older final.json: the last row's
                fin["max_level"] = run.rows[-1].get("max_level")
            final, source = Figures.of(fin, run.frames_total), "final.json"
            verified = run.final.get("verified")
            verified = verified if isinstance(verified, bool) else None
        else:
            final = Figures.of(run.rows[-1], run.rows[-1]["frames"]) if run.rows else None
            source, verified = "until" if run.cut is not None else "metrics.jsonl", None
        out.append(
            TableRow(
                run.path,
                run.env,
                run.preset,
                run.seed,
                at,
                first_level_step(run.rows),
                final,
                source,
                verified,
            )
        )
    return out


# --- figures --------------------------------------------------------------------------------


def _group_label(group: tuple[str, str], seeds: list[int | None]) -> str:
    s = ", ".join("?" if x is None else str(x) for x in seeds)
    return f"{group[0]} / {group[1]} ({len(seeds)} run{'s' if len(seeds) != 1 else ''}: seed {s})"


def bands_png(
    groups: dict[tuple[str, str], list[Run]], name: str, title: str, dpi: int = 100
) -> tuple[bytes | None, list[tuple[str, str]]]:
    """One figure: each group's band of ``name`` over agent steps. Returns the
    PNG (None when no run logged the quantity) and the groups without data."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from goexplore.report.plots import _plt, _png, _steps_fmt

    drawn, missing = [], []
    for group, runs in groups.items():
        have = [(run, series(run.rows, name)) for run in runs]
        have = [(run, c) for run, c in have if not np.isnan(c[1]).all()]
        if have:
            drawn.append((group, [run.seed for run, _ in have], band([c for _, c in have])))
        else:
            missing.append(group)
    if not drawn:
        return None, missing
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 3.9), constrained_layout=True)
    colours = plt.get_cmap("tab10").colors
    for k, (group, seeds, b) in enumerate(drawn):
        c = colours[k % len(colours)]
        ax.fill_between(b.grid, b.lo, b.hi, step="post", color=c, alpha=0.2, lw=0)
        ax.step(b.grid, b.median, where="post", color=c, lw=1.7, label=_group_label(group, seeds))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("agent steps", fontsize=9)
    ax.xaxis.set_major_formatter(FuncFormatter(_steps_fmt))
    ax.xaxis.set_major_locator(MaxNLocator(6))
    if name in ("n_cells", "rooms_found", "max_level"):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=min(0.0, min(float(np.nanmin(b.lo)) for _, _, b in drawn)))
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    fig.legend(
        loc="outside lower center",
        fontsize=8,
        ncols=min(2, len(drawn)),
        title="median across runs; shaded: min to max",
        title_fontsize=8,
    )
    return _png(fig, dpi), missing


# --- the page -------------------------------------------------------------------------------


@dataclass
class CompareResult:
    html: Path
    pngs: list[Path]
    rows: list[TableRow]
    budgets: list[int]


def _fmt(v, kind: str = "int") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return DASH
    try:
        return f"{v:,g}" if kind == "score" else f"{v:,}"
    except (TypeError, ValueError):  # final.json written by something else
        return escape(str(v))


def _budget_name(b: int) -> str:
    from goexplore.report.plots import _steps_fmt

    return _steps_fmt(b)


def _fig_cells(f: Figures | None) -> str:
    if f is None:
        return "".join(f"<td>{DASH}</td>" for _ in range(5))
    return (
        f"<td>{_fmt(f.best_score, 'score')}</td><td>{_fmt(f.best_done_score, 'score')}</td>"
        f"<td>{_fmt(f.cells)}</td><td>{_fmt(f.rooms)}</td><td>{_fmt(f.level)}</td>"
    )


FIG_HEAD = (
    "<th>best score in the archive</th><th>best end-of-episode score</th>"
    "<th>cells</th><th>rooms</th><th>level</th>"
)


def _run_cells(t: TableRow) -> str:
    return (
        f"<td class='l'><code>{escape(str(t.run_dir))}</code></td>"
        f"<td class='l'>{escape(t.env)} / {escape(t.preset)}</td>"
        f"<td>{DASH if t.seed is None else t.seed}</td>"
    )


def render(
    runs: list[Run],
    rows: list[TableRow],
    budgets: list[int],
    figures: list[tuple[str, str | None, list[tuple[str, str]]]],
) -> str:
    """The page. ``figures``: (title, PNG file name or None, groups without data)."""
    from goexplore.report.html import CSS

    n_groups = len({r.group for r in runs})
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>goexplore compare: {len(runs)} runs</title>",
        f"<style>{CSS}\n.figs{{display:flex;flex-wrap:wrap;gap:14px}}"
        ".figs figure{margin:0;max-width:560px}.scroll{overflow-x:auto}</style>",
        "</head><body><main>",
        f"<h1>Go-Explore Phase 1: {len(runs)} runs compared</h1>",
        f'<p class="sub">{n_groups} group{"s" if n_groups != 1 else ""} (env / preset, '
        "with the settings that differ from it); "
        "runs of a group are drawn as one band: the median across its runs, shaded from "
        "the lowest to the highest.</p>",
        f'<p class="note"><b>Protocol.</b> {escape(PROTOCOL_NOTE)}</p>',
    ]
    protocols = sorted(
        {r.final["protocol"] for r in runs if r.final and isinstance(r.final.get("protocol"), str)}
    )
    if protocols:
        out.append(
            '<p class="note">final.json says: '
            + "; ".join(f"<i>{escape(p)}</i>" for p in protocols)
            + "</p>"
        )

    out.append("<h2>Curves</h2>")
    out.append(
        '<p class="note">A run\'s value at step s is its last metrics row at or before s; '
        "a run counts only up to its last row, so where runs have ended the band holds "
        "fewer of them.</p>"
    )
    out.append('<div class="figs">')
    for title, png, missing in figures:
        out.append("<figure>")
        if png is not None:
            out.append(f'<img class="fig" alt="{escape(title)}" src="{escape(png)}">')
        else:
            out.append(f"<p class='note'><b>{escape(title)}</b>: no run logged it.</p>")
        if missing and png is not None:
            names = ", ".join(f"{escape(e)} / {escape(p)}" for e, p in missing)
            out.append(
                f"<figcaption>no data (not logged by these runs or games): {names}</figcaption>"
            )
        out.append("</figure>")
    out.append("</div>")

    out.append("<h2>At common budgets</h2>")
    if budgets:
        out.append(
            f'<p class="note">Each run\'s last metrics row at or before the budget '
            f"(hover a row for its step); {DASH}: the run did not reach the budget. "
            "Rows are logged every few batches, so a figure can be up to one logging "
            "interval old.</p>"
        )
    else:
        out.append(
            f'<p class="note">No run reached {_budget_name(BUDGETS[0])} agent steps; '
            "see the final figures below.</p>"
        )
    for b in budgets:
        out.append(f"<h3>{_budget_name(b)} agent steps ({b:,})</h3>")
        out.append(
            "<div class='scroll'><table><tr><th class='l'>run dir</th>"
            "<th class='l'>env / preset</th><th>seed</th>" + FIG_HEAD + "</tr>"
        )
        for t in rows:
            f = t.at[b]
            hover = "" if f is None else f" title='metrics row at {f.frames:,} agent steps'"
            out.append(f"<tr{hover}>{_run_cells(t)}{_fig_cells(f)}</tr>")
        out.append("</table></div>")

    out.append("<h2>Final figures</h2>")
    out.append(
        "<div class='scroll'><table><tr><th class='l'>run dir</th><th class='l'>env / preset"
        "</th><th>seed</th><th>agent steps</th>"
        + FIG_HEAD
        + "<th>first step at level ≥ 1</th><th>replay-verified</th><th class='l'>from</th></tr>"
    )
    for t in rows:
        f = t.final
        verified = (
            DASH
            if t.verified is None
            else '<span class="ok">yes</span>'
            if t.verified
            else '<span class="bad">NO</span>'
        )
        source = {
            "final.json": "final.json",
            "until": "last metrics row at or before --until",
        }.get(t.final_from, "last metrics row (no final.json: in progress or interrupted)")
        out.append(
            f"<tr>{_run_cells(t)}<td>{_fmt(None if f is None else f.frames)}</td>"
            f"{_fig_cells(f)}<td>{_fmt(t.first_level1_step)}</td><td>{verified}</td>"
            f"<td class='l'>{escape(source)}</td></tr>"
        )
    out.append("</table></div>")
    out.append(
        '<p class="note">level: max_level as the run logs it; first step at level ≥ 1: '
        f"the first metrics row with max_level ≥ 1 ({DASH}: never, or not logged). "
        "replay-verified: final.json's check that the best trajectories replay from "
        "reset to their archived scores.</p>"
    )

    out.append("<h2>Run dirs compared</h2><ul>")
    for r in runs:
        last = r.rows[-1]["frames"] if r.rows else 0
        out.append(
            f"<li><code>{escape(str(r.path))}</code>: {escape(r.env)} / "
            f"{escape(r.preset)}, seed {DASH if r.seed is None else r.seed}, "
            f"{len(r.rows):,} metrics rows "
            f"(last at {last:,} agent steps"
            f"{'' if r.cut is None else f'; compared to {r.cut:,} with --until'})"
            f"{'' if r.final or r.cut is not None else ', no final.json'}</li>"
        )
    out.append("</ul>")
    notes = [n for r in runs for n in r.notes]
    if notes:
        out.append("<p class='note'>" + "<br>".join(escape(n) for n in notes) + "</p>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def compare(run_dirs: list[Path], out: Path, until: int | None = None) -> CompareResult:
    """Read the run dirs and write ``out/index.html`` with its PNGs; with ``until``,
    each run as it stood at that many agent steps."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GoExploreError(f"--out {out}: exists and is a file (give a directory)")
    runs = load_runs(run_dirs, until)
    budgets = budgets_reached(
        runs,
        BUDGETS if until is None else tuple(sorted({b for b in BUDGETS if b < until} | {until})),
    )
    rows = table(runs, budgets)
    groups: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(out, e) from None
    pngs: list[Path] = []
    figures: list[tuple[str, str | None, list[tuple[str, str]]]] = []
    for name, title, file in QUANTITIES:
        png, missing = bands_png(groups, name, title)
        path = out / file
        try:
            if png is None:
                path.unlink(missing_ok=True)  # a previous comparison's, now stale
            else:
                path.write_bytes(png)
                pngs.append(path)
        except OSError as e:
            raise StorageError(path, e) from None
        figures.append((title, None if png is None else file, missing))
    html = out / "index.html"
    try:
        html.write_text(render(runs, rows, budgets, figures), encoding="utf-8")
    except OSError as e:
        raise StorageError(html, e) from None
    return CompareResult(html, pngs, rows, budgets)


# --- the command ----------------------------------------------------------------------------


def cmd_compare(args) -> int:
    res = compare([Path(p) for p in args.run_dirs], Path(args.out), args.until)
    print(
        f"compare: {res.html}  ({len(res.rows)} runs)\n  also: "
        + ", ".join(p.name for p in res.pngs)
    )
    return 0


def _steps(text: str) -> int:
    """``--until``: a positive whole number of agent steps, as 3000000 or 3e6."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 1 and v.is_integer()):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a positive whole number of agent steps (e.g. 3000000 or 3e6)"
        )
    return int(v)


def add_parser(sub):
    """Add ``compare`` to an argparse subparsers object (``goexplore compare``)."""
    c = sub.add_parser(
        "compare",
        help="one HTML page comparing run dirs: curves over agent "
        "steps (median and min-max per env/preset), figures "
        "at 1M/2M/5M/10M/20M steps, final figures; runs nothing",
    )
    c.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run dirs to compare")
    c.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder for index.html and its PNGs (default ./{DEFAULT_OUT}; "
        "created if needed, our files in it are overwritten)",
    )
    c.add_argument(
        "--until",
        type=_steps,
        default=None,
        metavar="STEPS",
        help="compare the runs as they stood at STEPS agent steps (e.g. 3000000 or 3e6): "
        "later metrics rows are left out, and STEPS is one of the budgets",
    )
    c.set_defaults(func=cmd_compare)
    return c
