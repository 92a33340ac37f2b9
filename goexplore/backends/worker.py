"""The worker: one env, its archive view, and the exploration of tasks.
The same object runs in-process (inline backend) or in a worker process."""

from __future__ import annotations

from dataclasses import dataclass

from goexplore.cells import make_cells
from goexplore.codec import StateCodec
from goexplore.config import Config
from goexplore.envs import make_env
from goexplore.episode import explore_raw
from goexplore.wire import EpisodeResult, Task, WorkerView, decode_results, encode_results


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to know: the run's config (env, cells, exploration)."""

    config: Config

    @classmethod
    def from_config(cls, cfg: Config) -> WorkerSpec:
        return cls(cfg)

    @property
    def env(self) -> str:
        return self.config.env

    @property
    def repeat_p(self) -> float:
        return self.config.action_repeat_p

    @property
    def end_on_life(self) -> bool:
        return self.config.episode_end == "life"

    def make_cells(self, fact_names: tuple[str, ...] = ()):
        return make_cells(self.config, fact_names)


class Worker:
    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.env = make_env(spec.env, spec.config.env_kwargs)
        self.cells = spec.make_cells(tuple(self.env.fact_names))
        self.codec = StateCodec()
        self.view = WorkerView()
        self.frames = None  # dynamic cells: (frame codec, sampling probability)
        if getattr(self.cells, "dynamic", False):
            from goexplore.cells.dynamic import FrameCodec

            self.frames = (FrameCodec(), spec.config.dynamic_sample_p)

    def set_codec(self, dictionary: bytes | None) -> None:
        self.codec = StateCodec(dictionary)

    def run_raw(self, task: Task) -> dict:
        """Explore one task; the result as plain Python values (see wire.encode_results)."""
        return explore_raw(
            self.env,
            self.cells,
            self.codec,
            self.view,
            task,
            self.spec.repeat_p,
            self.spec.end_on_life,
            self.frames,
        )

    def encode(self, raws: list[dict]) -> bytes:
        return encode_results(raws, len(self.env.fact_names))

    def run(self, task: Task) -> EpisodeResult:
        return decode_results(self.encode([self.run_raw(task)]))[0]

    def close(self) -> None:
        self.env.close()
