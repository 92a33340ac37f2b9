"""Progress while a run explores.

On a terminal: a live display (rich) with a bar of agent steps done of the
budget, steps/s, ETA, cells, rooms, best scores and the time since the last
checkpoint, refreshed every batch. Elsewhere (CI logs, nohup, pipes): one plain
line per metrics row, e.g.::

    steps 352,104/1,000,000 (35.2%)  981 steps/s  ETA 11m01s  cells 416  rooms 1  best 100  max 100  ckpt -  batch 100

``update`` receives a :class:`goexplore.phase1.Progress`; a progress whose
``logged`` attribute is False (an in-between batch) refreshes the live display
but prints no plain line.
"""

from __future__ import annotations

import sys
import time


def fmt_duration(s: float | None) -> str:
    """12s, 3m05s, 2h07m; '-' when unknown."""
    if s is None or s != s or s < 0 or s == float("inf"):
        return "-"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _score(v) -> str:
    return "-" if v is None else f"{v:g}"


def eta_s(p) -> float | None:
    if p.steps_per_s <= 0:
        return None
    return max(0, p.total - p.frames) / p.steps_per_s


def _place(p) -> str:
    """'rooms R  level L' for the facts the game has (level: the highest reached,
    counting from 0, so level 1 means the first level was completed)."""
    out = "" if getattr(p, "rooms", None) is None else f"  rooms {p.rooms}"
    lv = getattr(p, "level", None)
    return out + ("" if lv is None else f"  level {lv}")


def plain_line(p, since_ckpt: float | None = None) -> str:
    """One line with everything a log reader needs."""
    since = p.since_ckpt_s if since_ckpt is None else since_ckpt
    pct = 100.0 * p.frames / p.total if p.total else 0.0
    return (
        f"steps {p.frames:,}/{p.total:,} ({pct:.1f}%)  {p.steps_per_s:,.0f} steps/s  "
        f"ETA {fmt_duration(eta_s(p))}  cells {p.cells:,}{_place(p)}  "
        f"best {_score(p.best_done)}  max {_score(p.max_score)}  "
        f"ckpt {fmt_duration(since)}{' ago' if since is not None else ''}  batch {p.batch:,}"
        f"{_replayed(p)}{_lost(p)}"
    )


def _replayed(p) -> str:
    """'  replayed N' where restores replay the cell's actions (they cost env steps)."""
    n = getattr(p, "replayed", None)
    return "" if n is None else f"  replayed {n:,}"


def _lost(p) -> str:
    """'  workers lost N' once a worker has died (its tasks ran again elsewhere)."""
    n = getattr(p, "workers_lost", 0)
    return f"  workers lost {n}" if n else ""


class ProgressReporter:
    """Context manager: ``update(progress)`` as the run goes, ``print(msg)``
    for messages (printed above the live display on a terminal).

    ``live``: force the rich display (True) or plain lines (False); default:
    live iff ``stream`` is a terminal.
    """

    def __init__(self, total: int, start: int = 0, *, stream=None, live: bool | None = None):
        self.total = total
        self.start = start
        self.stream = stream if stream is not None else sys.stdout
        if live is None:
            isatty = getattr(self.stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = live
        self._last = None
        self._last_at = 0.0
        self._t0 = time.monotonic()
        self._rich = None
        self._console = None

    # --- context -------------------------------------------------------------------
    def __enter__(self):
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=self.stream)
            self._rich = Live(
                get_renderable=self._renderable,
                console=self._console,
                refresh_per_second=2,
                transient=False,
                redirect_stdout=True,
                redirect_stderr=False,
            )
            self._rich.start()
        return self

    def __exit__(self, *exc):
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
        return False

    # --- interface -------------------------------------------------------------------
    def print(self, msg: str) -> None:
        if self._console is not None and self._rich is not None:
            self._console.print(msg, markup=False, highlight=False)
        else:
            print(msg, file=self.stream, flush=True)

    def update(self, p) -> None:
        self._last, self._last_at = p, time.monotonic()
        if self._rich is not None:
            self._rich.refresh()
        elif getattr(p, "logged", True):
            print(plain_line(p), file=self.stream, flush=True)

    # --- the live display -------------------------------------------------------------
    def _since_ckpt(self) -> float | None:
        p = self._last
        if p is None or p.since_ckpt_s is None:
            return None
        return p.since_ckpt_s + (time.monotonic() - self._last_at)

    def _renderable(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        p = self._last
        grid = Table.grid(padding=(0, 1))
        if p is None:
            grid.add_row(
                ProgressBar(total=self.total, completed=self.start, width=36),
                Text(
                    f"{self.start:,}/{self.total:,} steps  starting "
                    f"({fmt_duration(time.monotonic() - self._t0)})",
                    style="dim",
                ),
            )
            return grid
        pct = 100.0 * p.frames / p.total if p.total else 0.0
        text = Text.assemble(
            (f"{p.frames:,}", "bold"),
            f"/{p.total:,} steps ",
            (f"{pct:5.1f}%", "bold"),
            f"  {p.steps_per_s:,.0f} steps/s  ETA ",
            (fmt_duration(eta_s(p)), "bold cyan"),
        )
        width = max(10, min(40, self._console.width - len(text) - 2))
        grid.add_row(
            ProgressBar(total=p.total, completed=min(p.frames, p.total), width=width), text
        )
        since = self._since_ckpt()
        stats = Text.assemble(
            "cells ",
            (f"{p.cells:,}", "bold"),
            *(("  rooms ", (f"{p.rooms}", "bold")) if p.rooms is not None else ()),
            *(("  level ", (f"{p.level}", "bold magenta")) if p.level is not None else ()),
            "  best ",
            (_score(p.best_done), "bold green"),
            "  max ",
            (_score(p.max_score), "bold"),
            "  last checkpoint ",
            (fmt_duration(since) + (" ago" if since is not None else ""), "bold"),
            f"  batch {p.batch:,}",
            _replayed(p),
            *(("  workers lost ", (f"{p.workers_lost}", "bold red")) if _lost(p) else ()),
            style=None,
        )
        return Group(grid, stats)
