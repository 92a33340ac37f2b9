"""Presets: documented bundles of ordinary config fields; flags override them;
config.json records the result; a resume starts from the run's own config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from goexplore.config import Config
from goexplore.errors import ConfigError
from goexplore.presets import PRESETS, apply_preset


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "goexplore.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_reference_preset_is_the_default_config():
    assert apply_preset("reference", {}) == Config()
    assert Config().preset == "reference" and Config().cells == "downscale"


def test_flags_override_the_preset():
    cfg = apply_preset("montezuma-dk", {"horiz_weight": 0.5, "seed": 3})
    assert cfg.horiz_weight == 0.5 and cfg.keys_weight == 1.0 and cfg.seed == 3
    assert cfg.cells == "montezuma-dk" and cfg.preset == "montezuma-dk"
    assert cfg.low_level_weight == 0.1 and cfg.episode_end == "life"
    assert apply_preset("pitfall-dk", {}).env == "pitfall"
    # the no-DK preset ends episodes at game over (the paper's rule, measured better
    # than a life loss on 2 of 3 seeds); a flag still wins
    assert apply_preset("downscale-dynamic", {}).episode_end == "game"
    assert apply_preset("downscale-dynamic", {"episode_end": "life"}).episode_end == "life"


def test_downscale_dynamic_stops_explorations_at_a_life_loss_with_regions_and_the_guard():
    """The no-DK preset carries the three flags of docs/studies/2026-12-06-no-dk-preset.md;
    it is valid on any game, and --episode-end life asks for the stop to be turned off."""
    cfg = apply_preset("downscale-dynamic", {"env": "venture"})
    assert cfg.stop_at_life_loss is True and cfg.episode_end == "game"
    assert cfg.region_power == 1.0 and cfg.dynamic_min_cells == 0.5
    cfg.validate()
    with pytest.raises(ConfigError, match="add --stop-at-life-loss false"):
        apply_preset("downscale-dynamic", {"episode_end": "life"}).validate()
    life = {"episode_end": "life", "stop_at_life_loss": False}
    apply_preset("downscale-dynamic", life).validate()


def test_unknown_preset_and_wrong_game_are_named():
    with pytest.raises(ConfigError, match="unknown; choose one of: reference, montezuma-dk"):
        apply_preset("fast", {})
    with pytest.raises(ConfigError, match="made for --env pitfall"):
        apply_preset("pitfall-dk", {"env": "montezuma"})


def test_presets_command_lists_each_preset_on_one_line():
    r = _cli("presets")
    assert r.returncode == 0
    lines = [ln for ln in r.stdout.splitlines() if ln.split(" ", 1)[0] in PRESETS]
    assert [ln.split()[0] for ln in lines] == list(PRESETS)
    r = _cli("presets", "montezuma-dk")
    assert (
        r.returncode == 0 and "--keys-weight 1.0" in r.stdout and "--horiz-weight 0.1" in r.stdout
    )


def test_config_written_by_an_older_version_loads_with_reference_defaults():
    old = {
        k: v
        for k, v in Config(seed=4).to_json().items()
        if k
        in (
            "env",
            "seed",
            "total_frames",
            "n_workers",
            "batch_cells",
            "explore_steps",
            "action_repeat_p",
            "cell_width",
            "cell_height",
            "cell_levels",
            "log_every_batches",
            "ckpt_every",
            "explog_chunk",
        )
    }
    assert Config.from_json(old) == Config(seed=4)


def test_run_with_a_preset_records_it_and_resume_needs_no_flags(tmp_path):
    d = tmp_path / "run"
    r = _cli(
        "run",
        "--preset",
        "montezuma-dk",
        "--horiz-weight",
        "0.3",
        "--total-frames",
        "150",
        "--batch-cells",
        "2",
        "--log-every-batches",
        "1",
        "--run-dir",
        str(d),
    )
    assert r.returncode == 0, r.stderr
    assert "preset montezuma-dk" in r.stdout and "highest level (from 0)     0" in r.stdout
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["preset"] == "montezuma-dk" and cfg["cells"] == "montezuma-dk"
    assert cfg["horiz_weight"] == 0.3 and cfg["keys_weight"] == 1.0
    final = json.loads((d / "final.json").read_text())
    assert final["max_level"] == 0 and final["rooms_found"] >= 1 and final["verified"]
    row = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()][-1]
    assert row["max_level"] == 0 and row["rooms_found"] >= 1
    # resume with only a bigger budget: the run's own config is the starting point
    r = _cli("run", "--total-frames", "300", "--run-dir", str(d), "--resume", "auto")
    assert r.returncode == 0, r.stderr
    assert json.loads((d / "config.json").read_text())["horiz_weight"] == 0.3
    before = sorted(p.name for p in d.rglob("*"))
    r = _cli("run", "--preset", "reference", "--run-dir", str(d), "--resume", "auto")
    assert r.returncode == 2 and "started with preset 'montezuma-dk'" in r.stderr
    assert sorted(p.name for p in d.rglob("*")) == before


def test_game_without_rooms_reports_none(tmp_path):
    d = tmp_path / "run"
    r = _cli(
        "run",
        "--env",
        "venture",
        "--total-frames",
        "100",
        "--batch-cells",
        "2",
        "--log-every-batches",
        "1",
        "--run-dir",
        str(d),
    )
    assert r.returncode == 0, r.stderr
    final = json.loads((d / "final.json").read_text())
    assert final["rooms_found"] is None and final["max_level"] is None
    assert "  rooms  " not in r.stdout.split("done:")[1]
