"""The report page: plain HTML and CSS, no script, every image inline."""

from __future__ import annotations

import datetime as _dt
from html import escape

from goexplore.report.media import data_uri

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f5f6f8;color:#1d2027}
main{max-width:1180px;margin:0 auto;padding:18px 22px 60px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:19px;margin:30px 0 8px;border-bottom:1px solid #d8dbe2;padding-bottom:4px}
.sub{color:#5b6170;margin:0 0 14px}
.kv{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:8px}
.kv div{background:#fff;border:1px solid #e0e3ea;border-radius:6px;padding:7px 10px}
.kv b{display:block;font-size:19px}.kv span{color:#5b6170;font-size:12.5px}
img.fig{max-width:100%;background:#fff;border:1px solid #e0e3ea;border-radius:6px}
.note{color:#5b6170;font-size:13px}
.videos{display:flex;gap:18px;flex-wrap:wrap;align-items:flex-start}
.videos figure{margin:0}figcaption{font-size:13px;color:#5b6170}
video,img.gif{image-rendering:pixelated;border:1px solid #e0e3ea;background:#000}
table{border-collapse:collapse;background:#fff;font-size:14px}
th,td{border:1px solid #e0e3ea;padding:4px 8px;text-align:right;vertical-align:middle}
th{background:#eef0f4}td.l,th.l{text-align:left}
img.thumb{width:120px;image-rendering:pixelated;display:block}
.ok{color:#177a3a;font-weight:600}.bad{color:#b3261e;font-weight:600}
details{margin-top:10px}pre{background:#fff;border:1px solid #e0e3ea;padding:8px;overflow:auto}
"""


def _num(v, fmt="{:,.0f}") -> str:
    if v is None:
        return "–"
    try:
        return fmt.format(v)
    except (TypeError, ValueError):
        return escape(str(v))


def _score(v) -> str:
    return "–" if v is None else f"{v:,g}"


def render(*, phase1, rows, final, curves: bytes, rep, run_dir) -> str:
    cfg, a = phase1.cfg, phase1.archive
    last = rows[-1] if rows else {}
    rate = last.get("steps_per_s")
    status = (
        "finished"
        if final
        else f"in progress or interrupted: latest checkpoint at {phase1.frames:,} steps"
    )
    verified = None if final is None else final.get("verified")
    cards = [
        (f"{phase1.frames:,}", f"agent steps of {cfg.total_frames:,} ({status})"),
        (_score(a.best_done_score), "best end-of-episode score"),
        (_score(a.max_archive_score), "max archive score"),
        (f"{a.n:,}", "cells"),
        *(
            [(f"{len(a.rooms)}", f"rooms seen (the game's {phase1.room_fact} fact)")]
            if phase1.has_rooms
            else []
        ),
        *(
            [(f"{a.max_level_reached}", "highest level reached (0: the first)")]
            if a.level_fact is not None
            else []
        ),
        (
            escape(cfg.preset),
            f"preset ({cfg.cells} cells, episode ends at "
            f"{'a life loss' if cfg.episode_end == 'life' else 'game over'})",
        ),
        (_num(rate), "agent steps / s (last row)"),
        (_num(final.get("wall_s"), "{:,.0f} s") if final else "–", "wall time"),
        ("–" if verified is None else ("yes" if verified else "NO"), "replay-verified from reset"),
    ]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>goexplore report: {escape(cfg.env)} seed {cfg.seed}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>Go-Explore Phase 1: {escape(cfg.env)}, seed {cfg.seed}</h1>",
        f'<p class="sub">run dir <code>{escape(str(run_dir))}</code> · report made '
        f"{_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} in {rep.seconds:.0f} s</p>",
        '<div class="kv">',
    ]
    out += [f"<div><b>{v}</b><span>{escape(k)}</span></div>" for v, k in cards]
    out.append("</div>")
    out.append(
        '<p class="note">Scores are deterministic-search results (emulator restore, no '
        "sticky actions): not comparable with sticky-action RL scores. "
        "Steps are agent steps (4 emulator frames each on Atari).</p>"
    )

    out.append("<h2>Curves</h2>")
    if rows:
        out.append(
            '<img class="fig" alt="metrics over agent steps" '
            f'src="{data_uri(curves, "image/png")}">'
        )
    else:
        out.append('<p class="note">metrics.jsonl holds no rows yet.</p>')

    if rep.representation_png is not None:
        out += _representation(phase1, rep)

    if rep.rooms:
        out += _rooms(phase1, rep.rooms)

    if rep.maps:
        out.append("<h2>Map</h2>")
        out.append(
            '<p class="note">Each reached room is a screenshot replayed from the game '
            "(the cell with the shortest trajectory in that room); grey rooms have not been "
            "reached. Each dot is a cell, drawn where the player stood (RAM x, y).</p>"
        )
        for m in rep.maps:
            lev = "" if m.level is None else f"level {m.level}, "
            out.append(f"<h3>{escape(lev)}coloured by {escape(m.colour)}</h3>")
            out.append(
                f'<img class="fig" alt="room map, {escape(lev)}{escape(m.colour)}" '
                f'src="{data_uri(m.png, "image/png")}">'
            )

    out.append("<h2>Best trajectory</h2>")
    if rep.mp4 is not None and rep.top:
        b = rep.top[0]
        out.append(
            f'<p class="note">Cell {b.cell}: score {b.score:,g} in {b.length:,} agent steps, '
            f"replayed from reset ({rep.video_frames:,} frames: the reset frame and one per step; "
            f"the video plays at 2x game speed).</p>"
        )
        out.append('<div class="videos">')
        out.append(
            f'<figure><video controls muted loop preload="metadata" width="320" '
            f'src="{escape(rep.mp4.name)}"></video><figcaption>MP4, every step '
            f'(<a href="{escape(rep.mp4.name)}">{escape(rep.mp4.name)}</a>)</figcaption></figure>'
        )
        if rep.gif is not None and rep.gif.exists():
            out.append(
                f'<figure><img class="gif" width="{min(320, 2 * 160)}" alt="best trajectory" '
                f'src="{data_uri(rep.gif.read_bytes(), "image/gif")}">'
                f"<figcaption>GIF (subsampled when long)</figcaption></figure>"
            )
        out.append("</div>")
    else:
        out.append('<p class="note">No video (disabled).</p>')

    out.append(f"<h2>Top {len(rep.top)} cells</h2>")
    names = list(phase1.fact_names)
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    out.append(
        "<table><tr><th>#</th><th>cell</th><th>score</th><th>steps</th>"
        + head
        + "<th>seen</th><th>chosen</th><th>replay</th><th class='l'>last frame</th></tr>"
    )
    for t in rep.top:
        ok = t.replayed_score == t.score
        facts = "".join(f"<td>{_fact(n, t.facts.get(n))}</td>" for n in names)
        check = (
            f'<span class="ok">✓ {t.replayed_score:,g}</span>'
            if ok
            else f'<span class="bad">✗ {t.replayed_score:,g}</span>'
        )
        out.append(
            f'<tr><td>{t.rank}</td><td title="{escape(t.description)}">{t.cell}</td>'
            f"<td>{t.score:,g}</td>"
            f"<td>{t.length:,}</td>{facts}<td>{t.seen:,}</td><td>{t.chosen:,}</td>"
            f"<td>{check}</td><td class='l'><img class='thumb' alt='cell {t.cell}' "
            f'src="{data_uri(t.thumb_png, "image/png")}"></td></tr>'
        )
    out.append("</table>")
    if cfg.cells in ("downscale", "downscale-dynamic"):
        cells_text = escape(phase1.cells.describe(b""))  # the representation, no one cell
    else:
        cells_text = escape(cfg.cells) + " keys"
    out.append(
        '<p class="note">replay: the score obtained by replaying the cell\'s trajectory '
        "from reset in a fresh environment (✓ when it equals the archived score). "
        f"Cells are {cells_text}; "
        "hover over a cell number for its key.</p>"
    )

    out.append(
        "<details><summary>Configuration</summary><pre>" + escape(cfg.dumps()) + "</pre></details>"
    )
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _representation(phase1, rep) -> list[str]:
    """Dynamic cells: the downscale over time and a table of the choices."""
    hist = phase1.dynamic.history
    out = [
        "<h2>Cell representation</h2>",
        f'<p class="note">{escape(phase1.cells.describe())}. The downscale is chosen '
        "again from a sample of recent frames during the run; each dotted line is a "
        "change, after which the whole archive was re-keyed.</p>",
        '<img class="fig" alt="width, height and grey levels over agent steps" '
        f'src="{data_uri(rep.representation_png.read_bytes(), "image/png")}">',
        "<table><tr><th>agent steps</th><th>width × height × grey levels</th>"
        "<th>sampled frames</th><th>their cells</th><th>score</th><th>archive cells</th>"
        "<th>changed</th></tr>",
    ]
    for e in hist:
        out.append(
            f"<tr><td>{e['frames']:,}</td><td>{e['width']}×{e['height']}×{e['levels'] + 1}</td>"
            f"<td>{e['sample_frames']:,}</td><td>{e['sample_cells']:,}</td>"
            f"<td>{e['score']:.3f}</td><td>{e['cells_before']:,} → {e['cells_after']:,}</td>"
            f"<td>{_changed(e)}</td></tr>"
        )
    out.append("</table>")
    return out


def _changed(e: dict) -> str:
    over = e.get("kept_over") or e.get("refused")
    if over is None:
        return "yes" if e["changed"] else "no"
    what = "no: kept" if "kept_over" in e else ("yes" if e["changed"] else "no") + ": chosen"
    return (
        f"{what} over the search's best {over['width']}×{over['height']}×"
        f"{over['levels'] + 1} ({over['score']:.3f}, {over['sample_cells']:,} cells)"
    )


def _rooms(phase1, rows) -> list[str]:
    """Where the archive's cells are, room by room, and where selection sends the workers."""
    levels = rows[0].level is not None
    out = [
        "<h2>Cells by room</h2>",
        "<p class=\"note\">The archive's cells in each room (the game's "
        f"{escape(phase1.room_fact)} fact), and the chance that the next cell picked for "
        "exploration lies in that room (its share of the selection weight). A room with "
        "many cells and few new finds takes picks away from the frontier.</p>",
        "<table><tr>"
        + ("<th>level</th>" if levels else "")
        + "<th>room</th><th>cells</th><th>share of cells</th><th>share of picks</th>"
        "<th>best score</th><th>median times seen</th></tr>",
    ]
    n = sum(r.cells for r in rows)
    for r in rows:
        out.append(
            "<tr>"
            + (f"<td>{_fact('level', r.level)}</td>" if levels else "")
            + f"<td>{r.room}</td><td>{r.cells:,}</td><td>{100 * r.cells / n:.1f}%</td>"
            f"<td>{100 * r.pick_share:.1f}%</td><td>{_score(r.max_score)}</td>"
            f"<td>{r.median_seen:,.0f}</td></tr>"
        )
    out.append("</table>")
    return out


def _fact(name: str, v) -> str:
    if v is None:
        return "–"
    if name == "inventory":
        return f"0x{v & 0xFF:02x}"
    if name == "level":
        return str(v + 1)
    return str(v)
