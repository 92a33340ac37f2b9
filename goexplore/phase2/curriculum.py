"""The backward curriculum of Salimans & Chen (2018), as Go-Explore's Phase 2 uses it.

Each demo has a *start point*: the step along the demo where training episodes
start (restored to the state the demo reached there). At first it is one step
before the demo's end, so the agent only has to finish what the demo did. An episode started
at the point is a *success* when its return from there reaches what the demo
earned from there (its remaining score). Once at least ``window`` episodes have
started at the point and the share of successes among the last ``window`` of them
reaches ``threshold``, the point moves back ``step`` steps (never below 0) and the
count starts again. Training from reset is reached when every demo's point is 0.

Only a share (``at_point``) of the episodes start at the point; the others start at a
step drawn uniformly between the point and the demo's end. They keep the parts the
policy has learned in its training data (without them a policy that fails at a new
point for long drifts and forgets the rest) and do not count for moving the point.

Pure Python and JSON: the curriculum is saved with every Phase 2 checkpoint and
restored as it was.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: the documented defaults (``goexplore robustify --help``)
THRESHOLD = 0.2  # success share at the point that moves it back
WINDOW = 20  # episodes at the point it judges by
START_FROM_END = 1  # the first point: steps before the demo's end
STEP_FRACTION = 0.02  # how far a move goes: this share of the demo (at least 1 step)
AT_POINT = 0.5  # the share of episodes that start at the point; the rest start later along it


@dataclass
class DemoPoint:
    length: int  # the demo's steps
    point: int  # where episodes start: steps from the demo's beginning
    step: int  # steps a move goes back
    results: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    moves: int = 0

    @property
    def from_end(self) -> int:
        return self.length - self.point


class Curriculum:
    def __init__(
        self,
        lengths: list[int],
        *,
        threshold: float = THRESHOLD,
        window: int = WINDOW,
        start_from_end: int = START_FROM_END,
        step_fraction: float = STEP_FRACTION,
        at_point: float = AT_POINT,
    ):
        if not lengths or min(lengths) < 1:
            raise ValueError("a curriculum needs demos of at least one step")
        if not 0 < threshold <= 1 or window < 1:
            raise ValueError("threshold in (0, 1] and window >= 1")
        if not 0 < at_point <= 1:
            raise ValueError("at_point in (0, 1]")
        self.threshold, self.window, self.at_point = threshold, window, at_point
        self.points = [
            DemoPoint(
                n,
                max(0, n - max(1, start_from_end)),
                max(1, round(step_fraction * n)),
                deque(maxlen=window),
            )
            for n in lengths
        ]

    def start(self, demo: int, rng=None) -> int:
        """Where the next episode on ``demo`` starts: the point, or with ``rng`` a share
        ``1 - at_point`` of the time a step drawn between the point and the end."""
        p = self.points[demo]
        if rng is None or p.point >= p.length - 1 or rng.random() < self.at_point:
            return p.point
        return int(rng.integers(p.point + 1, p.length))

    def record(self, demo: int, start: int, success: bool) -> bool:
        """An episode that started at ``start`` on ``demo`` ended; True when the point moved.
        Episodes that started before the point last moved do not count."""
        p = self.points[demo]
        if start != p.point:
            return False
        p.results.append(bool(success))
        if len(p.results) >= self.window and self.success(demo) >= self.threshold and p.point:
            p.point = max(0, p.point - p.step)
            p.results.clear()
            p.moves += 1
            return True
        return False

    def success(self, demo: int) -> float:
        """The success share of the last episodes at the point (0 when none yet)."""
        r = self.points[demo].results
        return sum(r) / len(r) if r else 0.0

    @property
    def at_reset(self) -> bool:
        return all(p.point == 0 for p in self.points)

    @property
    def progress(self) -> float:
        """How far back the curriculum has come: 0 at the start, 1 at reset (mean over demos)."""
        done = [(p.length - p.point) / p.length if p.length else 1.0 for p in self.points]
        return sum(done) / len(done)

    # --- checkpoints ------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "threshold": self.threshold,
            "window": self.window,
            "at_point": self.at_point,
            "demos": [
                {
                    "length": p.length,
                    "point": p.point,
                    "step": p.step,
                    "results": [int(x) for x in p.results],
                    "moves": p.moves,
                }
                for p in self.points
            ],
        }

    @classmethod
    def from_json(cls, d: dict) -> Curriculum:
        try:
            c = cls(
                [int(p["length"]) for p in d["demos"]],
                threshold=float(d["threshold"]),
                window=int(d["window"]),
                at_point=float(d.get("at_point", 1.0)),
            )
            for p, q in zip(c.points, d["demos"]):
                p.point, p.step, p.moves = int(q["point"]), int(q["step"]), int(q["moves"])
                p.results.extend(bool(x) for x in q["results"])
                if not 0 <= p.point <= p.length or p.step < 1:
                    raise ValueError(f"point {p.point} / step {p.step} out of range")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed curriculum ({e})") from None
        return c
