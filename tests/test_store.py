"""The run dir's storage: a full or read-only disk while a checkpoint or a log
chunk is written gives a clear StorageError (path and cause; exit code 2 from
the CLI), the previous checkpoint stays loadable, and the run resumes from it
to the same result. Tests run as root, so a read-only directory is simulated
by failing the OS calls (chmod does not stop root); the CLI test uses a real
OS limit (RLIMIT_FSIZE: writes past it fail with EFBIG).

Also: deterministic files, pruning, crash leftovers, LATEST semantics.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import os
import resource
import shutil
import subprocess
import sys

import numpy as np
import pytest
from runutil import assert_same_run, cli, cli_env, run_args

from goexplore.config import Config
from goexplore.errors import CheckpointError, GoExploreError, RunDirError, StorageError
from goexplore.explog import FIELDS, read_npz, write_npz
from goexplore.runner import execute, prepare
from goexplore.store import RunDir, ckpt_name, read_checkpoint
from goexplore.verify import verify_run

CFG = Config(
    env="toy",
    seed=6,
    total_frames=30_000,
    ckpt_every=5_000,
    explog_chunk=2_000,
    log_every_batches=1,
)


def _run(run_dir, resume=None, cfg=CFG, stop_after=None):
    p, _ = prepare(cfg, run_dir, resume)
    if stop_after is not None:
        p.run(should_stop=lambda: p.batch >= stop_after)
        p.checkpoint()
        return p
    assert execute(p, log=lambda *a: None) is not None
    return p


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    d = tmp_path_factory.mktemp("undisturbed") / "run"
    _run(d)
    return d


def _fail_nth(monkeypatch, name: str, n: int, err: int) -> list:
    """Make the n-th call of os.<name> fail with ``err`` (from now on)."""
    real, calls = getattr(os, name), []

    def fake(*a, **k):
        calls.append(a)
        if len(calls) == n:
            raise OSError(
                err,
                os.strerror(err),
                str(a[0]) if a and isinstance(a[0], (str, os.PathLike)) else None,
            )
        return real(*a, **k)

    monkeypatch.setattr(os, name, fake)
    return calls


# fsync order in a checkpoint: archive.npz, states.bin, explog_tail.npz, meta.json,
# manifest.json, the temp dir, the checkpoints dir, LATEST
@pytest.mark.parametrize(
    "call,n,err",
    [
        ("fsync", 1, errno.ENOSPC),
        ("fsync", 4, errno.ENOSPC),
        ("fsync", 5, errno.EIO),
        ("mkdir", 1, errno.EROFS),
        ("rename", 1, errno.EROFS),
        ("replace", 6, errno.ENOSPC),  # the LATEST pointer itself
    ],
)
def test_failed_checkpoint_write_keeps_the_previous_one(
    tmp_path, monkeypatch, undisturbed, call, n, err
):
    d = tmp_path / "run"
    p = _run(d, stop_after=2, cfg=CFG.replace(ckpt_every=0))  # checkpoints only when asked
    prev = RunDir(d).latest_name()
    p.run(should_stop=lambda: p.batch >= 3)
    with monkeypatch.context() as m:
        _fail_nth(m, call, n, err)
        with pytest.raises(StorageError) as e:
            p.checkpoint()
    msg = str(e.value)
    assert isinstance(e.value, GoExploreError) and e.value.cause.errno == err
    assert os.strerror(err) in msg and errno.errorcode[err] in msg
    assert str(d) in msg or str(e.value.path).startswith(str(d)), msg
    # the previous checkpoint is still the published one, and loads
    assert RunDir(d).latest_name() == prev
    read_checkpoint(d / "checkpoints" / prev)
    rep = verify_run(d)
    assert rep.ok, rep.text()
    assert not any(x.name.endswith(".tmp") for x in (d / "checkpoints").iterdir() if x.is_dir())
    # and the run resumes from it to the undisturbed result
    _run(d, resume="auto")
    assert_same_run(d, undisturbed)


def test_disk_full_while_a_chunk_is_flushed(tmp_path, monkeypatch, undisturbed):
    d = tmp_path / "run"
    p = _run(d, stop_after=1)
    prev = RunDir(d).latest_name()
    real = np.lib.format.write_array
    calls = []

    def failing(fp, array, *a, **k):  # the 2nd chunk flushed from now on
        if array.dtype == np.int64 and len(array) == CFG.explog_chunk:
            calls.append(1)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fp, array, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(np.lib.format, "write_array", failing)
        with pytest.raises(StorageError) as e:
            execute(p, log=lambda *a: None)
    msg = str(e.value)
    assert "chunk_" in msg and "No space left on device" in msg
    assert f"resume with: goexplore run --run-dir {d} --resume auto" in msg
    assert prev in msg  # names the intact checkpoint
    assert RunDir(d).latest_name() == prev and verify_run(d).ok
    assert not list((d / "explog").glob("*.tmp"))
    _run(d, resume="auto")
    assert_same_run(d, undisturbed)


def _limit_file_size(limit):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def test_cli_file_size_limit_exit_code_2_then_resume(tmp_path):
    """A real OS refusal (EFBIG from RLIMIT_FSIZE) while a checkpoint grows."""
    cfg = dict(env="toy", seed=6, frames=30_000, ckpt_every=5_000, chunk=500)
    base = tmp_path / "base"
    assert cli(run_args(base, resume=False, **cfg)).returncode == 0
    d = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *run_args(d, **cfg)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
        preexec_fn=_limit_file_size(90_000),
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "goexplore: error: could not write" in r.stderr
    assert "File too large (EFBIG)" in r.stderr and "checkpoints/ckpt_" in r.stderr, r.stderr
    assert "is intact" in r.stderr and "resume with:" in r.stderr
    latest = RunDir(d).latest_name()
    assert latest is not None and verify_run(d).ok
    r = cli(run_args(d, **cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same_run(d, base)


# --- files and pointers -----------------------------------------------------------------
def test_npz_files_are_deterministic_and_standard():
    arrays = {name: np.arange(50).astype(dt) for name, dt in FIELDS}
    a, b = io.BytesIO(), io.BytesIO()
    write_npz(a, arrays)
    write_npz(b, arrays)
    assert a.getvalue() == b.getvalue()
    with np.load(io.BytesIO(a.getvalue()), allow_pickle=False) as z:
        for k in arrays:
            np.testing.assert_array_equal(z[k], arrays[k])
    got = read_npz(a.getvalue(), "x")
    assert sorted(got) == sorted(arrays)


def test_pruning_keeps_latest_best_recent_and_milestones(undisturbed):
    rd = RunDir(undisturbed)
    names = [p.name for p in rd.checkpoints()]
    assert rd.latest_name() in names and rd.best_name() in names
    assert len(names) <= 2 + 2 + len([p for p in rd.checkpoints() if (p / "MILESTONE").exists()])
    assert not [p for p in rd.ckpt_dir.iterdir() if p.name.endswith((".tmp", ".del"))]


def test_unpublished_checkpoint_is_a_note_and_is_replaced(tmp_path, undisturbed):
    d = tmp_path / "run"
    shutil.copytree(undisturbed, d)
    rd = RunDir(d)
    latest = rd.latest_checkpoint()
    fake = rd.ckpt_dir / "ckpt_999999999999"  # as if killed before LATEST moved
    shutil.copytree(latest, fake)
    (rd.ckpt_dir / "junk.tmp").mkdir()
    rep = verify_run(d)
    assert rep.ok and any("never published" in n for n in rep.notes), rep.text()
    # resuming from an older checkpoint republishes it; the abandoned future goes at the next prune
    older = rd.checkpoints()[0]
    p, _ = prepare(CFG, d, str(older))
    assert rd.latest_name() == older.name
    execute(p, log=lambda *a: None)
    assert not fake.exists() and not (rd.ckpt_dir / "junk.tmp").exists()
    assert_same_run(d, undisturbed)


def test_missing_latest_with_checkpoints_is_refused(tmp_path, undisturbed):
    d = tmp_path / "run"
    shutil.copytree(undisturbed, d)
    os.unlink(d / "checkpoints" / "LATEST")
    with pytest.raises(CheckpointError, match="LATEST: missing"):
        prepare(CFG, d, "auto")
    assert not verify_run(d).ok


@pytest.mark.parametrize("content", [b"../../etc", b"\xff\xfe", b"ckpt_1", b"x" * 10_000])
def test_damaged_latest_pointer(tmp_path, undisturbed, content):
    d = tmp_path / "run"
    shutil.copytree(undisturbed, d)
    (d / "checkpoints" / "LATEST").write_bytes(content)
    with pytest.raises(CheckpointError, match="LATEST"):
        prepare(CFG, d, "auto")
    rep = verify_run(d)
    assert not rep.ok and any("LATEST" in x for x in rep.problems)


def test_hostile_run_config(tmp_path, undisturbed):
    d = tmp_path / "run"
    shutil.copytree(undisturbed, d)
    (d / "config.json").write_text(CFG.replace(explog_chunk=1 << 40).dumps())
    with pytest.raises(RunDirError, match="explog_chunk"):
        RunDir(d).read_config()
    (d / "config.json").write_text("[" * 100_000)
    with pytest.raises(RunDirError):
        RunDir(d).read_config()


def test_every_fifth_checkpoint_survives_pruning(tmp_path, monkeypatch):
    """The 5th, 10th, ... checkpoints a run writes are kept for good, across a resume."""
    written = []
    orig = RunDir.write_checkpoint

    def spy(self, frames, *a, **kw):
        if self.latest_name() != ckpt_name(frames):
            written.append(ckpt_name(frames))
        return orig(self, frames, *a, **kw)

    monkeypatch.setattr(RunDir, "write_checkpoint", spy)
    d = tmp_path / "run"
    for frames in (14_000, 30_000):  # the second part goes on from the first's end
        cfg = dataclasses.replace(CFG, total_frames=frames, ckpt_every=500, batch_cells=5)
        p, _ = prepare(cfg, d, "auto")
        execute(p, log=lambda *a: None)
    assert len(written) >= 25
    kept = {c.name for c in RunDir(d).checkpoints()}
    milestones = {c.name for c in RunDir(d).checkpoints() if (c / "MILESTONE").exists()}
    assert milestones == set(written[4::5]) and milestones <= kept
