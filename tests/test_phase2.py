"""Phase 2 end to end (torch and Stable-Baselines3: the ``[phase2]`` extra; these
run in ``make test-slow``): robustify a Phase 1 run of the example maze, resume it,
evaluate it from reset, and refuse bad input with one message and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from runutil import ROOT, cli_env

pytest.importorskip("stable_baselines3")
pytestmark = pytest.mark.phase2


def ge(*args, timeout=600):
    env = cli_env()
    env["PYTHONPATH"] = str(ROOT / "examples") + ":" + env["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("p2") / "run"
    r = ge(
        "run", "--env", "key_maze:make_env", "--env-kwargs", '{"max_steps": 100}', "--cells",
        "facts", "--episode-end", "game", "--total-frames", "100000", "--n-workers", "1",
        "--run-dir", d,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return d


def test_robustify_resume_and_evaluate(maze_run, tmp_path):
    out = tmp_path / "policy"
    args = ("robustify", maze_run, "--out", out, "--frames", "12000", "--ckpt-every", "4096",
            "--n-envs", "4", "--demos", "2")  # fmt: skip
    r = ge(*args)
    assert r.returncode == 0, r.stderr
    assert "start point moves back" in r.stdout  # the curriculum moved
    policy = json.loads((out / "policy.json").read_text())
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert policy["frames_trained"] == state["frames"] >= 12000
    assert policy["obs"] == "facts" and policy["sticky"] == 0.25
    assert policy["curriculum"] == state["curriculum"]
    points = [d["point"] for d in state["curriculum"]["demos"]]
    assert any(p < n - 1 for p, n in zip(points, policy["demo_lengths"]))
    # the weights are safetensors, the optimizer tensors only: no pickle
    from safetensors.torch import load_file

    assert load_file(str(out / "policy.safetensors"))
    rows = [json.loads(x) for x in (out / "curriculum.jsonl").read_text().splitlines()]
    assert rows[-1]["frames"] <= policy["frames_trained"] and (out / "curriculum.png").exists()

    # resuming a finished budget changes nothing: the same curriculum, read back
    r = ge(*args, "--resume")
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stderr
    again = json.loads((out / "policy.json").read_text())
    assert again["curriculum"] == state["curriculum"]
    # a bigger budget continues from the checkpoint, with its curriculum
    bigger = list(args)
    bigger[bigger.index("--frames") + 1] = "16000"
    r = ge(*bigger, "--resume", "--tensorboard")
    assert r.returncode == 0, r.stderr
    assert any((out / "tb").iterdir())  # the curriculum curve as TensorBoard scalars
    more = json.loads((out / "policy.json").read_text())
    assert more["frames_trained"] >= 16000
    assert all(
        b["point"] <= a["point"]
        for a, b in zip(state["curriculum"]["demos"], more["curriculum"]["demos"])
    )
    # a run dir with other settings is refused
    r = ge("robustify", maze_run, "--out", out, "--frames", "100", "--seed", "9", "--resume")
    assert r.returncode == 2 and "other settings (seed)" in r.stderr
    # flags left out take the run's own: only the budget is needed to go on
    r = ge("robustify", maze_run, "--out", out, "--frames", "16000", "--resume")
    assert r.returncode == 0 and "resumed from" in r.stdout, r.stderr

    ev = tmp_path / "eval.json"
    r = ge("evaluate", out, "--episodes", "3", "--json", ev, "--video", tmp_path / "ep.mp4")
    assert r.returncode == 0, r.stderr
    res = json.loads(ev.read_text())
    for k in ("episodes", "mean_score", "success_rate", "sticky", "frames_trained"):
        assert k in res, k
    assert res["episodes"] == len(res["scores"]) == 3 and res["sticky"] == 0.25
    assert "RL protocol" in res["protocol"] and (tmp_path / "ep.mp4").stat().st_size > 0


def test_the_no_demo_control_starts_every_episode_from_reset(maze_run, tmp_path):
    out = tmp_path / "control"
    r = ge("robustify", maze_run, "--out", out, "--frames", "3000", "--no-demo", "--n-envs", "2")
    assert r.returncode == 0, r.stderr
    policy = json.loads((out / "policy.json").read_text())
    assert policy["no_demo"] and policy["curriculum"] is None
    rows = [json.loads(x) for x in (out / "curriculum.jsonl").read_text().splitlines()]
    assert rows and all(row["from_end"] is None for row in rows)


def test_bad_input_is_one_message_and_nothing_written(tmp_path):
    zero = tmp_path / "zero"
    r = ge("run", "--env", "toy", "--total-frames", "2000", "--n-workers", "1", "--run-dir", zero)
    assert r.returncode in (0, 1), r.stderr
    final = json.loads((zero / "final.json").read_text())
    if final["best_score"] == 0:  # the toy scores little in 2,000 steps
        r = ge("robustify", zero, "--out", tmp_path / "o1")
        assert r.returncode == 2 and "no scoring trajectory" in r.stderr
        assert not (tmp_path / "o1").exists()
    r = ge("robustify", tmp_path / "nope", "--out", tmp_path / "o2")
    assert r.returncode == 2 and "not found" in r.stderr and not (tmp_path / "o2").exists()
    import torch

    if not torch.cuda.is_available():
        r = ge("robustify", zero, "--out", tmp_path / "o3", "--device", "cuda")
        assert r.returncode == 2 and "no CUDA device" in r.stderr
        assert not (tmp_path / "o3").exists()


def test_a_missing_extra_names_the_install(monkeypatch):
    import goexplore.phase2 as p2

    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import fails
    with pytest.raises(p2.GoExploreError, match=r"pip install 'goexplore\[phase2\]'"):
        p2.require()


def test_image_policy_weights_round_trip_through_safetensors(tmp_path):
    """SB3's CNN policy shares its feature extractor between heads; the checkpoint
    stores it once and loads back every tensor equal (Atari's 84x84 stacked frames)."""
    import torch

    from goexplore.phase2.robustify import _load_checkpoint, _save, build_model, make_venv

    spec = {"env": "montezuma", "env_kwargs": "", "obs": "atari84", "sticky": 0.25,
            "noops": 0, "end_on_life": True, "reward_scale": 0.01, "target": 100.0,
            "margin": 0.0}  # fmt: skip
    venv = make_venv(spec, 1, [], None, 0)
    a = build_model(spec, venv, 0, "cpu")
    _save(tmp_path / "ckpt", a, {"frames": 5, "curriculum": None})
    b = build_model(spec, venv, 1, "cpu")  # other initial weights
    assert _load_checkpoint(tmp_path / "ckpt", b)["frames"] == 5
    for (k, x), (_, y) in zip(a.policy.state_dict().items(), b.policy.state_dict().items()):
        assert torch.equal(x, y), k
    venv.close()


def test_the_same_seed_gives_the_same_policy_and_a_dataset_is_a_source(maze_run, tmp_path):
    """Seeded on CPU: two runs with the same seed write the same weights and the same
    curriculum. A demo dataset exported by `goexplore demo` is a source too: its demos
    replay to the run's, so training from it gives the same policy again."""
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        r = ge("robustify", maze_run, "--out", out, "--frames", "3000", "--n-envs", "2",
               "--demos", "1", "--device", "cpu")  # fmt: skip
        assert r.returncode == 0, r.stderr
        runs.append(out)
    a, b = ((p / "policy.safetensors").read_bytes() for p in runs)
    assert a == b
    ca, cb = (json.loads((p / "policy.json").read_text())["curriculum"] for p in runs)
    assert ca == cb

    ds_root = tmp_path / "datasets"
    r = ge("demo", maze_run, "--top", "1", "--out", ds_root, "--dataset-id", "test/maze/run-v0")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "from-dataset"
    r = ge("robustify", "test/maze/run-v0", "--dataset-root", ds_root, "--out", out,
           "--frames", "3000", "--n-envs", "2", "--demos", "1", "--device", "cpu")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (out / "policy.safetensors").read_bytes() == a
