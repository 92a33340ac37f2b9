"""Demos as a Minari dataset (the Farama standard for offline-RL data), and
goexplore's loader for it.

Layout under the datasets root ``ROOT`` (what ``MINARI_DATASETS_PATH`` names):

    ROOT/<namespace>/<name>-v<N>/data/...        Minari's files (HDF5 + metadata.json)
    ROOT/<namespace>/<name>-v<N>/goexplore/
        states.npz       emulator states every ``state_every`` steps of each demo
        manifest.json    size and SHA-256 of every file of the dataset
        demo_NN.mp4      with ``--video``

One episode per demo: ``observations`` (84x84 grayscale, as Gymnasium's
``AtariPreprocessing(screen_size=84)`` makes them, or full RGB frames),
``actions``, ``rewards``, ``terminations`` (the run's episode end: a life lost
or game over), ``truncations`` (a cell's trajectory stops without an episode
end) and ``infos["lives"]``. Observations are stored losslessly (no JPEG).

The dataset is built under a hidden staging folder inside ``ROOT`` and moved
into place by one rename when complete: a failure leaves nothing behind.
Nothing is pickled; the states file is a plain ``.npz`` read by the project's
loader for untrusted files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from goexplore.errors import CheckpointError, GoExploreError
from goexplore.explog import read_file, read_npz, sha256_file, write_npz_atomic

FORMAT = "goexplore-demos/1"
OBS_KINDS = ("gray84", "rgb")
SIDE = "goexplore"  # our folder inside the dataset's folder
MAX_STATES_BYTES = 1 << 34

INSTALL_HINT = "pip install 'minari>=0.5.4,<0.6' h5py  (goexplore's own dependencies)"


def _minari() -> Any:
    try:
        import h5py  # noqa: F401  (Minari's default storage backend)
        import minari
    except ImportError as e:
        raise GoExploreError(
            f"demos need Minari with HDF5 ({e.name} is not installed): {INSTALL_HINT}"
        ) from None
    return minari


@dataclass
class Demo:
    """One replayed demo, ready to store."""

    actions: np.ndarray  # (T,) int64
    rewards: np.ndarray  # (T,) float64
    observations: np.ndarray  # (T+1, ...) uint8
    lives: np.ndarray  # (T+1,) int64
    done: bool  # the last step ended an episode (termination); else truncation
    state_steps: np.ndarray  # (n,) steps at which the emulator state was saved
    states: list[bytes]
    meta: dict[str, Any]  # score, length, source, ...


@contextlib.contextmanager
def datasets_root(root: Path) -> Iterator[None]:
    """Point Minari at ``root`` for the duration (it reads the variable on each call)."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def check_dataset_id(dataset_id: str) -> tuple[str | None, str, int]:
    """(namespace, name, version) of a Minari id, or a clear error."""
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        ns, name, version = parse_dataset_id(dataset_id)
    except ValueError:
        raise GoExploreError(
            f"--dataset-id {dataset_id!r}: not a Minari id; use "
            "NAMESPACE/NAME-vN (letters, digits, '-' and '_'; e.g. goexplore/montezuma/run-v0)"
        ) from None
    if version is None:
        raise GoExploreError(f"--dataset-id {dataset_id!r}: give a version, e.g. {dataset_id}-v0")
    return ns, name, version


def default_dataset_id(game: str, run_dir: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(run_dir).resolve().name).strip("-") or "run"
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", game).strip("-") or "env"
    return f"goexplore/{name}/{slug}-v0"


def dataset_dir(root: Path, dataset_id: str) -> Path:
    ns, name, version = check_dataset_id(dataset_id)
    return Path(root) / (ns or "") / f"{name}-v{version}"


def _spaces(obs: str, n_actions: int, frame_shape: tuple[int, ...]) -> tuple[Any, Any]:
    import gymnasium as gym

    shape = (84, 84) if obs == "gray84" else frame_shape
    return (
        gym.spaces.Box(0, 255, shape, np.uint8),
        gym.spaces.Discrete(n_actions),
    )


def write_dataset(
    root: Path,
    dataset_id: str,
    demos: Sequence[Demo],
    *,
    env_spec: Any,
    obs: str,
    n_actions: int,
    metadata: dict[str, Any],
    videos: Sequence[Path] = (),
    staging: Path | None = None,
) -> Path:
    """Write ``demos`` as the Minari dataset ``dataset_id`` under ``root``
    (atomically), recording ``env_spec`` (a Gymnasium EnvSpec, or None);
    ``videos`` are files to move into its ``goexplore/`` folder. Returns the
    dataset's folder."""
    minari = _minari()
    root = Path(root).absolute()  # Minari resolves a relative root against its own path
    final = dataset_dir(root, dataset_id)
    if final.exists():
        raise GoExploreError(
            f"dataset {dataset_id!r} already exists in {root} ({final}); "
            "choose another --dataset-id (or version) or remove it"
        )
    ns = check_dataset_id(dataset_id)[0]
    staging = staging or make_staging(root)
    try:
        with datasets_root(staging), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # unset author e-mail / permalink
            from minari.data_collector.episode_buffer import EpisodeBuffer

            obs_space, act_space = _spaces(obs, n_actions, demos[0].observations.shape[1:])
            buffers = [_buffer(EpisodeBuffer, i, d) for i, d in enumerate(demos)]
            ds = minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=env_spec,
                observation_space=obs_space,
                action_space=act_space,
                algorithm_name="Go-Explore Phase 1 (goexplore)",
                author="goexplore",
                description=metadata.get("description"),
                requirements=metadata.get("requirements"),
                jpeg_encoding=False,
            )
            ds.storage.update_metadata({"goexplore": metadata})
            ds.storage.update_episode_metadata([d.meta for d in demos])
        built = dataset_dir(staging, dataset_id)
        side = built / SIDE
        side.mkdir()
        arrays: dict[str, np.ndarray] = {}
        for i, d in enumerate(demos):
            sizes = np.array([len(s) for s in d.states], np.int64)
            arrays[f"ep{i}_steps"] = d.state_steps.astype(np.int64)
            arrays[f"ep{i}_offsets"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            arrays[f"ep{i}_blob"] = np.frombuffer(b"".join(d.states), np.uint8)
        write_npz_atomic(side / "states.npz", arrays)
        for v in videos:
            shutil.move(str(v), side / Path(v).name)
        _write_manifest(built, dataset_id, len(demos))
        # publish: namespace metadata first (Minari lists namespaces by it), then one rename
        target_ns = root / (ns or "")
        target_ns.mkdir(parents=True, exist_ok=True)
        meta_file = "namespace_metadata.json"
        if ns and not (target_ns / meta_file).exists() and (staging / ns / meta_file).exists():
            shutil.copy2(staging / ns / meta_file, target_ns / meta_file)
        os.rename(built, final)
        return final
    except OSError as e:
        raise GoExploreError(f"could not write the dataset under {root}: {e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _buffer(cls: Any, i: int, d: Demo) -> Any:
    """One Minari episode: the last step is a termination (an episode end) or a
    truncation (a cell's trajectory, cut where the cell is)."""
    terminations = np.zeros(len(d.actions), bool)
    truncations = np.zeros(len(d.actions), bool)
    (terminations if d.done else truncations)[-1] = True
    return cls(
        id=i,
        seed=0,
        observations=d.observations,
        actions=d.actions,
        rewards=d.rewards,
        terminations=terminations,
        truncations=truncations,
        infos={"lives": d.lives},
    )


def make_staging(root: Path) -> Path:
    """A hidden folder inside ``root`` (same file system: the final move is a
    rename; hidden: Minari does not list it), or a clear error."""
    root = Path(root).absolute()
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = root / f".goexplore-staging-{os.getpid()}-{time.time_ns()}"
        staging.mkdir()
        return staging
    except OSError as e:
        raise GoExploreError(f"--out {root}: cannot write there ({e.strerror or e})") from None


def _write_manifest(ds_dir: Path, dataset_id: str, n: int) -> None:
    files = {}
    for p in sorted(ds_dir.rglob("*")):
        if p.is_file():
            rel = p.relative_to(ds_dir).as_posix()
            files[rel] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
    doc = {"format": FORMAT, "dataset_id": dataset_id, "episodes": n, "files": files}
    tmp = ds_dir / SIDE / "manifest.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, ds_dir / SIDE / "manifest.json")


# --- loading ---------------------------------------------------------------------------
@dataclass
class Demos:
    """A goexplore demo dataset, checked file by file against its manifest."""

    dataset: Any  # minari.MinariDataset
    path: Path
    metadata: dict[str, Any]  # what goexplore recorded (game, settings, config, demos)
    _states: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.dataset.total_episodes)

    def states(self, episode: int) -> list[tuple[int, bytes]]:
        """``(step, emulator state)`` pairs along demo ``episode``: restore the
        state, and the env continues from that step of the demo."""
        if not 0 <= episode < len(self):
            raise GoExploreError(f"episode {episode}: the dataset has episodes 0..{len(self) - 1}")
        steps = self._states[f"ep{episode}_steps"]
        off = self._states[f"ep{episode}_offsets"]
        blob = self._states[f"ep{episode}_blob"]
        return [(int(s), blob[off[j] : off[j + 1]].tobytes()) for j, s in enumerate(steps.tolist())]


def load_demos(dataset_id: str, root: Path | None = None) -> Demos:
    """Load a dataset written by ``goexplore demo`` after checking every file
    against its manifest (a truncated or altered file is an error naming it)."""
    root = Path(root or os.environ.get("MINARI_DATASETS_PATH") or Path.home() / ".minari/datasets")
    ds_dir = dataset_dir(root, dataset_id)
    if not ds_dir.is_dir():
        raise GoExploreError(f"dataset {dataset_id!r}: not found under {root} (no {ds_dir})")
    problems = check_files(ds_dir)
    if problems:
        raise CheckpointError(f"dataset {dataset_id!r} is damaged:\n  " + "\n  ".join(problems))
    states_path = ds_dir / SIDE / "states.npz"
    states = read_npz(read_file(states_path, MAX_STATES_BYTES, "demo states"), states_path)
    minari = _minari()
    with datasets_root(root):
        ds = minari.load_dataset(dataset_id)
    meta = ds.storage.metadata.get("goexplore")
    if not isinstance(meta, dict):
        raise CheckpointError(f"{ds_dir / 'data' / 'metadata.json'}: no goexplore metadata")
    return Demos(ds, ds_dir, meta, states)


def check_files(ds_dir: Path) -> list[str]:
    """Problems of a dataset folder against its manifest; each names a file."""
    man_path = ds_dir / SIDE / "manifest.json"
    try:
        man = json.loads(read_file(man_path, 1 << 22, "demo manifest"))
        files = man["files"]
        if man.get("format") != FORMAT or not isinstance(files, dict):
            raise ValueError("not a goexplore demo manifest")
    except CheckpointError as e:
        return [str(e)]
    except (ValueError, KeyError, TypeError) as e:
        return [f"{man_path}: unreadable ({e})"]
    problems = []
    for rel, want in files.items():
        p = ds_dir / rel
        if not p.is_file():
            problems.append(f"{p}: missing")
        elif p.stat().st_size != want["bytes"]:
            problems.append(f"{p}: {p.stat().st_size:,} bytes, the manifest says {want['bytes']:,}"
                            " (truncated or altered)")  # fmt: skip
        elif sha256_file(p) != want["sha256"]:
            problems.append(f"{p}: contents differ from the manifest's SHA-256 (altered)")
    return problems
