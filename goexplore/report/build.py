"""``goexplore report``: one HTML page that shows what a run explored.

Everything is read from the run dir (metrics.jsonl, the latest checkpoint,
the experience log, final.json) and every picture of the game comes from the
game itself: trajectories are replayed from reset and rendered. The page is
self-contained (images and the GIF are base64 data URIs); the full-length MP4
is a sibling file it links to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from goexplore.errors import GoExploreError
from goexplore.report.media import Player, VideoWriter, png_bytes, upscale, video_scale

MAX_MAP_LEVELS = 3


@dataclass
class TopCell:
    rank: int
    cell: int
    score: float
    length: int
    facts: dict
    seen: int
    chosen: int
    replayed_score: float
    thumb_png: bytes = field(repr=False)
    description: str = ""  # the cell representation's description of its key


@dataclass
class MapImage:
    level: int | None
    colour: str  # "score" or "visits"
    png: bytes = field(repr=False)
    file: str
    rooms_reached: list[int]


@dataclass
class RoomRow:
    """The archive's cells in one room: how many, and how much of the selection."""

    level: int | None
    room: int
    cells: int
    pick_share: float  # the chance that the next cell picked lies in this room
    max_score: float
    median_seen: float


@dataclass
class Report:
    out_dir: Path
    html: Path
    curves_png: Path
    maps: list[MapImage] = field(default_factory=list)
    mp4: Path | None = None
    gif: Path | None = None
    video_frames: int = 0
    best_cell: int | None = None
    best_length: int = 0
    top: list[TopCell] = field(default_factory=list)
    rooms: list[RoomRow] = field(default_factory=list)
    seconds: float = 0.0
    representation_png: Path | None = None  # dynamic cells: the downscale over time


def _require_plotting() -> None:
    missing = []
    for mod, pkg in (
        ("matplotlib", "matplotlib"),
        ("PIL", "pillow"),
        ("imageio", "imageio"),
        ("imageio_ffmpeg", "imageio-ffmpeg"),
    ):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        raise GoExploreError(
            f"the report needs {', '.join(missing)}: pip install {' '.join(missing)}"
        )


def top_cells(archive, n: int) -> list[int]:
    """Non-DONE cells by score (highest first), then shorter trajectory, then older;
    the DONE cell first where an episode's end scored more than any cell (a goal
    that ends the episode)."""
    live = np.flatnonzero(~archive.is_done[: archive.n])
    order = np.lexsort((live, archive.traj_len[live], -archive.score[live]))
    ids = [int(i) for i in live[order[:n]]]
    best = archive.best_trajectory()
    return [best, *ids[: n - 1]] if best not in ids else ids


def room_rows(archive, names: tuple[str, ...], room_fact: str | None, level_fact: str | None):
    """Per (level, room): the live cells, their share of the selection weight,
    best score and median times seen; [] for a game without a room fact."""
    n = archive.n
    if room_fact is None or room_fact not in names or not n:
        return []
    live = ~archive.is_done[:n]
    weights = archive.weights_of(np.arange(n))
    total = float(weights.sum())
    room = archive.facts[:n, names.index(room_fact)]
    has_level = level_fact in names
    level = archive.facts[:n, names.index(level_fact)] if has_level else np.zeros_like(room)
    ids = np.flatnonzero(live)
    places, group = np.unique(np.stack([level, room], axis=1)[live], axis=0, return_inverse=True)
    out = []
    for g, (lv, rm) in enumerate(places.tolist()):
        sel = ids[group.ravel() == g]
        out.append(
            RoomRow(
                int(lv) if has_level else None,
                int(rm),
                len(sel),
                float(weights[sel].sum()) / total if total > 0 else 0.0,
                float(archive.score[sel].max()),
                float(np.median(archive.seen[sel])),
            )
        )
    return out


def curve_rows(rows: list[dict], phase1) -> list[dict]:
    """The metrics rows, from the root cell (a fresh run's first row comes
    ``log_every_batches`` batches in) to the checkpoint the report is made of
    (the last batch usually ends between two rows)."""
    a = phase1.archive
    rows = list(rows)
    rooms = phase1.has_rooms
    if rows and rows[0].get("batch", 0) <= phase1.cfg.log_every_batches:
        rows.insert(
            0,
            {
                "batch": 0,
                "frames": 0,
                "n_cells": 1,
                "rooms_found": 1 if rooms else None,
                "max_archive_score": 0.0,
                "best_done_score": None,
                "max_level": 0 if a.level_fact is not None else None,
            },
        )
    if not rows or phase1.frames > rows[-1].get("frames", 0):
        rows.append(
            {
                "batch": phase1.batch,
                "frames": phase1.frames,
                "n_cells": a.n,
                "rooms_found": len(a.rooms) if rooms else None,
                "max_archive_score": a.max_archive_score,
                "best_done_score": a.best_done_score,
                "max_level": a.max_level_reached,
            }
        )
    return rows


def build_report(run_dir, out_dir=None, *, top: int = 10, video: bool = True, log=print) -> Report:
    """Build the report of the run in ``run_dir`` into ``out_dir`` (default
    ``run_dir/report``). Returns what was written."""
    from goexplore.phase1 import load_run
    from goexplore.report import html, plots
    from goexplore.formats import read_final
    from goexplore.store import RunDir

    _require_plotting()
    t0 = time.perf_counter()
    run_dir = Path(run_dir)
    phase1 = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    rd = RunDir(run_dir)
    rows = rd.read_metrics()
    final = read_final(rd.final_path)
    cfg, a, explog = phase1.cfg, phase1.archive, phase1.explog
    names = tuple(phase1.fact_names)
    n = a.n
    rep = Report(out_dir=out, html=out / "index.html", curves_png=out / "curves.png")

    # curves ------------------------------------------------------------------------
    curves = plots.curves_png(curve_rows(rows, phase1), title=f"{cfg.env}, seed {cfg.seed}")
    rep.curves_png.write_bytes(curves)
    if phase1.dynamic is not None:
        rep.representation_png = out / "representation.png"
        rep.representation_png.write_bytes(
            plots.representation_png(
                phase1.dynamic.history,
                phase1.frames,
                title="dynamic downscale: the representation over agent steps",
            )
        )

    # replays: top cells (the best one recorded as a video), room screenshots --------
    last_frames: dict[int, np.ndarray] = {}
    ids = top_cells(a, top)
    log(
        f"report: replaying {len(ids)} top cells from reset"
        + (" (the best one as a video)" if video else "")
    )
    with Player(cfg.env, cfg.env_kwargs) as player:
        for rank, i in enumerate(ids, 1):
            actions = explog.trajectory(int(a.traj_last[i]))
            writer = None
            if rank == 1 and video:
                rep.mp4, rep.gif = out / "best.mp4", out / "best.gif"
                writer = VideoWriter(rep.mp4, rep.gif, expected=len(actions) + 1)
            try:
                played = player.play(actions, on_frame=writer)
            finally:
                if writer is not None:
                    writer.close()
            if writer is not None:
                rep.video_frames = writer.n
                rep.best_cell, rep.best_length = i, len(actions)
            last_frames[i] = played.last
            thumb = played.last
            if thumb.shape[1] < 120:
                thumb = upscale(thumb, video_scale(*thumb.shape[:2]))
            rep.top.append(
                TopCell(
                    rank,
                    i,
                    float(a.score[i]),
                    int(a.traj_len[i]),
                    {k: int(v) for k, v in zip(names, a.facts[i])},
                    int(a.seen[i]),
                    int(a.chosen[i]),
                    played.score,
                    png_bytes(thumb),
                    "end of episode" if a.is_done[i] else phase1.cells.describe(a.key_of(i)),
                )
            )

        # the room map ----------------------------------------------------------------
        layout = phase1.room_layout
        if layout is not None and n:
            facts = a.facts[:n]
            live = ~a.is_done[:n]
            rf = phase1.room_fact
            room = facts[:, names.index(rf)] if rf is not None else np.zeros(n, np.int64)
            x, y = facts[:, names.index("x")], facts[:, names.index("y")]
            level = facts[:, names.index("level")] if "level" in names else np.zeros(n, int)
            levels, counts = np.unique(level[live], return_counts=True)
            levels = sorted(levels[np.argsort(-counts)][:MAX_MAP_LEVELS].tolist())
            for lev in levels:
                sel = live & (level == lev)
                shots: dict[int, np.ndarray] = {}
                for rm in sorted(set(room[sel].tolist())):
                    if layout.slot(rm) is None:
                        continue
                    cand = np.flatnonzero(sel & (room == rm))
                    i = int(cand[np.lexsort((cand, a.traj_len[cand]))[0]])
                    if i not in last_frames:
                        last_frames[i] = player.play(explog.trajectory(int(a.traj_last[i]))).last
                    shots[rm] = last_frames[i]
                log(
                    f"report: map of level {lev} (0: the first): {len(shots)} room(s) reached"
                    if phase1.level_fact is not None
                    else f"report: map: {len(shots)} room(s) reached"
                )
                px, py = layout.pixel(x[sel], y[sel])
                suffix = "" if len(levels) == 1 else f"_level{lev}"
                for colour, vals, label, logscale in (
                    ("score", a.score[:n][sel], "cell score", False),
                    ("visits", a.seen[:n][sel], "times seen (since last improved)", True),
                ):
                    png = plots.map_png(
                        layout,
                        shots,
                        px,
                        py,
                        room[sel],
                        vals,
                        label=label,
                        log=logscale,
                        title=(
                            f"{cfg.env}: level {lev}{' (the first)' if lev == 0 else ''}, "
                            if phase1.level_fact is not None
                            else f"{cfg.env}: "
                        )
                        + f"{int(sel.sum()):,} cells, coloured by {label}",
                    )
                    fname = f"map{suffix}.png" if colour == "score" else f"map_visits{suffix}.png"
                    (out / fname).write_bytes(png)
                    rep.maps.append(MapImage(int(lev), colour, png, fname, sorted(shots)))

    rep.rooms = room_rows(a, names, phase1.room_fact, phase1.level_fact)

    # page ------------------------------------------------------------------------------
    rep.seconds = time.perf_counter() - t0
    page = html.render(
        phase1=phase1, rows=rows, final=final, curves=curves, rep=rep, run_dir=run_dir
    )
    rep.html.write_text(page, encoding="utf-8")
    rep.seconds = time.perf_counter() - t0
    return rep
