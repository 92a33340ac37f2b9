"""Explore the key maze (examples/key_maze.py) from Python, and use what was found.

    python examples/explore_key_maze.py RUN_DIR

The env is named ``key_maze:make_env`` rather than passed as a function so that two
worker processes can build it (this file puts examples/ on their path); the
``if __name__ == "__main__"`` guard is what multiprocessing asks of any script
that starts worker processes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(run_dir: str) -> int:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p
    )  # worker processes import key_maze too
    sys.path.insert(0, str(HERE))
    import goexplore

    run = goexplore.explore(
        "key_maze:make_env",
        cells="facts",
        episode_end="game",
        n_workers=2,
        steps=200_000,
        run_dir=run_dir,
        progress=lambda p: print(f"\r{p.frames:,} steps, {p.cells} cells", end=""),
    )
    print(f"\n{run}")
    best = run.best()
    print(f"best: score {best.score:g} in {len(best)} steps, ends the episode: {best.ends_episode}")

    # play the best actions from reset in a fresh env: the score is the archived one
    env = run.make_env()
    env.reset()
    score = sum(env.step(int(a))[1] for a in best.actions)
    print(f"replayed from reset: score {score:g}")

    # the cells that hold the key, and an env restored to the shortest-path one of them
    cells = run.cells()
    holding = [i for i in cells["cell"] if cells["has_key"][i] and not cells["ends_episode"][i]]
    i = min(holding, key=lambda c: cells["length"][c])
    at = run.env_at(i)
    print(f"cell {i} ({run.describe(i)}): key in hand after {cells['length'][i]} steps")
    at.close()
    env.close()
    return 0 if score == best.score > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "runs/key_maze_api"))
