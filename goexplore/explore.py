"""One exploration episode, on the worker side: restore -> act -> compact result.

The worker holds a *view* of the archive as it was at the start of the batch
(key -> id, score, trajectory length), kept current by the deltas the master
sends (DESIGN.md section 3). Per step it returns only small arrays (action,
reward, lives, cell id, room facts); it clones the emulator state only for the
best visit of each cell in the episode, and only if that visit beats the view.
The view can only be weaker than the master's live archive, so the states sent
are a superset of what the master will accept: the decisions stay exactly the
reference's.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

DONE_KEY = b""  # the virtual end-of-episode cell (never sampled)


@dataclass
class Task:
    index: int          # position in the batch (results are applied in this order)
    state: bytes        # compressed state of the chosen cell, frozen at sampling time
    lives: int          # lives at the chosen cell (the restore leaves stale reads)
    score: float        # the chosen cell's score at sampling time
    length: int         # ... and its trajectory length
    seed: int           # this episode's own random seed
    steps: int          # max agent steps


@dataclass
class EpisodeResult:
    index: int
    actions: np.ndarray      # uint8 [n]
    rewards: np.ndarray      # float64 [n]
    lives: np.ndarray        # int16 [n]
    ids: np.ndarray          # int64 [n]: view id >= 0, or -(j+1) for new_keys[j]
    facts: np.ndarray        # int16 [n, F]
    done: bool               # the last step ended the episode (life loss / game over)
    new_keys: list[bytes]    # keys unknown to the view, in first-visit order
    snaps: dict[int, tuple[int, bytes]]  # id (as in ids) -> (step, compressed state)

    @property
    def n(self) -> int:
        return len(self.actions)

    # --- wire format: small header + raw arrays (then zstd by the transport) ---
    def encode(self) -> bytes:
        n, nf = self.n, self.facts.shape[1]
        parts = [struct.pack("<qqqq?", self.index, n, nf, len(self.new_keys), self.done),
                 self.actions.tobytes(), self.rewards.tobytes(),
                 self.lives.astype(np.int16).tobytes(), self.ids.astype(np.int32).tobytes(),
                 self.facts.astype(np.int16).tobytes()]
        for k in self.new_keys:
            parts += [struct.pack("<q", len(k)), k]
        parts.append(struct.pack("<q", len(self.snaps)))
        for i, (t, s) in self.snaps.items():
            parts += [struct.pack("<qqq", i, t, len(s)), s]
        return b"".join(parts)

    @classmethod
    def decode(cls, buf: bytes) -> "EpisodeResult":
        mv = memoryview(buf)
        index, n, nf, nk, done = struct.unpack_from("<qqqq?", mv)
        o = struct.calcsize("<qqqq?")

        def take(dtype, count):
            nonlocal o
            a = np.frombuffer(mv, dtype=dtype, count=count, offset=o)
            o += a.nbytes
            return a

        actions = take(np.uint8, n)
        rewards = take(np.float64, n)
        lives = take(np.int16, n)
        ids = take(np.int32, n).astype(np.int64)
        facts = take(np.int16, n * nf).reshape(n, nf)
        keys = []
        for _ in range(nk):
            (ln,) = struct.unpack_from("<q", mv, o)
            o += 8
            keys.append(bytes(mv[o:o + ln]))
            o += ln
        (ns,) = struct.unpack_from("<q", mv, o)
        o += 8
        snaps = {}
        for _ in range(ns):
            i, t, ln = struct.unpack_from("<qqq", mv, o)
            o += 24
            snaps[i] = (t, bytes(mv[o:o + ln]))
            o += ln
        return cls(index, actions, rewards, lives, ids, facts, bool(done), keys, snaps)


class WorkerView:
    """A worker's copy of (key -> (id, score, length)), updated by deltas."""

    def __init__(self):
        self.cells: dict[bytes, tuple[int, float, int]] = {}

    def apply(self, delta: list[tuple[bytes, int, float, int]]) -> None:
        cells = self.cells
        for key, cid, score, length in delta:
            cells[key] = (cid, score, length)


def explore(env, cells, codec, view: WorkerView, task: Task, repeat_p: float) -> EpisodeResult:
    """Restore the chosen cell, then up to ``task.steps`` repeated random actions;
    a life loss or game over ends the episode on the DONE cell."""
    rng = np.random.default_rng(task.seed)
    env.restore_state(codec.decompress(task.state))
    # no reads here: after a restore, screen and RAM are stale until a step

    n_actions = env.n_actions
    known = view.cells
    key_of = cells.key
    actions, rewards, lives_l, ids, facts = [], [], [], [], []
    new_keys: list[bytes] = []
    new_index: dict[bytes, int] = {}
    best: dict[int, float] = {}            # id -> best score so far this episode
    snaps: dict[int, tuple[int, bytes]] = {}
    score, length, prev_lives = task.score, task.length, task.lives
    done = False

    action = int(rng.integers(n_actions))
    for t in range(task.steps):
        if rng.random() > repeat_p:
            action = int(rng.integers(n_actions))
        frame, reward, terminated, lives = env.step(action)
        done = bool(terminated) or lives < prev_lives
        score += reward
        length += 1
        key = DONE_KEY if done else key_of(frame)
        entry = known.get(key)
        if entry is None:
            cid = new_index.get(key)
            if cid is None:
                cid = new_index[key] = -(len(new_keys) + 1)
                new_keys.append(key)
        else:
            cid = entry[0]
        b = best.get(cid)
        if b is None or score > b:          # the best visit so far (earliest of the max)
            best[cid] = score
            if entry is None or score > entry[1] or (score == entry[1] and length < entry[2]):
                snaps[cid] = (t, codec.compress(env.clone_state()))
        actions.append(action)
        rewards.append(reward)
        lives_l.append(lives)
        ids.append(cid)
        facts.append(env.facts())
        if done:
            break
        prev_lives = lives

    n = len(actions)
    return EpisodeResult(
        index=task.index,
        actions=np.array(actions, dtype=np.uint8),
        rewards=np.array(rewards, dtype=np.float64),
        lives=np.array(lives_l, dtype=np.int16),
        ids=np.array(ids, dtype=np.int64),
        facts=np.array(facts, dtype=np.int16).reshape(n, len(env.fact_names)),
        done=done, new_keys=new_keys, snaps=snaps)
