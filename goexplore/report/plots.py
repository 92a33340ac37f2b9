"""The report's figures (matplotlib, Agg backend, PNG bytes out)."""

from __future__ import annotations

import io

import numpy as np

from goexplore.envs.layout import RoomLayout

BG = (0x15, 0x17, 0x1C)  # map background (outside the room grid)
PLACEHOLDER = (0x3A, 0x3D, 0x45)  # a room the run has not reached


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.08)
    _plt().close(fig)
    return buf.getvalue()


def _steps_fmt(v, _pos=None) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


CURVES = (
    ("best_done_score", "best end-of-episode score"),
    ("max_archive_score", "max archive score"),
    ("n_cells", "cells in the archive"),
    ("rooms_found", "rooms found"),
    ("max_level", "highest level (0: the first)"),
    ("steps_per_s", "agent steps / s"),
    ("ep_return_mean", "mean return, last 20 episodes"),
)


def curves_png(rows: list[dict], title: str = "", dpi: int = 100) -> bytes:
    """Metrics over agent steps, one small panel each."""
    plt = _plt()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig, axes = plt.subplots(2, 4, figsize=(15, 6), constrained_layout=True)
    frames = np.array([r.get("frames", 0) for r in rows], dtype=float)
    for ax, (name, label) in zip(axes.flat, CURVES):
        y = np.array([np.nan if r.get(name) is None else r[name] for r in rows], dtype=float)
        ok = ~np.isnan(y)
        if ok.any():
            step = name not in ("steps_per_s", "ep_return_mean")
            marker = "." if ok.sum() <= 40 else None
            if step:
                ax.step(frames[ok], y[ok], where="post", color="#3568d4", lw=1.6, marker=marker)
            else:
                ax.plot(frames[ok], y[ok], color="#3568d4", lw=1.2, marker=marker)
            ax.set_ylim(bottom=min(0.0, float(np.nanmin(y))))
        else:
            ax.text(
                0.5,
                0.5,
                "no data yet",
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="#888",
            )
        ax.set_title(label, fontsize=10)
        ax.xaxis.set_major_formatter(FuncFormatter(_steps_fmt))
        ax.xaxis.set_major_locator(MaxNLocator(5))
        if name in ("rooms_found", "max_level"):
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if ok.any():
                ax.set_ylim(0, max(1.0, float(np.nanmax(y))) * 1.08)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    for ax in axes.flat[len(CURVES) :]:
        ax.axis("off")
    for ax in axes[1]:
        ax.set_xlabel("agent steps", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=11)
    return _png(fig, dpi)


def map_png(
    layout: RoomLayout,
    screenshots: dict[int, np.ndarray],
    px: np.ndarray,
    py: np.ndarray,
    rooms: np.ndarray,
    values: np.ndarray,
    *,
    label: str,
    log: bool = False,
    title: str = "",
    dpi: int = 100,
) -> bytes:
    """The room grid: each reached room's screenshot (dimmed), placeholders for
    the others, and one dot per cell where the player stood, coloured by
    ``values`` (highest drawn on top)."""
    plt = _plt()
    from matplotlib.colors import LogNorm, Normalize

    H, W = layout.room_h, layout.room_w
    canvas = np.zeros((layout.rows * H, layout.cols * W, 3), np.uint8)
    canvas[:] = BG
    # axes sized so that one screen pixel is one image pixel (crisp screenshots)
    img_w, img_h = layout.cols * W / dpi, layout.rows * H / dpi
    fig = plt.figure(figsize=(img_w + 1.1, img_h + 0.4))
    ax = fig.add_axes((0.0, 0.0, img_w / (img_w + 1.1), img_h / (img_h + 0.4)))
    for room in layout.rooms:
        r, c = layout.slot(room)
        y0, x0 = r * H, c * W
        if room in screenshots:
            img = layout.room_image(screenshots[room]).astype(np.float32)
            canvas[y0 : y0 + H, x0 : x0 + W] = (img * 0.55).astype(np.uint8)
        else:
            canvas[y0 : y0 + H, x0 : x0 + W] = PLACEHOLDER
            ax.text(
                x0 + W / 2,
                y0 + H / 2,
                "not reached",
                color="#9aa0aa",
                ha="center",
                va="center",
                fontsize=7,
            )
        ax.text(
            x0 + 4,
            y0 + 4,
            str(room),
            color="white",
            fontsize=8,
            ha="left",
            va="top",
            fontweight="bold",
        )
    ax.imshow(canvas, interpolation="nearest")
    # grid lines between rooms
    for room in layout.rooms:
        r, c = layout.slot(room)
        ax.add_patch(
            plt.Rectangle((c * W - 0.5, r * H - 0.5), W, H, fill=False, ec="#6b7080", lw=0.6)
        )
    sc = None
    if len(values):
        slots = [layout.slot(int(rm)) for rm in rooms]
        keep = np.array([s is not None for s in slots])
        if keep.any():
            rr = np.array([s[0] for s in slots if s is not None])
            cc = np.array([s[1] for s in slots if s is not None])
            X = cc * W + np.clip(px[keep], 0, W - 1)
            Y = rr * H + np.clip(py[keep], 0, H - 1)
            v = values[keep].astype(float)
            order = np.argsort(v, kind="stable")
            if log:
                norm = LogNorm(vmin=max(1.0, v.min() + 1), vmax=max(2.0, v.max() + 1))
                cv = v + 1
            else:
                norm = Normalize(vmin=v.min(), vmax=v.max() if v.max() > v.min() else v.min() + 1)
                cv = v
            sc = ax.scatter(
                X[order],
                Y[order],
                c=cv[order],
                s=7,
                cmap="plasma",
                norm=norm,
                linewidths=0.25,
                edgecolors="black",
            )
    if sc is not None:
        x0 = img_w / (img_w + 1.1)
        cb = fig.colorbar(
            sc, cax=fig.add_axes((x0 + 0.012, 0.04, 0.012, 0.9 * img_h / (img_h + 0.4)))
        )
        cb.set_label(label, fontsize=9)
        cb.ax.tick_params(labelsize=8)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return _png(fig, dpi)


def representation_png(history: list[dict], end: int, title: str = "", dpi: int = 100) -> bytes:
    """Dynamic cells: width, height and grey levels of the downscale over agent
    steps (a step curve from each change on), the changes marked by dotted lines."""
    plt = _plt()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    changes = [e for e in history if e.get("changed")]
    fig, ax = plt.subplots(figsize=(9, 3.2), constrained_layout=True)
    if changes:
        x = [e["frames"] for e in changes] + [max(end, changes[-1]["frames"])]
        for key, label, colour, add in (
            ("width", "width", "#3568d4", 0),
            ("height", "height", "#d4683a", 0),
            ("levels", "grey levels", "#3aa55a", 1),
        ):
            y = [e[key] + add for e in changes]
            ax.step(x, y + y[-1:], where="post", color=colour, lw=1.6, label=label)
        for e in changes:
            ax.axvline(e["frames"], color="#888", ls=":", lw=0.8)
        ax.set_yscale("log")
        ax.legend(fontsize=8, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no choice made yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("agent steps", fontsize=9)
    ax.xaxis.set_major_formatter(FuncFormatter(_steps_fmt))
    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return _png(fig, dpi)
