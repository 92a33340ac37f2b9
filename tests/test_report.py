"""``goexplore report``: the page, its pictures and video, the map, TensorBoard."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import select
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("imageio_ffmpeg")

from goexplore.cli import main
from goexplore.phase1 import load_run
from goexplore.report import build_report
from goexplore.report.build import top_cells
from goexplore.envs.atari import MONTEZUMA_LAYOUT as MONTEZUMA
from goexplore.envs.layout import layout_of
from goexplore.report.media import count_video_frames, iter_gif_frames


def _run(tmp, env, frames, *extra):
    rd = tmp / f"{env}-run"
    rc = main(
        [
            "run",
            "--env",
            env,
            "--total-frames",
            str(frames),
            "--run-dir",
            str(rd),
            "--log-every-batches",
            "1",
            *extra,
        ]
    )
    assert rc == 0
    return rd


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("toy")
    rd = _run(tmp, "toy", 12_000)
    t0 = time.perf_counter()
    rep = build_report(rd, tmp / "report", top=6, log=lambda *_: None)
    return rd, rep, time.perf_counter() - t0


def test_toy_report_files_and_page(toy_report):
    rd, rep, _ = toy_report
    html = rep.html.read_text()
    for name in ("curves.png", "map.png", "map_visits.png", "best.mp4", "best.gif", "index.html"):
        assert (rep.out_dir / name).stat().st_size > 0, name
    for heading in ("Curves", "Cells by room", "Map", "Best trajectory", "Top 6 cells"):
        assert f"<h2>{heading}</h2>" in html
    # self-contained: every image is a data URI; the only file referenced is the sibling MP4
    srcs = re.findall(r'src="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/") for s in srcs if s != "best.mp4")
    assert "best.mp4" in srcs
    for s in srcs:
        if s.startswith("data:image/png"):
            assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in html and "https://" not in html
    assert len(rep.top) == 6 and all(t.replayed_score == t.score for t in rep.top)


def test_top_cells_order(toy_report):
    rd, rep, _ = toy_report
    a = load_run(rd).archive
    ids = top_cells(a, 6)
    assert [t.cell for t in rep.top] == ids
    keys = [(-a.score[i], a.traj_len[i], i) for i in ids]
    assert keys == sorted(keys)
    assert not any(a.is_done[i] for i in ids)
    assert a.score[ids[0]] == a.max_archive_score


def test_cells_by_room_against_the_archive(toy_report):
    """The per-room table, checked against counts and weights computed here from the
    checkpoint's arrays (the toy run selects by 1/sqrt(seen + 1), DONE weighs 0)."""
    rd, rep, _ = toy_report
    p1 = load_run(rd)
    a, names = p1.archive, list(p1.fact_names)
    live = ~a.is_done[: a.n]
    room = a.facts[: a.n, names.index("room")][live]
    level = a.facts[: a.n, names.index("level")][live]
    w = 1.0 / np.sqrt(a.seen[: a.n][live] + 1.0)
    score, seen = a.score[: a.n][live], a.seen[: a.n][live]
    want = {}
    for lv, rm in sorted(set(zip(level.tolist(), room.tolist()))):
        m = (level == lv) & (room == rm)
        want[(lv, rm)] = (
            int(m.sum()),
            w[m].sum() / w.sum(),
            score[m].max(),
            np.median(seen[m]),
        )
    assert len(want) >= 2  # the toy run reaches more than one room
    got = {
        (r.level, r.room): (r.cells, r.pick_share, r.max_score, r.median_seen) for r in rep.rooms
    }
    assert got.keys() == want.keys()
    for k, (cells, share, best, med) in want.items():
        assert got[k][0] == cells and got[k][2] == best and got[k][3] == med
        assert got[k][1] == pytest.approx(share, rel=1e-9)
    html = rep.html.read_text()
    row = rep.rooms[0]
    assert f"<td>{row.room}</td><td>{row.cells:,}</td>" in html


def test_video_has_one_frame_per_step_plus_reset(toy_report):
    rd, rep, _ = toy_report
    a = load_run(rd).archive
    best = a.best_cell()
    assert rep.best_cell == best and rep.best_length == a.traj_len[best]
    assert count_video_frames(rep.mp4) == a.traj_len[best] + 1 == rep.video_frames
    gif = list(iter_gif_frames(rep.gif))
    assert 1 <= len(gif) <= a.traj_len[best] + 1
    assert gif[0].shape[1] >= 120


def test_video_frames_are_the_replay(toy_report):
    """First decoded frame is the reset screen, last the best cell's final screen."""
    import imageio

    from goexplore.report.media import Player, upscale, video_scale

    rd, rep, _ = toy_report
    p = load_run(rd)
    acts = p.explog.trajectory(int(p.archive.traj_last[rep.best_cell]))
    frames = []
    Player("toy").play(acts, on_frame=lambda f: frames.append(f.copy()))
    r = imageio.get_reader(str(rep.mp4))
    decoded = [f for f in r]
    r.close()
    k = video_scale(*frames[0].shape[:2])
    for i in (0, len(frames) // 2, len(frames) - 1):
        want = upscale(frames[i], k).astype(int)
        got = decoded[i][: want.shape[0], : want.shape[1]].astype(int)
        assert np.abs(got - want).mean() < 6, i


def test_map_png_small_enough(toy_report):
    _, rep, _ = toy_report
    assert [m.colour for m in rep.maps] == ["score", "visits"]
    assert rep.maps[0].rooms_reached
    for m in rep.maps:
        assert len(m.png) < 300_000
    assert rep.curves_png.stat().st_size < 300_000


def test_layouts():
    assert sorted(r for row in MONTEZUMA.grid for r in row if r >= 0) == list(range(24))
    assert [sum(r >= 0 for r in row) for row in MONTEZUMA.grid] == [3, 5, 7, 9]
    assert MONTEZUMA.slot(1) == (0, 4) and MONTEZUMA.slot(15) == (3, 0)
    from goexplore.envs import make_env

    assert make_env("montezuma").room_layout is MONTEZUMA
    assert layout_of(make_env("pitfall")) is None  # scenes on a ring: no map
    toy = layout_of(make_env("toy"))
    assert toy.slot(4) == (1, 1)


def test_montezuma_positions_land_on_the_player():
    """RAM (x, y) -> pixel: the mapped point lies on Panama Joe's sprite."""
    from goexplore.envs import make_env

    env = make_env("montezuma")
    env.reset()
    rng = np.random.default_rng(3)
    a, hits, checked = 0, 0, 0
    for t in range(600):
        if rng.random() < 0.1:
            a = int(rng.integers(env.n_actions))
        _, _, term, _ = env.step(a)
        if term:
            break
        if t % 5:
            continue
        rgb = MONTEZUMA.room_image(env.render_rgb())
        room, x, y = env.facts()[:3]
        mask = np.all(rgb == (200, 72, 72), axis=2)  # Panama Joe's shirt
        ys, xs = np.nonzero(mask)
        if len(xs) < 20 or np.ptp(xs) > 10 or np.ptp(ys) < 12:
            continue  # not one upright sprite (dying: lying down, never an archive cell)
        checked += 1
        px, py = MONTEZUMA.pixel(x, y)
        hits += (xs.min() <= px <= xs.max()) and (ys.min() <= py <= ys.max())
    env.close()
    assert checked >= 20
    assert hits == checked, (hits, checked)


def test_montezuma_short_run_report(tmp_path):
    rd = _run(tmp_path, "montezuma", 3000, "--batch-cells", "30")
    rep = build_report(rd, tmp_path / "report", top=3, log=lambda *_: None)
    a = load_run(rd).archive
    assert rep.maps and 1 in rep.maps[0].rooms_reached
    assert count_video_frames(rep.mp4) == a.traj_len[a.best_cell()] + 1
    assert all(t.replayed_score == t.score for t in rep.top)
    assert "not reached" not in rep.html.read_text()  # the placeholders are drawn, not written


def test_cli_report_and_errors(toy_report, tmp_path, capsys):
    rd, _, _ = toy_report
    assert main(["report", str(rd), "--out", str(tmp_path / "r"), "--top", "2", "--no-video"]) == 0
    assert (tmp_path / "r" / "index.html").exists() and not (tmp_path / "r" / "best.mp4").exists()
    assert "report: " in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no such run dir" in capsys.readouterr().err


def test_interrupted_run_and_game_without_a_map(toy_report, tmp_path, monkeypatch):
    """No final.json (a run still going, or stopped): the report says so. A game
    whose rooms are not known gets no map, everything else as usual."""

    rd, _, _ = toy_report
    copy = tmp_path / "run"
    shutil.copytree(rd, copy)
    (copy / "final.json").unlink()
    import goexplore.phase1 as phase1_module

    monkeypatch.setattr(phase1_module, "layout_of", lambda env: None)
    rep = build_report(copy, tmp_path / "r", top=1, video=False, log=lambda *_: None)
    html = rep.html.read_text()
    assert "in progress or interrupted" in html
    assert rep.maps == [] and "<h2>Map</h2>" not in html and "<h2>Curves</h2>" in html


def test_tensorboard_scalars(tmp_path):
    pytest.importorskip("tensorboardX")
    from tensorboardX.proto import event_pb2

    rd = _run(tmp_path, "toy", 4000, "--tensorboard")
    files = list((rd / "tb").glob("events.out.tfevents.*"))
    assert len(files) == 1
    data, tags = files[0].read_bytes(), {}
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack("<Q", data[pos : pos + 8])
        ev = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
        pos += 12 + n + 4
        for v in ev.summary.value:
            tags.setdefault(v.tag, []).append((ev.step, v.simple_value))
    rows = [json.loads(x) for x in (rd / "metrics.jsonl").read_text().splitlines()]
    assert [s for s, _ in tags["goexplore/n_cells"]] == [r["frames"] for r in rows]
    assert [v for _, v in tags["goexplore/n_cells"]] == [r["n_cells"] for r in rows]
    assert "goexplore/max_archive_score" in tags and "goexplore/steps_per_s" in tags


def test_tensorboard_missing_is_skipped_with_a_message(tmp_path, capsys, monkeypatch):
    import goexplore.report.tensorboard as tbmod

    monkeypatch.setattr(tbmod, "_summary_writer_class", lambda: None)
    _run(tmp_path, "toy", 2000, "--tensorboard")
    err = capsys.readouterr().err
    assert "--tensorboard: skipped" in err and "tensorboardX" in err


# --- the page in a real browser ----------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """A tiny DevTools-protocol client over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    FLAGS = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--mute-audio",
        "--remote-debugging-pipe",
    ]

    def __init__(self, user_data_dir: Path):
        self.proc = subprocess.Popen(
            [
                "sh",
                "-c",
                'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null',
                CHROMIUM,
                *self.FLAGS,
                f"--user-data-dir={user_data_dir}",
                "about:blank",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._id, self._buf, self.events = 0, b"", []

    def send(self, method, params=None, session=None, timeout=60):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        while True:
            m = self._recv(timeout)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_event(self, method, timeout=60):
        for i, m in enumerate(self.events):
            if m.get("method") == method:
                return self.events.pop(i)
        while True:
            m = self._recv(timeout)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def _recv(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load_page(url: str, tmp: Path, width=1200, height=2000):
    """Open ``url``; return (problems, screenshot PNG bytes, page facts)."""
    b = Chromium(tmp / "chromium-profile")
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for dom in ("Page", "Runtime", "Log"):
            b.send(f"{dom}.enable", session=s)
        b.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=s,
        )
        b.send("Page.navigate", {"url": url}, session=s)
        b.wait_event("Page.loadEventFired")
        facts = b.send(
            "Runtime.evaluate",
            {
                "awaitPromise": True,
                "returnByValue": True,
                "expression": """
            (async () => {
              const v = document.querySelector('video');
              let video = null;
              if (v) {
                const mp4 = v.canPlayType('video/mp4; codecs="avc1.42E01E"');
                if (v.readyState < 1 && mp4) await new Promise(r => {
                  v.addEventListener('loadedmetadata', r); v.addEventListener('error', r);
                  setTimeout(r, 8000); });
                video = {canPlay: mp4, readyState: v.readyState, error: v.error && v.error.code,
                         duration: v.duration};
              }
              const imgs = Array.from(document.images);
              return {images: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
                      height: document.body.scrollHeight, video: video};
            })()""",
            },
            session=s,
        )["result"]["value"]
        shot = base64.b64decode(
            b.send("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
        )
        problems = []
        for m in b.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                problems.append(
                    f"{d.get('text', '')} {d.get('exception', {}).get('description', '')}"
                )
            elif m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in (
                "error",
                "assert",
            ):
                problems.append(f"console.{p['type']}: {p.get('args')}")
            elif m.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                problems.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return problems, shot, facts
    finally:
        b.close()


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (CI installs it: .ci/apt-packages.txt)"
)
def test_page_loads_in_headless_chromium(toy_report, tmp_path):
    from PIL import Image

    _, rep, _ = toy_report
    problems, shot, facts = load_page(rep.html.resolve().as_uri(), tmp_path)
    assert problems == []
    assert facts["images"] >= 4 and facts["broken"] == 0, facts
    if facts["video"]["canPlay"]:  # Debian's chromium plays H.264; others may not
        assert facts["video"]["readyState"] >= 1 and facts["video"]["error"] is None, facts
        assert facts["video"]["duration"] > 0
    img = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"))
    assert img.shape[:2] == (2000, 1200)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # not blank
    assert img.std() > 20
    (tmp_path / "page.png").write_bytes(shot)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_browser_check_catches_errors(tmp_path):
    """The check itself works: a broken page is reported."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="missing.png"><script>console.error("boom");'
        "nope();</script></body></html>"
    )
    problems, _, facts = load_page(page.as_uri(), tmp_path, 400, 300)
    text = " ".join(problems)
    assert "boom" in text and "nope" in text
    assert facts["broken"] == 1
