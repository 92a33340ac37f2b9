"""One exploration episode, on the worker side: restore -> act -> compact result.

The worker holds a *view* of the archive as it was at the start of the batch
(key -> id, and per id the score and trajectory length), kept current by the
deltas the master sends (docs/architecture.md). The worker reduces its episode
to what the master's accept rule needs, per cell visited (the reference rule,
:mod:`goexplore.archive.accept`):

* within one episode the trajectory grows by one step per step, so of all the
  visits to a cell the one that can end up stored is its *best visit*: the
  earliest one with the highest score;
* the view can only be weaker than the master's live archive (entries only
  ever improve), so a best visit that does not beat the view cannot beat the
  live entry either: for such a cell the master only counts the visit
  (``seen``), and the worker sends just the cell's id;
* every other best visit (one that beats the view, or a cell unknown to the
  view) is a *candidate*: the worker sends its step, score, lives, facts and
  emulator state, cloned at that step. Cells unknown to the view are sent by
  key (they may have been added by an earlier task of the same batch).

This is a superset of what the master accepts, so the decisions stay exactly
the reference's. Per agent step only the action travels (one byte), plus the
nonzero rewards; the states sent are only for candidates. The result's fields
are the schema :data:`goexplore.wire.EPISODE`.
"""

from __future__ import annotations

import numpy as np

from goexplore.cells import DONE_KEY, score_keyer
from goexplore.wire import EpisodeResult, Task, WorkerView, decode_results, encode_results


# --- the episode -----------------------------------------------------------------------------
def explore(
    env,
    cells,
    codec,
    view: WorkerView,
    task: Task,
    repeat_p: float,
    end_on_life: bool = True,
) -> EpisodeResult:
    """Restore the chosen cell, then up to ``task.steps`` repeated random actions;
    a life loss (with ``end_on_life``) or game over ends the episode on the DONE cell.
    With ``task.stop_on_life`` a life loss stops the exploration, and the episode goes
    on from its last state when that state's cell is picked again."""
    raw = explore_raw(env, cells, codec, view, task, repeat_p, end_on_life)
    return decode_results(encode_results([raw], len(env.fact_names)))[0]


def explore_raw(
    env,
    cells,
    codec,
    view: WorkerView,
    task: Task,
    repeat_p: float,
    end_on_life: bool = True,
    frames=None,
) -> dict:
    """:func:`explore`, returning the result as plain Python values, one per
    :data:`goexplore.wire.EPISODE` field (what :func:`~goexplore.wire.encode_results` takes).

    ``frames`` (a :class:`~goexplore.cells.dynamic.FrameCodec` and a sampling
    probability) makes the episode also return each candidate's frame and a
    random sample of its frames (not the episode-ending one), drawn from a
    generator of its own seeded by the task: the exploration's draws are unchanged.
    """
    rng = np.random.default_rng(task.seed)
    if getattr(cells, "dynamic", False):
        cells = cells.at(task.rep)
    env.restore_state(codec.decompress(task.state))
    # no reads here: after a restore, screen and RAM are stale until a step

    random, integers = rng.random, rng.integers
    step, facts = env.step, env.facts
    key_of = score_keyer(cells, task.key)  # the chosen cell's key carries any context
    ri = env.fact_names.index(env.room_fact) if env.room_fact else None
    lookup = view.ids.get
    vscore, vlen = view.score, view.length
    n_actions = env.n_actions
    actions = bytearray()
    rew_t: list[int] = []
    rew_v: list[float] = []
    new_keys: list[bytes] = []
    new_index: dict[bytes, int] = {}
    visits: dict[int, list] = {}  # id -> [first step, best step, best score, steps]
    snaps: dict[int, tuple] = {}  # id -> (lives, facts, state) at its best visit
    rooms = set()
    score, length, prev_lives = task.score, task.length, task.lives
    done = False
    sample_frames: list[bytes] = []
    fcodec = next_sample = None
    if frames is not None:
        fcodec, p = frames
        draw = np.random.default_rng([task.seed, 1]).geometric
        next_sample = int(draw(p)) - 1 if p > 0 else task.steps

    stop_at_loss = end_on_life or task.stop_on_life
    action = int(integers(n_actions))
    for t in range(task.steps):
        if random() > repeat_p:
            action = int(integers(n_actions))
        frame, reward, terminated, lives = step(action)
        actions.append(action)
        if reward:
            rew_t.append(t)
            rew_v.append(reward)
        score += reward
        f = facts()
        if ri is not None:
            rooms.add(f[ri])
        lost = lives < prev_lives
        done = terminated or (end_on_life and lost)
        stop = terminated or (stop_at_loss and lost)
        if t == next_sample:
            if not done:
                sample_frames.append(fcodec.compress(frame))
            next_sample += int(draw(p))
        key = DONE_KEY if done else key_of(frame, f, score)
        cid = lookup(key)
        if cid is None:
            cid = new_index.get(key)
            if cid is None:
                cid = new_index[key] = -1 - len(new_keys)
                new_keys.append(key)
        v = visits.get(cid)
        if v is None:
            visits[cid] = [t, t, score, 1]
        elif score > v[2]:  # a better visit (the earliest of the max wins)
            v[1], v[2] = t, score
            v[3] += 1
        else:
            v[3] += 1
            if stop:
                break
            prev_lives = lives
            continue
        # the best visit so far: keep its state if it could be accepted
        if cid < 0 or score > vscore[cid] or (score == vscore[cid] and length + t + 1 < vlen[cid]):
            fz = fcodec.compress(frame) if fcodec is not None and not done else b""
            snaps[cid] = (lives, f, codec.compress(env.clone_state()), fz)
        if stop:
            break
        prev_lives = lives

    seen, nseen, cids, nc, ct, cfirst, cscore, clives, cfacts, cstates = ([] for _ in range(10))
    cframes: list[bytes] = []
    for cid, (t0, tb, s, k) in visits.items():
        snap = snaps.get(cid)
        if snap is None:
            seen.append(cid)
            nseen.append(k)
            continue
        cids.append(cid)
        nc.append(k)
        ct.append(tb)
        cfirst.append(t0 == tb)
        cscore.append(s)
        clives.append(snap[0])
        cfacts.append(snap[1])
        cstates.append(snap[2])
        cframes.append(snap[3])  # b"" unless frames are wanted (one item per candidate)
    return {
        "index": task.index,
        "done": done,
        "final_score": float(score),
        "actions": actions,
        "rew_t": rew_t,
        "rew_v": rew_v,
        "seen_ids": seen,
        "seen_steps": nseen,
        "rooms": sorted(rooms),
        "cand_ids": cids,
        "cand_steps": nc,
        "cand_t": ct,
        "cand_first": cfirst,
        "cand_score": cscore,
        "cand_lives": clives,
        "cand_facts": cfacts,
        "cand_states": cstates,
        "cand_frames": cframes,
        "new_keys": new_keys,
        "sample_frames": sample_frames,
    }
