"""Test support for the pirate family and Majordomo, on top of ``tests.procs``: processes
that record their history into the test's folder, and queries of that history.

The ``pirates`` fixture wraps the shared ``procs`` fixture (every process in its own
process group, all stopped at the end of the test).
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from contract.history import read_events
from tests.procs import Proc, Procs

#: the readiness line of every role (implementations.runtime.announce_ready)
READY = r"ready: "


class Pirates:
    def __init__(self, procs: Procs) -> None:
        self.procs = procs
        self.history = procs.tmp / "history"

    def endpoint(self) -> str:
        return self.procs.endpoint()

    def start(self, module: str, args: list[str], src: str, ready: str | None = READY) -> Proc:
        """``python -m module args`` recording as ``src``; waits for its readiness line."""
        env = {"ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": src}
        proc = self.procs.python(src, module, *args, env=env)
        if ready:
            proc.wait_log(ready)
        return proc

    def proc(self, src: str) -> Proc:
        return next(p for p in self.procs.started if p.name == src)

    @staticmethod
    def kill(proc: Proc) -> None:
        """SIGKILL (a crash) and reap it."""
        proc.signal(signal.SIGKILL)
        proc.popen.wait(10)

    def events(self, ev: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """History events recorded so far (of kind ``ev``, with fields equal to ``match``), by time."""
        if not self.history.exists():
            return []
        found = [
            e
            for e in read_events(self.history)
            if (ev is None or e["ev"] == ev) and all(e.get(k) == v for k, v in match.items())
        ]
        return sorted(found, key=lambda e: e["ts"])


@pytest.fixture(name="pirates")
def pirates_fixture(procs: Procs) -> Pirates:
    return Pirates(procs)
