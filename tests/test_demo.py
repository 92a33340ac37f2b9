"""``goexplore demo``: a run's best trajectories as a Minari dataset.

Checked against independent computations: the dataset is reloaded with
Minari itself and every demo's actions are replayed from reset in a fresh
env; diversity is measured by walking the experience log directly; damaged
datasets and bad input must fail by name and leave nothing behind."""

from __future__ import annotations

import os
import shutil
from types import SimpleNamespace
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import run_ours
from runutil import cli

from goexplore.envs import make_env
from goexplore.errors import CheckpointError, GoExploreError
from goexplore.export import build
from goexplore.export.build import export_demos
from goexplore.export.minari import datasets_root, load_demos
from goexplore.export.picks import LogTree, candidates, choose
from goexplore.phase1 import load_run

minari = pytest.importorskip("minari")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("demo") / "toy-run", 20_000)


def _run(d: Path, frames: int, env="toy") -> Path:
    run_ours(env, 3, frames, 1, run_dir=d).checkpoint()
    return d


def _entries_on_path(phase1, last: int) -> set[int]:
    out, i = set(), last
    while i >= 0:
        out.add(i)
        i = phase1.explog.entry(i)[0]
    return out


def _replay(env_name: str, actions, end_on_life=True):
    """(score, observations 84x84, lives, dones) of actions from reset, in a fresh env."""
    env = make_env(env_name)
    frame = env.reset()
    obs, lives, dones, score = (
        [cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)],
        [env.lives()],
        [],
        0.0,
    )
    for a in np.asarray(actions).tolist():
        frame, r, term, now = env.step(int(a))
        score += r
        dones.append(bool(term) or (end_on_life and now < lives[-1]))
        obs.append(cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA))
        lives.append(now)
    env.close()
    return score, np.stack(obs), np.array(lives), dones


def test_dataset_reloads_with_minari_and_replays_to_its_scores(toy_run, tmp_path):
    res = export_demos(toy_run, tmp_path, top=3, state_every=50, log=lambda *a: None)
    phase1 = load_run(toy_run)
    with datasets_root(tmp_path):
        ds = minari.load_dataset(res.dataset_id)
    assert ds.total_episodes == 3
    metas = list(ds.storage.get_episode_metadata(range(3)))
    scores = []
    for ep, meta in zip(ds.iterate_episodes(), metas):
        score, obs, lives, dones = _replay("toy", ep.actions)
        assert score == meta["score"] == ep.rewards.sum() > 0
        np.testing.assert_array_equal(ep.observations, obs)
        np.testing.assert_array_equal(ep.infos["lives"], lives)
        # an end-of-episode demo: its one termination is its last step, as the replay says
        assert dones[-1] and not any(dones[:-1])
        assert ep.terminations[-1] and not ep.terminations[:-1].any() and not ep.truncations.any()
        # the actions are the run's trajectory to that log entry
        np.testing.assert_array_equal(
            ep.actions, phase1.explog.trajectory(int(meta["explog_entry"]))
        )
        scores.append(score)
    # the best end-of-episode trajectories, best first: none scores more than the first
    done_scores = [s for s in phase1.archive.done_scores]
    assert scores[0] == max(done_scores) and scores == sorted(scores, reverse=True)
    info = ds.storage.metadata["goexplore"]
    # the toy has no emulator settings, no Gymnasium spec and needs no package
    assert info["game"] == "toy" and info["env_settings"] == {} and info["requirements"] == []
    assert info["env_id"] is None and ds.spec.env_spec is None
    assert info["run_config"]["seed"] == 3 and "sticky" in info["protocol"]


def test_stored_states_start_the_env_anywhere_along_a_demo(toy_run, tmp_path):
    res = export_demos(toy_run, tmp_path, top=2, state_every=40, log=lambda *a: None)
    demos = load_demos(res.dataset_id, root=tmp_path)
    for e, ep in enumerate(demos.dataset.iterate_episodes()):
        states = demos.states(e)
        assert [s for s, _ in states] == list(range(0, len(ep.actions), 40))
        step, blob = states[-1]
        env = make_env("toy")
        env.reset()
        env.restore_state(blob)
        rest = [env.step(int(a))[1] for a in ep.actions[step:]]
        np.testing.assert_array_equal(rest, ep.rewards[step:])
        env.close()


def test_diverse_picks_share_less_of_their_paths(toy_run, tmp_path):
    phase1 = load_run(toy_run)
    plain = export_demos(toy_run, tmp_path, top=4, log=lambda *a: None)
    div = export_demos(
        toy_run, tmp_path, top=4, diverse=True, dataset_id="tests/diverse-v0", log=lambda *a: None
    )

    def shared_fraction(metas) -> float:
        """Mean over picks after the first: the share of its steps on earlier picks' paths."""
        seen: set[int] = set()
        fracs = []
        for m in metas:
            path = _entries_on_path(phase1, m["explog_entry"])
            if seen:
                fracs.append(len(path & seen) / len(path))
            seen |= path
        return float(np.mean(fracs))

    assert len({m["explog_entry"] for m in div.demos}) == 4
    assert shared_fraction(div.demos) <= shared_fraction(plain.demos)
    # the recorded shared steps are what the log walk says
    seen: set[int] = set()
    for m in div.demos:
        path = _entries_on_path(phase1, m["explog_entry"])
        assert m["shared_steps"] == len(path & seen)
        seen |= path
    # diversity never drops below the plain top-K's worst score
    assert min(m["score"] for m in div.demos) >= min(m["score"] for m in plain.demos)
    # and the demos really differ as action sequences
    acts = [phase1.explog.trajectory(m["explog_entry"]).tobytes() for m in div.demos]
    assert len(set(acts)) == 4


def _tree(episodes):
    """An experience log from (start entry, rewards, done flags) episodes."""
    prev, rew, done = [], [], []
    for start, rs, ds in episodes:
        for j, (r, d) in enumerate(zip(rs, ds)):
            prev.append(start if j == 0 else len(prev) - 1)
            rew.append(r)
            done.append(d)
    return LogTree(
        {"prev": np.array(prev), "rew": np.array(rew, np.float32), "done": np.array(done, np.uint8)}
    )


def test_diverse_choice_on_a_known_tree():
    # A: entries 0..9 from the root, 100 points at entry 5, episode end at 9 (10 steps)
    # B: from entry 8, two steps, end at 11: 11 steps, 9 of them on A's path
    # C: from entry 5, five steps, end at 16: 11 steps, 6 of them on A's path
    # D: from entry 2, two steps, end at 18: 0 points (not a candidate)
    tree = _tree(
        [
            (-1, [0] * 5 + [100] + [0] * 4, [0] * 9 + [1]),
            (8, [0, 0], [0, 1]),
            (5, [0] * 5, [0] * 4 + [1]),
            (2, [0, 0], [0, 1]),
        ]
    )
    np.testing.assert_array_equal(tree.depth[[9, 11, 16, 18]], [10, 11, 11, 5])
    np.testing.assert_array_equal(tree.score[[4, 5, 11, 16, 18]], [0, 100, 100, 100, 0])
    pool = candidates(tree, SimpleNamespace(done_id=-1), "done")
    assert [(p.last, p.length) for p in pool] == [(9, 10), (11, 11), (16, 11)]
    assert [p.last for p in choose(tree, pool, 2, diverse=False)] == [9, 11]
    picked = choose(tree, pool, 2, diverse=True)
    assert [(p.last, p.shared) for p in picked] == [(9, 0), (16, 6)]
    assert [(p.last, p.shared) for p in choose(tree, pool, 3, diverse=True)] == [
        (9, 0),
        (16, 6),
        (11, 9),
    ]


def test_best_cells_end_in_a_truncation(toy_run, tmp_path):
    res = export_demos(toy_run, tmp_path, top=3, select="best", log=lambda *a: None)
    phase1 = load_run(toy_run)
    a = phase1.archive
    best = sorted((-float(a.score[i]), int(a.traj_len[i])) for i in range(a.n) if a.score[i] > 0)[
        :3
    ]
    assert [(-m["score"], m["length"]) for m in res.demos] == best
    demos = load_demos(res.dataset_id, root=tmp_path)
    for ep, m in zip(demos.dataset.iterate_episodes(), res.demos):
        assert ep.truncations[-1] != m["ends_episode"] and ep.terminations[-1] == m["ends_episode"]


def _left_behind(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*")] if root.exists() else []


def test_bad_input_is_named_and_leaves_nothing(toy_run, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(GoExploreError, match=r"--top 100000: .* has only \d+ scoring"):
        export_demos(toy_run, out, top=100_000, log=lambda *a: None)
    assert not out.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(GoExploreError, match="--out .*a-file/sub: cannot write"):
        export_demos(toy_run, blocker / "sub", top=1, log=lambda *a: None)
    with pytest.raises(GoExploreError, match="not a Minari id"):
        export_demos(toy_run, out, top=1, dataset_id="bad id!", log=lambda *a: None)
    # an existing id: refused, the first dataset untouched
    first = export_demos(toy_run, out, top=1, dataset_id="tests/once-v0", log=lambda *a: None)
    before = sorted(_left_behind(out))
    with pytest.raises(GoExploreError, match="already exists"):
        export_demos(toy_run, out, top=2, dataset_id="tests/once-v0", log=lambda *a: None)
    assert sorted(_left_behind(out)) == before
    assert len(load_demos(first.dataset_id, root=out)) == 1


def test_a_run_with_no_scoring_trajectory_is_refused(tmp_path):
    run = _run(tmp_path / "short", 2_000, env="montezuma")  # no points in 2,000 steps
    assert load_run(run).archive.max_archive_score == 0
    out = tmp_path / "out"
    with pytest.raises(GoExploreError, match="no scoring end-of-episode trajectories"):
        export_demos(run, out, top=1, log=lambda *a: None)
    with pytest.raises(GoExploreError, match="no scoring cells"):
        export_demos(run, out, top=1, select="best", log=lambda *a: None)
    assert not out.exists()


def test_a_pick_that_does_not_replay_to_its_score_is_refused(toy_run, tmp_path, monkeypatch):
    real = build.record

    def off_by_one(*args, **kw):
        demo, score, early, done = real(*args, **kw)
        return demo, score + (1 if kw.get("video") is None and len(args[1]) % 2 else 0), early, done

    monkeypatch.setattr(build, "record", off_by_one)
    phase1 = load_run(toy_run)
    with pytest.raises(GoExploreError, match=r"refusing .*\n  demo \d+ \(episode end \(log entry"):
        export_demos(toy_run, tmp_path / "out", top=6, log=lambda *a: None)
    assert not (tmp_path / "out").exists()
    del phase1


def test_a_damaged_dataset_is_named_by_the_loader(toy_run, tmp_path):
    res = export_demos(toy_run, tmp_path, top=2, log=lambda *a: None)
    pristine = tmp_path / "pristine"
    shutil.copytree(res.path, pristine)

    def restore():
        shutil.rmtree(res.path)
        shutil.copytree(pristine, res.path)

    hdf5 = res.path / "data" / "main_data.hdf5"
    with open(hdf5, "r+b") as f:
        f.truncate(os.path.getsize(hdf5) // 2)
    with pytest.raises(CheckpointError, match=r"main_data\.hdf5: .* bytes, the manifest says"):
        load_demos(res.dataset_id, root=tmp_path)
    restore()
    states = res.path / "goexplore" / "states.npz"
    data = bytearray(states.read_bytes())
    data[len(data) // 2] ^= 0xFF
    states.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"states\.npz: contents differ"):
        load_demos(res.dataset_id, root=tmp_path)
    restore()
    (res.path / "data" / "metadata.json").unlink()
    with pytest.raises(CheckpointError, match=r"metadata\.json: missing"):
        load_demos(res.dataset_id, root=tmp_path)
    restore()
    assert len(load_demos(res.dataset_id, root=tmp_path)) == 2


def test_cli_demo_with_videos(toy_run, tmp_path):
    from goexplore.report.media import count_video_frames

    r = cli(["demo", str(toy_run), "--top", "2", "--diverse", "--video", "--out", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    assert "minari.load_dataset('goexplore/toy/toy-run-v0')" in r.stdout
    demos = load_demos("goexplore/toy/toy-run-v0", root=tmp_path)
    for i, ep in enumerate(demos.dataset.iterate_episodes()):
        assert (
            count_video_frames(demos.path / "goexplore" / f"demo_{i:02d}.mp4")
            == len(ep.actions) + 1
        )
    r = cli(["demo", str(toy_run), "--top", "0", "--out", str(tmp_path)])
    assert r.returncode == 2 and "--top 0: must be at least 1" in r.stderr


def test_atari_demos_replay_in_the_recorded_gymnasium_env(tmp_path):
    """On ALE: the dataset's env spec rebuilds the env the demos were played in
    (frameskip 4, no sticky actions, reset seed 0); its actions, stepped through
    plain Gymnasium, earn the stored rewards."""
    run = _run(tmp_path / "centipede", 4_000, env="centipede")  # points in the first steps
    res = export_demos(run, tmp_path / "ds", top=1, select="best", log=lambda *a: None)
    demos = load_demos(res.dataset_id, root=tmp_path / "ds")
    env = demos.dataset.recover_environment()
    for ep, meta in zip(demos.dataset.iterate_episodes(), res.demos):
        obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(
            cv2.resize(obs, (84, 84), interpolation=cv2.INTER_AREA), ep.observations[0]
        )
        rewards = [env.step(int(a))[1] for a in ep.actions]
        np.testing.assert_array_equal(rewards, ep.rewards)
        assert sum(rewards) == meta["score"] > 0
    env.close()


def test_a_relative_out_path_works(toy_run, tmp_path, monkeypatch):
    """``--out runs/x`` is relative to where the command runs (Minari resolves
    relative roots against its own path; the export must not pass one on)."""
    monkeypatch.chdir(tmp_path)
    res = export_demos(toy_run, Path("runs/x"), top=1, log=lambda *a: None)
    assert res.path.is_absolute() and res.path.is_relative_to(tmp_path / "runs" / "x")
    assert len(load_demos(res.dataset_id, root=tmp_path / "runs" / "x")) == 1
    assert not [p for p in (tmp_path / "runs" / "x").iterdir() if p.name.startswith(".")]
