"""Presets: documented bundles of ordinary config fields.

``goexplore run --preset NAME`` starts from the defaults, applies the preset's
fields, then the flags given on the command line (a flag always wins). The
run's config.json records every field, and ``preset`` names the bundle it
started from. ``goexplore presets`` lists them.

Where the settings come from:

* ``reference`` — the reference script (docs/concepts.md): 11x8 downscaled
  frames with 9 grey levels, weight 1/sqrt(seen+1), an episode ends at a life
  loss. The default; reproduces the reference exactly.
* ``montezuma-dk`` — the Montezuma domain-knowledge run of the Go-Explore
  papers (Ecoffet et al. 2019, Nature 2021; the original code's
  ``phase1_montezuma.sh``): cells (level, room, x, y, keys with the rooms they
  were taken in) on 16-pixel squares of a 2x-wide frame; selection weight
  ``(1/sqrt(seen+1) + 1 * holds-the-most-keys-here + 0.1 * missing
  left/right neighbours) * 0.1^(max level - level)``; counters reset when a
  cell improves. The episode still ends at a life loss, as there.
* ``pitfall-dk`` — the Pitfall domain-knowledge run (``phase1_pitfall.sh``):
  cells (scene, treasures left, x, y); seen weight 1 and nothing else.
* ``downscale-dynamic`` — the no-domain-knowledge run of the Nature paper (the
  original code's ``phase1_downscaled.sh``): the downscale re-chosen from recent
  frames (:mod:`goexplore.dynamic`), split factor 0.125, seen weight 1, counters
  reset on update, and an episode that ends at game over, as there (against a life
  loss: better on 2 of 3 seeds and in the median at 2M and 3M, docs/studies/
  2026-12-04-no-dk-selection.md). Departures, chosen on measurements over several
  seeds: a chosen-since-new weight of 1 beside the paper's seen weight; explorations
  that stop at a life loss, the region term at power 1 and the guard against a
  downscale choice of too few cells, which found more on Montezuma (seeds 0-4) and as
  much or more in the median on Venture and Pitfall (seeds 0-2; docs/studies/
  2026-12-06-no-dk-preset.md). The paper's
  cadence (one choice after 10,000 steps, then every 10M of a 500M-step run) is
  scaled to runs of millions of steps (see ``goexplore.dynamic``).
* ``minigrid`` — any MiniGrid or BabyAI env (``--env gym:MiniGrid-...``; default
  ``gym:MiniGrid-DoorKey-8x8-v0``): cells from the adapter's facts (x, y, direction,
  carried object, open doors, keys left), weight 1/sqrt(seen+1), and an episode that
  ends when the env ends it (MiniGrid has no lives). The tables are in
  docs/custom-envs.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from fnmatch import fnmatchcase

from goexplore.config import Config
from goexplore.errors import ConfigError


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str  # one line for `goexplore presets`
    settings: dict  # config field -> value
    envs: tuple[str, ...] | None = None  # the envs it is made for, as patterns (None: any)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "reference",
            "the reference script exactly: 11x8x9 downscaled frames, "
            "weight 1/sqrt(seen+1), episode ends at a life loss (the default)",
            {},
        ),
        Preset(
            "montezuma-dk",
            "Montezuma with domain knowledge (papers' settings): cells (level, "
            "room, x, y, keys + their rooms); seen 1, most-keys 1, horizontal "
            "neighbours 0.1, level weight 0.1",
            {
                "env": "montezuma",
                "cells": "montezuma-dk",
                "cell_x_bin": 8,
                "cell_y_bin": 16,
                "seen_weight": 1.0,
                "seen_power": 0.5,
                "keys_weight": 1.0,
                "horiz_weight": 0.1,
                "vert_weight": 0.0,
                "low_level_weight": 0.1,
                "reset_on_update": True,
            },
            envs=("montezuma",),
        ),
        Preset(
            "pitfall-dk",
            "Pitfall with domain knowledge (papers' settings): cells (scene, "
            "treasures left, x, y); seen weight 1",
            {
                "env": "pitfall",
                "cells": "pitfall-dk",
                "cell_x_bin": 8,
                "cell_y_bin": 16,
                "seen_weight": 1.0,
                "seen_power": 0.5,
                "reset_on_update": True,
            },
            envs=("pitfall",),
        ),
        Preset(
            "downscale-dynamic",
            "no domain knowledge (the Nature paper's dynamic downscaling): the downscale "
            "re-chosen from recent frames, split factor 0.125, choices of at least half the "
            "target cells; seen weight 1, chosen-since-new weight 1, region power 1; episode "
            "ends at game over, explorations stop at a life loss",
            {
                "cells": "downscale-dynamic",
                "seen_weight": 1.0,
                "seen_power": 0.5,
                "since_new_weight": 1.0,
                "since_new_power": 0.5,
                "reset_on_update": True,
                "episode_end": "game",
                "stop_at_life_loss": True,
                "region_power": 1.0,
                "dynamic_min_cells": 0.5,
            },
        ),
        Preset(
            "minigrid",
            "MiniGrid and BabyAI envs (--env gym:MiniGrid-...; default DoorKey-8x8): cells "
            "from position, direction, carried object, open doors, keys left; "
            "weight 1/sqrt(seen+1); episode ends when the env ends it",
            {
                "env": "gym:MiniGrid-DoorKey-8x8-v0",
                "cells": "facts",
                "episode_end": "game",
            },
            envs=("gym:MiniGrid-*", "gym:BabyAI-*"),
        ),
    )
}


def apply_preset(name: str, given: dict) -> Config:
    """Defaults, then preset ``name``, then the fields in ``given`` (flags)."""
    try:
        preset = PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"--preset {name!r}: unknown; choose one of: "
            f"{', '.join(PRESETS)} (see `goexplore presets`)"
        ) from None
    known = {f.name for f in fields(Config)}
    bad = set(preset.settings) - known
    if bad:  # a programming error in the table, named plainly
        raise ConfigError(f"preset {name!r} sets unknown fields {sorted(bad)}")
    env = given.get("env")
    if preset.envs is not None and env is not None:
        if not any(fnmatchcase(env, pat) for pat in preset.envs):
            raise ConfigError(
                f"--preset {name} is made for --env {' or '.join(preset.envs)}; got --env "
                f"{env} (choose another preset, e.g. reference)"
            )
    return Config(**{**preset.settings, "preset": name, **given})


def describe() -> str:
    """The `goexplore presets` listing: one line per preset."""
    width = max(map(len, PRESETS))
    return "\n".join(f"{p.name:<{width}}  {p.summary}" for p in PRESETS.values())
