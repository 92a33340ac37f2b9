"""The experience log holds exactly the entries of the episodes appended to it,
whether an episode fits its chunk or crosses one or more chunk boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goexplore.explog import ExperienceLog

episode = st.tuples(
    st.integers(0, 40),  # steps
    st.integers(-1, 10_000),  # prev of the first step
    st.lists(
        st.tuples(st.integers(0, 39), st.sampled_from([1.0, 100.0, -5.0, 0.5])),
        max_size=4,
        unique_by=lambda x: x[0],
    ),
    st.booleans(),  # the last step ended it
)


def expected_entries(episodes) -> dict[str, list]:
    """The log built one entry at a time, as the reference does."""
    out = {"prev": [], "act": [], "rew": [], "done": []}
    for n, prev0, rewards, done_last, actions in episodes:
        r = dict((t, v) for t, v in rewards if t < n)
        for i in range(n):
            out["prev"].append(prev0 if i == 0 else len(out["prev"]) - 1)
            out["act"].append(int(actions[i]))
            out["rew"].append(r.get(i, 0.0))
            out["done"].append(int(done_last and i == n - 1))
    return out


@settings(max_examples=80, deadline=None)
@given(
    eps=st.lists(episode, min_size=1, max_size=25),
    chunk=st.sampled_from([7, 32, 1000]),
    seed=st.integers(0, 2**16),
)
def test_log_holds_every_appended_entry(eps, chunk, seed):
    rng = np.random.default_rng(seed)
    log = ExperienceLog(None, chunk_size=chunk)
    full, count = [], 0
    for n, prev0, rewards, done_last in eps:
        actions = rng.integers(0, 18, n).astype(np.uint8)
        kept = [(t, v) for t, v in rewards if t < n]
        rew_t = np.array([t for t, _ in kept], np.int32)
        rew_v = np.array([v for _, v in kept], np.float64)
        first = log.append_episode(prev0, actions, rew_t, rew_v, done_last)
        assert first == count
        count += n
        full.append((n, prev0, kept, done_last, actions))
    got = log.all_entries()
    want = expected_entries(full)
    assert log.count == count and log.n_flushed == count // chunk
    for name in want:
        np.testing.assert_array_equal(
            got[name], np.array(want[name], got[name].dtype), err_msg=name
        )


def test_an_interrupt_mid_write_is_raised_as_the_interrupt(tmp_path, monkeypatch):
    """A second Ctrl-C while a chunk's member is being written: the caller sees the
    KeyboardInterrupt (and stops as asked), not zipfile's complaint about an open
    writing handle."""
    import zipfile

    import goexplore.explog as explog

    def interrupted(self):
        raise KeyboardInterrupt  # arrives while the member's handle is being closed

    monkeypatch.setattr(zipfile._ZipWriteFile, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        explog.write_npz_atomic(tmp_path / "c.npz", {"a": np.zeros(3)})
    import gc
    import sys

    monkeypatch.setattr(sys, "unraisablehook", lambda u: None)  # the broken zip's __del__
    gc.collect()
