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


class StorageError(GoExploreError):
    """Writing to the run dir failed (disk full, read-only file system, I/O
    error). Carries the path and the OS error; what was published before (the
    previous checkpoint, flushed log chunks) is left intact."""

    def __init__(self, path, cause: OSError, hint: str = ""):
        import errno as _errno

        self.path, self.cause, self.hint = path, cause, hint
        code = _errno.errorcode.get(cause.errno, "") if cause.errno else ""
        why = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(
            f"could not write {path}: {why}"
            + (f" ({code})" if code else "")
            + (f"\n{hint}" if hint else "")
        )


class EnvError(GoExploreError):
    """An env that does not meet the protocol (goexplore.envs.base) or the
    adapter's limits: what was wrong, and what is allowed."""
