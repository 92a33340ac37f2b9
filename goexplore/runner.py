"""A whole run: the run dir contract around :class:`~goexplore.phase1.Phase1`
(create or resume, checkpoints, Ctrl-C, final verification, final.json)."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from goexplore.config import Config
from goexplore.errors import RunDirError
from goexplore.phase1 import Phase1
from goexplore.store import RunDir, read_checkpoint, resolve_resume, write_text_atomic


def prepare(cfg: Config, run_dir: Path, resume: str | None) -> tuple[Phase1, Path | None]:
    """Check everything before touching the run dir; then set up the run."""
    cfg.validate()
    rd = RunDir(run_dir)
    if rd.path.exists() and not rd.path.is_dir():
        raise RunDirError(f"--run-dir {rd.path} exists and is not a directory")
    existing = rd.read_config() if rd.holds_run() else None
    if rd.holds_run() and existing is None:
        raise RunDirError(f"{rd.path} holds checkpoints but no config.json; refusing to use it")
    if existing is not None:
        if resume is None:
            raise RunDirError(f"{rd.path} already holds a run; continue it with --resume auto, "
                              "or choose another --run-dir")
        diff = existing.differs_from(cfg)
        if diff:
            raise RunDirError(
                f"{rd.path} holds a different run (it differs in: {', '.join(diff)}); "
                f"only {', '.join(Config.RESUMABLE)} may change on resume")
    ckpt = resolve_resume(resume, rd) if resume is not None else None
    if ckpt is not None:
        meta, _, _, _ = read_checkpoint(ckpt)  # fails now, naming the file, if damaged
        saved = Config.from_json(meta["config"])
        diff = saved.differs_from(cfg)
        if diff:
            raise RunDirError(f"checkpoint {ckpt} belongs to a different run "
                              f"(it differs in: {', '.join(diff)})")
    rd.create(cfg)
    phase1 = Phase1(cfg, rd)
    if ckpt is None:
        if rd.metrics_path.exists():
            rd.metrics_path.unlink()
        phase1.seed_root()
    else:
        phase1.restore(ckpt)
        _carry_metrics(rd, RunDir(ckpt.parent.parent), phase1.batch)
    return phase1, ckpt


def _carry_metrics(rd: RunDir, src: RunDir, batch: int) -> None:
    """Keep the metric rows up to the checkpoint (rows after it are redone)."""
    rows = [r for r in src.read_metrics() if r.get("batch", 0) <= batch]
    rd.write_metrics(rows)


class _StopFlag:
    """First Ctrl-C: stop at the end of the batch; second: stop now."""

    def __init__(self):
        self.stop = False
        self._old = None

    def __enter__(self):
        self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum, frame):
        if self.stop:
            raise KeyboardInterrupt
        self.stop = True
        print("\ninterrupt: finishing this batch and writing a checkpoint "
              "(Ctrl-C again to stop at once)", flush=True)

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._old)
        return False


def execute(phase1: Phase1, on_progress=None, log=print) -> dict | None:
    """Run to the budget; returns final.json's content, or None if interrupted."""
    t0 = time.time()
    with _StopFlag() as flag:
        finished = phase1.run(on_progress=on_progress, should_stop=lambda: flag.stop)
    rd = phase1.run_dir
    ckpt = phase1.checkpoint()
    if not finished:
        log(f"stopped at {phase1.frames:,} agent steps; checkpoint {ckpt}\n"
            f"resume with: goexplore run --run-dir {rd.path} --resume auto "
            f"--env {phase1.cfg.env} --seed {phase1.cfg.seed} --total-frames {phase1.cfg.total_frames}")
        return None
    verification = phase1.verify()
    final = phase1.summary(verification, time.time() - t0)
    write_text_atomic(rd.final_path, json.dumps(final, indent=1) + "\n")
    return final
