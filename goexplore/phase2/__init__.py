"""Phase 2: robustify Phase 1's demos into a policy that plays from reset under
sticky actions (the backward algorithm of Salimans & Chen 2018 with
Stable-Baselines3's PPO), and evaluate it under the standard stochastic protocol.

* :mod:`.curriculum`: the start points along the demos and when they move back;
* :mod:`.envs`: the env episodes run in (start states, sticky actions, no-ops,
  observations);
* :mod:`.source`: demos from a run dir or a demo dataset, replay-checked;
* :mod:`.robustify`: training, checkpoints (safetensors + JSON), the final policy;
* :mod:`.evaluate`: scores from reset.

torch and Stable-Baselines3 are the optional extra ``[phase2]``; only this package
imports them.
"""

from __future__ import annotations

from goexplore.errors import GoExploreError

INSTALL = "pip install 'goexplore[phase2]'"


def require() -> None:
    """A clear error when the extra is missing."""
    missing = []
    for mod in ("torch", "stable_baselines3", "safetensors"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise GoExploreError(
            f"Phase 2 needs {', '.join(missing)}: {INSTALL} "
            "(from a clone: pip install -e '.[phase2]')"
        )
