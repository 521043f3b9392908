"""Errors a user can act on. The CLI prints them (no traceback) and exits 2 (4 for a file
of zchaos's own that could not be written: the run's outputs are incomplete)."""

from __future__ import annotations

from pathlib import Path


class SetupError(Exception):
    """The scenario, the manifest or the machine is not as a run needs it (exit code 2).

    ``where`` names the file (and key, or frame) at fault, so the message can say where to look.
    """

    exit_code = 2

    def __init__(self, message: str, *, where: str | Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = str(where) if where is not None else None

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def key_path(file: str | Path, *keys: str | int) -> str:
    """``file: key.sub[2]`` style location for an error message."""
    parts = ""
    for key in keys:
        parts += f"[{key}]" if isinstance(key, int) else (f".{key}" if parts else str(key))
    return f"{file}: {parts}" if parts else str(file)


class LoadGeneratorCrashed(SetupError):
    """Locust, zchaos's load generator, died of a signal in the middle of a run: a crash of
    ours or of a library in it (libzmq aborts on its own assertions), neither the system's
    doing nor the user's input. The run gets no verdict; an exploration counts it incomplete
    and goes on (harness/explore/loop.py)."""


class CannotWrite(SetupError):
    """A file of zchaos's own could not be written (a full disk, most often): what it would have
    said is missing, so the outcome is incomplete (exit 4), and nothing half-written is left."""

    exit_code = 4  # contract/outcomes.py: incomplete

    def __init__(self, path: str | Path, exc: OSError, what: str = "") -> None:
        why = (exc.strerror or str(exc)).lower()
        super().__init__(f"{why}: {what}" if what else why, where=path)
        self.errno = exc.errno
