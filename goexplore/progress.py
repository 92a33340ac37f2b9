"""Progress while a run explores. (Plain lines for now.)"""
from __future__ import annotations


class ProgressReporter:
    def __init__(self, total: int, start: int = 0):
        self.total = total

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def print(self, msg: str) -> None:
        print(msg, flush=True)

    def update(self, p) -> None:
        best = "-" if p.best_done is None else f"{p.best_done:g}"
        print(f"batch {p.batch:>6}  steps {p.frames:>11,}/{p.total:,}  {p.steps_per_s:7.0f}/s  "
              f"cells {p.cells:>6}  rooms {p.rooms:>3}  best {best}  max {p.max_score:g}", flush=True)
