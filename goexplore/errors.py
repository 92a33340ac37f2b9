"""The project's error types. Every user-facing failure is one of these."""


class GoExploreError(Exception):
    """Base class: a problem the user can act on (bad input, damaged files)."""


class ConfigError(GoExploreError):
    """Invalid configuration or command-line input."""


class RunDirError(GoExploreError):
    """A run directory that cannot be used as asked."""


class CheckpointError(GoExploreError):
    """A checkpoint or experience-log chunk that is missing, truncated or altered."""


class WorkerError(GoExploreError):
    """A worker failed; carries the worker's traceback text."""
