"""Worker processes on one machine.

The master sends each worker the archive delta at the start of every batch,
then hands out tasks one at a time, keeping ``INFLIGHT`` tasks queued per
worker so no core waits on the master. Results come back as compact
zstd-compressed byte strings and are yielded strictly in task order, so the
master applies them exactly as the reference does whatever finishes first.

A worker that dies (killed by the OOM killer, say) is replaced: the new one
gets the current archive view and re-runs the dead one's tasks from their own
seeds, which gives identical results. A worker that raises sends its
traceback, which is re-raised in the master as :class:`WorkerError`.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import traceback
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import wait

import zstandard as zstd

from goexplore.backends.worker import Worker, WorkerSpec
from goexplore.errors import WorkerError
from goexplore.explore import EpisodeResult, Task

INFLIGHT = 2
MAX_RESPAWNS = 32


def _error(index: int) -> bytes:
    return b"E" + json.dumps([index, traceback.format_exc()]).encode()


def _worker_main(conn, spec: WorkerSpec) -> None:
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the master handles Ctrl-C
    try:
        worker = Worker(spec)
        cctx = zstd.ZstdCompressor(level=1)
    except BaseException:
        conn.send_bytes(_error(-1))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        kind = msg[0]
        try:
            if kind == "task":
                res = worker.run(msg[1])
                conn.send_bytes(cctx.compress(res.encode()))
            elif kind == "view":
                worker.view.apply(msg[1])
            elif kind == "codec":
                worker.set_codec(msg[1])
            elif kind == "stop":
                worker.close()
                return
        except BaseException:
            conn.send_bytes(_error(msg[1].index if kind == "task" else -1))
            return


class _Proc:
    def __init__(self, ctx, spec):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, spec), daemon=True)
        self.proc.start()
        child.close()
        self.tasks: deque[Task] = deque()   # sent, not yet answered


class ProcessBackend:
    def __init__(self, spec: WorkerSpec, n_workers: int):
        self.spec, self.n_workers = spec, n_workers
        self._ctx = mp.get_context("spawn")
        self._dctx = zstd.ZstdDecompressor()
        self.procs: list[_Proc] = []
        self.bytes_received = 0
        self.respawns = 0
        self._dictionary = None
        self._view_fn = None

    def start(self, full_view, dictionary: bytes | None = None, view_fn=None) -> None:
        """``view_fn()`` gives the master's current view (for replacements)."""
        self._dictionary, self._view_fn = dictionary, view_fn
        self.procs = [self._spawn(full_view) for _ in range(self.n_workers)]

    def _spawn(self, view) -> _Proc:
        p = _Proc(self._ctx, self.spec)
        p.conn.send(("view", view))
        if self._dictionary is not None:
            p.conn.send(("codec", self._dictionary))
        return p

    def set_codec(self, dictionary: bytes | None) -> None:
        self._dictionary = dictionary
        for p in self.procs:
            p.conn.send(("codec", dictionary))

    def run_batch(self, delta, tasks: list[Task]) -> Iterator[EpisodeResult]:
        for p in self.procs:
            p.conn.send(("view", delta))
        todo = deque(tasks)
        done: dict[int, EpisodeResult] = {}
        nxt = 0

        def feed(p: _Proc) -> None:
            while todo and len(p.tasks) < INFLIGHT:
                t = todo.popleft()
                p.conn.send(("task", t))
                p.tasks.append(t)

        for p in self.procs:
            feed(p)
        while nxt < len(tasks):
            if nxt in done:
                yield done.pop(nxt)
                nxt += 1
                continue
            by_conn = {p.conn: p for p in self.procs}
            by_sentinel = {p.proc.sentinel: p for p in self.procs}
            for ready in wait(list(by_conn) + list(by_sentinel)):
                p = by_conn.get(ready) or by_sentinel[ready]
                if p.proc.is_alive() and p.conn.poll():
                    try:
                        self._receive(p, done)
                        feed(p)
                        continue
                    except (EOFError, OSError):
                        p.proc.join(timeout=5)
                # the worker ended (or its pipe broke): keep what it sent, replace it
                try:
                    while p.tasks and p.conn.poll():
                        self._receive(p, done)
                except (EOFError, OSError):
                    pass
                self._replace(p, todo)
                feed(self.procs[-1])
                break  # the lists of connections changed

    def _receive(self, p: _Proc, done: dict) -> None:
        msg = p.conn.recv_bytes()
        if msg[:1] == b"E":
            idx, tb = json.loads(msg[1:])
            self.close()
            raise WorkerError(f"worker failed on task {idx}:\n{tb}")
        self.bytes_received += len(msg)
        res = EpisodeResult.decode(self._dctx.decompress(msg))
        expected = p.tasks.popleft()
        if res.index != expected.index:
            raise RuntimeError(f"internal error: task {res.index} answered, {expected.index} expected")
        done[res.index] = res
        self._deaths_in_a_row = 0

    def _replace(self, p: _Proc, todo: deque) -> None:
        self.respawns += 1
        self._deaths_in_a_row = getattr(self, "_deaths_in_a_row", 0) + 1
        if self.respawns > MAX_RESPAWNS or self._deaths_in_a_row > 3:
            self.close()
            raise WorkerError(f"workers died {self.respawns} times (exit code {p.proc.exitcode}); "
                              "giving up — check memory (OOM killer) and the system log")
        p.proc.join(timeout=1)
        todo.extendleft(reversed(p.tasks))   # re-run its tasks first, in order
        self.procs.remove(p)
        self.procs.append(self._spawn(self._view_fn()))

    def close(self) -> None:
        for p in self.procs:
            try:
                p.conn.send(("stop",))
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.proc.join(timeout=5)
            if p.proc.is_alive():
                p.proc.kill()
                p.proc.join()
        self.procs = []
