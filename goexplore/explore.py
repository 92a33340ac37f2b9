"""One exploration episode, on the worker side: restore -> act -> compact result.

The worker holds a *view* of the archive as it was at the start of the batch
(key -> id, and per id the score and trajectory length), kept current by the
deltas the master sends (DESIGN.md section 3). The worker reduces its episode
to what the master's accept rule needs, per cell visited (reference rule,
DESIGN.md section 2):

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
nonzero rewards; the states sent are only for candidates.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

import numpy as np

from goexplore.cells import DONE_KEY

_TASK = struct.Struct("<iIihdqII")  # index, seed, steps, lives, score, length, state, key bytes


@dataclass
class Task:
    index: int  # position in the batch (results are applied in this order)
    state: bytes  # compressed state of the chosen cell, frozen at sampling time
    lives: int  # lives at the chosen cell (the restore leaves stale reads)
    score: float  # the chosen cell's score at sampling time
    length: int  # ... and its trajectory length
    seed: int  # this episode's own random seed
    steps: int  # max agent steps
    key: bytes = b""  # the chosen cell's key, for representations that need its context

    def encode(self) -> bytes:
        return (
            _TASK.pack(
                self.index,
                self.seed,
                self.steps,
                self.lives,
                self.score,
                self.length,
                len(self.state),
                len(self.key),
            )
            + bytes(self.state)
            + self.key
        )

    @staticmethod
    def decode_many(buf, offset: int = 0) -> list[Task]:
        out = []
        mv = memoryview(buf)
        o = offset
        while o < len(mv):
            index, seed, steps, lives, score, length, ln, kn = _TASK.unpack_from(mv, o)
            o += _TASK.size
            out.append(
                Task(
                    index,
                    bytes(mv[o : o + ln]),
                    lives,
                    score,
                    length,
                    seed,
                    steps,
                    bytes(mv[o + ln : o + ln + kn]),
                )
            )
            o += ln + kn
        return out


_HDR = struct.Struct("<II")  # episodes, facts per candidate
_COLS = 8  # per-episode table: index n done k m nr c nk


def encode_results(raws: list[tuple], nf: int) -> bytes:
    """The wire form of several episode results (a worker's chunk), column by
    column so the master decodes them with a handful of calls: a table of
    per-episode counts, then one block per item size (float64, int32, int16,
    uint8), then the candidates' states and the new keys. ``raws`` are
    :func:`explore_raw` tuples."""
    table, finals = array("i"), array("d")
    f8, i4, i2 = array("d"), array("i"), array("h")
    rew_t, seen, rooms, cids, ct, slen, klen, nseen, nc = (array("i") for _ in range(9))
    cscore, lives = array("d"), array("h")
    facts, first, acts, states, keys = array("h"), bytearray(), bytearray(), [], []
    for (
        index,
        actions,
        done,
        final,
        r_t,
        r_v,
        sn,
        sns,
        rm,
        ci,
        cs,
        t,
        fi,
        sc,
        lv,
        fa,
        st,
        nk,
    ) in raws:
        table.extend((index, len(actions), done, len(r_t), len(sn), len(rm), len(ci), len(nk)))
        finals.append(final)
        f8.extend(r_v)
        rew_t.extend(r_t)
        seen.extend(sn)
        nseen.extend(sns)
        rooms.extend(rm)
        if ci:
            cids.extend(ci)
            nc.extend(cs)
            ct.extend(t)
            cscore.extend(sc)
            lives.extend(lv)
            for f in fa:
                facts.extend(f)
            first.extend(fi)
            states += st
            slen.extend(map(len, st))
        if nk:
            keys += nk
            klen.extend(map(len, nk))
        acts += actions
    f8.extend(cscore)
    for part in (rew_t, seen, rooms, cids, ct, slen, klen, nseen, nc):
        i4.extend(part)
    i2.extend(lives)
    i2.extend(facts)
    return b"".join(
        [
            _HDR.pack(len(raws), nf),
            table.tobytes(),
            finals.tobytes(),
            f8.tobytes(),
            i4.tobytes(),
            i2.tobytes(),
            bytes(first),
            bytes(acts),
            *states,
            *keys,
        ]
    )


def decode_results(buf) -> list[EpisodeResult]:
    """The episode results of one :func:`encode_results` message (numpy views into it)."""
    mv = memoryview(buf)
    ne, nf = _HDR.unpack_from(mv)
    o = _HDR.size
    table = np.frombuffer(mv, np.int32, _COLS * ne, o).reshape(ne, _COLS)
    o += 4 * _COLS * ne
    finals = np.frombuffer(mv, np.float64, ne, o).tolist()
    o += 8 * ne
    tot = table.sum(axis=0).tolist()
    N, K, M, NR, C, NK = tot[1], tot[3], tot[4], tot[5], tot[6], tot[7]
    f8 = np.frombuffer(mv, np.float64, K + C, o)
    o += 8 * (K + C)
    n4 = K + M + NR + 3 * C + NK + M + C
    i4 = np.frombuffer(mv, np.int32, n4, o)
    o += 4 * n4
    i2 = np.frombuffer(mv, np.int16, C * (1 + nf), o)
    o += 2 * C * (1 + nf)
    u8 = np.frombuffer(mv, np.uint8, C + N, o)
    o += C + N
    rew_v, cscore = f8[:K], f8[K:]
    rew_t, seen, rooms = i4[:K], i4[K : K + M], i4[K + M : K + M + NR]
    j = K + M + NR
    cids, ct, slen = i4[j : j + C], i4[j + C : j + 2 * C], i4[j + 2 * C : j + 3 * C]
    j += 3 * C
    klen, nseen, nc = i4[j : j + NK], i4[j + NK : j + NK + M], i4[j + NK + M :]
    lives, facts = i2[:C], i2[C:].reshape(C, nf)
    first, actions = u8[:C].view(np.bool_), u8[C:]
    out = []
    on = ok = om = onr = oc = onk = 0
    so = o  # the states, then the keys
    ko = states_end = o + int(slen.sum())
    for index, n, done, k, m, nr, c, nk in table.tolist():
        if c:
            st = []
            for ln in slen[oc : oc + c].tolist():
                st.append(bytes(mv[so : so + ln]))
                so += ln
            res = EpisodeResult(
                index,
                actions[on : on + n],
                done != 0,
                finals[len(out)],
                rew_t[ok : ok + k],
                rew_v[ok : ok + k],
                seen[om : om + m],
                cids[oc : oc + c],
                ct[oc : oc + c],
                first[oc : oc + c],
                cscore[oc : oc + c],
                lives[oc : oc + c],
                facts[oc : oc + c],
                st,
                [],
                rooms[onr : onr + nr],
                nseen[om : om + m],
                nc[oc : oc + c],
            )
        else:
            res = EpisodeResult(
                index,
                actions[on : on + n],
                done != 0,
                finals[len(out)],
                rew_t[ok : ok + k],
                rew_v[ok : ok + k],
                seen[om : om + m],
                _NO_I4,
                _NO_I4,
                _NO_BOOL,
                _NO_F8,
                _NO_I2,
                _NO_I2.reshape(0, nf),
                [],
                [],
                rooms[onr : onr + nr],
                nseen[om : om + m],
                _NO_I4,
            )
        if nk:
            for ln in klen[onk : onk + nk].tolist():
                res.new_keys.append(bytes(mv[ko : ko + ln]))
                ko += ln
        out.append(res)
        on += n
        ok += k
        om += m
        onr += nr
        oc += c
        onk += nk
    if so != states_end or ko != len(mv):
        raise RuntimeError(f"internal error: results message of {len(mv)} bytes, decoded {ko}")
    return out


class EpisodeResult:
    """One episode, reduced for the master (see the module docstring)."""

    __slots__ = (
        "index",
        "actions",
        "done",
        "final_score",
        "rew_t",
        "rew_v",
        "seen_ids",
        "cand_ids",
        "cand_t",
        "cand_first",
        "cand_score",
        "cand_lives",
        "cand_facts",
        "cand_states",
        "new_keys",
        "rooms",
        "seen_steps",
        "cand_steps",
        "n",
    )

    def __init__(
        self,
        index,
        actions,
        done,
        final_score,
        rew_t,
        rew_v,
        seen_ids,
        cand_ids,
        cand_t,
        cand_first,
        cand_score,
        cand_lives,
        cand_facts,
        cand_states,
        new_keys,
        rooms,
        seen_steps,
        cand_steps,
    ):
        self.index = index  # position in the batch
        self.actions = actions  # uint8 [n]
        self.done = done  # the last step ended the episode (life lost / over)
        self.final_score = final_score  # score after the last step
        self.rew_t = rew_t  # int [k]: steps with a nonzero reward
        self.rew_v = rew_v  # float64 [k]: ... and those rewards
        self.seen_ids = seen_ids  # int [m]: view ids visited, not beating the view
        self.cand_ids = cand_ids  # int [c]: view id >= 0, or -(j+1) for new_keys[j]
        self.cand_t = cand_t  # int [c]: step of the best visit
        self.cand_first = cand_first  # bool [c]: the best visit is the cell's first
        self.cand_score = cand_score  # float64 [c]: score at the best visit
        self.cand_lives = cand_lives  # int16 [c]
        self.cand_facts = cand_facts  # int16 [c, F]
        self.cand_states = cand_states  # compressed states at the best visits
        self.new_keys = new_keys  # keys unknown to the view, in first-visit order
        self.rooms = rooms  # int: distinct rooms (the env's room fact) seen
        self.seen_steps = seen_steps  # int [m]: steps taken in each of seen_ids
        self.cand_steps = cand_steps  # int [c]: steps taken in each of cand_ids
        self.n = len(actions)

    # --- wire format (one episode; see encode_results) ---------------------------------
    def raw(self) -> tuple:
        return (
            self.index,
            self.actions.tobytes(),
            self.done,
            self.final_score,
            self.rew_t.tolist(),
            self.rew_v.tolist(),
            self.seen_ids.tolist(),
            self.seen_steps.tolist(),
            self.rooms.tolist(),
            self.cand_ids.tolist(),
            self.cand_steps.tolist(),
            self.cand_t.tolist(),
            self.cand_first.tolist(),
            self.cand_score.tolist(),
            self.cand_lives.tolist(),
            [tuple(f) for f in self.cand_facts.tolist()],
            list(self.cand_states),
            list(self.new_keys),
        )

    def encode(self) -> bytes:
        nf = self.cand_facts.shape[1] if self.cand_facts.ndim == 2 else 0
        return encode_results([self.raw()], nf)

    @classmethod
    def decode(cls, buf) -> EpisodeResult:
        (res,) = decode_results(buf)
        return res


_NO_I2 = np.zeros(0, np.int16)
_NO_I4 = np.zeros(0, np.int32)
_NO_F8 = np.zeros(0, np.float64)
_NO_BOOL = np.zeros(0, np.bool_)


# --- the worker's view of the archive -------------------------------------------------------
_DELTA = struct.Struct("<qqqqq")  # start, n_new, key_size, done_pos, n_changed


@dataclass
class ViewDelta:
    """What the workers' views need to catch up: the keys of the cells added
    since the last delta (ids ``start ..``), and the current score and length
    of every cell added or replaced since then."""

    start: int
    keys: np.ndarray  # uint8 [n_new, key_size] (the DONE row is zeros)
    done_pos: int  # row of keys that is the DONE cell, or -1
    ids: np.ndarray  # int64 [c]
    score: np.ndarray  # float64 [c]
    length: np.ndarray  # int64 [c]
    _bytes: bytes | None = field(default=None, repr=False)

    def encode(self) -> bytes:
        if self._bytes is None:
            self._bytes = b"".join(
                [
                    _DELTA.pack(
                        self.start, len(self.keys), self.keys.shape[1], self.done_pos, len(self.ids)
                    ),
                    self.ids.astype(np.int64).tobytes(),
                    self.score.astype(np.float64).tobytes(),
                    self.length.astype(np.int64).tobytes(),
                    np.ascontiguousarray(self.keys).tobytes(),
                ]
            )
        return self._bytes

    @classmethod
    def decode(cls, buf) -> ViewDelta:
        mv = memoryview(buf)
        start, nn, ks, done_pos, c = _DELTA.unpack_from(mv)
        o = _DELTA.size
        ids = np.frombuffer(mv, np.int64, c, o)
        score = np.frombuffer(mv, np.float64, c, o + 8 * c)
        length = np.frombuffer(mv, np.int64, c, o + 16 * c)
        keys = np.frombuffer(mv, np.uint8, nn * ks, o + 24 * c).reshape(nn, ks)
        return cls(start, keys, done_pos, ids, score, length)

    @property
    def nbytes(self) -> int:
        return len(self.encode())


class WorkerView:
    """A worker's copy of the archive: key -> id, and per id (score, length)."""

    def __init__(self):
        self.ids: dict[bytes, int] = {}
        self.n = 0
        self.score = np.zeros(1024, np.float64)
        self.length = np.zeros(1024, np.int64)

    def apply(self, delta: ViewDelta) -> None:
        nn = len(delta.keys)
        end = delta.start + nn
        if delta.start > self.n:
            raise RuntimeError(
                f"internal error: view delta starts at cell {delta.start}, the view has {self.n}"
            )
        if end > len(self.score):
            cap = max(end, 2 * len(self.score))
            for name in ("score", "length"):
                a = np.zeros(cap, getattr(self, name).dtype)
                a[: self.n] = getattr(self, name)[: self.n]
                setattr(self, name, a)
        if nn:
            ks = delta.keys.shape[1]
            block = delta.keys.tobytes()
            ids = self.ids
            for r in range(nn):
                ids[DONE_KEY if r == delta.done_pos else block[r * ks : (r + 1) * ks]] = (
                    delta.start + r
                )
            self.n = max(self.n, end)
        self.score[delta.ids] = delta.score
        self.length[delta.ids] = delta.length


# --- the episode -----------------------------------------------------------------------------
def explore(
    env, cells, codec, view: WorkerView, task: Task, repeat_p: float, end_on_life: bool = True
) -> EpisodeResult:
    """Restore the chosen cell, then up to ``task.steps`` repeated random actions;
    a life loss (with ``end_on_life``) or game over ends the episode on the DONE cell."""
    raw = explore_raw(env, cells, codec, view, task, repeat_p, end_on_life)
    return decode_results(encode_results([raw], len(env.fact_names)))[0]


def explore_raw(
    env, cells, codec, view: WorkerView, task: Task, repeat_p: float, end_on_life: bool = True
) -> tuple:
    """:func:`explore`, returning the result as Python lists (see :func:`encode_results`)."""
    rng = np.random.default_rng(task.seed)
    env.restore_state(codec.decompress(task.state))
    # no reads here: after a restore, screen and RAM are stale until a step

    random, integers = rng.random, rng.integers
    step, facts = env.step, env.facts
    key_of = cells.keyer(task.key)  # the chosen cell's key carries any context
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
        done = terminated or (end_on_life and lives < prev_lives)
        key = DONE_KEY if done else key_of(frame, f)
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
            if done:
                break
            prev_lives = lives
            continue
        # the best visit so far: keep its state if it could be accepted
        if cid < 0 or score > vscore[cid] or (score == vscore[cid] and length + t + 1 < vlen[cid]):
            snaps[cid] = (lives, f, codec.compress(env.clone_state()))
        if done:
            break
        prev_lives = lives

    seen, nseen, cids, nc, ct, cfirst, cscore, clives, cfacts, cstates = ([] for _ in range(10))
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
    return (
        task.index,
        actions,
        done,
        float(score),
        rew_t,
        rew_v,
        seen,
        nseen,
        sorted(rooms),
        cids,
        nc,
        ct,
        cfirst,
        cscore,
        clives,
        cfacts,
        cstates,
        new_keys,
    )
