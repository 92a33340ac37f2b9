"""Workers as Ray actors: the same worker code as the process backend, on
this machine or across a Ray cluster (``pip install 'goexplore[ray]'``).

Each actor owns one :class:`~goexplore.backends.worker.Worker` (an env and its
archive view). Only byte strings travel: the config as JSON when an actor
starts, archive-view deltas, tasks and compact results in the process
backend's wire format. Tasks go out in guided chunks, with a second chunk
queued behind each actor's current one while much of the batch is left;
results are yielded strictly in task order, so the archive is the process
backend's, bit for bit.

An actor that dies (its process killed, its node lost) is replaced by a new
one, which gets the current archive view; the tasks it had not answered run
again there from their own seeds, with the same results. The user is told
which worker died and which tasks ran again. An actor that raises is an error
(:class:`~goexplore.errors.WorkerError`), as in the process backend.

``address``: ``None`` starts a local Ray with one CPU per worker; ``"auto"``
or ``HOST:PORT`` joins a running cluster (``ray start --head`` ...), which must
have a CPU for each worker.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterator

from goexplore import _faults
from goexplore.backends.base import Counters, Notify, local_cores, next_chunk
from goexplore.backends.processes import MAX_RESPAWNS, _ranges
from goexplore.backends.worker import Worker, WorkerSpec
from goexplore.errors import GoExploreError, WorkerError
from goexplore.wire import EpisodeResult, Task, ViewDelta, decode_results

INSTALL_HINT = "pip install 'goexplore[ray]'"
START_TIMEOUT_S = 120.0  # actors that cannot be placed by then: the cluster is too small


class _Actor:
    """One worker in a Ray actor (wrapped with ``ray.remote`` on first use)."""

    def __init__(self, config_json: str):
        from goexplore.config import Config

        self.worker = Worker(WorkerSpec(Config.from_json(json.loads(config_json))))

    def pid(self) -> int:
        return os.getpid()

    def view(self, delta: bytes) -> None:
        self.worker.view.apply(ViewDelta.decode(delta))

    def codec(self, dictionary: bytes) -> None:
        self.worker.set_codec(dictionary or None)

    def run(self, tasks: bytes) -> bytes:
        out = []
        for task in Task.decode_many(tasks):
            _faults.hit("task")  # fault injection for tests; off by default
            out.append(self.worker.run_raw(task))
        return self.worker.encode(out)


def _ray():
    try:
        import ray
    except ImportError:
        raise GoExploreError(f"--backend ray needs Ray: {INSTALL_HINT}") from None
    return ray


class _Slot:
    def __init__(self, number: int, actor):
        self.number = number
        self.actor = actor
        self.pending: deque[tuple[object, list[Task]]] = deque()  # (result ref, its tasks)


class RayBackend:
    def __init__(
        self,
        spec: WorkerSpec,
        n_workers: int,
        notify: Notify | None = None,
        address: str | None = None,
    ):
        self.spec, self.n_workers = spec, n_workers  # 0: one per CPU of the cluster
        self.notify = notify or (lambda msg: None)
        self.address = address or None
        self.counters = Counters()
        self.slots: list[_Slot] = []
        self._dictionary: bytes | None = None
        self._view_fn: Callable[[], ViewDelta] | None = None
        self._remote = None
        self._started_ray = False
        self._config_json = json.dumps(spec.config.to_json())

    # --- start and stop -------------------------------------------------------------------
    def start(
        self,
        full_view: ViewDelta,
        dictionary: bytes | None = None,
        view_fn: Callable[[], ViewDelta] | None = None,
    ) -> None:
        ray = _ray()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray starts its workers at niceness 15: on a busy machine they would yield to
        # everything else (4x slower measured here). The Ray we start runs them at 0.
        os.environ.setdefault("RAY_worker_niceness", "0")
        if not ray.is_initialized():
            if self.address:
                kw = {"address": self.address}
            else:  # a local Ray: one CPU per worker (auto: the machine's cores)
                kw = {"num_cpus": self.n_workers or local_cores()}
            try:
                ray.init(
                    **kw,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level="ERROR",
                    configure_logging=True,
                )
            except ConnectionError as e:
                raise GoExploreError(
                    f"--ray-address {self.address}: cannot connect ({e})"
                ) from None
            self._started_ray = True
        cpus = ray.cluster_resources().get("CPU", 0)
        if self.n_workers == 0:
            self.n_workers = max(1, int(cpus))
        if cpus < self.n_workers:
            self.close()
            raise GoExploreError(
                f"--n-workers {self.n_workers}: the Ray cluster has {cpus:g} CPUs; "
                "ask for at most that many workers (one CPU each)"
            )
        self._remote = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        self._dictionary, self._view_fn = dictionary, view_fn
        self.slots = [_Slot(i, self._new_actor()) for i in range(self.n_workers)]
        view = full_view.encode()
        for s in self.slots:
            self._prime(s.actor, view)
        # wait until every actor is placed and has its view (a clear error if never)
        ray.get([s.actor.pid.remote() for s in self.slots], timeout=START_TIMEOUT_S)

    def _new_actor(self):
        return self._remote.remote(self._config_json)

    def _prime(self, actor, view: bytes) -> None:
        actor.view.remote(view)
        if self._dictionary is not None:
            actor.codec.remote(self._dictionary)
        self.counters.bytes_sent += len(view) + len(self._dictionary or b"")

    def set_codec(self, dictionary: bytes | None) -> None:
        self._dictionary = dictionary
        for s in self.slots:
            s.actor.codec.remote(dictionary or b"")

    def close(self) -> None:
        ray = _ray()
        for s in self.slots:
            try:
                ray.kill(s.actor)
            except Exception:
                pass
        self.slots = []
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False

    # --- a batch ----------------------------------------------------------------------------
    def run_batch(self, delta: ViewDelta, tasks: list[Task]) -> Iterator[EpisodeResult]:
        ray = _ray()
        c = self.counters
        msg = delta.encode()
        for s in self.slots:
            s.actor.view.remote(msg)  # calls from this driver run in order on each actor
            c.bytes_sent += len(msg)
        todo = deque(tasks)
        done: dict[int, EpisodeResult] = {}
        nxt = 0
        n = self.n_workers

        def feed(s: _Slot) -> None:
            while k := next_chunk(len(todo), n, len(s.pending)):
                chunk = [todo.popleft() for _ in range(k)]
                body = b"".join(t.encode() for t in chunk)
                s.pending.append((s.actor.run.remote(body), chunk))
                c.bytes_sent += len(body)

        for s in self.slots:
            feed(s)
        while nxt < len(tasks):
            if nxt in done:
                yield done.pop(nxt)
                nxt += 1
                continue
            heads = {s.pending[0][0]: s for s in self.slots if s.pending}
            ready, _ = ray.wait(list(heads), num_returns=1)
            s = heads[ready[0]]
            ref, chunk = s.pending[0]
            try:
                data = ray.get(ref)
            except ray.exceptions.RayActorError:
                self._replace(s, todo)
                feed(s)
                continue
            except ray.exceptions.RayTaskError as e:
                self.close()
                raise WorkerError(f"worker {s.number} failed:\n{e}") from None
            s.pending.popleft()
            c.bytes_received += len(data)
            c.messages += 1
            for res, task in zip(decode_results(data), chunk):
                if res.index != task.index:
                    raise RuntimeError(f"internal error: task {res.index} answered, {task.index}")
                done[res.index] = res
            feed(s)

    def _replace(self, s: _Slot, todo: deque) -> None:
        """A dead actor: a new one in its slot, with the current view; its
        unanswered tasks go first in the queue, in order."""
        c = self.counters
        c.workers_lost += 1
        if c.workers_lost > MAX_RESPAWNS:
            self.close()
            raise WorkerError(f"Ray workers died {c.workers_lost} times; giving up")
        lost = [t for _, chunk in s.pending for t in chunk]
        s.pending.clear()
        c.tasks_rerun += len(lost)
        todo.extendleft(reversed(lost))
        s.actor = self._new_actor()
        self._prime(s.actor, self._view_fn().encode() if self._view_fn else b"")
        self.notify(
            f"worker {s.number} (Ray actor) died; re-running its {len(lost)} unfinished "
            f"task(s) of this batch ({_ranges([t.index for t in lost])}) on a new actor "
            f"{s.number}"
            if lost
            else f"worker {s.number} (Ray actor) died with no unfinished task; replaced it"
        )
