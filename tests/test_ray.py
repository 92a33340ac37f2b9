"""The Ray backend gives the process backend's run, bit for bit, and survives
an actor that dies mid-batch; a real two-node cluster does the same.

Every test that starts Ray runs the CLI inside a private network namespace
that has only loopback (``unshare --net`` + ``ip link set lo up``, as root):
Ray then registers every node as 127.0.0.1 and no traffic leaves the machine.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from runutil import ROOT, assert_same_run, cli, cli_env, run_args

pytest.importorskip("ray")


def _can_unshare() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = ["unshare", "--net", "sh", "-c", "ip link set lo up"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


WHY = "Ray tests run in a private network namespace: need root, unshare, ip and the kernel's leave"
if not _can_unshare():
    pytest.skip(WHY, allow_module_level=True)

FRAMES = 20_000


def in_netns(script: str, timeout=600, **env) -> subprocess.CompletedProcess:
    """``script`` (sh) in a fresh network namespace with only loopback up."""
    e = cli_env(**env)
    e["RAY_USAGE_STATS_ENABLED"] = "0"
    e["RAY_worker_niceness"] = "0"  # `ray start` nodes too (see goexplore/backends/ray.py)
    return subprocess.run(
        ["unshare", "--net", "sh", "-c", "ip link set lo up && " + script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        cwd=ROOT,
    )


def goexplore(args) -> str:
    return shlex.join([sys.executable, "-m", "goexplore.cli", *map(str, args)])


@pytest.fixture(scope="module")
def process_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ray") / "processes"
    r = cli(run_args(d, seed=4, frames=FRAMES, workers=2, resume=False))
    assert r.returncode == 0, r.stderr
    return d


def test_ray_gives_the_process_backends_run(process_run, tmp_path):
    d = tmp_path / "ray"
    args = run_args(d, seed=4, frames=FRAMES, workers=2, resume=False, extra=["--backend", "ray"])
    r = in_netns(goexplore(args))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert_same_run(d, process_run)


def test_a_killed_actor_is_replaced_and_its_tasks_rerun(process_run, tmp_path):
    d = tmp_path / "ray-killed"
    args = run_args(d, seed=4, frames=FRAMES, workers=2, resume=False, extra=["--backend", "ray"])
    r = in_netns(
        goexplore(args),
        GOEXPLORE_TEST_KILL_AT="task:30",
        GOEXPLORE_TEST_ONCE=str(tmp_path / "fired"),
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert (tmp_path / "fired").exists(), "the fault was not injected"
    told = re.findall(
        r"worker (\d) \(Ray actor\) died; re-running its (\d+) unfinished task\(s\) of this "
        r"batch \(tasks? [\d, -]+\) on a new actor (\d)",
        r.stdout,
    )
    assert len(told) == 1 and told[0][0] == told[0][2] and int(told[0][1]) >= 1, r.stdout[-3000:]
    assert "workers lost 1" in [ln for ln in r.stdout.splitlines() if ln.startswith("steps")][-1]
    assert_same_run(d, process_run)


@pytest.mark.slow
def test_a_two_node_cluster_gives_the_process_backends_run(tmp_path):
    """``ray start --head`` plus a second node joined with ``ray start --address``,
    a short Montezuma exploration through ``--ray-address``, compared with the
    process backend; ``ray stop`` afterwards, whatever happens."""
    frames = 7_000
    want = tmp_path / "processes"
    r = cli(run_args(want, env="montezuma", seed=0, frames=frames, workers=2, resume=False))
    assert r.returncode == 0, r.stderr
    got = tmp_path / "cluster"
    args = run_args(got, env="montezuma", seed=0, frames=frames, workers=2, resume=False)
    args += ["--backend", "ray", "--ray-address", "127.0.0.1:6390"]
    ray = shlex.quote(str(Path(sys.executable).with_name("ray")))
    short = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must be short
    tmp = shlex.quote(short)
    script = (
        f"trap '{ray} stop --force >/dev/null 2>&1' EXIT; "
        f"{ray} start --head --node-ip-address 127.0.0.1 --port 6390 --num-cpus 1 "
        f"--include-dashboard false --temp-dir {tmp} --disable-usage-stats >/dev/null && "
        f"{ray} start --address 127.0.0.1:6390 --node-ip-address 127.0.0.1 --num-cpus 1 "
        f"--disable-usage-stats >/dev/null && "
        f"{goexplore(args)}"
    )
    # Ray 2.60's `ray start --head` turns token authentication on: every node and the
    # driver share one token
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    try:
        r = in_netns(script, timeout=900, **token)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert_same_run(got, want)
