"""The archive against slow, obvious oracles of the reference's rules.

* The accept rule: episodes are reduced by the real worker code
  (:func:`goexplore.episode.explore`, against views that lag a batch, through
  the wire format) and applied per episode by :meth:`Archive.apply`; the
  oracle walks every step with the reference's per-step rule on a plain dict.
* Selection: :meth:`Archive.sample` against the reference's Python walk, over
  batches of random ``seen`` changes (full and partial running sums).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracles import reference_sample

from goexplore.archive import Archive
from goexplore.selection import SelectionParams
from goexplore.testing import synthetic_archive
from goexplore.cells import DONE_KEY, make_cells
from goexplore.codec import StateCodec
from goexplore.config import Config
from goexplore.envs import make_env
from goexplore.errors import CheckpointError
from goexplore.episode import explore
from goexplore.wire import EpisodeResult, Task, WorkerView

KEY_SIZE, N_FACTS = 6, 2


# --- a scripted world -----------------------------------------------------------------------
class ScriptEnv:
    """Plays back a scripted episode whatever the actions: per step
    (key, reward, lives, terminated). The state at step t of task i is
    b"i:t", so the test can tell which snapshot a cell holds."""

    n_actions = 3
    fact_names = ("room", "t")
    room_fact, level_fact = "room", None

    def __init__(self):
        self.script, self.task, self.t = [], -1, 0

    def restore_state(self, state):
        self.t = 0

    def step(self, action):
        key, reward, lives, term = self.script[self.t]
        self.t += 1
        return key, reward, term, lives

    def clone_state(self):
        return f"{self.task}:{self.t - 1}".encode()

    def facts(self):
        key = self.script[self.t - 1][0]
        return (key[0] % 4, self.t - 1)


class KeyCells:
    key_size = KEY_SIZE
    needs_context = False

    def key(self, frame):
        return frame

    def keyer(self, start_key=b""):
        return lambda frame, facts: frame


class Identity:
    dictionary = None

    def compress(self, raw):
        return bytes(raw)

    def decompress(self, blob):
        return blob


def _key(j: int) -> bytes:
    return bytes([j % 9] * (KEY_SIZE - 1) + [j // 9])


# --- the reference rule, per step, on a dict ---------------------------------------------------
class Oracle:
    def __init__(self, root_key, root_state, lives, seen_start=False):
        self.seen_start = seen_start  # the Nature rule: the start cell counts once
        self.cells = {
            root_key: dict(
                score=0.0,
                traj_len=0,
                traj_last=-1,
                seen=0,
                chosen=0,
                chosen_since_new=0,
                lives=lives,
                state=root_state,
                facts=(0, 0),
            )
        }
        self.done_scores, self.rooms = [], set()

    def sample(self, n, rng):
        keys = [k for k in self.cells if k != DONE_KEY]
        picks = reference_sample(
            np.array([self.cells[k]["seen"] for k in keys]), np.zeros(len(keys), bool), n, rng
        )
        out = []
        for j in picks:
            c = self.cells[keys[j]]
            c["chosen"] += 1
            c["chosen_since_new"] += 1
            out.append((keys[j], dict(c)))
        return out

    def apply(self, chosen_key, cap, steps, task, first_entry):
        """steps: per step (key, reward, lives, done, facts) as the env produced them."""
        score, length, prev = cap["score"], cap["traj_len"], cap["traj_last"]
        found, seen_ep = False, set()
        if self.seen_start:  # the original code: seen_cells = {start}; start.seen += 1
            self.cells[chosen_key]["seen"] += 1
            seen_ep.add(chosen_key)
        for t, (key, reward, lives, done, facts) in enumerate(steps):
            prev = first_entry + t
            score += reward
            length += 1
            self.rooms.add(facts[0])
            k = DONE_KEY if done else key
            c = self.cells.get(k)
            entry = dict(
                score=score,
                traj_len=length,
                traj_last=prev,
                lives=lives,
                state=f"{task}:{t}".encode(),
                facts=facts,
            )
            if c is None:
                self.cells[k] = dict(entry, seen=1, chosen=0, chosen_since_new=0)
                seen_ep.add(k)
                found = True
            else:
                if k not in seen_ep:
                    c["seen"] += 1
                    seen_ep.add(k)
                if score > c["score"] or (score == c["score"] and length < c["traj_len"]):
                    c.update(entry, seen=0, chosen=0, chosen_since_new=0)
                    found = True
            if done:
                self.done_scores.append(score)
                break
        if found:
            self.cells[chosen_key]["chosen_since_new"] = 0


def _table(a: Archive):
    return [
        dict(
            key=a.key_of(i),
            score=float(a.score[i]),
            traj_len=int(a.traj_len[i]),
            traj_last=int(a.traj_last[i]),
            seen=int(a.seen[i]),
            chosen=int(a.chosen[i]),
            chosen_since_new=int(a.chosen_since_new[i]),
            lives=int(a.lives[i]),
            state=a.state(i),
            facts=tuple(int(x) for x in a.facts[i]),
        )
        for i in range(a.n)
    ]


def _oracle_table(o: Oracle):
    return [
        dict(key=k, **{f: (tuple(v) if f == "facts" else v) for f, v in c.items()})
        for k, c in o.cells.items()
    ]


step_st = st.tuples(
    st.integers(0, 11),  # key (a small pool: revisits)
    st.sampled_from([0.0, 0.0, 0.0, 1.0, 2.0, -1.0, 100.0]),
    st.sampled_from(["", "", "", "", "", "", "life", "over"]),
)
episode_st = st.lists(step_st, min_size=1, max_size=10)
batches_st = st.lists(st.lists(episode_st, min_size=1, max_size=6), min_size=1, max_size=5)


def run_both(batches, seed, view_lag=True, seen_start=False):
    env, cells, codec = ScriptEnv(), KeyCells(), Identity()
    root = _key(0)
    a = Archive(KEY_SIZE, N_FACTS, capacity=2, params=SelectionParams(seen_start=seen_start))
    a.add(root, b"root", 0.0, 0, -1, 3, (0, 0))
    o = Oracle(root, b"root", 3, seen_start=seen_start)
    view = WorkerView()
    view.apply(a.full_view())
    a.views_synced()
    rng_a, rng_o = np.random.default_rng(seed), np.random.default_rng(seed)
    entries = 0
    task_no = 0
    for batch in batches:
        cap = a.sample(len(batch), rng_a)
        picks = o.sample(len(batch), rng_o)
        assert [a.key_of(int(i)) for i in cap.ids] == [k for k, _ in picks]
        delta = a.take_delta()
        view.apply(delta if view_lag else a.full_view())
        for i, script in enumerate(batch):
            lives0 = int(cap.lives[i])
            steps, env_script = [], []
            for kj, reward, event in script:
                lives = lives0 - 1 if event == "life" else lives0
                env_script.append((_key(kj), reward, lives, event == "over"))
            env.script, env.task = env_script, task_no
            task = Task(
                i,
                cap.states[i],
                lives0,
                float(cap.score[i]),
                int(cap.length[i]),
                seed=task_no,
                steps=len(script),
            )
            res = explore(env, cells, codec, view, task, repeat_p=0.9)
            res = EpisodeResult.decode(res.encode())  # through the wire format
            for t in range(res.n):
                key, reward, lives, term = env_script[t]
                done = term or lives < lives0
                steps.append((key, reward, lives, done, (key[0] % 4, t)))
            assert res.n == len(steps) and (res.done == steps[-1][3])
            a.apply(
                int(cap.ids[i]),
                float(cap.score[i]),
                int(cap.length[i]),
                int(cap.last[i]),
                res,
                entries,
            )
            o.apply(picks[i][0], picks[i][1], steps, task_no, entries)
            entries += res.n
            task_no += 1
        assert _table(a) == _oracle_table(o)
        assert list(a.done_scores) == o.done_scores[-200:] and a.rooms == o.rooms
        assert a.n_done_episodes == len(o.done_scores)
    return a, o


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches_st, seed=st.integers(0, 2**32 - 1))
def test_accept_rule_equals_per_step_reference(batches, seed):
    run_both(batches, seed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches_st, seed=st.integers(0, 2**32 - 1))
def test_seen_start_equals_the_per_step_nature_rule(batches, seed):
    """--seen-start: the chosen cell counts once per episode, as visited before its
    first step (the original code's per-step loop), also when the episode comes back
    to it or improves it."""
    run_both(batches, seed, seen_start=True)


def test_seen_start_counts_the_start_cell_once():
    a_ref, _ = run_both([[[(1, 0.0, "")]]], 0)
    a_nat, _ = run_both([[[(1, 0.0, "")]]], 0, seen_start=True)
    root = 0  # picked (the only cell), then an episode that never comes back to it
    assert a_ref.seen[root] == 0 and a_nat.seen[root] == 1
    a_nat, _ = run_both([[[(0, 0.0, ""), (1, 0.0, ""), (0, 0.0, "")]]], 0, seen_start=True)
    assert a_nat.seen[root] == 1  # back to it twice: still once


def test_accept_rule_cases():
    """Hand-picked: a new cell revisited with a higher score (seen 0), a cell
    first found by an earlier task of the same batch, DONE, equal scores."""
    new_then_better = [[(1, 0.0, ""), (2, 0.0, ""), (1, 5.0, ""), (1, 0.0, "")]]
    same_batch = [
        [(3, 0.0, ""), (3, 1.0, "")],
        [(3, 2.0, ""), (4, 0.0, "life")],
        [(3, 0.0, ""), (5, 0.0, "over")],
    ]
    ties = [[(6, 0.0, ""), (7, 0.0, "")], [(7, 0.0, "")], [(2, -1.0, ""), (2, 1.0, "")]]
    a, o = run_both([new_then_better, same_batch, ties, same_batch], seed=1)
    assert a.done_id >= 0 and any(c["seen"] == 0 for c in o.cells.values())


def test_stale_view_sends_superset():
    """Views that are a whole run behind still give the reference's result."""
    rng = np.random.default_rng(0)
    batches = [
        [
            [
                (int(rng.integers(12)), float(rng.integers(3)), "")
                for _ in range(int(rng.integers(1, 9)))
            ]
            for _ in range(5)
        ]
        for _ in range(6)
    ]
    run_both(batches, seed=3, view_lag=True)


# --- selection ---------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), batches=st.integers(1, 6))
def test_sample_equals_reference_walk(seed, n, batches):
    rng = np.random.default_rng(seed)
    a = Archive(KEY_SIZE, N_FACTS, capacity=2)
    done_at = int(rng.integers(n + 1))
    for i in range(n + 1):
        key = DONE_KEY if i == done_at else rng.integers(0, 9, KEY_SIZE, np.uint8).tobytes()
        if i != done_at and a.lookup(key) >= 0:
            continue
        a.add(key, b"s", 0.0, 0, -1, 3, (0, 0))
    if a.n == 1 and a.is_done[0]:
        return
    a.seen[: a.n] = rng.integers(0, 50, a.n)
    a._touched.append(np.arange(a.n))
    g1, g2 = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    for b in range(batches):
        cap = a.sample(100, g1)
        ref = reference_sample(a.seen[: a.n].copy(), a.is_done[: a.n].copy(), 100, g2)
        assert cap.ids == ref
        # the running sum is bit-identical to the reference's np.cumsum over non-DONE cells
        live = ~a.is_done[: a.n]
        ref_csum = np.cumsum(np.array([1.0 / np.sqrt(s + 1.0) for s in a.seen[: a.n][live]]))
        assert a.csum[: a.n][live].tobytes() == ref_csum.tobytes()
        # change some seen counts: sometimes only late cells (partial running sum)
        lo = 0 if b % 2 else int(rng.integers(a.n))
        ids = np.unique(rng.integers(lo, a.n, 5))
        a.seen[ids] += rng.integers(1, 4, len(ids))
        a._touched.append(ids)
        if b == 2:  # new cells appended
            for _ in range(3):
                key = rng.integers(0, 9, KEY_SIZE, np.uint8).tobytes()
                if a.lookup(key) < 0:
                    a.add(key, b"s", 0.0, 0, -1, 3, (0, 0))


def test_sample_large_archive_equals_reference():
    a = synthetic_archive(20_000, seed=4)
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(3):
        cap = a.sample(100, g1)
        assert cap.ids == reference_sample(a.seen[: a.n], a.is_done[: a.n], 100, g2)
        ids = np.unique(np.random.default_rng(1).integers(15_000, 20_000, 50))
        a.seen[ids] += 1
        a._touched.append(ids)


# --- storage -----------------------------------------------------------------------------------
def test_index_states_and_checkpoint_arrays_round_trip():
    rng = np.random.default_rng(0)
    a = Archive(88, 5, capacity=2)
    keys = []
    while len(keys) < 3000:
        k = rng.integers(0, 9, 88, np.uint8).tobytes()
        if a.lookup(k) < 0:
            a.add(
                k,
                bytes(rng.integers(0, 256, int(rng.integers(1, 200)), np.uint8)),
                1.0,
                1,
                1,
                3,
                (1, 2, 3, 4, 5),
            )
            keys.append(k)
    a.add(DONE_KEY, b"done", 5.0, 9, 9, 0, (0,) * 5)
    assert [a.lookup(k) for k in keys] == list(range(3000))
    assert a.lookup(DONE_KEY) == 3000 and a.key_of(3000) == DONE_KEY
    assert a.lookup(bytes(88)) == -1 and a.lookup(bytes([16] * 88)) == -1
    assert a.lookup(b"short") == -1
    states = a.states
    for i in rng.integers(0, 3000, 2000).tolist():  # replacements: in place, appended, compacted
        a._replace(i, bytes([i % 251]) * int(rng.integers(1, 300)), 2.0, 2, 2, 3, (0,) * 5)
        states[i] = a.state(i)
    assert a.states == states
    b = Archive.from_arrays(88, 5, a.to_arrays(), a.state_blobs())
    assert b.states == states and b.done_id == 3000
    assert [b.lookup(k) for k in keys] == list(range(3000))
    for name in Archive.ARRAYS:
        np.testing.assert_array_equal(
            getattr(b, name)[: b.n] if name != "keys" else b.keys, a.to_arrays()[name]
        )
    arrays = a.to_arrays()
    arrays["keys"][5] = arrays["keys"][7]
    with pytest.raises(CheckpointError):
        Archive.from_arrays(88, 5, arrays, a.state_blobs())


def test_keys_with_big_values_leave_nibble_packing():
    a = Archive(4, 1)
    small = [bytes(4)] + [bytes([1, 2, 3, i]) for i in range(1, 10)]  # an all-zero key too
    for k in small:
        a.add(k, b"x", 0.0, 0, -1, 1, (0,))
    big = bytes([200, 17, 3, 1])
    a.add(big, b"y", 0.0, 0, -1, 1, (0,))
    assert [a.lookup(k) for k in small + [big]] == list(range(11))
    assert a.key_of(10) == big and a.keys[3].tobytes() == small[3]
    b = Archive.from_arrays(4, 1, a.to_arrays(), a.state_blobs())
    assert [b.lookup(k) for k in small + [big]] == list(range(11))


def _raw(**values) -> dict:
    """An episode result with every schema field empty except ``values``."""
    from goexplore.wire import EPISODE

    raw = {f.name: (0 if f.size == "episode" else []) for f in EPISODE}
    raw.update(actions=bytearray(), done=False, final_score=0.0)
    raw.update(values)
    return raw


def test_several_results_in_one_message():
    from goexplore.wire import EPISODE, decode_results, encode_results

    raws = [
        _raw(
            index=4,
            actions=bytearray([1, 1, 2]),
            done=True,
            final_score=7.0,
            rew_t=[1],
            rew_v=[7.0],
            seen_ids=[3, 9],
            seen_steps=[2, 1],
            rooms=[0, 2],
        ),
        _raw(
            index=5,
            actions=bytearray([0] * 5),
            rooms=[1],
            cand_ids=[-1, 4],
            cand_steps=[3, 2],
            cand_t=[2, 3],
            cand_first=[True, False],
            cand_score=[1.5, 2.0],
            cand_lives=[3, 2],
            cand_facts=[(1, 2), (3, 4)],
            cand_states=[b"s1", b"state2"],
            cand_frames=[b"", b"frame"],
            new_keys=[b"k" * KEY_SIZE],
        ),
        _raw(index=6, new_keys=[b"", b"x"], sample_frames=[b"f"]),
    ]
    got = decode_results(encode_results(raws, 2))
    assert [r.index for r in got] == [4, 5, 6]
    for r, raw in zip(got, raws):
        back = r.raw()
        assert set(back) == {f.name for f in EPISODE}
        for name, want in raw.items():
            want = bytes(want) if name == "actions" else want
            assert back[name] == want, name
        assert r.n == len(raw["actions"])
    # one result round-trips alone as well
    assert decode_results(got[1].encode())[0].raw() == got[1].raw()


def test_the_schema_drives_the_wire():
    """Every field the worker produces is in the schema and survives the wire;
    a field missing from a raw result is an error, not a silent zero."""
    from goexplore.episode import explore_raw
    from goexplore.wire import EPISODE, decode_results, encode_results

    cfg = Config(env="toy", seed=1)
    env, cells = make_env("toy"), make_cells(cfg)
    env.reset()
    task = Task(0, StateCodec().compress(env.clone_state()), env.lives(), 0.0, 0, 7, 100)
    raw = explore_raw(env, cells, StateCodec(), WorkerView(), task, 0.95)
    assert list(raw) == [f.name for f in EPISODE]
    (res,) = decode_results(encode_results([raw], len(env.fact_names)))
    back = res.raw()
    for name, want in raw.items():
        if name == "actions":
            want = bytes(want)
        elif name == "cand_facts":
            want = [tuple(f) for f in want]
        assert back[name] == want, name
    del raw["rooms"]
    with pytest.raises(KeyError, match="rooms"):
        encode_results([raw], len(env.fact_names))


@pytest.mark.parametrize("n", [1, 2, 7, 100, 101])
def test_task_seeds_drawn_at_once_equal_one_call_per_task(n):
    """Phase1 draws a batch's task seeds with one call; the reference makes one
    call per task. Same numbers, same generator state after."""
    for seed in range(10):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        a.random(n), b.random(n)
        assert [int(a.integers(2**31)) for _ in range(n)] == b.integers(2**31, size=n).tolist()
        assert a.bit_generator.state == b.bit_generator.state


def test_results_of_a_game_without_facts_cross_the_wire():
    from goexplore.wire import decode_results, encode_results

    raw = _raw(index=1, actions=bytearray([2, 3]), cand_ids=[-1], cand_steps=[2], cand_t=[1],
               cand_first=[True], cand_score=[5.0], cand_lives=[3], cand_facts=[()],
               cand_states=[b"s"], cand_frames=[b""], new_keys=[b"k"])  # fmt: skip
    (res,) = decode_results(encode_results([raw], 0))
    assert res.cand_facts.shape == (1, 0) and res.raw()["cand_facts"] == [()]


def test_a_short_column_is_refused_not_shifted():
    """A candidate column with fewer items than its group would misalign every later
    column of the message: the encoder names it instead."""
    from goexplore.wire import encode_results

    raw = _raw(
        actions=bytearray([1]),
        cand_ids=[-1],
        cand_steps=[1],
        cand_t=[0],
        cand_first=[True],
        cand_score=[0.0],
        cand_lives=[3],
        cand_facts=[(1, 2)],
        cand_states=[b"s"],
        new_keys=[b"k"],
    )  # no cand_frames
    with pytest.raises(ValueError, match="cand_frames"):
        encode_results([raw], 2)


@pytest.mark.parametrize("score", [0.0, 1.0])
def test_region_weights_stay_equal_to_a_count_from_scratch(score):
    """Cells move between regions, new ones arrive and counters change, batch after
    batch: the kept weights and running sum equal the weight without the region term
    divided by each region's size counted here, with and without the score term."""
    a0 = synthetic_archive(300, key_size=8, seed=3)
    arrays = a0.to_arrays()
    states = [a0.state(i) for i in range(a0.n)]
    params = SelectionParams(steps=(1.0, 0.5), score=score, region=1.0)
    plain = SelectionParams(steps=(1.0, 0.5), score=score)  # (picks change neither)
    a = Archive.from_arrays(8, 5, arrays, states, params=params)
    ref = Archive.from_arrays(8, 5, arrays, states, params=plain)
    rng = np.random.default_rng(0)
    region = {i: int(rng.integers(6)) for i in range(a.n) if not a.is_done[i]}
    for i, r in region.items():
        a.set_region(i, bytes([r]))
    gen = np.random.default_rng(1)
    for step in range(12):
        for i in rng.choice(sorted(region), 10, replace=False).tolist():  # moves
            region[i] = int(rng.integers(6 + step))
            a.set_region(i, bytes([region[i]]))
        ids = rng.integers(0, a.n, 40)
        ids = ids[~a.is_done[ids]]
        a.add_visits(ids)
        ref.add_visits(ids)
        key = rng.integers(9, 256, 8, dtype=np.uint8).tobytes()  # (synthetic keys: 0..8)
        s = float(rng.integers(3))
        for b in (a, ref):
            j = b.add(key, b"\x01s", s, 5, 0, 5, [0] * 5)
        region[j] = int(rng.integers(6 + step))
        a.set_region(j, bytes([region[j]]))
        a.sample(20, gen)
        ref.sample(20, np.random.default_rng(1))
        size = np.bincount(list(region.values()))
        n = a.n
        want = ref.weights_of(np.arange(n)) / np.array(
            [size[region[i]] if i in region else 1 for i in range(n)]
        )
        np.testing.assert_array_equal(a.weight[:n], a.weights_of(np.arange(n)))
        np.testing.assert_allclose(a.weight[:n], want, rtol=1e-12)
        np.testing.assert_array_equal(a.cumulative_weights(), np.cumsum(a.weight[:n]))
