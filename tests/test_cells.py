"""DownscaleCells must give exactly the bytes of the cv2 reference key, on every frame."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import goexplore.cells.downscale as cells_mod
from goexplore.cells.downscale import DownscaleCells, reference_key

GAMES = (
    "montezuma_revenge",
    "pitfall",
    "private_eye",
    "venture",
    "gravitar",
    "solaris",
    "freeway",
    "berzerk",
    "bowling",
    "centipede",
    "skiing",
)
FRAMES_PER_GAME = 300
H, W = 210, 160

CELLS = DownscaleCells()
HYP = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.fixture(scope="module")
def real_frames() -> dict[str, np.ndarray]:
    """A few hundred random-action grayscale frames from each of several games."""
    from ale_py.env import AtariEnv

    out = {}
    for game in GAMES:
        env = AtariEnv(
            game=game,
            frameskip=4,
            repeat_action_probability=0.0,
            obs_type="grayscale",
            max_num_frames_per_episode=0,
        )
        try:
            obs, _ = env.reset(seed=0)
            rng = np.random.default_rng(len(out))
            frames = [obs]
            while len(frames) < FRAMES_PER_GAME:
                obs, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
                frames.append(obs)
                if term or trunc:
                    obs, _ = env.reset()
                    frames.append(obs)
        finally:
            env.close()
        out[game] = np.stack(frames[:FRAMES_PER_GAME])
    return out


def assert_keys_exact(cells: DownscaleCells, frames: np.ndarray) -> None:
    batch = cells.keys(frames)
    assert batch.shape == (len(frames), cells.key_size) and batch.dtype == np.uint8
    for i, frame in enumerate(frames):
        ref = reference_key(frame, cells.width, cells.height, cells.levels)
        assert cells.key(frame) == ref, f"key() differs on frame {i}"
        assert batch[i].tobytes() == ref, f"keys() differs on frame {i}"


# ------------------------------------------------------------------ real frames
def test_reference_key_is_the_cv2_expression():
    import cv2

    frame = np.random.default_rng(0).integers(0, 256, (H, W), dtype=np.uint8)
    small = cv2.resize(frame, (11, 8), interpolation=cv2.INTER_AREA)
    assert reference_key(frame) == ((small / 255.0) * 8).astype(np.uint8).tobytes()
    assert len(reference_key(frame)) == 88 == CELLS.key_size


@pytest.mark.parametrize("game", GAMES)
def test_real_frames_bit_identical(real_frames, game):
    frames = real_frames[game]
    assert frames.shape == (FRAMES_PER_GAME, H, W) and frames.dtype == np.uint8
    assert_keys_exact(CELLS, frames)


def test_real_frames_rarely_fall_back_to_cv2(real_frames, monkeypatch):
    """The fast path decides (almost) every real frame on its own."""
    calls = []
    real = cells_mod.reference_key
    monkeypatch.setattr(cells_mod, "reference_key", lambda *a: calls.append(1) or real(*a))
    frames = np.concatenate(list(real_frames.values()))
    assert len(frames) >= 3000
    for frame in frames:
        CELLS.key(frame)
    assert len(calls) <= 0.02 * len(frames), f"{len(calls)} of {len(frames)} fell back"


# ------------------------------------------------------------- synthetic frames
@HYP
@given(seed=st.integers(0, 2**32 - 1))
def test_uniform_random_frames(seed):
    frame = np.random.default_rng(seed).integers(0, 256, (H, W), dtype=np.uint8)
    assert CELLS.key(frame) == reference_key(frame)


@HYP
@given(
    values=st.lists(st.integers(0, 255), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    layout=st.sampled_from(["pixels", "rows", "cols", "blocks", "checker"]),
)
def test_few_level_frames(values, seed, layout):
    """Frames of a few grey levels: cell averages often sit exactly on a rounding point."""
    rng = np.random.default_rng(seed)
    lv = np.array(values, np.uint8)
    if layout == "pixels":
        frame = lv[rng.integers(0, len(lv), (H, W))]
    elif layout == "rows":
        frame = np.repeat(lv[rng.integers(0, len(lv), H)][:, None], W, axis=1)
    elif layout == "cols":
        frame = np.repeat(lv[rng.integers(0, len(lv), W)][None, :], H, axis=0)
    elif layout == "blocks":
        by, bx = rng.integers(1, 30, 2)
        grid = lv[rng.integers(0, len(lv), (H // by + 1, W // bx + 1))]
        frame = np.repeat(np.repeat(grid, by, axis=0), bx, axis=1)[:H, :W]
    else:
        yy, xx = np.indices((H, W))
        frame = lv[(yy + xx) % len(lv)]
    frame = np.ascontiguousarray(frame, dtype=np.uint8)
    assert CELLS.key(frame) == reference_key(frame)


THRESHOLD_PAIRS = [
    (31, 32),
    (63, 64),
    (95, 96),
    (127, 128),
    (159, 160),
    (191, 192),
    (223, 224),
    (254, 255),
]


@HYP
@given(
    pair=st.sampled_from(THRESHOLD_PAIRS),
    p=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
    spread=st.integers(0, 2),
)
def test_frames_near_thresholds(pair, p, seed, spread):
    """Pixels around a quantisation threshold T: cell averages close to T - 0.5."""
    rng = np.random.default_rng(seed)
    lo, hi = pair
    frame = np.where(rng.random((H, W)) < p, hi, lo).astype(np.int64)
    frame += rng.integers(-spread, spread + 1, (H, W))
    frame = np.clip(frame, 0, 255).astype(np.uint8)
    assert CELLS.key(frame) == reference_key(frame)


def test_exact_ties_on_every_threshold(monkeypatch):
    """Half the cell at T-1, half at T (a mathematically exact T - 0.5 average)."""
    calls = []
    real = cells_mod.reference_key
    monkeypatch.setattr(cells_mod, "reference_key", lambda *a: calls.append(1) or real(*a))
    frames = []
    for lo, hi in THRESHOLD_PAIRS:
        for period in (1, 2, 3, 5, 7, 13, 16):
            yy, xx = np.indices((H, W))
            frames.append(np.where((xx // period + yy) % 2 == 0, lo, hi).astype(np.uint8))
            frames.append(np.where((yy // period) % 2 == 0, lo, hi).astype(np.uint8))
            frames.append(np.where((xx // period) % 2 == 0, hi, lo).astype(np.uint8))
    frames = np.stack(frames)
    for frame in frames:
        CELLS.key(frame)
    assert calls, "no frame reached the cv2 fallback: the test lost its teeth"
    monkeypatch.undo()
    assert_keys_exact(CELLS, frames)


def test_constant_frames():
    frames = np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], H, 1).repeat(W, 2)
    assert_keys_exact(CELLS, frames)


# -------------------------------------------------------------------- batch API
def test_batch_equals_per_frame(real_frames):
    rng = np.random.default_rng(5)
    mixed = [real_frames[g][::7] for g in GAMES]
    mixed.append(rng.integers(0, 256, (40, H, W), dtype=np.uint8))
    mixed.append(np.where(rng.random((40, H, W)) < 0.5, 31, 32).astype(np.uint8))
    frames = np.concatenate(mixed)
    assert len(frames) > 130  # crosses the internal chunk size
    batch = CELLS.keys(frames)
    assert batch.shape == (len(frames), 88) and batch.dtype == np.uint8
    assert [row.tobytes() for row in batch] == [CELLS.key(f) for f in frames]
    # non-contiguous stacks and views work too
    view = frames[::-2, :, :]
    assert [row.tobytes() for row in CELLS.keys(view)] == [reference_key(f) for f in view]
    assert CELLS.keys(frames[:0]).shape == (0, 88)


def test_non_contiguous_frame():
    big = np.random.default_rng(3).integers(0, 256, (2 * H, 2 * W), dtype=np.uint8)
    for frame in (big[::2, ::2], big[H:, W:], big[:H, :W][::-1], np.asfortranarray(big[:H, :W])):
        assert CELLS.key(frame) == reference_key(frame)


# ----------------------------------------------------------- other resolutions
@pytest.mark.parametrize(
    "width,height,levels",
    [
        (11, 8, 8),
        (8, 11, 8),
        (16, 16, 8),
        (10, 12, 16),
        (11, 8, 1),
        (11, 8, 2),
        (11, 8, 255),
        (13, 9, 254),
        (5, 3, 100),
        (1, 1, 8),
        (40, 30, 8),
        (160, 8, 8),
        (16, 14, 8),  # integer scale factors: cv2's other INTER_AREA algorithm
    ],
)
@pytest.mark.parametrize("shape", [(210, 160), (250, 160), (84, 84), (97, 61), (24, 33)])
def test_other_sizes_equal_cv2(width, height, levels, shape):
    cells = DownscaleCells(width, height, levels)
    assert cells.key_size == width * height
    rng = np.random.default_rng(width * 1000 + height * 10 + levels)
    frames = [
        rng.integers(0, 256, shape, dtype=np.uint8),
        np.where(rng.random(shape) < 0.5, 127, 128).astype(np.uint8),
        np.full(shape, 200, np.uint8),
        rng.choice(np.array([0, 63, 64, 200], np.uint8), shape),
    ]
    assert_keys_exact(cells, np.stack(frames))


def test_upscaling_uses_cv2():
    cells = DownscaleCells(11, 8)
    frame = np.random.default_rng(0).integers(0, 256, (5, 7), dtype=np.uint8)
    assert cells.key(frame) == reference_key(frame)


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"levels": 0}, "levels"),
        ({"levels": 256}, "levels"),
        ({"levels": -1}, "levels"),
        ({"levels": 2.5}, "levels"),
        ({"levels": True}, "levels"),
        ({"width": 0}, "width"),
        ({"height": -3}, "height"),
        ({"width": "11"}, "width"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DownscaleCells(**kwargs)


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((H, W), np.float32),
        np.zeros((H, W), np.int16),
        np.zeros((H, W, 3), np.uint8),
        np.zeros(W, np.uint8),
        np.zeros((0, W), np.uint8),
        [[0] * W] * H,
        None,
    ],
)
def test_bad_frame(frame):
    with pytest.raises(ValueError, match="frame"):
        CELLS.key(frame)


@pytest.mark.parametrize(
    "frames",
    [
        np.zeros((H, W), np.uint8),
        np.zeros((2, H, W), np.float64),
        np.zeros((2, H, W, 3), np.uint8),
        np.zeros((2, 0, W), np.uint8),
        [np.zeros((H, W), np.uint8)],
    ],
)
def test_bad_frames(frames):
    with pytest.raises(ValueError, match="frames"):
        CELLS.keys(frames)


def test_value_semantics():
    assert DownscaleCells() == DownscaleCells(11, 8, 8) == DownscaleCells(np.int64(11))
    assert hash(DownscaleCells()) == hash(DownscaleCells(11, 8, 8))
    with pytest.raises(AttributeError):
        DownscaleCells().width = 3
