"""The archive of cells. Read :mod:`goexplore.archive.accept` first: the accept
rule, the heart of the algorithm; :mod:`goexplore.archive.core` holds the cells."""

from goexplore.archive.accept import apply_episode, beats
from goexplore.archive.core import DONE_SCORES_KEPT, Archive, Capture

__all__ = ["DONE_SCORES_KEPT", "Archive", "Capture", "apply_episode", "beats"]
