"""Pictures from the game itself: replay a trajectory from reset and keep the
frames a report needs (a cell's last frame, every frame of a video), and
write them as PNG, MP4 and GIF.

Frames are streamed (a long trajectory is never held in memory at full size).
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable

import numpy as np

from goexplore.envs import make_env

VIDEO_FPS = 30  # agent steps per second of video (the game runs at 15)
GIF_MAX_FRAMES = 300  # longer trajectories are subsampled in the GIF (never in the MP4)
GIF_MAX_WIDTH = 160


@dataclass
class Played:
    steps: int
    score: float
    last: np.ndarray  # RGB frame after the last action (reset's frame if none)


class Player:
    """Replays action sequences from reset in one reusable environment."""

    def __init__(self, env_name: str, env_kwargs: str = ""):
        self.env_name = env_name
        self.env = make_env(env_name, env_kwargs)

    def play(self, actions, on_frame: Callable[[np.ndarray], None] | None = None) -> Played:
        env = self.env
        env.reset()
        rgb = env.render_rgb()
        if on_frame:
            on_frame(rgb)
        score = 0.0
        acts = np.asarray(actions).tolist()
        for a in acts:
            _, r, _, _ = env.step(int(a))
            score += r
            if on_frame:
                on_frame(env.render_rgb())
        return Played(len(acts), score, np.array(env.render_rgb(), copy=True))

    def close(self) -> None:
        self.env.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def video_scale(h: int, w: int) -> int:
    """Integer upscale that makes tiny screens watchable (Atari: 2x)."""
    return max(2, math.ceil(320 / w))


def _even(img: np.ndarray) -> np.ndarray:
    """H.264 in yuv420p needs even sides: pad by one black row/column."""
    h, w = img.shape[:2]
    if h % 2 or w % 2:
        img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)))
    return img


def upscale(img: np.ndarray, k: int) -> np.ndarray:
    return img if k == 1 else np.repeat(np.repeat(img, k, axis=0), k, axis=1)


def downscale(img: np.ndarray, k: int) -> np.ndarray:
    return img if k == 1 else img[::k, ::k]


class VideoWriter:
    """Writes every frame to an MP4 (H.264, ffmpeg from imageio-ffmpeg) and a
    subsampled copy to a GIF. ``expected`` frames let the GIF pick its stride."""

    def __init__(self, mp4: Path | None, gif: Path | None, expected: int):
        self.mp4, self.gif = mp4, gif
        self.expected = expected
        self.gif_stride = max(1, math.ceil(expected / GIF_MAX_FRAMES))
        self.gif_frames: list[np.ndarray] = []
        self.n = 0
        self._writer = None
        self._scale = None

    def __call__(self, rgb: np.ndarray) -> None:
        if self._scale is None:
            self._scale = video_scale(*rgb.shape[:2])
            if self.mp4 is not None:
                import imageio

                self._writer = imageio.get_writer(
                    str(self.mp4),
                    format="FFMPEG",
                    mode="I",
                    fps=VIDEO_FPS,
                    codec="libx264",
                    pixelformat="yuv420p",
                    macro_block_size=1,
                    quality=8,
                    ffmpeg_log_level="error",
                    output_params=["-movflags", "+faststart"],
                )
        if self._writer is not None:
            self._writer.append_data(_even(upscale(rgb, self._scale)))
        if self.gif is not None and self.n % self.gif_stride == 0:
            w = rgb.shape[1]
            k = max(1, w // GIF_MAX_WIDTH)
            self.gif_frames.append(downscale(upscale(rgb, self._gif_up(w)), k).copy())
        self.n += 1

    @staticmethod
    def _gif_up(w: int) -> int:
        return max(1, GIF_MAX_WIDTH // w)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.gif is not None and self.gif_frames:
            write_gif(self.gif, self.gif_frames, 1000 * self.gif_stride / VIDEO_FPS)


def write_gif(path: Path, frames: list[np.ndarray], frame_ms: float) -> None:
    from PIL import Image

    # one shared palette keeps the file small and avoids flicker between frames
    imgs = [Image.fromarray(f) for f in frames]
    pal = imgs[len(imgs) // 2].quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    q = [im.quantize(palette=pal, dither=Image.Dither.NONE) for im in imgs]
    q[0].save(
        path,
        save_all=True,
        append_images=q[1:],
        duration=max(20, round(frame_ms / 10) * 10),
        loop=0,
        optimize=False,
        disposal=1,
    )


def png_bytes(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def count_video_frames(path: Path) -> int:
    """Decode a video and count its frames (tests, sanity checks)."""
    import imageio

    r = imageio.get_reader(str(path))
    try:
        return sum(1 for _ in r)
    finally:
        r.close()


def iter_gif_frames(path: Path) -> Iterable[np.ndarray]:
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        for fr in ImageSequence.Iterator(im):
            yield np.asarray(fr.convert("RGB"))
