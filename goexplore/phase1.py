"""Go-Explore Phase 1: sample cells -> return (restore) -> explore -> update.

Readable top to bottom; the semantics are the reference's (docs/concepts.md),
the data flow docs/architecture.md's. Seeding lives in one place:
the master generator, seeded by ``cfg.seed``, draws each batch's sample and
then one seed per task; each task explores with its own generator. Results
therefore do not depend on the number of workers or on interruptions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goexplore.archive import Archive
from goexplore.backends import Counters, WorkerSpec, make_backend
from goexplore.codec import MAX_SAMPLES, TRAIN_AT, StateCodec, train_model
from goexplore.config import Config
from goexplore.demos import verify_cell
from goexplore.envs import make_env
from goexplore.envs.layout import layout_of
from goexplore.errors import CheckpointError
from goexplore.explog import ExperienceLog
from goexplore.formats import MAX_JSON_BYTES, check_final, load_json, metrics_row
from goexplore.cells import DONE_KEY
from goexplore.wire import Task
from goexplore.selection import SelectionParams
from goexplore.store import (
    MILESTONE_EVERY,
    RunDir,
    adopt_chunks,
    ckpt_name,
    read_checkpoint,
    read_optional,
)

PROTOCOL = (
    "Phase 1 deterministic search with emulator restore (no sticky actions): "
    "not comparable with sticky-action RL scores"
)


@dataclass
class Progress:
    frames: int
    total: int
    batch: int
    cells: int
    rooms: int | None  # None: the game has no room fact
    best_done: float | None
    max_score: float
    steps_per_s: float
    since_ckpt_s: float | None
    logged: bool = True  # a metrics row was written at this batch (else an in-between update)
    level: int | None = None  # highest level of an archived cell (None: the game has no levels)
    workers_lost: int = 0  # workers that died (and were replaced) in this process
    replayed: int | None = None  # env steps spent on restores by replay (None: not replaying)


class Phase1:
    def __init__(self, cfg: Config, run_dir: RunDir | None = None):
        self.cfg = cfg.validate()
        self.run_dir = run_dir
        self.spec = WorkerSpec.from_config(cfg)
        env = make_env(cfg.env, cfg.env_kwargs)
        self.fact_names = tuple(env.fact_names)
        self.room_fact, self.level_fact = env.room_fact, env.level_fact
        #: emulator frames per agent step (None: the env has no frameskip)
        self.frameskip = getattr(env, "frameskip", None)
        self.room_layout = layout_of(env)  # the report's map (None: the env has none)
        #: restores replay the cell's action prefix (the adapter's return by replay)
        self.restores_replay = getattr(env, "state_mode", None) == "replay"
        env.close()
        self.cells = self.spec.make_cells(self.fact_names)
        self.params = SelectionParams.from_config(cfg)
        self.dynamic = None  # dynamic cells: the master's state (goexplore.dynamic)
        if getattr(self.cells, "dynamic", False):
            from goexplore.dynamic import DynamicState

            self.dynamic = DynamicState.start(cfg, len(self.fact_names))
        self.archive = self._new_archive()
        self.explog = ExperienceLog(run_dir.explog_dir if run_dir else None, cfg.explog_chunk)
        self.codec = StateCodec()
        self.codec_level = 0  # state-model trainings done (see codec.TRAIN_AT)
        self.rng = np.random.default_rng(cfg.seed)
        self.frames = 0
        self.batch = 0
        self.last_ckpt_frames = 0
        self.checkpoints_written = 0  # this run's checkpoints so far (every 5th is kept)
        self.replayed_steps = 0  # env steps spent on restores by replay (not exploration)
        self._warned_one_cell = False
        self._logged_batch: int | None = None  # the batch of this process's last metrics row
        self.last_ckpt_time: float | None = None
        self.counters = Counters()  # the backends' own, summed over this process's runs
        self._backend = None  # while running
        self.lock: int | None = None  # RUN_DIR/.lock while a process writes the run dir

    def _archive_args(self) -> dict:
        li = self.fact_names.index(self.level_fact) if self.level_fact else None
        return {"params": self.params, "rep": self.cells, "level_fact": li}

    def _new_archive(self) -> Archive:
        return Archive(self.cells.key_size, len(self.fact_names), **self._archive_args())

    @property
    def has_rooms(self) -> bool:
        return self.room_fact is not None

    # --- start --------------------------------------------------------------------
    def seed_root(self) -> None:
        """The root cell: the frame and state right after reset (a reset's frame
        is fresh; only restores leave stale reads)."""
        env = make_env(self.cfg.env, self.cfg.env_kwargs)
        frame = env.reset()
        facts = env.facts()
        self.archive.add(
            self.cells.keyer()(frame, facts),
            self.codec.compress(env.clone_state()),
            0.0,
            0,
            -1,
            env.lives(),
            facts,
        )
        if self.dynamic is not None:
            blob = self.dynamic.codec.compress(frame)
            self.dynamic.set_frame(0, blob)
            self.dynamic.set_region(self.archive, 0, blob)
        env.close()

    # --- the loop -------------------------------------------------------------------
    def run(self, on_progress=None, should_stop=lambda: False, notify=None) -> bool:
        """Explore until the budget is spent (True) or ``should_stop()`` at a
        batch boundary (False). ``notify(line)`` hears of worker faults."""
        cfg, archive, explog, rng = self.cfg, self.archive, self.explog, self.rng
        options = {"address": cfg.ray_address or None} if cfg.backend == "ray" else {}
        backend = self._backend = make_backend(
            cfg.backend, self.spec, cfg.n_workers, notify, **options
        )
        backend.start(
            archive.full_view(), self.codec.dictionary, view_fn=lambda: self.archive.full_view()
        )
        archive.views_synced()
        if cfg.n_workers == 0 and notify is not None:
            where = "the cluster's CPUs" if cfg.backend == "ray" else "this machine's cores"
            notify(f"workers: auto = {backend.n_workers} ({where})")
        t0, f0 = time.perf_counter(), self.frames
        context = self.cells.needs_context
        dyn = self.dynamic
        try:
            while self.frames < cfg.total_frames:
                if should_stop():
                    break
                if self.codec_level < len(TRAIN_AT) and archive.n >= TRAIN_AT[self.codec_level]:
                    self.train_codec(backend)
                if dyn is not None and dyn.due(cfg, self.frames, archive.n):
                    archive = self.recompute_cells(notify)
                rep = self.cells.params_bytes() if dyn is not None else b""
                until = cfg.stop_at_life_loss_until
                stop = cfg.stop_at_life_loss and (until == 0 or self.frames < until)
                cap = archive.sample(cfg.batch_cells, rng)
                # one draw per task; the same numbers and generator state as one call
                # per task (tests/test_archive.py checks it), at 1/20 of the cost
                seeds = rng.integers(2**31, size=cfg.batch_cells).tolist()
                keys = [archive.key_of(c) for c in cap.ids] if context else [b""] * len(cap.ids)
                tasks = [
                    Task(
                        i,
                        cap.states[i],
                        cap.lives[i],
                        cap.score[i],
                        cap.length[i],
                        seeds[i],
                        cfg.explore_steps,
                        keys[i],
                        rep,
                        stop,
                    )
                    for i in range(cfg.batch_cells)
                ]
                if self.restores_replay:  # each restore replays the cell's whole trajectory
                    self.replayed_steps += sum(cap.length)
                for res in backend.run_batch(archive.take_delta(), tasks):
                    i = res.index  # cap's rows are Python lists: no conversions needed
                    last = cap.last[i]
                    first = explog.append_episode(last, res.actions, res.rew_t, res.rew_v, res.done)
                    on_set = None
                    if dyn is not None:
                        dyn.observe(res.sample_frames, cfg.dynamic_sample)
                        on_set = _frame_setter(dyn, res.cand_frames, archive)
                    archive.apply(cap.ids[i], cap.score[i], cap.length[i], last, res, first, on_set)
                    self.frames += res.n
                self.batch += 1
                if notify is not None and not self._warned_one_cell:
                    self._check_one_cell(notify)
                logged = self.batch % cfg.log_every_batches == 0
                if logged or on_progress:
                    rate = (self.frames - f0) / max(time.perf_counter() - t0, 1e-9)
                    if logged:
                        self.log_metrics(rate)
                    if on_progress:  # every batch: live displays refresh, logs print when logged
                        on_progress(self.progress(rate, logged))
                if (
                    cfg.ckpt_every
                    and self.run_dir
                    and self.frames - self.last_ckpt_frames >= cfg.ckpt_every
                ):
                    self.checkpoint()
            if self.frames >= cfg.total_frames and self._logged_batch != self.batch:
                # a run always ends with a metrics row, however short (dropped if resumed)
                self.log_metrics((self.frames - f0) / max(time.perf_counter() - t0, 1e-9), True)
        finally:
            backend.close()
            self.counters.add(backend.counters)
            self._backend = None
        return self.frames >= cfg.total_frames

    #: batches after which an archive of one cell is reported
    ONE_CELL_BATCHES = 10

    def one_cell_warning(self) -> str | None:
        """What to tell the user when every frame has made the same cell (None: not so)."""
        a = self.archive
        live = a.n - (a.done_id >= 0)
        if live > 1 or self.batch < self.ONE_CELL_BATCHES:
            return None
        return (
            f"after {self.frames:,} agent steps the archive holds one cell: the cell "
            f"representation {self.cfg.cells!r} maps every frame to the same key, so "
            "Go-Explore cannot tell places apart (facts cells: check the env reports facts "
            "that change and --fact-bins; downscale cells: check the frames change)"
        )

    def _check_one_cell(self, notify) -> None:
        why = self.one_cell_warning()
        if why is not None:
            self._warned_one_cell = True
            notify(f"warning: {why}")

    def recompute_cells(self, notify=None) -> Archive:
        """Dynamic cells: choose the representation again and re-key the archive
        (at a batch boundary; draws from the master generator)."""
        t = time.perf_counter()
        before = self.cells
        self.archive = self.dynamic.recompute(
            self.cfg, self.archive, self.rng, self.frames, **self._archive_args()
        )
        self.cells = self.dynamic.rep
        ev = self.dynamic.history[-1] if self.dynamic.history else None
        if ev is not None and ev["frames"] == self.frames:
            seconds = time.perf_counter() - t  # (not in the history: it is not reproducible)
            if notify is not None:
                what = "now" if self.cells != before else "kept"
                over = ev.get("kept_over") or ev.get("refused")
                beat = (
                    f", score {ev['score']:.3f} against the search's best "
                    f"{over['width']}x{over['height']}x{over['levels'] + 1} at {over['score']:.3f}"
                    if over
                    else ""
                )
                if over and over["sample_cells"] < self.cfg.dynamic_min_cells * ev["target"]:
                    beat += f" with {over['sample_cells']:,} cells, too few"
                notify(
                    f"cells: {what} {ev['width']}x{ev['height']}x{ev['levels'] + 1} "
                    f"({ev['sample_cells']:,} cells in {ev['sample_frames']:,} sampled frames"
                    f", target {ev['target']:,.0f}{beat}; archive {ev['cells_before']:,} -> "
                    f"{ev['cells_after']:,} cells, {seconds:.1f} s)"
                )
        return self.archive

    def train_codec(self, backend=None) -> None:
        """(Re)train the state model on states spread over the archive
        (deterministic: the same archive gives the same model), recompress the
        archive with it and hand it to the workers. At a batch boundary."""
        a = self.archive
        while self.codec_level < len(TRAIN_AT) and a.n >= TRAIN_AT[self.codec_level]:
            self.codec_level += 1
        ids = np.linspace(0, a.n - 1, min(a.n, MAX_SAMPLES)).astype(np.int64)
        model = train_model(
            [self.codec.decompress(a.state(i)) for i in ids.tolist()], generation=self.codec_level
        )
        if model is None:  # no model helps (tiny states): never again
            self.codec_level = len(TRAIN_AT)
            return
        old, self.codec = self.codec, StateCodec(model)
        a.recompress_states(old, self.codec)
        if self.dynamic is not None:
            self.dynamic.recompress_states(old, self.codec)
        if backend is not None:
            backend.set_codec(model)

    def progress(self, rate: float, logged: bool = True) -> Progress:
        a = self.archive
        since = None if self.last_ckpt_time is None else time.time() - self.last_ckpt_time
        return Progress(
            self.frames,
            self.cfg.total_frames,
            self.batch,
            a.n,
            len(a.rooms) if self.has_rooms else None,
            a.best_done_score,
            a.max_archive_score,
            rate,
            since,
            logged,
            a.max_level_reached,
            self.workers_lost,
            self.replayed_steps if self.restores_replay else None,
        )

    @property
    def workers_lost(self) -> int:
        """Workers that died (and were replaced) in this process, the running backend's too."""
        live = self._backend.counters.workers_lost if self._backend is not None else 0
        return self.counters.workers_lost + live

    def log_metrics(self, steps_per_s: float, final: bool = False) -> None:
        """One metrics row; ``final``: the end-of-run row written off the log cadence
        (a resumed run drops it and goes on)."""
        a = self.archive
        self._logged_batch = self.batch
        tail = list(a.done_scores)[-20:]
        row = metrics_row(
            batch=self.batch,
            frames=self.frames,
            steps_per_s=round(steps_per_s, 1),
            best_done_score=a.best_done_score,
            max_archive_score=a.max_archive_score,
            ep_return_mean=float(np.mean(tail)) if tail else None,
            game_return_count=a.n_done_episodes,
            n_cells=a.n,
            rooms_found=len(a.rooms) if self.has_rooms else None,
            max_level=a.max_level_reached,
            explog_entries=self.explog.count,
            time=round(time.time(), 3),
        )
        if self.dynamic is not None:  # the representation: [width, height, levels] or None
            row["cell_repr"] = self.cells.params and list(self.cells.params)
        if final:
            row["final"] = True
        if self.run_dir:
            self.run_dir.append_metrics(row)

    # --- checkpoints ------------------------------------------------------------------
    def checkpoint(self) -> Path:
        a, e = self.archive, self.explog
        n = a.n
        arrays = a.to_arrays()
        meta = {
            "frames": self.frames,
            "batch": self.batch,
            "config": self.cfg.to_json(),
            "rng": self.rng.bit_generator.state,
            "n_cells": n,
            "done_scores": list(a.done_scores),
            "n_done_episodes": a.n_done_episodes,
            "rooms": sorted(a.rooms),
            "explog": e.meta(),  # count, n_flushed, chunk_size, chunk_sha256
            "codec_dictionary": None
            if self.codec.dictionary is None
            else self.codec.dictionary.hex(),
            "codec_level": self.codec_level,
            "best_done_score": a.best_done_score,
            "max_archive_score": a.max_archive_score,
            "replayed_steps": self.replayed_steps,
        }
        prev_best = self._best_ckpt_score()
        best = a.best_done_score is not None and (
            prev_best is None or a.best_done_score > prev_best
        )
        extra = None
        if self.dynamic is not None:
            meta["dynamic"] = self.dynamic.to_meta()
            extra = {"dynamic.npz": self.dynamic.to_arrays()}
        if self.run_dir.latest_name() != ckpt_name(self.frames):  # else already written
            self.checkpoints_written += 1
        meta["checkpoints_written"] = self.checkpoints_written
        path = self.run_dir.write_checkpoint(
            self.frames,
            meta,
            arrays,
            a.state_blobs(),
            e.tail_arrays(),
            best=best,
            extra=extra,
            milestone=self.checkpoints_written % MILESTONE_EVERY == 0,
        )
        self.last_ckpt_frames = self.frames
        self.last_ckpt_time = time.time()
        return path

    def _best_ckpt_score(self) -> float | None:
        p = self.run_dir.ckpt_dir / "BEST"
        if not p.exists():
            return None
        try:
            meta = load_json(p.parent / p.read_text().strip() / "meta.json", MAX_JSON_BYTES)
            return meta.get("best_done_score")
        except (OSError, CheckpointError, AttributeError):
            return None

    def restore(self, ckpt: Path, also: tuple[str, ...] = ()) -> None:
        """Continue from a checkpoint (of this run dir or another one), made with the
        same settings but the resumable ones and ``also`` (a branch's)."""
        meta, arrays, states, tail = read_checkpoint(ckpt)
        try:
            saved = Config.from_json(meta["config"])
            n = int(meta["n_cells"])
            if len(arrays.get("score", ())) != n:
                raise CheckpointError(
                    f"{ckpt / 'archive.npz'}: holds {len(arrays.get('score', ()))} "
                    f"cells, meta.json says {n}"
                )
            if self.dynamic is not None:
                from goexplore.dynamic import DynamicState

                self.dynamic = DynamicState.from_checkpoint(
                    meta["dynamic"],
                    read_optional(ckpt, "dynamic.npz"),
                    n,
                    len(self.fact_names),
                    str(ckpt / "dynamic.npz"),
                )
                self.cells = self.dynamic.rep
            a = self.archive = Archive.from_arrays(
                self.cells.key_size,
                len(self.fact_names),
                arrays,
                states,
                where=str(ckpt / "archive.npz"),
                **self._archive_args(),
            )
            a.done_scores.extend(float(x) for x in meta["done_scores"])
            a.n_done_episodes = int(meta.get("n_done_episodes", len(meta["done_scores"])))
            a.rooms = {int(x) for x in meta["rooms"]}
            if self.dynamic is not None:
                self.dynamic.use_regions(self.cfg)
                self.dynamic.assign_regions(a)
            self.frames, self.batch = int(meta["frames"]), int(meta["batch"])
            self.checkpoints_written = int(meta.get("checkpoints_written", 0))
            self.replayed_steps = int(meta.get("replayed_steps", 0))
            if self.batch % self.cfg.log_every_batches == 0:
                self._logged_batch = self.batch  # the log cadence wrote this batch's row
            self.rng.bit_generator.state = meta["rng"]
            d = meta.get("codec_dictionary")
            self.codec = StateCodec(bytes.fromhex(d) if d else None)
            self.codec_level = int(meta.get("codec_level", 0 if d is None else 1))
            ex = meta["explog"]
            if ex["chunk_size"] != self.explog.chunk_size:
                raise CheckpointError(
                    f"{ckpt}: experience-log chunk size {ex['chunk_size']} "
                    f"differs from this run's {self.explog.chunk_size}"
                )
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{ckpt / 'meta.json'}: malformed checkpoint ({e!r})") from None
        diff = saved.differs_from(self.cfg, also)
        if diff:
            raise CheckpointError(
                f"{ckpt}: made by a run with different settings ({', '.join(diff)})"
            )
        if self.run_dir is not None:
            src_explog = ckpt.parent.parent / "explog"
            if src_explog.resolve() != self.run_dir.explog_dir.resolve():
                adopt_chunks(
                    src_explog, self.run_dir.explog_dir, ex["n_flushed"], ex.get("chunk_sha256")
                )
        self.explog.restore(ex["count"], ex["n_flushed"], tail, ex.get("chunk_sha256"))
        self.last_ckpt_frames = self.frames

    # --- results ------------------------------------------------------------------------
    #: cells replay-verified at the end of a run besides the best ones
    VERIFY_SAMPLE = 16

    def verify(self) -> dict:
        """Replay from reset the best end-of-episode trajectory, the best cell, and a
        sample of other cells (drawn with the run's seed, whatever the backend)."""
        a = self.archive
        out = {}
        targets = [("best_cell", a.best_cell())]
        if a.done_id >= 0:
            targets.append(("best_done", a.done_id))
        for name, i in targets:
            ok, why = self.verify_cell(i)
            out[name] = {"cell": i, "score": float(a.score[i]), "ok": ok, "detail": why}
        rest = np.setdiff1d(np.arange(a.n), [i for _, i in targets])
        if len(rest):
            pick = np.random.default_rng(self.cfg.seed).choice(
                rest, min(self.VERIFY_SAMPLE, len(rest)), replace=False
            )
            pick = sorted(int(i) for i in pick)
            failed = [(i, why) for i in pick for ok, why in [self.verify_cell(i)] if not ok]
            out["sample"] = {
                "cells": pick,
                "ok": not failed,
                "detail": (
                    f"{len(pick)} cells drawn at random replay to their cell and score"
                    if not failed
                    else f"{len(failed)} of {len(pick)} sampled cells do not replay: "
                    + "; ".join(f"cell {i}: {why}" for i, why in failed[:5])
                ),
            }
        return out

    def verify_cell(self, i: int) -> tuple[bool, str]:
        """Does cell ``i``'s trajectory, replayed from reset in a fresh env, reach it
        with its score? (ok, explanation)"""
        a = self.archive
        return verify_cell(
            self.cfg.env,
            self.cells,
            self.explog.trajectory(int(a.traj_last[i])),
            key=a.key_of(i),
            score=float(a.score[i]),
            length=int(a.traj_len[i]),
            is_done=a.key_of(i) == DONE_KEY,
            end_on_life=self.cfg.episode_end == "life",
            env_kwargs=self.cfg.env_kwargs,
        )

    def summary(self, verification: dict, wall_s: float) -> dict:
        a = self.archive
        best = a.best_done_score
        final = {
            "env": self.cfg.env,
            "seed": self.cfg.seed,
            "preset": self.cfg.preset,
            "cells": self.cfg.cells,
            "episode_end": self.cfg.episode_end,
            "frames_total": self.frames,
            "frames_unit": "agent_steps",
            "emulator_frames_total": self.frames * self.frameskip if self.frameskip else None,
            "batches": self.batch,
            "metric": "best_done_score",
            "value": best if best is not None else 0.0,
            "best_done_score": best,
            "max_archive_score": a.max_archive_score,
            "best_score": a.best_score,
            "n_cells": a.n,
            "rooms_found": len(a.rooms) if self.has_rooms else None,
            "max_level": a.max_level_reached,
            "explog_entries": self.explog.count,
            "verified": all(v["ok"] for v in verification.values()),
            "verification": verification,
            "protocol": PROTOCOL,
            "wall_s": round(wall_s, 2),
            "replayed_steps": self.replayed_steps if self.restores_replay else None,
            "warnings": [w for w in [self.one_cell_warning()] if w],
            **({"dynamic_cells": self.dynamic_summary()} if self.dynamic is not None else {}),
        }
        check_final(final, "final.json")  # the writer keeps to the schema too
        return final

    def dynamic_summary(self) -> dict:
        """Dynamic cells: the representation, its history and what its frames cost."""
        d, a = self.dynamic, self.archive
        mem = d.memory_bytes()
        arch = a.memory_bytes()
        return {
            "cell_repr": None if d.rep.params is None else list(d.rep.params),
            "history": d.history,
            "changes": sum(e["changed"] for e in d.history),
            "shadow_entries": len(d.shadow),
            "archive_bytes_per_cell": round(sum(arch.values()) / a.n, 1),
            "frame_bytes_per_cell": round(mem["frames"] / a.n, 1),
            "shadow_bytes": mem["shadow"],
            "sample_bytes": mem["sample"],
        }


def load_run(path: Path) -> Phase1:
    """A finished or interrupted run, loaded from its latest checkpoint."""
    from goexplore.errors import RunDirError

    rd = RunDir(path)
    if not rd.path.is_dir():
        raise RunDirError(f"{rd.path}: no such run dir")
    cfg = rd.read_config()
    if cfg is None:
        raise RunDirError(f"{rd.path}: not a run dir (no config.json)")
    ckpt = rd.latest_checkpoint()
    if ckpt is None:
        raise RunDirError(f"{rd.path}: holds no checkpoint yet")
    p = Phase1(cfg, rd)
    p.restore(ckpt)
    return p


def _frame_setter(dyn, frames, archive):
    """``Archive.apply``'s ``on_set`` for dynamic cells: keep the entry's frame (and,
    with the region term on, set its region)."""
    set_frame = dyn.set_frame
    if dyn.regions is None:
        return lambda i, c: set_frame(i, frames[c])

    def on_set(i: int, c: int) -> None:
        set_frame(i, frames[c])
        dyn.set_region(archive, i, frames[c])

    return on_set
