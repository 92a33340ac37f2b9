"""The worker: one env, its archive view, and the exploration of tasks.
The same object runs in-process (inline backend) or in a worker process."""
from __future__ import annotations

from dataclasses import dataclass

from goexplore.cells import DownscaleCells
from goexplore.codec import StateCodec
from goexplore.envs import make_env
from goexplore.explore import EpisodeResult, Task, WorkerView, decode_results, encode_results, explore_raw


@dataclass(frozen=True)
class WorkerSpec:
    env: str
    cell_width: int
    cell_height: int
    cell_levels: int
    repeat_p: float

    @classmethod
    def from_config(cls, cfg) -> "WorkerSpec":
        return cls(cfg.env, cfg.cell_width, cfg.cell_height, cfg.cell_levels, cfg.action_repeat_p)

    def make_cells(self) -> DownscaleCells:
        return DownscaleCells(self.cell_width, self.cell_height, self.cell_levels)


class Worker:
    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.env = make_env(spec.env)
        self.cells = spec.make_cells()
        self.codec = StateCodec()
        self.view = WorkerView()

    def set_codec(self, dictionary: bytes | None) -> None:
        self.codec = StateCodec(dictionary)

    def run_raw(self, task: Task) -> tuple:
        """Explore one task; the result as Python lists (see explore.encode_results)."""
        return explore_raw(self.env, self.cells, self.codec, self.view, task, self.spec.repeat_p)

    def encode(self, raws: list[tuple]) -> bytes:
        return encode_results(raws, len(self.env.fact_names))

    def run(self, task: Task) -> EpisodeResult:
        return decode_results(self.encode([self.run_raw(task)]))[0]

    def close(self) -> None:
        self.env.close()
