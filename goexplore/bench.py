"""``goexplore bench``: how close Phase 1 runs to the emulator's own speed.

In one process run it measures

(a) the *bare limit*: one core stepping the emulator at frameskip 4 and
    reading the grayscale frame (random repeated actions, reset on game over),
    no Go-Explore work at all;
(b) the full Phase 1 pipeline (the real :class:`~goexplore.phase1.Phase1`
    with ``W`` workers) on the same machine,

interleaved: (a) before, between and after the segments of (b), so a machine
shared with other work is compared against itself at about the same time.
``ratio = (b steps/s) / (cores used x (a) steps/s per core)`` with
``cores used = min(W, os.cpu_count())``; the master process runs on the same
cores, so everything it costs shows in the ratio. Rates are taken between the
first and the last batch of each segment (worker start-up excluded; it is
reported separately).

(a) is also measured with ``cores used`` bare loops running at once
(``ratio_vs_parallel_bare``). On an idle machine the two agree; when other
work keeps the machine busy, one process alone gets a bigger share of it than
each of ``W`` processes at once, and only the parallel figure compares like
with like. And since the emulator's cost per step depends on the game state
(Montezuma's first room, where (a) plays, is ~15% dearer than the rooms
Go-Explore spends its time in later), (a) is also measured on the states the
pipeline explores from (restore a cell drawn with the selection weights, then
up to 100 steps until a life is lost): ``ratio_vs_archive_states_bare``
compares the pipeline with the bare emulator on the same kind of work.

Besides the ratio: the master's CPU time per agent step (``time.process_time``
of the master), the bytes workers send the master per agent step, the
archive's memory per cell (allocated, including compressed states, key index
and dictionary), selection time per batch on a synthetic archive of
``--select-cells`` cells, and the time to checkpoint and resume a synthetic
archive of ``--ckpt-cells`` cells.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from goexplore.testing import synthetic_archive, synthetic_counters


# --- (a) the bare emulator loop ---------------------------------------------------------------
class _BareLoop:
    """Nothing but step + grayscale frame (random repeated actions, reset on game over)."""

    def __init__(self, env_name: str, seed: int = 0):
        from goexplore.envs import make_env

        self.env = env = make_env(env_name)
        env.reset()
        rng = np.random.default_rng(seed)
        n = 4096
        change = rng.random(n) > 0.95
        draws = rng.integers(env.n_actions, size=n)
        self.acts = draws[np.maximum.accumulate(np.where(change, np.arange(n), 0))].tolist()
        self.ale = getattr(env, "ale", None)

    def run(self, seconds: float, states: list[bytes] | None = None) -> float:
        """Agent steps/s over about ``seconds``; with ``states``: episodes of up to
        100 steps from each state in turn, until a life is lost."""
        env, ale = self.env, self.ale
        steps = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        if states is not None:
            acts, na = self.acts, len(self.acts)
            if ale is not None:
                from goexplore.envs.atari import FRAMESKIP

                aset = ale.getMinimalActionSet()
                screen = np.empty(ale.getScreenDims()[:2], np.uint8)
                act, gray, over, lives = ale.act, ale.getScreenGrayscale, ale.game_over, ale.lives

                def step(a):
                    for _ in range(FRAMESKIP):
                        act(aset[a])
                    gray(screen)
                    return None, 0, over(), lives()
            else:
                step = env.step
            j = 0
            while time.perf_counter() < deadline:
                for state in states:
                    env.restore_state(state)
                    _, _, done, start = step(acts[j % na])
                    t = 1
                    while t < 100 and not done:
                        _, _, done, now = step(acts[(j + t) % na])
                        t += 1
                        done = done or now < start
                    j += t
                    steps += t
        elif ale is not None:
            from goexplore.envs.atari import FRAMESKIP

            actions = [ale.getMinimalActionSet()[a] for a in self.acts]
            screen = np.empty(ale.getScreenDims()[:2], np.uint8)
            act, gray, over = ale.act, ale.getScreenGrayscale, ale.game_over
            while True:
                for a in actions:
                    for _ in range(FRAMESKIP):
                        act(a)
                    gray(screen)
                    if over():
                        ale.reset_game()
                steps += len(actions)
                if time.perf_counter() >= deadline:
                    break
        else:
            step, acts = env.step, self.acts
            while True:
                for a in acts:
                    if step(a)[2]:
                        env.reset()
                steps += len(acts)
                if time.perf_counter() >= deadline:
                    break
        return steps / (time.perf_counter() - t0)

    def close(self) -> None:
        self.env.close()


def archive_bare_rate(env_name: str, archive, codec, seconds: float, seed: int = 0) -> float:
    """Agent steps/s of one core doing only the emulator work of Go-Explore on
    the states it explores from: restore a cell drawn with the selection
    weights, then up to 100 steps of random repeated actions (step +
    grayscale frame) until a life is lost. The emulator's cost per step
    depends on the game state (Montezuma's first room is ~15% dearer than
    the next ones), so against this the pipeline is compared on the same
    kind of work; ``ratio`` itself is against :func:`bare_rate`, from reset."""
    loop = _BareLoop(env_name, seed)
    try:
        rng = np.random.default_rng(seed)
        csum = archive.cumulative_weights()
        ids = np.minimum(np.searchsorted(csum, rng.random(256) * csum[-1]), archive.n - 1)
        return loop.run(seconds, [codec.decompress(archive.state(i)) for i in ids.tolist()])
    finally:
        loop.close()


def bare_rate(env_name: str, seconds: float, seed: int = 0) -> float:
    """Agent steps/s of one core doing nothing but step + grayscale frame."""
    loop = _BareLoop(env_name, seed)
    try:
        return loop.run(seconds)
    finally:
        loop.close()


def _bare_child(env_name, seed, conn) -> None:
    loop = _BareLoop(env_name, seed)
    conn.send("ready")
    while True:
        seconds = conn.recv()
        if seconds is None:
            break
        conn.recv()  # "go": all loops start together
        conn.send(loop.run(seconds))
    loop.close()


class BarePool:
    """``k`` bare loops in ``k`` processes, kept between measurements, that run
    at the same time: what ``k`` cores give when they all work, on this machine, now."""

    def __init__(self, env_name: str, k: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for i in range(k):
            parent, child = ctx.Pipe()
            pr = ctx.Process(target=_bare_child, args=(env_name, i, child), daemon=True)
            pr.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(pr)
        for c in self.conns:
            if not c.poll(120) or c.recv() != "ready":
                self.close()
                raise RuntimeError("bare-emulator process did not start")

    def measure(self, seconds: float) -> list[float]:
        for c in self.conns:
            c.send(seconds)
        for c in self.conns:
            c.send("go")
        return [c.recv() for c in self.conns]

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for pr in self.procs:
            pr.join(timeout=10)
            if pr.is_alive():
                pr.kill()


# --- (b) the pipeline --------------------------------------------------------------------------
class _Meter:
    """Progress callback: steps, wall and master CPU between the first and last batch."""

    def __init__(self):
        self.first = self.last = None

    def __call__(self, progress) -> None:
        mark = (progress.frames, time.perf_counter(), time.process_time())
        if self.first is None:
            self.first = mark
        self.last = mark

    def span(self) -> tuple[int, float, float]:
        if self.first is None or self.last is self.first:
            return 0, 0.0, 0.0
        return tuple(b - a for a, b in zip(self.first, self.last))


def _pipeline(
    env_name: str, n_workers: int, frames: int, segments: int, bare_s: float, cores: int, log
) -> dict:
    from goexplore.config import Config
    from goexplore.phase1 import Phase1

    cfg = Config(env=env_name, seed=0, total_frames=frames, n_workers=n_workers)
    p = Phase1(cfg)
    p.seed_root()

    def measure_bare():
        arch.append(archive_bare_rate(env_name, p.archive, p.codec, bare_s))
        bare.append(bare_rate(env_name, bare_s))
        par.append(sum(pool.measure(bare_s)) / cores if pool else bare[-1])
        log(
            f"  bare: {bare[-1]:,.0f} steps/s on one core, {par[-1]:,.0f} per core with "
            f"{cores} at once, {arch[-1]:,.0f} from the archive's states"
        )

    bare, par, arch = [], [], []
    pool = BarePool(env_name, cores) if cores > 1 else None
    try:
        measure_bare()
        rest = _segments(p, frames, segments, measure_bare, log, cores, bare, par, arch)
    finally:
        if pool:
            pool.close()
    return dict(rest, bare=bare, bare_parallel=par, bare_archive=arch)


def _segments(p, frames, segments, measure_bare, log, cores, bare, par, arch) -> dict:
    seg_rows = []
    steps = wall = cpu = 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run_wall = run_cpu = tail_idle = between = same_work = 0.0
    for k in range(segments):
        target = frames * (k + 1) // segments
        p.cfg = p.cfg.replace(total_frames=target)
        meter = _Meter()
        b0, f0 = p.counters.bytes_received, p.frames
        k0 = p.counters.as_dict()
        c0, w0 = time.process_time(), time.perf_counter()
        p.run(on_progress=meter)
        run_cpu += time.process_time() - c0
        seg_wall = time.perf_counter() - w0
        run_wall += seg_wall
        dk = {key: v - k0.get(key, 0) for key, v in p.counters.as_dict().items()}
        idle = dk.get("tail_idle_s", 0) + p.cfg.n_workers * dk.get("between_batches_s", 0)
        tail_idle += dk.get("tail_idle_s", 0)
        between += dk.get("between_batches_s", 0)
        s, w, c = meter.span()
        steps, wall, cpu = steps + s, wall + w, cpu + c
        measure_bare()
        seg_rows.append(
            {
                "frames": p.frames,
                "cells": p.archive.n,
                "steps": s,
                "steps_per_s": s / w if w else None,
                "master_cpu_us_per_step": 1e6 * c / s if s else None,
                "bytes_per_step": (p.counters.bytes_received - b0) / max(p.frames - f0, 1),
                "worker_idle_share": idle / (p.cfg.n_workers * seg_wall),
                "bare_before": bare[-2],
                "bare_after": bare[-1],
                "bare_parallel_before": par[-2],
                "bare_parallel_after": par[-1],
                "bare_archive_states_after": arch[-1],
            }
        )
        # the time the same steps take at the bare speed on this segment's states
        same_work += s / (cores * (arch[-2] + arch[-1]) / 2)
        log(
            f"  segment {k + 1}/{segments}: {p.frames:,} steps, {p.archive.n:,} cells, "
            f"{s / max(w, 1e-9):,.0f} steps/s ({s / max(w, 1e-9) / cores:,.0f} per core)"
        )
    mem = p.archive.memory_bytes()
    if p.codec.dictionary:
        mem["dictionary"] = len(p.codec.dictionary)
    n = p.archive.n
    return {
        "p": p,
        "segments": seg_rows,
        "steps": steps,
        "wall": wall,
        "cpu": cpu,
        "total_wall": time.perf_counter() - wall0,
        "total_cpu": time.process_time() - cpu0,
        "run_wall": run_wall,
        "run_cpu": run_cpu,
        "memory": mem,
        "cells": n,
        "tail_idle": tail_idle,
        "between": between,
        "same_work": same_work,
    }


# --- selection at scale ------------------------------------------------------------------------
def selection_bench(n_cells: int, batches: int = 30, touched: int = 600, seed: int = 0) -> dict:
    """ms per batch of ``sample(100)``, each batch after ``touched`` random
    cells' ``seen`` changed (about what a batch of 100 episodes does)."""
    a = synthetic_archive(n_cells, seed=seed)
    rng = np.random.default_rng(seed + 1)
    gen = np.random.default_rng(seed + 2)
    a.sample(100, gen)
    times = []
    for _ in range(batches):
        ids = rng.integers(0, a.n, touched)
        ids = np.unique(ids[~a.is_done[ids]])
        a.add_visits(ids)
        t = time.perf_counter()
        a.sample(100, gen)
        times.append(time.perf_counter() - t)
    return {
        "cells": n_cells,
        "ms_per_batch": 1e3 * statistics.median(times),
        "ms_per_batch_max": 1e3 * max(times),
        "archive": a,
    }


# --- checkpoint + resume at scale --------------------------------------------------------------
def checkpoint_bench(n_cells: int, env_name: str = "montezuma") -> dict:
    """Checkpoint a synthetic archive of ``n_cells`` and resume from it."""
    from goexplore.config import Config
    from goexplore.phase1 import Phase1, load_run
    from goexplore.store import RunDir

    t = time.perf_counter()
    syn = synthetic_archive(n_cells)
    build = time.perf_counter() - t
    with tempfile.TemporaryDirectory(prefix="goexplore-bench-") as tmp:
        cfg = Config(env=env_name, seed=0, total_frames=1)
        rd = RunDir(Path(tmp) / "run")
        rd.create(cfg)
        p = Phase1(cfg, rd)
        if p.archive.key_size != syn.key_size or p.archive.n_facts != syn.n_facts:
            syn = synthetic_archive(n_cells, p.archive.key_size, p.archive.n_facts)
        p.archive = syn
        t = time.perf_counter()
        ckpt = p.checkpoint()
        save = time.perf_counter() - t
        size = sum(f.stat().st_size for f in ckpt.iterdir())
        t = time.perf_counter()
        q = load_run(rd.path)
        load = time.perf_counter() - t
        if q.archive.n != n_cells or q.archive.lookup(syn.key_of(n_cells - 1)) != n_cells - 1:
            raise RuntimeError("internal error: the resumed synthetic archive differs")
    return {
        "cells": n_cells,
        "checkpoint_s": save,
        "resume_s": load,
        "checkpoint_resume_s": save + load,
        "checkpoint_bytes": size,
        "build_s": build,
    }


# --- the whole bench ---------------------------------------------------------------------------
def facts_cost(
    env_name: str, states: int = 200, calls: int = 200, rounds: int = 5, seed: int = 0
) -> dict:
    """What reading the per-step RAM facts costs, timed directly (not as the
    difference of two noisy step loops): ``env.facts()`` called ``calls`` times
    on each of ``states`` states reached by random play, best of ``rounds``;
    and an agent step for scale. Also the domain-knowledge key built from the
    facts, where the game has one."""
    from goexplore.cells import representation_class
    from goexplore.envs import make_env

    env = make_env(env_name)
    rng = np.random.default_rng(seed)
    env.reset()
    per_round, steps = [], []
    keyer, key_round = None, []
    for name in ("montezuma-dk", "pitfall-dk"):
        rep = representation_class(name)
        if not rep.problems(env_name, env.fact_names):
            keyer = rep().keyer()
    for _ in range(rounds):
        t_facts = t_key = t_step = 0.0
        for _ in range(states):
            a = int(rng.integers(env.n_actions))
            t = time.perf_counter()
            done = env.step(a)[2]
            t_step += time.perf_counter() - t
            if done:
                env.reset()
                continue
            facts = env.facts
            t = time.perf_counter()
            for _ in range(calls):
                facts()
            t_facts += time.perf_counter() - t
            if keyer is not None:
                f = facts()
                t = time.perf_counter()
                for _ in range(calls):
                    keyer(None, f)
                t_key += time.perf_counter() - t
        per_round.append(t_facts / (states * calls))
        key_round.append(t_key / (states * calls))
        steps.append(t_step / states)
    env.close()
    facts_s, step_s = min(per_round), statistics.median(steps)
    return {
        "step_us": 1e6 * step_s,
        "facts_us_per_step": 1e6 * facts_s,
        "facts_share_of_step": facts_s / step_s,
        "n_facts": len(env.fact_names),
        "dk_key_us_per_step": 1e6 * min(key_round) if keyer is not None else None,
    }


def selection_dk_bench(
    n_cells: int,
    batches: int = 30,
    touched: int = 600,
    new: int = 20,
    seed: int = 0,
    overrides: dict | None = None,
    new_score_every: int = 10,
) -> dict:
    """The montezuma-dk preset's selection at ``n_cells`` cells: per batch,
    ``touched`` cells' counters change and ``new`` cells arrive (each updating
    its neighbours' and its place's map terms), then ``sample(100)``. ms per
    batch for the sample (all weight terms), and µs per new cell for the map terms.
    ``overrides``: config fields set on top of the preset (e.g. every term on).
    Cells score one of 40 levels; a new cell in every ``new_score_every``-th batch
    brings a new score (the score-rank term then recomputes every weight; 8 of the
    first 123 batches of a montezuma-dk run did). ``region_power`` and
    ``region_chosen_power`` in ``overrides`` turn the region terms on (outside the preset:
    they need dynamic cells), each cell's region its (level, room), and with
    ``region_score`` also its score (up to 40 times the regions); every new cell changes
    a region's size and every pick its picks, so every batch then recomputes every weight.
    ms per batch: median, mean and max."""
    from goexplore.archive import Archive
    from goexplore.cells import make_cells
    from goexplore.dynamic import with_score
    from goexplore.presets import apply_preset
    from goexplore.selection import SelectionParams

    overrides = dict(overrides or {})
    region_power = float(overrides.pop("region_power", 0.0))
    region_chosen = float(overrides.pop("region_chosen_power", 0.0))
    regions = bool(region_power or region_chosen)
    region_score = bool(overrides.pop("region_score", False))

    def region(k: bytes, score: float) -> bytes:
        return with_score(k[:2], score) if region_score else k[:2]

    cfg = apply_preset("montezuma-dk", overrides)
    rep = make_cells(cfg)
    rng = np.random.default_rng(seed)

    def keys(n):
        k = np.zeros((n, rep.key_size), np.uint8)
        k[:, 0] = rng.integers(0, 3, n)  # level
        k[:, 1] = rng.integers(0, 24, n)  # room
        k[:, 2] = rng.integers(0, 20, n)  # x bin
        k[:, 3] = rng.integers(9, 16, n)  # y bin
        k[:, 4] = rng.integers(0, 4, n)  # keys held
        for j in range(3):
            k[:, 5 + j] = np.where(k[:, 4] > j, rng.integers(0, 24, n), 255)
        return k

    pool = np.unique(keys(3 * (n_cells + batches * new)), axis=0)
    pool = pool[rng.permutation(len(pool))]
    base = pool[:n_cells]
    arrays = synthetic_counters(rng, base, 5)
    arrays["steps"] = rng.integers(0, 1000, n_cells).astype(np.int32)
    arrays["score"] = 100.0 * rng.integers(0, 40, n_cells)
    arrays["facts"][:, 3] = base[:, 0]
    t = time.perf_counter()
    a = Archive.from_arrays(
        rep.key_size,
        5,
        arrays,
        [b"\x01state"] * n_cells,
        where="synthetic",
        params=dataclasses.replace(
            SelectionParams.from_config(cfg), region=region_power, region_chosen=region_chosen
        ),
        rep=rep,
        level_fact=3,
    )
    if regions:
        for i, k in enumerate(base.tolist()):
            a.set_region(i, region(bytes(k), a.score[i]))
    load = time.perf_counter() - t
    gen = np.random.default_rng(seed + 2)
    a.sample(100, gen)
    extra = iter(pool[n_cells:].tolist())
    times, add_times = [], []
    for b in range(batches):
        ids = rng.integers(0, a.n, touched)
        a.add_visits(ids)
        t = time.perf_counter()
        for j in range(new):
            k = bytes(next(extra))
            fresh = j == 0 and b % new_score_every == new_score_every - 1
            score = 100.0 * (40 + b) if fresh else 100.0 * int(rng.integers(0, 40))
            i = a.add(k, b"\x01state", score, 10, 0, 5, (k[1], 0, 0, k[0], 0))
            if regions:
                a.set_region(i, region(k, score))
        add_times.append((time.perf_counter() - t) / new)
        t = time.perf_counter()
        a.sample(100, gen)
        times.append(time.perf_counter() - t)
    return {
        "cells": n_cells,
        "ms_per_batch": 1e3 * statistics.median(times),
        "ms_per_batch_mean": 1e3 * statistics.mean(times),
        "ms_per_batch_max": 1e3 * max(times),
        "us_per_new_cell": 1e6 * statistics.median(add_times),
        "load_s": load,
    }


def run_bench(
    env: str = "montezuma",
    n_workers: int = 2,
    frames: int = 2_000_000,
    segments: int | None = None,
    bare_seconds: float = 5.0,
    select_cells: int = 100_000,
    ckpt_cells: int = 1_000_000,
    log=print,
) -> dict:
    cpus = os.cpu_count() or 1
    cores = max(1, min(n_workers, cpus))
    if segments is None:
        segments = max(1, min(8, frames // 250_000))
    load0 = os.getloadavg()
    log(
        f"goexplore bench: {env}, {n_workers} worker(s) on {cpus} CPU(s), "
        f"{frames:,} agent steps in {segments} segment(s)"
    )
    pipe = _pipeline(env, n_workers, frames, segments, bare_seconds, cores, log)
    p = pipe["p"]
    bare = statistics.fmean(pipe["bare"])
    bare_par = statistics.fmean(pipe["bare_parallel"])
    steps, wall = pipe["steps"], pipe["wall"]
    if steps == 0:  # too short for two batches in a segment: whole-run figures
        steps, wall = p.frames, pipe["run_wall"]
    rate = steps / wall
    cpu = pipe["cpu"] if pipe["steps"] else pipe["run_cpu"]
    log("  selection ...")
    sel = selection_bench(select_cells)
    sel_dk = selection_dk_bench(select_cells)
    log("  checkpoint + resume ...")
    ck = checkpoint_bench(ckpt_cells, env)
    mem = pipe["memory"]
    log("  RAM facts ...")
    facts = facts_cost(env)
    out = {
        "env": env,
        "n_workers": n_workers,
        "cpu_count": cpus,
        "cores_used": cores,
        "frames": p.frames,
        "frames_unit": "agent_steps",
        "batches": p.batch,
        "bare_steps_per_s_per_core": bare,
        "bare_samples": pipe["bare"],
        "bare_parallel_steps_per_s_per_core": bare_par,
        "bare_parallel_samples": pipe["bare_parallel"],
        "pipeline_steps_per_s": rate,
        "pipeline_steps_per_s_per_core": rate / cores,
        "ratio": rate / (cores * bare),
        "ratio_vs_parallel_bare": rate / (cores * bare_par),
        "bare_archive_states_samples": pipe["bare_archive"],
        "ratio_vs_archive_states_bare": (pipe["same_work"] / wall) if pipe["steps"] else None,
        "master_cpu_us_per_step": 1e6 * cpu / steps,
        # including each segment's worker start-up and the batches the span leaves out
        "master_cpu_us_per_step_whole_run": 1e6 * pipe["run_cpu"] / max(p.frames, 1),
        "worker_to_master_bytes_per_step": p.counters.bytes_received / max(p.frames, 1),
        "archive_cells": pipe["cells"],
        "archive_bytes_per_cell": sum(mem.values()) / max(pipe["cells"], 1),
        "archive_memory_bytes": mem,
        "selection_cells": sel["cells"],
        "selection_ms_per_batch": sel["ms_per_batch"],
        "selection_ms_per_batch_max": sel["ms_per_batch_max"],
        "selection_dk_ms_per_batch": sel_dk["ms_per_batch"],
        "selection_dk_ms_per_batch_max": sel_dk["ms_per_batch_max"],
        "selection_dk_us_per_new_cell": sel_dk["us_per_new_cell"],
        "checkpoint_cells": ck["cells"],
        "checkpoint_s": ck["checkpoint_s"],
        "resume_s": ck["resume_s"],
        "checkpoint_resume_s": ck["checkpoint_resume_s"],
        "checkpoint_bytes": ck["checkpoint_bytes"],
        "facts_us_per_step": facts["facts_us_per_step"],
        "facts_share_of_step": facts["facts_share_of_step"],
        "facts_n": facts["n_facts"],
        "step_us": facts["step_us"],
        "dk_key_us_per_step": facts["dk_key_us_per_step"],
        "measured_wall_s": wall,
        "total_wall_s": pipe["total_wall"],
        "startup_and_tail_s": pipe["run_wall"] - wall,
        # where workers waited, as a share of their time (process backend only)
        "worker_idle_share_batch_tail": pipe["tail_idle"] / (n_workers * pipe["run_wall"]),
        "worker_idle_share_between_batches": pipe["between"] / pipe["run_wall"],
        "segments": pipe["segments"],
        "loadavg_before": list(load0),
        "loadavg_after": list(os.getloadavg()),
        "machine": platform.platform(),
        "python": platform.python_version(),
    }
    return out


def format_report(r: dict) -> str:
    def line(name, key, fmt, unit=""):
        return f"  {name:<46}{format(r[key], fmt)}{unit}"

    return "\n".join(
        [
            f"goexplore bench — {r['env']}, {r['n_workers']} workers, "
            f"{r['cores_used']} cores used, "
            f"{r['frames']:,} agent steps",
            line("bare emulator, steps/s per core", "bare_steps_per_s_per_core", ",.0f"),
            line("pipeline, steps/s per core", "pipeline_steps_per_s_per_core", ",.0f"),
            line(
                "bare, per core with all cores at once",
                "bare_parallel_steps_per_s_per_core",
                ",.0f",
            ),
            line("ratio", "ratio", ".3f"),
            line("ratio against the parallel bare loops", "ratio_vs_parallel_bare", ".3f"),
            line(
                "ratio against bare on the archive's states", "ratio_vs_archive_states_bare", ".3f"
            ),
            line("master CPU per agent step", "master_cpu_us_per_step", ".2f", " µs"),
            line("worker -> master per agent step", "worker_to_master_bytes_per_step", ".1f", " B"),
            line(
                f"archive per cell ({r['archive_cells']:,} cells)",
                "archive_bytes_per_cell",
                ".0f",
                " B",
            ),
            line(
                f"selection per batch ({r['selection_cells']:,} cells)",
                "selection_ms_per_batch",
                ".3f",
                " ms",
            ),
            line(
                f"checkpoint + resume ({r['checkpoint_cells']:,} cells)",
                "checkpoint_resume_s",
                ".1f",
                " s",
            ),
            line(
                f"selection, DK weights ({r['selection_cells']:,} cells)",
                "selection_dk_ms_per_batch",
                ".3f",
                " ms",
            ),
            f"  {'  map terms per new cell':<46}{r['selection_dk_us_per_new_cell']:.1f} µs",
            f"  {'RAM facts read per step (' + str(r['facts_n']) + ' facts)':<46}"
            f"{r['facts_us_per_step']:.2f} µs "
            f"({100 * r['facts_share_of_step']:.2f}% of a {r['step_us']:.0f} µs step)",
            *(
                [f"  {'domain-knowledge key per step':<46}{r['dk_key_us_per_step']:.2f} µs"]
                if r.get("dk_key_us_per_step") is not None
                else []
            ),
            f"  {'workers waiting: batch tails, between':<46}"
            f"{100 * r['worker_idle_share_batch_tail']:.1f}%, "
            f"{100 * r['worker_idle_share_between_batches']:.1f}% of their time",
        ]
    )


def main(args) -> int:
    r = run_bench(
        env=args.env,
        n_workers=args.n_workers,
        frames=args.frames,
        segments=args.segments,
        bare_seconds=args.bare_seconds,
        select_cells=args.select_cells,
        ckpt_cells=args.ckpt_cells,
    )
    print(format_report(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
        print(f"  written to {args.json}")
    return 0
