"""One schema per run-dir format (:mod:`goexplore.formats`): what a run writes
keeps to it, and every reader applies the same rule to a bad metrics line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_ours

from goexplore import formats
from goexplore.errors import CheckpointError, GoExploreError, RunDirError
from goexplore.runner import execute, prepare
from goexplore.store import RunDir
from goexplore.verify import verify_run

from test_store import CFG


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("formats") / "run"
    p, _ = prepare(CFG, d, None)
    assert execute(p, log=lambda *a: None) is not None
    return d


def test_what_a_run_writes_keeps_to_the_schemas(finished):
    rows, notes = formats.read_metrics(finished / "metrics.jsonl")
    assert rows and not notes
    for row in rows:
        assert set(row) <= set(formats.METRICS_FIELDS), set(row) - set(formats.METRICS_FIELDS)
        assert set(formats.METRICS_REQUIRED) <= set(row)
    final = json.loads((finished / "final.json").read_text())
    assert set(final) <= set(formats.FINAL_FIELDS)
    formats.check_final(final, "final.json")
    rd = RunDir(finished)
    for ckpt in rd.checkpoints():
        meta = json.loads((ckpt / "meta.json").read_text())
        assert set(meta) <= set(formats.META_FIELDS), set(meta) - set(formats.META_FIELDS)
        formats.validate_meta(meta, ckpt)
    assert rd.read_config() == CFG.validate()


def test_an_unknown_metrics_field_is_refused_where_rows_are_made():
    with pytest.raises(ValueError, match="no schema"):
        formats.metrics_row(batch=1, frames=2, max_archive_score=0.0, n_cells=1, typo=3)


def test_one_rule_for_a_bad_metrics_line(finished, tmp_path):
    """A malformed line in the middle: verify, compare, report and resume all
    name the file and line; a last line cut short by a crash is a note for all."""
    from goexplore.report.compare import load_run

    d = tmp_path / "run"
    shutil.copytree(finished, d)
    m = d / "metrics.jsonl"
    lines = m.read_text().splitlines(keepends=True)
    good = "".join(lines)

    m.write_text(good + lines[-1][: len(lines[-1]) // 2])  # cut short: tolerated everywhere
    assert verify_run(d).ok and any("cut short" in n for n in verify_run(d).notes)
    assert len(load_run(d).rows) == len(lines)
    assert len(RunDir(d).read_metrics()) == len(lines)

    bad = lines[:2] + ['{"frames": "many"}\n'] + lines[2:]
    m.write_text("".join(bad))
    where = f"{m}, line 3: malformed metrics line"
    rep = verify_run(d)
    assert not rep.ok and any(where in p for p in rep.problems), rep.text()
    for read in (lambda: load_run(d), lambda: RunDir(d).read_metrics()):
        with pytest.raises(GoExploreError, match="line 3: malformed metrics line"):
            read()
    with pytest.raises(RunDirError, match="line 3: malformed"):
        prepare(CFG, d, "auto")  # resume carries the rows over: the same rule


@pytest.mark.parametrize(
    "row, why",
    [
        ({"frames": -1}, "non-negative"),
        ({"frames": 5, "n_cells": "x"}, "'n_cells' must be an integer"),
        ({"frames": 5, "best_done_score": "x"}, "must be a number or null"),
        ([1], "JSON object"),
    ],
)
def test_metrics_row_checks(row, why):
    assert why in formats.check_metrics_row(row)


def test_rows_must_advance():
    assert "does not increase" in formats.check_metrics_row({"frames": 5}, prev_frames=5)
    assert formats.check_metrics_row({"frames": 6}, prev_frames=5) is None


def test_final_json_checked_where_read(finished, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(finished, d)
    final = json.loads((d / "final.json").read_text())
    final["n_cells"] = "lots"
    (d / "final.json").write_text(json.dumps(final))
    with pytest.raises(RunDirError, match="'n_cells' must be an integer"):
        formats.read_final(d / "final.json")
    assert not verify_run(d).ok


def test_checkpoint_meta_is_checked_before_it_is_written(tmp_path):
    p = run_ours("toy", 1, 2_000, 1, run_dir=tmp_path / "run")
    p.explog.count += 1  # the log no longer matches the steps: an inconsistent meta
    with pytest.raises(CheckpointError, match="explog.count"):
        p.checkpoint()
    assert RunDir(tmp_path / "run").checkpoints() == []


def test_the_run_dir_spec_documents_every_field_of_every_schema():
    """docs/run-dir-format.md names each field the schemas define (a new field must
    be documented before it ships)."""
    doc = (Path(__file__).parents[1] / "docs" / "run-dir-format.md").read_text()
    schemas = (formats.METRICS_FIELDS, formats.FINAL_FIELDS, formats.META_FIELDS)
    for schema in (*schemas, formats.BRANCH_FIELDS):
        missing = [name for name in schema if f"`{name}`" not in doc]
        assert not missing, f"undocumented fields: {missing}"
    assert f"The current version is\n**{formats.CHECKPOINT_VERSION}**" in doc
