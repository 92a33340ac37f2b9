"""A whole run: the run dir contract around :class:`~goexplore.phase1.Phase1`
(create or resume, checkpoints, Ctrl-C, final verification, final.json).

Resume never continues from damaged state: the checkpoint it would continue
from, and every experience-log chunk that checkpoint needs, are checked first
(:func:`goexplore.verify.check_resume_point`); a damaged one is an error that
names the files. Falling back to an older intact checkpoint happens only when
asked (``fallback=True``, the CLI's ``--fallback``; or ``--resume PATH``).
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import fields
from pathlib import Path

from goexplore import formats
from goexplore.config import Config
from goexplore.errors import CheckpointError, RunDirError, StorageError
from goexplore.phase1 import Phase1
from goexplore.store import CKPT_NAME, RunDir, ckpt_frames, write_text_atomic


def prepare(
    cfg: Config,
    run_dir: Path,
    resume: str | None,
    fallback: bool = False,
    log=print,
    branch: bool = False,
) -> tuple[Phase1, Path | None]:
    """Check everything before touching the run dir; then set up the run. With
    ``branch``, ``resume`` names another run's checkpoint (or run dir) that a new run
    dir continues with other selection settings (:data:`Config.BRANCHABLE`)."""
    cfg.validate()
    rd = RunDir(run_dir)
    if rd.path.exists() and not rd.path.is_dir():
        raise RunDirError(f"--run-dir {rd.path} exists and is not a directory")
    existing = rd.read_config() if rd.holds_run() else None
    if rd.holds_run() and existing is None:
        raise RunDirError(f"{rd.path} holds checkpoints but no config.json; refusing to use it")
    also: tuple[str, ...] = ()
    if branch:
        if resume in (None, "auto"):
            raise RunDirError(
                "--branch-from: give another run's run dir or checkpoint dir to branch from"
            )
        if existing is not None:
            raise RunDirError(
                f"--branch-from: {rd.path} already holds a run; a branch starts a new run "
                "dir (continue this one with --resume auto)"
            )
        also = Config.BRANCHABLE
    if existing is not None:
        if resume is None:
            raise RunDirError(
                f"{rd.path} already holds a run; continue it with --resume auto, "
                "or choose another --run-dir"
            )
        diff = existing.differs_from(cfg)
        if diff:
            raise RunDirError(
                f"{rd.path} holds a different run (it differs in: {', '.join(diff)}); "
                f"only {', '.join(Config.RESUMABLE)} may change on resume"
            )
    flag = "--branch-from" if branch else "--resume"
    ckpt = choose_checkpoint(resume, rd, fallback, log, flag) if resume is not None else None
    record = formats.read_branch(rd.branch_path) if existing is not None else None
    if ckpt is None and resume == "auto" and record is not None:
        # a branch stopped before its first checkpoint starts again at its branch point
        ckpt, also = choose_checkpoint(record["source"], rd, fallback, log), Config.BRANCHABLE
    if ckpt is not None:
        saved = checkpoint_config(ckpt)  # checked above
        diff = saved.differs_from(cfg, also)
        if diff:
            raise RunDirError(
                f"checkpoint {ckpt} belongs to a different run (it differs in: {', '.join(diff)})"
                + (f"; a branch may change only {', '.join(also)}" if also else "")
            )
    rd.create(cfg)
    if branch:  # where this run came from, for compare, verify and a resume
        assert ckpt is not None
        made = formats.branch_record(ckpt, ckpt_frames(ckpt.name), saved.differs_from(cfg))
        write_text_atomic(rd.branch_path, json.dumps(made, indent=1))
    lock = lock_run_dir(rd)
    try:
        if (
            ckpt is not None
            and _same_dir(ckpt.parent, rd.ckpt_dir)
            and ckpt.name != rd.latest_name()
        ):
            # continuing from an older checkpoint of this run: it becomes the run's
            # state; the newer ones are an abandoned future (pruned later)
            rd.set_latest(ckpt.name)
            rd.drop_best_after(ckpt_frames(ckpt.name))
        phase1 = Phase1(cfg, rd)
        phase1.lock = lock
        if ckpt is None:
            if rd.metrics_path.exists():
                rd.metrics_path.unlink()
            phase1.seed_root()
        else:
            phase1.restore(ckpt, also)
            _carry_metrics(rd, RunDir(ckpt.parent.parent), phase1.batch)
    except BaseException:
        unlock_run_dir(lock)
        raise
    return phase1, ckpt


def branch_source(path: str, fallback: bool = False, log=print) -> tuple[Path, Config]:
    """The intact checkpoint that ``run --branch-from PATH`` continues (PATH: a run dir,
    its latest; or a checkpoint dir), and the settings of the run that wrote it."""
    ckpt = choose_checkpoint(path, RunDir(Path(path)), fallback, log, "--branch-from")
    assert ckpt is not None  # only 'auto' may find none
    return ckpt, checkpoint_config(ckpt)


def checkpoint_config(ckpt: Path) -> Config:
    """The settings of the run that wrote checkpoint ``ckpt`` (an intact one)."""
    meta = formats.load_json(ckpt / "meta.json", formats.MAX_JSON_BYTES, "checkpoint meta")
    return Config.from_json(meta["config"])


#: run dirs this process holds the lock of: lock path -> file descriptor
_HELD: dict[str, int] = {}


def lock_run_dir(rd: RunDir) -> int:
    """Hold RUN_DIR/.lock (an advisory lock, released when the process ends or the run
    does): a second process writing the same run dir would interleave its checkpoints
    and metrics with this one's. This process may take it again (a run set up and
    then set up anew). Returns the lock's file descriptor."""
    import fcntl
    import os

    path = rd.path / ".lock"
    key = str(path.resolve())
    if key in _HELD:
        return _HELD[key]
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        other = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RunDirError(
            f"{rd.path} is in use by another goexplore process (pid {other}); wait for it "
            "to end (or stop it), then resume"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _HELD[key] = fd
    return fd


def unlock_run_dir(fd: int | None) -> None:
    import os

    for key, held in list(_HELD.items()):
        if held == fd:
            del _HELD[key]
            os.close(fd)  # closing the descriptor releases the lock


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def choose_checkpoint(
    resume: str, rd: RunDir, fallback: bool = False, log=print, flag: str = "--resume"
) -> Path | None:
    """The intact checkpoint to continue from (None: a fresh start, only for
    ``auto`` in a run dir without checkpoints). Damage is an error unless
    ``fallback``, which takes the newest intact checkpoint older than the
    damaged one, saying so. ``flag``: the option that named ``resume``, for errors."""
    from goexplore.verify import check_resume_point

    src, first, problems = rd, None, []
    if resume == "auto":
        try:
            first = rd.latest_checkpoint()
        except CheckpointError as e:
            problems = [str(e)]
        if first is None and not problems:
            return None
    else:
        p = Path(resume)
        if (p / "manifest.json").exists() or CKPT_NAME.fullmatch(p.name):
            if not p.is_dir():
                raise CheckpointError(f"{flag} {resume}: no such checkpoint")
            first, src = p, RunDir(p.parent.parent)
        elif p.is_dir():
            src = RunDir(p)
            try:
                first = src.latest_checkpoint()
            except CheckpointError as e:
                problems = [str(e)]
            if first is None and not problems:
                raise CheckpointError(f"{flag} {resume}: holds no checkpoint to continue from")
        else:
            auto = "'auto', " if flag == "--resume" else ""
            raise CheckpointError(
                f"{flag} {resume}: no such run dir or checkpoint "
                f"(give {auto}a run dir or a checkpoint dir)"
            )
    if first is not None:
        problems = check_resume_point(first)
        if not problems:
            return first
    what = first if first is not None else src.ckpt_dir / "LATEST"
    if not fallback:
        raise CheckpointError(
            f"cannot resume from {what}: damaged\n  "
            + "\n  ".join(problems)
            + f"\nFor a full report: goexplore verify {src.path}\n"
            "To continue from the newest intact older checkpoint instead, add --fallback "
            f"(or give {flag} PATH naming one)."
        )
    upto = (
        ckpt_frames(first.name)
        if first is not None and CKPT_NAME.fullmatch(first.name)
        else float("inf")
    )
    for cand in reversed(src.checkpoints()):
        if ckpt_frames(cand.name) >= upto:
            continue
        if not check_resume_point(cand):
            log(
                f"--fallback: {what} is damaged ({problems[0]});\n"
                f"  continuing from the newest intact older checkpoint, {cand}"
            )
            return cand
    raise CheckpointError(
        f"cannot resume from {what}: damaged ({problems[0]}), and no older "
        f"intact checkpoint in {src.ckpt_dir} to fall back to"
    )


def _carry_metrics(rd: RunDir, src: RunDir, batch: int) -> None:
    """Keep the metric rows up to the checkpoint (rows after it are redone; an
    end-of-run row goes: the run goes on)."""
    rows = [r for r in src.read_metrics() if r.get("batch", 0) <= batch and not r.get("final")]
    rd.write_metrics(rows)


def resume_command(cfg: Config, rd: RunDir) -> str:
    """The command line that continues this run."""
    parts = ["goexplore run", f"--run-dir {rd.path}", "--resume auto", f"--env {cfg.env}"]
    for f in fields(Config):
        v = getattr(cfg, f.name)
        if f.name != "env" and (v != f.default or f.name in ("seed", "total_frames")):
            parts.append(f"--{f.name.replace('_', '-')} {v}")
    return " ".join(parts)


class _StopFlag:
    """First Ctrl-C (or SIGTERM): stop at the end of the batch; second: stop now."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.stop = False
        self._old = {}

    def __enter__(self):
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handler)
        return self

    def _handler(self, signum, frame):
        if self.stop:
            raise KeyboardInterrupt
        self.stop = True
        print(
            "\ninterrupt: finishing this batch and writing a checkpoint "
            "(Ctrl-C again to stop at once)",
            flush=True,
        )

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)
        return False


def execute(phase1: Phase1, on_progress=None, log=print) -> dict | None:
    """Run to the budget; returns final.json's content, or None if interrupted."""
    t0 = time.time()
    rd = phase1.run_dir
    how = resume_command(phase1.cfg, rd)
    try:
        return _execute(phase1, rd, how, t0, on_progress, log)
    finally:
        unlock_run_dir(getattr(phase1, "lock", None))
        phase1.lock = None


def _execute(phase1: Phase1, rd, how: str, t0: float, on_progress, log) -> dict | None:
    with _StopFlag() as flag:  # covers everything: a late Ctrl-C is handled too
        try:
            finished = phase1.run(
                on_progress=on_progress, should_stop=lambda: flag.stop, notify=log
            )
            ckpt = _final_checkpoint(phase1)
            if not finished:
                log(
                    f"stopped at {phase1.frames:,} agent steps; checkpoint {ckpt}; all workers "
                    f"ended.\nresume with: {how}"
                )
                return None
            verification = phase1.verify()
            final = phase1.summary(verification, time.time() - t0)
            write_text_atomic(rd.final_path, json.dumps(final, indent=1) + "\n")
            return final
        except KeyboardInterrupt:
            log(
                f"\nstopped at once at {phase1.frames:,} agent steps: the last complete "
                f"checkpoint is {_latest_or_none(rd)}; all workers ended.\nresume with: {how}"
            )
            return None
        except StorageError as e:
            raise StorageError(
                e.path,
                e.cause,
                hint=(
                    f"The last complete checkpoint ({_latest_or_none(rd)}) is intact. Free space "
                    f"(or make {rd.path} writable), then resume with: {how}"
                ),
            ) from None


def _final_checkpoint(phase1: Phase1) -> Path:
    """Checkpoint the current state (a no-op if the latest checkpoint holds it)."""
    return phase1.checkpoint()


def _latest_or_none(rd: RunDir) -> str:
    try:
        latest = rd.latest_checkpoint()
    except CheckpointError:
        latest = None
    return str(latest) if latest is not None else "none yet"
