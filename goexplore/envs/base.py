"""The environment protocol Go-Explore needs: deterministic reset, step, and
exact clone/restore of the full state as bytes.

Any environment that implements :class:`RestorableEnv` can be explored. The
built-in toy (:mod:`goexplore.envs.toy`) is the worked example; the conformance
checks every adapter must pass live in ``tests/test_envs.py``:

* ``reset()`` is deterministic;
* restore then replay gives identical steps;
* ``clone -> restore -> clone`` is byte-stable.

Caveat that shapes the API (the ALE pitfall): right after ``restore_state``
the screen and RAM still show the PRE-restore values until the next step.
Go-Explore therefore takes cell keys only from frames returned by ``step`` and
carries the lives baseline with each cell, never reading them after a restore.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class RestorableEnv(Protocol):
    """What an environment must offer to be explored by Go-Explore."""

    #: number of discrete actions (actions are ``0 .. n_actions - 1``)
    n_actions: int
    #: names of the per-step integer facts returned by :meth:`facts` (may be empty)
    fact_names: tuple[str, ...]
    #: the fact that is the env's room ("rooms found"), or None where it has none
    room_fact: str | None
    #: the fact that is the env's level, or None where it has none
    level_fact: str | None

    def reset(self) -> np.ndarray:
        """Start the (single, deterministic) initial state; return its frame."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, int]:
        """Act; return ``(frame, reward, terminated, lives)``. The frame may be a
        buffer the env reuses on the next call."""

    def clone_state(self) -> bytes:
        """Serialize the complete state (enough to continue identically)."""

    def restore_state(self, state: bytes) -> None:
        """Restore a state from :meth:`clone_state`."""

    def lives(self) -> int:
        """Lives left in the current state (read after reset or a step)."""

    def facts(self) -> tuple[int, ...]:
        """Per-step facts (room, position, ...) read after a step."""

    def render_rgb(self) -> np.ndarray:
        """An RGB picture of the current state (reports and videos)."""

    def close(self) -> None:
        """Free resources."""
