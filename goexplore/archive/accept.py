"""The accept rule: what one exploration episode does to the archive.

This is the heart of Go-Explore Phase 1, in the reference's semantics
(docs/concepts.md):

* a visit replaces a cell's entry iff it :func:`beats` it: a higher score, or
  the same score with a strictly shorter trajectory; replacement resets the
  cell's counters (seen, chosen, chosen_since_new, steps);
* a new cell is inserted at its first visit, in first-visit order;
* ``seen`` counts once per episode for each cell the episode visited;
* the chosen cell's ``chosen_since_new`` resets when the episode found
  anything new or better.

:func:`apply_episode` does per episode what the reference does per step.
Within one episode the trajectory grows by one step per step, so of all the
visits to a cell the one that can end up stored is its best visit (the
earliest with the highest score), and the cell is replaced iff that visit
beats the live entry; a new cell keeps ``seen == 1`` iff its best visit is its
first. The worker has already reduced the episode to best visits
(:mod:`goexplore.episode`); ``tests/test_archive.py`` checks this function
against a literal per-step oracle.

Beyond the reference: with ``seen_start`` (the Nature paper's count, the
original code's) the cell an episode starts from also counts once, as visited
before the first step; ``steps`` counts the agent steps episodes spent in a
cell, added at the episode's end; with ``reset_on_update=False`` the counters
keep counting when an entry is replaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from goexplore.wire import EpisodeResult

if TYPE_CHECKING:
    from goexplore.archive.core import Archive


def beats(score: float, length: int, live_score: float, live_length: int) -> bool:
    """Does a visit (``score``, trajectory ``length``) replace the live entry?"""
    return score > live_score or (score == live_score and length < live_length)


def _visits(res: EpisodeResult, cell: int) -> bool:
    """Whether the episode visited ``cell`` (an id the worker's view knew)."""
    return bool((res.seen_ids == cell).any() or (res.cand_ids == cell).any())


def apply_episode(
    archive: Archive,
    chosen: int,
    score0: float,
    len0: int,
    last0: int,
    res: EpisodeResult,
    first_entry: int,
    on_set=None,
) -> bool:
    """Apply one exploration episode from cell ``chosen`` (captured with score
    ``score0``, trajectory length ``len0`` ending at log entry ``last0``), whose
    steps were appended to the experience log from ``first_entry``. Returns
    whether it found anything. ``on_set(i, c)``: cell ``i``'s entry was just set
    from candidate ``c``."""
    if archive.params.seen_start and not _visits(res, chosen):
        archive._seen_pending.append(np.array([chosen], np.int64))
        archive._steps_pending.append(np.zeros(1, np.int64))
    if res.n == 0:
        return False
    # cells visited whose best visit does not beat the view: seen += 1, deferred
    # (increments commute; they are applied before any entry is reset, and before
    # anything reads seen)
    if len(res.seen_ids):
        archive._seen_pending.append(res.seen_ids)
        archive._steps_pending.append(res.seen_steps)
    if res.done:
        archive.done_scores.append(res.final_score)
        archive.n_done_episodes += 1
    archive._rooms_pending.append(res.rooms)
    if len(archive._rooms_pending) > 512:
        archive._merge_rooms()  # bounds what is held
    if not len(res.cand_ids):
        return False
    if archive._seen_pending:
        archive._flush_seen()
    found = False
    keep = not archive.params.reset_on_update
    for c, (cid, t, s) in enumerate(
        zip(res.cand_ids.tolist(), res.cand_t.tolist(), res.cand_score.tolist())
    ):
        length = len0 + t + 1
        if cid < 0:
            key = res.new_keys[-1 - cid]
            cid = archive.lookup(key)
            if cid < 0:  # new: inserted in first-visit order
                i = archive.add(
                    key,
                    res.cand_states[c],
                    s,
                    length,
                    first_entry + t,
                    int(res.cand_lives[c]),
                    res.cand_facts[c],
                )
                archive._seen[i] = 1 if res.cand_first[c] else 0
                found = True
                if on_set is not None:
                    on_set(i, c)
                continue
        # (add may have grown the arrays: no aliases kept across the loop)
        if beats(s, length, archive.score[cid], archive.traj_len[cid]):
            archive._replace(
                cid,
                res.cand_states[c],
                s,
                length,
                first_entry + t,
                int(res.cand_lives[c]),
                res.cand_facts[c],
            )
            found = True
            if on_set is not None:
                on_set(cid, c)
            if not keep:
                continue  # counters start again (the reference)
        archive._seen[cid] += 1
        archive.steps[cid] += res.cand_steps[c]
        archive._touched_ids.append(cid)
    if found:
        archive.chosen_since_new[chosen] = 0
        if archive.params.pick_counters:
            archive._touched_ids.append(chosen)
    return found
