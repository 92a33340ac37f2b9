"""Worker processes on one machine.

Every message is a byte string (no pickle on the hot path). The master sends
each worker the archive delta at the start of every batch, then hands out
tasks in chunks: guided scheduling (chunks of about remaining / 2W tasks, at
most ``MAX_CHUNK``), with a second chunk queued behind the current one while
much is left, so no worker waits on the master, and one task at a time at the
end, so the batch's tail is short. A worker answers a chunk with one message
holding its results; the master wakes once per chunk, not per episode, and
yields results strictly in task order, so they are applied exactly as the
reference does whatever finishes first.

A worker that dies (killed by the OOM killer, say) is replaced: the new one
gets the current archive view and re-runs the dead one's tasks from their own
seeds, which gives identical results; the user is told which worker died and
which tasks ran again. A worker that raises sends its traceback, which is
re-raised in the master as :class:`WorkerError`.
"""

from __future__ import annotations

import json
import time
import multiprocessing as mp
import select
import traceback
from collections import deque
from collections.abc import Iterator

from goexplore import _faults
from goexplore.backends.base import Counters, Notify, next_chunk
from goexplore.backends.worker import Worker, WorkerSpec
from goexplore.errors import WorkerError
from goexplore.wire import EpisodeResult, Task, ViewDelta, decode_results

MAX_RESPAWNS = 32
MAX_CHUNK_BYTES = 32 * 1024  # bytes per message: a queued chunk never blocks the master

# message kinds (first byte)
_VIEW, _CODEC, _TASKS, _STOP = b"V", b"C", b"T", b"S"
_RESULT, _ERROR = b"R", b"E"


def _error(index: int) -> bytes:
    return _ERROR + json.dumps([index, traceback.format_exc()]).encode()


def _worker_main(conn, spec: WorkerSpec) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the master handles Ctrl-C
    try:
        worker = Worker(spec)
    except BaseException:
        conn.send_bytes(_error(-1))
        return
    while True:
        try:
            msg = conn.recv_bytes()
        except EOFError:
            return
        kind = msg[:1]
        index = -1
        try:
            if kind == _TASKS:
                out = []
                for task in Task.decode_many(msg, 1):
                    index = task.index
                    _faults.hit("task")  # fault injection for tests; off by default
                    out.append(worker.run_raw(task))
                conn.send_bytes(_RESULT + worker.encode(out))
            elif kind == _VIEW:
                worker.view.apply(ViewDelta.decode(memoryview(msg)[1:]))
            elif kind == _CODEC:
                worker.set_codec(msg[1:] or None)
            elif kind == _STOP:
                worker.close()
                return
        except BaseException:
            conn.send_bytes(_error(index))
            return


class _Proc:
    def __init__(self, ctx, spec, slot: int):
        self.slot = slot  # the worker's number, kept by its replacement
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, spec), daemon=True)
        self.proc.start()
        child.close()
        self.fd = self.conn.fileno()
        self.tasks: deque[Task] = deque()  # sent, not yet answered
        self.chunks: deque[int] = deque()  # sizes of the chunks sent, not yet answered

    def send(self, msg: bytes) -> None:
        """Send to a worker that may have died: its death shows in its sentinel."""
        try:
            self.conn.send_bytes(msg)
        except OSError:  # BrokenPipeError, ConnectionResetError
            pass


class ProcessBackend:
    def __init__(self, spec: WorkerSpec, n_workers: int, notify: Notify | None = None):
        self.spec, self.n_workers = spec, n_workers
        self.notify = notify or (lambda msg: None)
        self._ctx = mp.get_context("spawn")
        self.procs: list[_Proc] = []
        # where workers wait (seconds) is counted too: between batches (all of them; the
        # master samples, applies the last results, sends views), and at a batch's tail
        self.counters = Counters()
        self._all_in = None
        self._deaths_in_a_row = 0
        self._dictionary = None
        self._view_fn = None

    def start(self, full_view: ViewDelta, dictionary: bytes | None = None, view_fn=None) -> None:
        """``view_fn()`` gives the master's current view (for replacements)."""
        self._dictionary, self._view_fn = dictionary, view_fn
        self.procs = [self._spawn(full_view, slot) for slot in range(self.n_workers)]

    def _spawn(self, view: ViewDelta, slot: int) -> _Proc:
        p = _Proc(self._ctx, self.spec, slot)
        p.send(_VIEW + view.encode())
        if self._dictionary is not None:
            p.send(_CODEC + self._dictionary)
        return p

    def set_codec(self, dictionary: bytes | None) -> None:
        self._dictionary = dictionary
        for p in self.procs:
            p.send(_CODEC + (dictionary or b""))  # a dead worker's replacement gets it at spawn

    def run_batch(self, delta: ViewDelta, tasks: list[Task]) -> Iterator[EpisodeResult]:
        c = self.counters
        if self._all_in is not None:
            c.between_batches_s += time.perf_counter() - self._all_in
            self._all_in = None
        msg = _VIEW + delta.encode()
        for p in self.procs:
            p.send(msg)  # a dead worker is found below; its replacement gets the current view
            c.bytes_sent += len(msg)
        todo = deque(tasks)
        idle_since: dict[_Proc, float] = {}
        done: dict[int, EpisodeResult] = {}
        nxt = 0
        n_workers = self.n_workers

        def feed(p: _Proc) -> None:
            while k := next_chunk(len(todo), n_workers, len(p.chunks)):
                parts, size = [_TASKS], 1
                while todo and len(parts) <= k:
                    b = todo[0].encode()
                    if len(parts) > 1 and size + len(b) > MAX_CHUNK_BYTES:
                        break
                    p.tasks.append(todo.popleft())  # re-run by the replacement if p is dead
                    parts.append(b)
                    size += len(b)
                p.chunks.append(len(parts) - 1)
                p.send(b"".join(parts))
                c.bytes_sent += size

        for p in self.procs:
            feed(p)
        poller, by_fd = self._poller()
        while nxt < len(tasks):
            if nxt in done:
                yield done.pop(nxt)
                nxt += 1
                continue
            replaced = False
            for fd, _ in poller.poll():
                p = by_fd.get(fd)
                if p is None or p not in self.procs:
                    continue
                if fd == p.fd:  # a message (or the end of a dead worker's pipe)
                    try:
                        self._receive(p, done)
                        feed(p)
                        if not p.tasks:
                            now = idle_since[p] = time.perf_counter()
                            if len(idle_since) == len(self.procs):  # all answered
                                self._all_in = now
                                c.tail_idle_s += sum(now - t for t in idle_since.values())
                        continue
                    except (EOFError, OSError):
                        p.proc.join(timeout=5)
                elif p.proc.is_alive():
                    continue
                # the worker ended (or its pipe broke): keep what it sent, replace it
                try:
                    while p.tasks and p.conn.poll():
                        self._receive(p, done)
                except (EOFError, OSError):
                    pass
                self._replace(p, todo)
                feed(self.procs[-1])
                replaced = True
                break
            if replaced:  # the connections changed
                poller, by_fd = self._poller()

    def _poller(self):
        poller, by_fd = select.poll(), {}
        for p in self.procs:
            for fd in (p.fd, p.proc.sentinel):
                poller.register(fd, select.POLLIN)
                by_fd[fd] = p
        return poller, by_fd

    def _receive(self, p: _Proc, done: dict) -> None:
        msg = p.conn.recv_bytes()
        if msg[:1] == _ERROR:
            idx, tb = json.loads(msg[1:])
            self.close()
            raise WorkerError(f"worker failed on task {idx}:\n{tb}")
        self.counters.bytes_received += len(msg)
        self.counters.messages += 1
        for res in decode_results(memoryview(msg)[1:]):
            expected = p.tasks.popleft()
            if res.index != expected.index:
                raise RuntimeError(
                    f"internal error: task {res.index} answered, {expected.index} expected"
                )
            done[res.index] = res
        p.chunks.popleft()
        self._deaths_in_a_row = 0

    def _replace(self, p: _Proc, todo: deque) -> None:
        lost = self.counters.workers_lost = self.counters.workers_lost + 1
        self._deaths_in_a_row += 1
        if lost > MAX_RESPAWNS or self._deaths_in_a_row > 3:
            self.close()
            raise WorkerError(
                f"workers died {lost} times (exit code {p.proc.exitcode}); "
                "giving up — check memory (OOM killer) and the system log"
            )
        p.proc.join(timeout=1)
        rerun = [t.index for t in p.tasks]
        self.counters.tasks_rerun += len(rerun)
        self.notify(
            f"worker {p.slot} (pid {p.proc.pid}) died (exit code {p.proc.exitcode}); "
            + (
                f"re-running its {len(rerun)} unfinished task(s) of this batch "
                f"({_ranges(rerun)}) on a new worker {p.slot}"
                if rerun
                else f"it had no unfinished task; started a new worker {p.slot}"
            )
        )
        todo.extendleft(reversed(p.tasks))  # re-run its tasks first, in order
        self.procs.remove(p)
        self.procs.append(self._spawn(self._view_fn(), p.slot))

    def close(self) -> None:
        for p in self.procs:
            p.send(_STOP)
        for p in self.procs:
            p.proc.join(timeout=5)
            if p.proc.is_alive():
                p.proc.kill()
                p.proc.join()
        self.procs = []


def _ranges(ids: list[int]) -> str:
    """'tasks 3-5, 9' for [3, 4, 5, 9]."""
    out, start, prev = [], None, None
    for i in [*ids, None]:
        if start is not None and (i is None or i != prev + 1):
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ("task " if len(ids) == 1 else "tasks ") + ", ".join(out)
