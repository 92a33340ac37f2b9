"""Export a run's trajectories: ``picks`` chooses them, ``minari`` writes and
loads them as a Minari dataset, ``build`` runs ``goexplore demo``."""
