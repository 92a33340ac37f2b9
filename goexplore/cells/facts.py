"""Cells from named integer facts, for any env (``--cells facts``).

A cell is the tuple of the env's facts (:meth:`~goexplore.envs.base.RestorableEnv.facts`),
each divided by its bin size (``--fact-bins x=2,y=2``; a fact not named has bin 1,
and a bin of 0 leaves the fact out of the key). Facts come from the env: the
Gymnasium adapter reads them from ``info`` or from a function of ``(obs, info)``
(:class:`goexplore.envs.gym.GymnasiumEnv`); MiniGrid has built-in ones.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from goexplore.errors import ConfigError


def parse_bins(text: str) -> dict[str, int]:
    """``x=2,y=2,carrying=1`` -> {name: bin}; a named error for anything else."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, eq, value = part.partition("=")
        try:
            b = int(value)
        except ValueError:
            b = -1
        if not eq or not name.strip() or b < 0:
            raise ConfigError(
                f"fact-bins: {part!r} is not NAME=BIN with a whole BIN >= 0 "
                "(e.g. --fact-bins x=2,y=2; 0 leaves the fact out)"
            )
        out[name.strip()] = b
    return out


@dataclass(frozen=True)
class FactCells:
    """The key: each kept fact // its bin, as little-endian int16."""

    fact_names: tuple[str, ...]
    bins: tuple[int, ...]  # one per fact; 0: left out

    name = "facts"
    needs_context = False
    uses_fact_names = True  # make_cells passes the env's fact names

    @classmethod
    def from_config(cls, cfg, fact_names=()) -> FactCells:
        bins = parse_bins(cfg.fact_bins)
        names = tuple(fact_names)
        unknown = sorted(set(bins) - set(names))
        if unknown:
            raise ConfigError(
                f"fact-bins: {', '.join(unknown)} not among the env's facts "
                f"({', '.join(names) or 'none'})"
            )
        return cls(names, tuple(bins.get(n, 1) for n in names))

    @staticmethod
    def problems(env: str, fact_names) -> list[str]:
        if not fact_names:
            return [
                f"cells facts: the env {env!r} reports no facts; give the adapter facts "
                "(info keys or a function of (obs, info)), or use --cells downscale"
            ]
        return []

    @property
    def key_size(self) -> int:
        return 2 * sum(1 for b in self.bins if b)

    def keyer(self, start_key: bytes = b""):
        kept = [(i, b) for i, b in enumerate(self.bins) if b]
        pack = struct.Struct("<" + "h" * len(kept)).pack

        def key(frame, facts) -> bytes:
            return pack(*[facts[i] // b for i, b in kept])

        return key

    def values(self, key: bytes) -> dict[str, int]:
        names = [n for n, b in zip(self.fact_names, self.bins) if b]
        vals = struct.unpack("<" + "h" * len(names), key)
        return dict(zip(names, vals))

    def describe(self, key: bytes) -> str:
        if not key:
            return "done"
        bins = dict(zip(self.fact_names, self.bins))
        return " ".join(
            f"{n}={v}" if bins[n] == 1 else f"{n}={v * bins[n]}-{(v + 1) * bins[n] - 1}"
            for n, v in self.values(key).items()
        )

    def place(self, key: bytes):
        return None
