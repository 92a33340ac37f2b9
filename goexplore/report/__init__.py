"""Run reports: curves, the room map, the best trajectory as a video, the
top cells (``goexplore report``); TensorBoard scalars during a run."""

from __future__ import annotations

from goexplore.report.build import Report, build_report

__all__ = ["Report", "build_report"]
