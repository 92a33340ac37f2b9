"""How Phase 1 scales to many workers: simulated workers, the real master.

Two steps, no emulator in the second:

1. ``record``: a real run (inline worker) that keeps every episode's result as
   it crossed the wire and the worker time it took.
2. ``simulate``: the same run again (same seed, same batch size, so the same
   archive evolution), with a backend that serves the recorded results instead
   of running episodes. The master's real work is timed: before each batch
   (sampling, tasks, the view delta) and per result (decoding and applying it).
   A discrete-event simulation then places those master times and the recorded
   episode times on N virtual workers, with the process backend's dispatch
   policy (guided chunks of about remaining / 2N tasks, at most 12, a second
   chunk queued while 8N or more tasks are left) and a round-trip latency per
   chunk; the master applies results strictly in task order and feeds a
   worker only when it is not applying results, as the real loop does.

Figures: barrier efficiency (worker time spent on episodes / N x wall time),
the master's CPU per agent step, and its utilisation.

    python benchmarks/scaling_sim.py record --batch-cells 1000 --frames 300000 --out rec1000.npz
    python benchmarks/scaling_sim.py simulate rec100.npz rec1000.npz --workers 8 32 128 512
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goexplore import phase1 as phase1_mod
from goexplore.backends.base import Counters, next_chunk
from goexplore.backends.inline import InlineBackend
from goexplore.config import Config
from goexplore.phase1 import Phase1
from goexplore.wire import decode_results


class RecordingBackend(InlineBackend):
    """The inline worker, keeping each result's bytes and worker seconds."""

    def __init__(self, spec, n_workers=1, notify=None):
        super().__init__(spec)
        self.blobs: list[bytes] = []
        self.secs: list[float] = []
        self.steps: list[int] = []
        self.batch_sizes: list[int] = []

    def run_batch(self, delta, tasks):
        self.worker.view.apply(delta)
        self.batch_sizes.append(len(tasks))
        for task in tasks:
            t = time.perf_counter()
            blob = self.worker.encode([self.worker.run_raw(task)])
            self.secs.append(time.perf_counter() - t)
            self.blobs.append(blob)
            (res,) = decode_results(blob)
            self.steps.append(res.n)
            yield res


class ReplayBackend:
    """Serves recorded results; times the master around them."""

    def __init__(self, blobs: list[bytes]):
        self.n_workers = 1
        self.counters = Counters()
        self.blobs = blobs
        self.k = 0
        self.pre: list[float] = []  # master seconds before each batch
        self.apply: list[float] = []  # master seconds per result (decode + apply)
        self._left = None

    def start(self, full_view, dictionary=None, view_fn=None):
        self._left = time.thread_time()

    def set_codec(self, dictionary):
        pass

    def run_batch(self, delta, tasks):
        # the master's CPU time (this thread's), not wall time: robust to a busy machine
        now = time.thread_time()
        self.pre.append(now - self._left)
        t = now
        for task in tasks:
            (res,) = decode_results(self.blobs[self.k])
            if res.index != task.index:
                raise RuntimeError("the replay diverged from the recording")
            self.k += 1
            yield res
            now = time.thread_time()
            self.apply.append(now - t)
            t = now
        self._left = time.thread_time()

    def close(self):
        pass


def _config(args) -> Config:
    return Config(
        env=args.env,
        seed=args.seed,
        total_frames=args.frames,
        batch_cells=args.batch_cells,
        n_workers=1,
        ckpt_every=0,
    )


def record(args) -> int:
    cfg = _config(args)
    holder = {}

    def make(name, spec, n, notify=None, **kw):
        holder["b"] = RecordingBackend(spec)
        return holder["b"]

    phase1_mod.make_backend = make
    p = Phase1(cfg)
    p.seed_root()
    t = time.perf_counter()
    p.run()
    b = holder["b"]
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in b.blobs])])
    np.savez(
        args.out,
        blob=np.frombuffer(b"".join(b.blobs), np.uint8),
        offsets=offsets,
        secs=np.array(b.secs),
        steps=np.array(b.steps),
        batch_sizes=np.array(b.batch_sizes),
        config=np.frombuffer(cfg.dumps().encode(), np.uint8),
    )
    print(
        f"recorded {len(b.blobs):,} episodes, {sum(b.steps):,} steps, "
        f"{len(b.batch_sizes)} batches of {cfg.batch_cells} in {time.perf_counter() - t:.0f}s "
        f"({1e6 * sum(b.secs) / sum(b.steps):.0f} µs per step on a worker) -> {args.out}"
    )
    return 0


def replay_master(path: str):
    """Run the master over a recording: (recording arrays, pre, apply, config)."""
    rec = np.load(path)
    cfg = Config.from_json(json.loads(rec["config"].tobytes()))
    blob, off = rec["blob"].tobytes(), rec["offsets"]
    blobs = [blob[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    b = ReplayBackend(blobs)
    phase1_mod.make_backend = lambda *a, **k: b
    p = Phase1(cfg)
    p.seed_root()
    p.run()
    return rec, np.array(b.pre), np.array(b.apply), cfg


def _batch(
    t: float, d: np.ndarray, a: np.ndarray, workers: int, latency: float, interleave: bool
) -> float:
    """One batch starting at master time ``t``: episode times ``d``, master apply
    times ``a``; returns when the master has applied its last result. The master
    applies every result that is in (in task order) before it reads the next
    message; with ``interleave`` it first reads (and answers with new tasks)
    every message that has arrived before each result it applies."""
    nb = len(d)
    todo = list(range(nb))
    free = [t] * workers  # when each worker finishes what it was sent
    inflight = [0] * workers
    events: list[tuple[float, int, int, list[int]]] = []
    seq = 0

    def feed(w: int, now: float) -> None:
        nonlocal seq
        while kk := next_chunk(len(todo), workers, inflight[w]):
            chunk, todo[:kk] = todo[:kk], []
            start = max(free[w], now + latency / 2)
            free[w] = start + float(d[chunk].sum())
            inflight[w] += 1
            heapq.heappush(events, (free[w] + latency / 2, seq, w, chunk))
            seq += 1

    for w in range(workers):
        feed(w, t)
    arrived = np.zeros(nb, bool)
    nxt = 0
    while nxt < nb:
        while nxt < nb and arrived[nxt]:  # apply what is in, in task order
            while interleave and events and events[0][0] <= t:
                _, _, w, chunk = heapq.heappop(events)
                arrived[chunk] = True
                inflight[w] -= 1
                feed(w, t)
            t += float(a[nxt])
            nxt += 1
        if nxt == nb:
            break
        at, _, w, chunk = heapq.heappop(events)
        t = max(t, at)
        arrived[chunk] = True
        inflight[w] -= 1
        feed(w, t)
    return t


def simulate_one(
    dur, steps, batch_sizes, pre, apply, workers: int, latency: float, interleave: bool = False
) -> dict:
    t = 0.0  # the master's clock
    k0 = 0
    for nb, m in zip(batch_sizes.tolist(), pre.tolist()):
        t = _batch(t + m, dur[k0 : k0 + nb], apply[k0 : k0 + nb], workers, latency, interleave)
        k0 += nb
    busy = float(dur[:k0].sum())
    master = float(pre.sum() + apply[:k0].sum())
    return {
        "workers": workers,
        "efficiency": busy / (workers * t),
        "master_utilisation": master / t,
        "steps_per_s": float(steps[:k0].sum()) / t,
    }


def simulate(args) -> int:
    out = []
    for path in args.recordings:
        rec, pre, apply, cfg = replay_master(path)
        dur, steps, bs = rec["secs"], rec["steps"], rec["batch_sizes"]
        n_steps = int(steps.sum())
        pre, apply = pre * args.master_scale, apply * args.master_scale  # what-if: a faster master
        if args.worker_us_per_step:
            # a recording made on a busy machine has preemption noise in its episode
            # times (its p99 per-step cost was 10x the median here): model them instead
            # as a restore plus the steps at a stated cost
            dur = 1e-6 * (args.restore_us + args.worker_us_per_step * steps)
        us = 1e6 * (pre.sum() + apply.sum()) / n_steps
        print(
            f"{path}: batch {cfg.batch_cells:,}, {len(bs)} batches, {n_steps:,} steps; master "
            f"{us:.2f} µs CPU per agent step ({1e6 * pre.mean():.0f} µs before each batch); "
            f"workers {1e6 * dur.sum() / n_steps:.0f} µs per step"
        )
        for w in args.workers:
            r = simulate_one(dur, steps, bs, pre, apply, w, args.latency_us * 1e-6, args.interleave)
            r.update(batch_cells=cfg.batch_cells, master_us_per_step=us, interleave=args.interleave)
            out.append(r)
            print(
                f"  {w:>4} workers: efficiency {r['efficiency']:.3f}, master busy "
                f"{100 * r['master_utilisation']:.0f}% of the time, {r['steps_per_s']:,.0f} steps/s"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--env", default="montezuma")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--batch-cells", type=int, default=100)
    r.add_argument("--frames", type=int, default=200_000)
    r.add_argument("--out", required=True)
    s = sub.add_parser("simulate")
    s.add_argument("recordings", nargs="+")
    s.add_argument("--workers", type=int, nargs="+", default=[8, 32, 128, 512])
    s.add_argument("--latency-us", type=float, default=500.0, help="round trip per chunk")
    s.add_argument(
        "--worker-us-per-step",
        type=float,
        default=None,
        help="model each episode's time as --restore-us + its steps x this (default: the "
        "recorded times)",
    )
    s.add_argument(
        "--restore-us",
        type=float,
        default=200.0,
        help="with --worker-us-per-step: cost of starting an episode (decompress, restore)",
    )
    s.add_argument(
        "--interleave",
        action="store_true",
        help="the master reads arrived messages (and feeds their workers) before each result "
        "it applies, instead of applying every result that is in first",
    )
    s.add_argument(
        "--master-scale",
        type=float,
        default=1.0,
        help="what if the master were this many times as costly (0.5: twice as fast)",
    )
    s.add_argument("--json", default=None)
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else simulate(args)


if __name__ == "__main__":
    sys.exit(main())
