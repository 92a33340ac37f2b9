"""What travels between the master and the workers: tasks, archive-view
deltas and episode results, as byte strings (no pickle).

An episode result is described once, by :data:`EPISODE`: one row per field
(its name, its dtype, and what sizes it: one per episode, or one per item of
a group such as the candidates). That schema drives both the encoder and the
decoder and defines :class:`EpisodeResult`'s attributes, so adding a field is
one row here plus the worker code that fills it.

A message holds several episodes (a worker's chunk), column by column: a
table of per-episode group sizes and the per-episode scalars (one struct
read), then every array column's values for all episodes together, widest
dtype first (every column stays aligned), then the lengths and bytes of the
byte-string columns. Decoding costs about one numpy call per nonempty column
per message, so a message of one short episode stays cheap (the master's
main per-step cost before).
"""

from __future__ import annotations

import functools
import itertools
import struct
from array import array
from dataclasses import dataclass, field

import numpy as np

from goexplore.cells import DONE_KEY


@dataclass(frozen=True)
class Field:
    name: str
    dtype: str  # numpy dtype ('f8', 'i4', 'i2', 'u1', '?'), or 'bytes' (a list of byte strings)
    size: str  # 'episode' (one value per episode) or the group that sizes it
    doc: str
    per_item: bool = False  # a row of `facts` values per item (candidates' facts)


# Groups: each is sized per episode by the length of its first field.
EPISODE: tuple[Field, ...] = (
    Field("index", "i4", "episode", "position in the batch"),
    Field("done", "?", "episode", "the last step ended the episode (life lost / game over)"),
    Field("final_score", "f8", "episode", "score after the last step"),
    Field("actions", "u1", "steps", "one action per agent step"),
    Field("rew_t", "i4", "rewards", "steps with a nonzero reward"),
    Field("rew_v", "f8", "rewards", "... and those rewards"),
    Field("seen_ids", "i4", "seen", "view ids visited, not beating the view"),
    Field("seen_steps", "i4", "seen", "steps taken in each of seen_ids"),
    Field("rooms", "i4", "rooms", "distinct rooms (the env's room fact) seen"),
    Field("cand_ids", "i4", "cands", "view id >= 0, or -(j+1) for new_keys[j]"),
    Field("cand_steps", "i4", "cands", "steps taken in each candidate cell"),
    Field("cand_t", "i4", "cands", "step of the best visit"),
    Field("cand_first", "?", "cands", "the best visit is the cell's first"),
    Field("cand_score", "f8", "cands", "score at the best visit"),
    Field("cand_lives", "i2", "cands", "lives at the best visit"),
    Field("cand_facts", "i2", "cands", "the env's facts at the best visit", per_item=True),
    Field("cand_states", "bytes", "cands", "compressed emulator states at the best visits"),
    Field("cand_frames", "bytes", "cands", "dynamic cells: compressed frames at the best visits"),
    Field("new_keys", "bytes", "new_keys", "keys unknown to the view, in first-visit order"),
    Field("sample_frames", "bytes", "samples", "dynamic cells: a random sample of the frames"),
)
NAMES = tuple(f.name for f in EPISODE)
_SCALARS = tuple(f for f in EPISODE if f.size == "episode")
_GROUPS = tuple(dict.fromkeys(f.size for f in EPISODE if f.size != "episode"))
_LEADER = {g: next(f.name for f in EPISODE if f.size == g) for g in _GROUPS}
_DTYPES = sorted(
    dict.fromkeys(f.dtype for f in EPISODE if f.size != "episode" and f.dtype != "bytes"),
    key=lambda dt: -np.dtype(dt).itemsize,  # widest first: every block stays aligned
)
# the array columns, grouped by dtype, widest first, schema order within a dtype
_ARRAYS = tuple(f for dt in _DTYPES for f in EPISODE if f.size != "episode" and f.dtype == dt)
_BYTES = tuple(f for f in EPISODE if f.dtype == "bytes")
_ARRAY_CODE = {"f8": "d", "i4": "i", "i2": "h", "u1": "B", "?": "B"}
_HDR = struct.Struct("<II")  # episodes, facts per item
_EMPTY = {f.name: np.zeros(0, f.dtype) for f in _ARRAYS}
_GI = {g: i for i, g in enumerate(_GROUPS)}
_SCALARS_BY_WIDTH = tuple(sorted(_SCALARS, key=lambda f: -np.dtype(f.dtype).itemsize))
# decoding order: per group (in _GROUPS order), its array columns then its byte strings
_BY_GROUP = tuple(
    (i, [k for k, f in enumerate(_ARRAYS) if _GI[f.size] == i]) for i in range(len(_GROUPS))
)
_BYTES_OF = {i: [k for k, f in enumerate(_BYTES) if _GI[f.size] == i] for i in range(len(_GROUPS))}
_BYTES_GROUPS = tuple(_GI[f.size] for f in _BYTES)
_NG = len(_GROUPS)
_STRUCT_CODE = {"f8": "d", "i4": "i", "i2": "h", "u1": "B", "?": "?"}
# per array column (in message order): its group, dtype, item size, per_item
_COLS = tuple(
    (_GI[f.size], np.dtype(f.dtype), np.dtype(f.dtype).itemsize, f.per_item) for f in _ARRAYS
)
# an episode's group values in decoding order: per group, its array and byte-string columns
_ORDER = tuple((g, tuple(members), tuple(_BYTES_OF[g])) for g, members in _BY_GROUP)
_MEMBERS = tuple(f for f in EPISODE if f.size != "episode" and f.name != _LEADER[f.size])


def encode_results(raws: list[dict], nf: int) -> bytes:
    """The wire form of several episode results. ``raws`` are dicts with every
    :data:`EPISODE` field as plain Python values (lists, bytes)."""
    table = array("i")
    scalars = {f.name: array(_ARRAY_CODE[f.dtype]) for f in _SCALARS_BY_WIDTH}
    cols = {f.name: array(_ARRAY_CODE[f.dtype]) for f in _ARRAYS}
    lens = {f.name: array("i") for f in _BYTES}
    blobs: dict[str, list[bytes]] = {f.name: [] for f in _BYTES}
    for raw in raws:
        sizes = [len(raw[_LEADER[g]]) for g in _GROUPS]
        for f in _MEMBERS:  # a short column would shift every later one: refuse it
            if len(raw[f.name]) != sizes[_GI[f.size]]:
                raise ValueError(
                    f"episode result field {f.name!r} has {len(raw[f.name])} items, "
                    f"its group {f.size!r} has {sizes[_GI[f.size]]}"
                )
        table.extend(sizes)
        for f in _SCALARS_BY_WIDTH:
            scalars[f.name].append(raw[f.name])
        for f in _ARRAYS:
            v = raw[f.name]
            if not v:
                continue
            if f.per_item:
                for row in v:
                    cols[f.name].extend(row)
            else:
                cols[f.name].extend(v)
        for f in _BYTES:
            v = raw[f.name]
            if v:
                blobs[f.name] += v
                lens[f.name].extend(map(len, v))
    parts = [_HDR.pack(len(raws), nf), table.tobytes()]
    parts += [scalars[f.name].tobytes() for f in _SCALARS_BY_WIDTH]
    parts.append(bytes(_pad(sum(map(len, parts)))))  # the columns start 8-byte aligned
    parts += [cols[f.name].tobytes() for f in _ARRAYS]
    parts += [lens[f.name].tobytes() for f in _BYTES]
    for f in _BYTES:
        parts += blobs[f.name]
    return b"".join(parts)


def _pad(offset: int) -> int:
    return -offset % 8


@functools.lru_cache(maxsize=64)
def _head(ne: int) -> struct.Struct:
    """The group-size table and the scalars of an ``ne``-episode message, after its header."""
    codes = "".join(f"{ne}{_STRUCT_CODE[f.dtype]}" for f in _SCALARS_BY_WIDTH)
    return struct.Struct(f"<{_NG * ne}i{codes}")


@functools.lru_cache(maxsize=8)
def _empties(nf: int) -> tuple:
    """Each array column's value for an episode with none of its items."""
    return tuple(_empty(f, nf) for f in _ARRAYS)


def decode_results(buf) -> list[EpisodeResult]:
    """The episode results of one :func:`encode_results` message (numpy views into it).

    Its cost is mostly per message, so it is kept to a few calls per nonempty
    column: most messages hold one short episode."""
    mv = memoryview(buf)
    ne, nf = _HDR.unpack_from(mv)
    head = _head(ne)
    vals = head.unpack_from(mv, _HDR.size)
    o = _HDR.size + head.size
    o += _pad(o)
    sizes = [vals[g : _NG * ne : _NG] for g in range(_NG)]  # per group, per episode
    totals = [sum(s) for s in sizes]
    p = _NG * ne
    scalars = [vals[p + k * ne : p + (k + 1) * ne] for k in range(len(_SCALARS))]
    cols: list = []
    for g, dt, size, per_item in _COLS:
        n = totals[g]
        if not n:
            cols.append(None)
            continue
        if per_item:
            cols.append(np.frombuffer(mv, dt, n * nf, o).reshape(n, nf))
            o += size * n * nf
        else:
            cols.append(np.frombuffer(mv, dt, n, o))
            o += size * n
    nb = sum(totals[g] for g in _BYTES_GROUPS)
    lens = struct.unpack_from(f"<{nb}i", mv, o) if nb else ()
    o += 4 * nb
    items: list = []
    j = 0
    data = buf if type(buf) is bytes else bytes(mv)  # slices of bytes are bytes: one call each
    for g in _BYTES_GROUPS:
        out_g = []
        for ln in lens[j : j + totals[g]]:
            out_g.append(data[o : o + ln])
            o += ln
        items.append(out_g)
        j += totals[g]
    if o != len(mv):
        raise RuntimeError(f"internal error: results message of {len(mv)} bytes, decoded {o}")
    empties = _empties(nf)
    make = _make_result
    # per group, where each episode's items start (most messages hold one episode)
    if ne == 1:
        starts = [(0, t) for t in totals]
    else:
        starts = [list(itertools.accumulate(s, initial=0)) for s in sizes]
    out = []
    for e in range(ne):
        args = [s[e] for s in scalars]
        for g, members, bcols in _ORDER:
            a, b = starts[g][e], starts[g][e + 1]
            if a == b:
                args += [empties[k] for k in members]
                args += [[] for _ in bcols]
            elif b - a == totals[g]:  # the whole column (always, in a one-episode message)
                args += [cols[k] for k in members]
                args += [items[k] for k in bcols]
            else:
                args += [cols[k][a:b] for k in members]
                args += [items[k][a:b] for k in bcols]
        out.append(make(*args))
    return out


def _empty(f: Field, nf: int) -> np.ndarray:
    e = _EMPTY[f.name]
    return e.reshape(0, nf) if f.per_item else e


def _result_maker():
    """A constructor taking the fields in decoding order as positional arguments
    (generated from the schema, as dataclasses do: the decoder's hot loop)."""
    order = [f.name for f in _SCALARS_BY_WIDTH]
    for g, members in _BY_GROUP:
        order += [_ARRAYS[k].name for k in members] + [_BYTES[k].name for k in _BYTES_OF[g]]
    args = [f"v{i}" for i in range(len(order))]
    body = "".join(f"    r.{n} = {a}\n" for n, a in zip(order, args))
    head = f"def make({', '.join(args)}):\n    r = new(cls)\n"
    src = f"{head}{body}    r.n = len(r.actions)\n    return r\n"
    ns: dict = {"new": object.__new__, "cls": EpisodeResult}
    exec(src, ns)
    return ns["make"]


class EpisodeResult:
    """One episode, reduced for the master (see :mod:`goexplore.episode`). Its
    attributes are the :data:`EPISODE` fields, plus ``n`` (agent steps)."""

    __slots__ = (*NAMES, "n")

    def __init__(self, **values):
        for name in NAMES:
            setattr(self, name, values[name])
        self.n = len(self.actions)

    def raw(self) -> dict:
        """The result as plain Python values (what :func:`encode_results` takes)."""
        out = {}
        for f in EPISODE:
            v = getattr(self, f.name)
            if f.dtype == "bytes":
                v = list(v)
            elif f.size == "episode":
                v = v.item() if hasattr(v, "item") else v
            elif f.name == "actions":
                v = bytes(np.asarray(v, np.uint8))
            elif f.per_item:
                v = [tuple(r) for r in np.asarray(v).tolist()]
            else:
                v = np.asarray(v).tolist()
            out[f.name] = v
        return out

    def encode(self) -> bytes:
        nf = self.cand_facts.shape[1] if np.ndim(self.cand_facts) == 2 else 0
        return encode_results([self.raw()], nf)

    @classmethod
    def decode(cls, buf) -> EpisodeResult:
        (res,) = decode_results(buf)
        return res


# --- tasks -----------------------------------------------------------------------------------
_TASK = struct.Struct("<iIihdqIII?")  # index, seed, steps, lives, score, length; bytes of
# state, key, rep; stop at a life loss


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
    rep: bytes = b""  # the representation's parameters, for representations that change
    stop_on_life: bool = False  # a life loss stops the exploration (game-over episodes)

    def encode(self) -> bytes:
        head = _TASK.pack(
            self.index,
            self.seed,
            self.steps,
            self.lives,
            self.score,
            self.length,
            len(self.state),
            len(self.key),
            len(self.rep),
            self.stop_on_life,
        )
        return head + bytes(self.state) + self.key + self.rep

    @staticmethod
    def decode_many(buf, offset: int = 0) -> list[Task]:
        out = []
        mv = memoryview(buf)
        o = offset
        while o < len(mv):
            index, seed, steps, lives, score, length, ln, kn, rn, stop = _TASK.unpack_from(mv, o)
            o += _TASK.size
            state, key = bytes(mv[o : o + ln]), bytes(mv[o + ln : o + ln + kn])
            rep = bytes(mv[o + ln + kn : o + ln + kn + rn])
            out.append(Task(index, state, lives, score, length, seed, steps, key, rep, stop))
            o += ln + kn + rn
        return out


# --- the workers' view of the archive ----------------------------------------------------------
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
            head = _DELTA.pack(
                self.start, len(self.keys), self.keys.shape[1], self.done_pos, len(self.ids)
            )
            self._bytes = b"".join(
                [
                    head,
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
        if delta.start == 0:  # a whole view (the archive was re-keyed): start afresh
            self.ids.clear()
            self.n = 0
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


_make_result = _result_maker()
