"""Fidelity: goexplore's archive equals the reference script's, cell by cell
(key, score, trajectory length, seen, chosen, chosen_since_new, lives, trajectory
pointer) and entry by entry in the experience log, after 20 batches on
Montezuma — whatever the number of workers."""

from __future__ import annotations

import pytest
from conftest import (
    FIDELITY_ENV,
    FIDELITY_FRAMES,
    FIDELITY_SEED,
    archive_table,
    assert_same_archive,
    run_ours,
)


def test_reference_budget_covers_20_batches(reference_montezuma):
    assert reference_montezuma["batch"] >= 20


@pytest.mark.parametrize(
    "n_workers",
    [
        2,
        pytest.param(1, marks=pytest.mark.slow),
        pytest.param(3, marks=pytest.mark.slow),
    ],
)
def test_archive_equals_reference(reference_montezuma, n_workers):
    ours = archive_table(run_ours(FIDELITY_ENV, FIDELITY_SEED, FIDELITY_FRAMES, n_workers))
    assert_same_archive(ours, reference_montezuma)
    # not a vacuous comparison: exploration got somewhere
    assert len(ours["cells"]) > 150
    assert any(c["seen"] > 1 for c in ours["cells"])
    assert any(c["chosen"] > 0 for c in ours["cells"])


def test_worker_count_does_not_change_the_toy_archive():
    tables = [archive_table(run_ours("toy", 7, 30_000, w)) for w in (1, 2, 3)]
    for t in tables[1:]:
        assert_same_archive(t, tables[0])
