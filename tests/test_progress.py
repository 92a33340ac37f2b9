"""Live progress: plain lines off a terminal, a rich display on one."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from goexplore.phase1 import Progress
from goexplore.progress import ProgressReporter, fmt_duration, plain_line

LINE = re.compile(
    r"^steps (?P<frames>[\d,]+)/(?P<total>[\d,]+) \([\d.]+%\)  (?P<rate>[\d,]+) steps/s  "
    r"ETA (?P<eta>\S+)  cells (?P<cells>[\d,]+)(  rooms (?P<rooms>\d+))?(  level (?P<level>\d+))?  "
    r"best (?P<best>\S+)  max (?P<max>\S+)  ckpt (?P<ckpt>\S+)( ago)?  batch [\d,]+$"
)


def _p(frames=352_104, total=1_000_000, logged=True, best=100.0, since=125.0):
    return Progress(
        frames=frames,
        total=total,
        batch=100,
        cells=416,
        rooms=3,
        best_done=best,
        max_score=400.0,
        steps_per_s=981.4,
        since_ckpt_s=since,
        logged=logged,
    )


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_fmt_duration():
    assert fmt_duration(None) == "-"
    assert fmt_duration(float("inf")) == "-"
    assert fmt_duration(7.4) == "7s"
    assert fmt_duration(185) == "3m05s"
    assert fmt_duration(7620) == "2h07m"


def test_plain_line_has_everything():
    m = LINE.match(plain_line(_p()))
    assert m, plain_line(_p())
    assert m["frames"] == "352,104" and m["total"] == "1,000,000"
    assert m["rate"] == "981" and m["cells"] == "416" and m["rooms"] == "3"
    assert m["best"] == "100" and m["max"] == "400"
    assert m["eta"] == "11m00s"  # 647,896 steps at 981.4/s
    assert m["ckpt"] == "2m05s"
    none_yet = plain_line(_p(best=None, since=None))
    assert " best - " in none_yet and " ckpt - " in none_yet


def test_not_a_terminal_gives_plain_lines_only_for_logged_updates():
    out = io.StringIO()
    with ProgressReporter(1_000_000, stream=out) as rep:
        assert rep.live is False
        rep.update(_p(frames=10_000, logged=False))  # in-between batch: nothing printed
        rep.update(_p(frames=20_000))
        rep.print("a message")
        rep.update(_p(frames=30_000))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert LINE.match(lines[0]) and lines[0].startswith("steps 20,000/1,000,000 ")
    assert lines[1] == "a message"
    assert LINE.match(lines[2]) and "\x1b" not in out.getvalue()


def test_terminal_gets_a_live_display():
    out = _Tty()
    with ProgressReporter(1_000_000, stream=out) as rep:
        assert rep.live is True
        rep.update(_p(logged=False))
        rep.print("a message")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "━" in text  # the bar
    for part in (
        "352,104",
        "/1,000,000 steps",
        "35.2%",
        "981 steps/s",
        "ETA 11m00s",
        "cells 416",
        "rooms 3",
        "best 100",
        "max 400",
        "last checkpoint 2m",
        "a message",
    ):
        assert part in text, part


def test_cli_run_off_a_terminal_prints_plain_progress_lines(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "goexplore.cli",
            "run",
            "--env",
            "toy",
            "--total-frames",
            "6000",
            "--log-every-batches",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("steps ")]
    assert lines, run.stdout
    for ln in lines:
        m = LINE.match(ln)
        assert m, ln
        assert m["total"] == "6,000" and int(m["cells"].replace(",", "")) > 0
    assert "\x1b" not in run.stdout


def test_rooms_and_level_shown_only_where_the_game_has_them():
    from goexplore.progress import plain_line

    p = _p()
    with_level = plain_line(Progress(**{**p.__dict__, "level": 2}))
    assert LINE.match(with_level)["level"] == "2" and LINE.match(with_level)["rooms"] == "3"
    bare = plain_line(Progress(**{**p.__dict__, "rooms": None}))
    assert "rooms" not in bare and "level" not in bare and LINE.match(bare)
