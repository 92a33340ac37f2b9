"""``goexplore robustify``: train a policy from Phase 1's demos with the backward
curriculum (:mod:`goexplore.phase2.curriculum`) and Stable-Baselines3's PPO, under
sticky actions, until it plays from reset.

The output dir holds, besides the final policy:

* ``config.json``: the settings (what ``--resume`` continues with);
* ``demos.json``: each demo's source, length and score;
* ``curriculum.jsonl``: one row per PPO rollout: frames, each demo's start point
  (steps from its end), success at the points, episodes and their mean return;
* ``checkpoint/``: ``policy.safetensors`` (weights), ``optimizer.pt`` (tensors only,
  read with ``torch.load(weights_only=True)``), ``state.json`` (frames, curriculum):
  nothing is pickled, so loading someone else's checkpoint runs no code;
* ``policy.safetensors`` and ``policy.json`` at the end: what ``goexplore evaluate``
  reads; ``curriculum.png``: the curve.

SB3's own ``.zip`` carries cloudpickled objects; it is never written or read here.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from goexplore.errors import GoExploreError
from goexplore.phase2 import require
from goexplore.phase2.curriculum import AT_POINT, START_FROM_END, STEP_FRACTION, THRESHOLD, WINDOW

FORMAT = "goexplore-policy/1"
PROTOCOL = (
    "RL protocol: a policy playing from reset under sticky actions (and, for Atari, "
    "random no-ops); comparable with sticky-action RL scores, unlike Phase 1's"
)


@dataclass
class Settings:
    source: str  # a run dir or a dataset id
    frames: int = 1_000_000  # policy steps (agent steps) of training
    seed: int = 0
    sticky: float = 0.25
    noops: int = -1  # random no-ops at a reset (-1: 30 for Atari, 0 otherwise)
    demos: int = 4  # demos to sample from
    target_score: float | None = None  # cut the demos where they reach this score
    no_demo: bool = False  # the control: every episode from reset
    success_margin: float = -1.0  # a success may fall short by this share (-1: 0 Atari, 0.1 else)
    device: str = "auto"
    n_envs: int = 8
    threshold: float = THRESHOLD
    window: int = WINDOW
    start_from_end: int = START_FROM_END
    step_fraction: float = STEP_FRACTION
    at_point: float = AT_POINT
    ckpt_every: int = 100_000
    dataset_root: str | None = None
    tensorboard: bool = False  # the curriculum rows as TensorBoard scalars in OUT/tb

    def check(self) -> None:
        bad = []
        if self.frames < 1:
            bad.append(f"--frames {self.frames}: must be at least 1")
        if not 0 <= self.sticky < 1:
            bad.append(f"--sticky {self.sticky}: a probability in [0, 1)")
        if self.demos < 1:
            bad.append(f"--demos {self.demos}: must be at least 1")
        if self.n_envs < 1:
            bad.append(f"--n-envs {self.n_envs}: must be at least 1")
        if self.device not in ("auto", "cpu", "cuda"):
            bad.append(f"--device {self.device!r}: auto, cpu or cuda")
        if bad:
            raise GoExploreError("; ".join(bad))


def pick_device(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise GoExploreError("--device cuda: no CUDA device here (use --device cpu or auto)")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def ppo_settings(obs: str) -> dict:
    """PPO's settings per observation kind (documented in docs/phase2.md)."""
    common = {
        "n_steps": 128,
        "batch_size": 256,
        "n_epochs": 4,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "ent_coef": 0.01,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
    }
    if obs in ("atari84", "frame84"):
        return {**common, "learning_rate": 2.5e-4, "clip_range": 0.1}
    return {**common, "learning_rate": 1e-3, "clip_range": 0.2}


def policy_kind(obs: str) -> tuple[str, dict, int]:
    """(SB3 policy, its kwargs, frames stacked) per observation kind."""
    if obs in ("atari84", "frame84"):
        return "CnnPolicy", {}, 4
    return "MlpPolicy", {"net_arch": [64, 64]}, 1


def build_model(spec: dict, venv: Any, seed: int, device: str) -> Any:
    from stable_baselines3 import PPO

    policy, kwargs, _ = policy_kind(spec["obs"])
    return PPO(
        policy,
        venv,
        seed=seed,
        device=device,
        verbose=0,
        policy_kwargs=kwargs,
        **ppo_settings(spec["obs"]),
    )


def make_venv(spec: dict, n_envs: int, demos, curriculum, seed: int, *, evaluate=False) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    from goexplore.phase2.envs import Phase2Env

    def one():
        return Phase2Env(
            spec["env"],
            spec["env_kwargs"],
            demos=demos,
            curriculum=curriculum,
            obs=spec["obs"],
            sticky=spec["sticky"],
            noops=spec["noops"],
            end_on_life=spec["end_on_life"] and not evaluate,
            reward_scale=spec["reward_scale"],
            target=spec["target"],
            margin=spec["margin"],
        )

    venv = DummyVecEnv([one for _ in range(n_envs)])
    venv.seed(seed)
    stack = policy_kind(spec["obs"])[2]
    return VecFrameStack(venv, stack) if stack > 1 else venv


# --- checkpoints -------------------------------------------------------------------------
def _save(dirpath: Path, model: Any, state: dict) -> None:
    """Weights, optimizer tensors and JSON state, written as a new directory then
    swapped in: a crash leaves the previous checkpoint whole."""
    import torch
    from safetensors.torch import save_model

    tmp = dirpath.with_name(dirpath.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # save_model: SB3's image policies share one feature extractor between the
    # policy and value heads (tensors that share memory are stored once)
    save_model(model.policy, str(tmp / "policy.safetensors"))
    torch.save(model.policy.optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state, indent=1) + "\n")
    old = dirpath.with_name(dirpath.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if dirpath.exists():
        dirpath.rename(old)
    tmp.rename(dirpath)
    shutil.rmtree(old, ignore_errors=True)


def _load_weights(model: Any, path: Path) -> None:
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    try:
        load_model(model.policy, str(path))
    except (OSError, SafetensorError, RuntimeError) as e:
        raise GoExploreError(f"{path}: unreadable policy weights ({str(e)[:200]})") from None


def _read_state(ckpt: Path) -> dict:
    """state.json: the steps done and the curriculum (checked here: a damaged file is
    an error naming it)."""
    from goexplore.phase2.curriculum import Curriculum

    try:
        state = json.loads((ckpt / "state.json").read_text())
        int(state["frames"])
        if state["curriculum"] is not None:
            Curriculum.from_json(state["curriculum"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise GoExploreError(f"{ckpt / 'state.json'}: unreadable ({e})") from None
    return state


def _load_checkpoint(ckpt: Path, model: Any) -> dict:
    """Weights and optimizer into ``model``; returns the checkpoint's JSON state."""
    import torch

    state = _read_state(ckpt)
    _load_weights(model, ckpt / "policy.safetensors")
    try:
        opt = torch.load(ckpt / "optimizer.pt", weights_only=True, map_location=model.device)
        model.policy.optimizer.load_state_dict(opt)
    except Exception as e:  # torch raises many kinds for a damaged file
        raise GoExploreError(f"{ckpt / 'optimizer.pt'}: unreadable ({str(e)[:200]})") from None
    return state


# --- the run -------------------------------------------------------------------------------
def robustify(settings: Settings, out: Path, *, resume: bool = False, log=print) -> dict:
    """Train (or continue training) a policy into ``out``; returns policy.json's content."""
    require()
    settings.check()
    out = Path(out)
    cfg_path = out / "config.json"
    if cfg_path.exists():
        if not resume:
            raise GoExploreError(
                f"{out} already holds a robustify run; continue it with --resume, or choose "
                "another --out"
            )
        try:
            saved = json.loads(cfg_path.read_text())
        except (OSError, ValueError) as e:
            raise GoExploreError(f"{cfg_path}: unreadable ({e})") from None
        # a resume needs only the flags that change: a setting left at its default
        # takes the run's own
        for f in fields(Settings):
            if f.name in saved and getattr(settings, f.name) == f.default:
                setattr(settings, f.name, saved[f.name])
        keep = {f.name for f in fields(Settings)} - {
            "frames",
            "ckpt_every",
            "device",
            "tensorboard",
        }
        differ = [k for k in sorted(keep) if saved.get(k) != getattr(settings, k)]
        if differ:
            raise GoExploreError(
                f"{out} holds a run with other settings ({', '.join(differ)}); only "
                "--frames, --ckpt-every, --device and --tensorboard may change on --resume"
            )
    device = pick_device(settings.device)

    from goexplore.phase2.curriculum import Curriculum
    from goexplore.phase2.source import build_demos, read_source

    root = Path(settings.dataset_root) if settings.dataset_root else None
    src = read_source(settings.source, settings.demos, root, settings.target_score)
    demos, obs = build_demos(src, None, settings.target_score)
    from goexplore.envs.atari import GAMES

    atari = src.env in GAMES
    spec = {
        "env": src.env,
        "env_kwargs": src.env_kwargs,
        "obs": obs,
        "sticky": settings.sticky,
        "noops": settings.noops if settings.noops >= 0 else (30 if atari else 0),
        "end_on_life": src.episode_end == "life",
        "reward_scale": 0.01 if atari else 1.0,
        "target": max(d.score for d in demos),
        "margin": settings.success_margin
        if settings.success_margin >= 0
        else (0.0 if atari else 0.1),
    }
    ckpt = out / "checkpoint"
    state = _read_state(ckpt) if resume and (ckpt / "state.json").exists() else None
    curriculum = None
    if not settings.no_demo:
        curriculum = (
            Curriculum.from_json(state["curriculum"])
            if state is not None
            else Curriculum(
                [len(d) for d in demos],
                threshold=settings.threshold,
                window=settings.window,
                start_from_end=settings.start_from_end,
                step_fraction=settings.step_fraction,
                at_point=settings.at_point,
            )
        )
    out.mkdir(parents=True, exist_ok=True)
    if not cfg_path.exists():
        cfg_path.write_text(json.dumps(asdict(settings), indent=1) + "\n")
        (out / "demos.json").write_text(
            json.dumps(
                [{"source": d.source, "length": len(d), "score": d.score} for d in demos],
                indent=1,
            )
            + "\n"
        )
    venv = make_venv(
        spec, settings.n_envs, [] if settings.no_demo else demos, curriculum, settings.seed
    )
    model = build_model(spec, venv, settings.seed, device)
    done = 0
    if state is not None:
        _load_checkpoint(ckpt, model)
        done = int(state["frames"])
        model.num_timesteps = done
        log(f"robustify: resumed from {ckpt} at {done:,} frames")
        _trim_rows(out / "curriculum.jsonl", done)
    log(
        f"robustify: {len(demos)} demo(s) of {src.env} (lengths "
        f"{', '.join(str(len(d)) for d in demos)}; scores "
        f"{', '.join(f'{d.score:g}' for d in demos)}), obs {obs}, sticky {settings.sticky}, "
        f"{'no demos (control)' if settings.no_demo else 'backward curriculum'}, {device}"
    )
    t0 = time.perf_counter()
    if done < settings.frames:
        cb = _callback(out, settings, spec, curriculum, log, t0, done)
        model.learn(settings.frames - done, callback=cb, reset_num_timesteps=False)
        cb.flush()
        done = model.num_timesteps
        _save(ckpt, model, _state(done, curriculum))
    policy = _finish(out, model, settings, spec, demos, curriculum, done)
    venv.close()
    return policy


def _state(frames: int, curriculum) -> dict:
    return {"frames": frames, "curriculum": curriculum.to_json() if curriculum else None}


def _trim_rows(path: Path, frames: int) -> None:
    if not path.exists():
        return
    rows = [r for r in path.read_text().splitlines() if r.strip()]
    keep = [r for r in rows if json.loads(r)["frames"] <= frames]
    path.write_text("".join(r + "\n" for r in keep))


def _callback(out, settings, spec, curriculum, log, t0, start_frames):
    from stable_baselines3.common.callbacks import BaseCallback

    class Curriculum_(BaseCallback):
        def __init__(self):
            super().__init__()
            self.returns: deque = deque(maxlen=100)
            self.successes: deque = deque(maxlen=100)
            self.episodes = 0
            self.next_ckpt = (start_frames // settings.ckpt_every + 1) * settings.ckpt_every
            self.next_log = start_frames
            self.rows = open(out / "curriculum.jsonl", "a")
            self.tb = None
            if settings.tensorboard:
                from goexplore.report.tensorboard import INSTALL_HINT, _summary_writer_class

                writer = _summary_writer_class()
                if writer is None:
                    raise GoExploreError(f"--tensorboard needs tensorboardX: {INSTALL_HINT}")
                self.tb = writer(str(out / "tb"))

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                e = info.get("episode_end")
                if e is None:
                    continue
                self.episodes += 1
                self.returns.append(e["return"])
                if e["start"] == 0:
                    self.successes.append(e["success"])
                if curriculum is not None and e["demo"] >= 0:
                    if curriculum.record(e["demo"], e["start"], e["success"]):
                        p = curriculum.points[e["demo"]]
                        log(
                            f"  {self.num_timesteps:,} frames: demo {e['demo']} start point "
                            f"moves back to {p.from_end} steps from its end (of {p.length})"
                        )
            n = self.num_timesteps
            if n >= self.next_ckpt:
                self.next_ckpt += settings.ckpt_every
                _save(out / "checkpoint", self.model, _state(n, curriculum))
            return True

        def _on_rollout_end(self) -> None:
            n = self.num_timesteps
            row = {
                "frames": n,
                "from_end": [p.from_end for p in curriculum.points] if curriculum else None,
                "success_at_point": (
                    [round(curriculum.success(i), 3) for i in range(len(curriculum.points))]
                    if curriculum
                    else None
                ),
                "progress": round(curriculum.progress, 4) if curriculum else None,
                "success_from_reset": (
                    round(float(np.mean(self.successes)), 3) if self.successes else None
                ),
                "episodes": self.episodes,
                "return_mean": round(float(np.mean(self.returns)), 4) if self.returns else None,
                "time": round(time.time(), 3),
            }
            self.rows.write(json.dumps(row) + "\n")
            self.rows.flush()
            if self.tb is not None:
                for k in ("progress", "success_from_reset", "return_mean", "episodes"):
                    if row[k] is not None:
                        self.tb.add_scalar(f"phase2/{k}", row[k], n)
                for i, v in enumerate(row["from_end"] or []):
                    self.tb.add_scalar(f"phase2/start_from_end/demo{i}", v, n)
            if n >= self.next_log:
                self.next_log = n + max(10_000, settings.frames // 50)
                rate = (n - start_frames) / max(time.perf_counter() - t0, 1e-9)
                where = (
                    f"start points {row['from_end']} steps from the end, progress "
                    f"{row['progress']:.0%}"
                    if curriculum
                    else "from reset (control)"
                )
                log(
                    f"frames {n:,}/{settings.frames:,}  {rate:,.0f}/s  {where}  episodes "
                    f"{self.episodes:,}  success from reset {row['success_from_reset']}"
                )

        def flush(self) -> None:
            self.rows.close()
            if self.tb is not None:
                self.tb.close()

    return Curriculum_()


def _finish(out: Path, model, settings: Settings, spec: dict, demos, curriculum, frames) -> dict:
    import shutil as _sh

    _sh.copyfile(out / "checkpoint" / "policy.safetensors", out / "policy.safetensors")
    policy, kwargs, stack = policy_kind(spec["obs"])
    doc = {
        "format": FORMAT,
        **spec,
        "policy": policy,
        "policy_kwargs": kwargs,
        "frame_stack": stack,
        "ppo": ppo_settings(spec["obs"]),
        "frames_trained": int(frames),
        "seed": settings.seed,
        "no_demo": settings.no_demo,
        "demo_scores": [d.score for d in demos],
        "demo_lengths": [len(d) for d in demos],
        "curriculum": curriculum.to_json() if curriculum else None,
        "reached_reset": bool(curriculum.at_reset) if curriculum else None,
    }
    from goexplore.store import write_text_atomic

    write_text_atomic(out / "policy.json", json.dumps(doc, indent=1) + "\n")
    _plot(out)
    return doc


def _plot(out: Path) -> None:
    path = out / "curriculum.jsonl"
    rows = (
        [json.loads(r) for r in path.read_text().splitlines() if r.strip()] if path.exists() else []
    )
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    x = [r["frames"] for r in rows]
    if rows[0]["progress"] is not None:
        ax.plot(x, [r["progress"] for r in rows], label="curriculum progress (1: from reset)")
    succ = [r["success_from_reset"] for r in rows]
    ax.plot(x, [np.nan if s is None else s for s in succ], label="success from reset")
    ax.set_xlabel("policy steps")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.savefig(out / "curriculum.png", dpi=100)
    plt.close(fig)


def load_policy(policy_dir: Path) -> tuple[dict, Any]:
    """policy.json and a PPO model holding the weights (no pickle involved)."""
    require()
    policy_dir = Path(policy_dir)
    try:
        doc = json.loads((policy_dir / "policy.json").read_text())
    except (OSError, ValueError) as e:
        raise GoExploreError(f"{policy_dir / 'policy.json'}: unreadable ({e})") from None
    if doc.get("format") != FORMAT:
        raise GoExploreError(f"{policy_dir / 'policy.json'}: not a goexplore policy ({FORMAT})")
    return doc, policy_dir / "policy.safetensors"
