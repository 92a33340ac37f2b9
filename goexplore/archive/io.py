"""The archive as checkpoint arrays, and back (no pickle: plain arrays and state
bytes; every shape checked before use)."""

from __future__ import annotations

import numpy as np

from goexplore.errors import CheckpointError


class CheckpointArrays:
    """Mixin of :class:`~goexplore.archive.Archive`: its checkpoint form."""

    #: arrays of a checkpoint (each with one row per cell), see :meth:`to_arrays`
    ARRAYS = (
        "keys",
        "score",
        "traj_len",
        "traj_last",
        "seen",
        "chosen",
        "chosen_since_new",
        "lives",
        "facts",
        "is_done",
        "steps",
    )
    #: arrays a checkpoint written before they existed may lack (they start at 0)
    OPTIONAL = ("steps",)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The checkpoint arrays (:attr:`ARRAYS`, one row per cell; keys unpacked)."""
        n = self.n
        out = {
            name: getattr(self, name)[:n] for name in self.ARRAYS if name not in ("keys", "facts")
        }
        out["traj_len"] = out["traj_len"].astype(np.int64)
        out["keys"] = self.keys
        out["facts"] = self.facts[:n]
        return out

    @classmethod
    def from_arrays(
        cls,
        key_size: int,
        n_facts: int,
        arrays: dict[str, np.ndarray],
        states: list[bytes],
        where: str = "checkpoint",
        params=None,
        rep=None,
        level_fact: int | None = None,
    ):
        """An archive from checkpoint arrays; CheckpointError if they do not fit."""
        try:
            n = len(arrays["score"])
        except (KeyError, TypeError):
            raise CheckpointError(f"{where}: no array 'score'") from None
        want = {"keys": (n, key_size), "facts": (n, n_facts)}
        arrays = dict(arrays)
        for name in cls.OPTIONAL:
            arrays.setdefault(name, np.zeros(n, cls.FIELDS[name]))
        for name in cls.ARRAYS:
            arr = arrays.get(name)
            shape = want.get(name, (n,))
            if arr is None or arr.shape != shape:
                raise CheckpointError(
                    f"{where}: array {name!r} has shape "
                    f"{None if arr is None else arr.shape}, expected {shape}"
                )
        if len(states) != n:
            raise CheckpointError(f"{where}: {len(states)} states for {n} cells")
        a = cls(
            key_size, n_facts, capacity=max(64, n), params=params, rep=rep, level_fact=level_fact
        )
        a.n = n
        for name in cls.ARRAYS:
            if name not in ("keys", "facts"):
                getattr(a, name)[:n] = arrays[name]
        a.facts[:n] = arrays["facts"]
        done = np.flatnonzero(a.is_done[:n])
        if len(done) > 1:
            raise CheckpointError(f"{where}: {len(done)} DONE cells")
        a._done_id = int(done[0]) if len(done) else -1
        keys = np.asarray(arrays["keys"], np.uint8)
        if a._nibbles and n and int(keys.max()) >= 16:
            a._nibbles = False
            a._keys = np.zeros((a._cap, key_size), np.uint8)
        a._keys[:n] = a._pack_rows(keys)
        if a._done_id >= 0:
            a._keys[a._done_id] = 0
        lens = np.fromiter(map(len, states), np.int64, n)
        a.state_len[:n] = lens
        a.state_off[:n] = np.cumsum(lens) - lens
        a._arena = bytearray(b"".join(states))
        try:
            a._rebuild_index()
        except ValueError:
            raise CheckpointError(f"{where}: duplicate cell keys") from None
        if level_fact is not None:
            a.level[:n] = a.facts[:n, level_fact]
            live = a.level[:n][~a.is_done[:n]]
            a.max_level = int(live.max(initial=0))
        if a._places is not None:
            for i in np.flatnonzero(~a.is_done[:n]).tolist():
                a._places.add(i, a.key_of(i), a, recompute=False)
            a._places.recompute_neighbours(a)
        if a._groups is not None:
            for i in np.flatnonzero(~a.is_done[:n]).tolist():
                a._groups.add(i, a.key_of(i), a.score, a.outscored, rescore=False)
            a._groups.rescore_all(a.score, a.outscored)
        if a.params.score:
            a._recount_scores()
        a._touch_all = True
        a._update_weights()
        a._csum_from = 0
        a._view_n = n
        return a
