"""Test support for the pirate family and Majordomo: real processes, free ports, polling.

Each process runs in its own session (process group) with its history recorded to a
temporary folder; ``Procs.stop_all`` (called by the ``procs`` fixture's finalizer) ends
every group it started: SIGTERM, a deadline, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.history import read_events

ROOT = Path(__file__).resolve().parent.parent


def free_endpoint() -> str:
    """A tcp endpoint on 127.0.0.1 whose port the OS just handed out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


class Proc:
    """One implementation process (``python -m MODULE ARGS``) in its own process group."""

    def __init__(self, module: str, args: list[str], src: str, tmp: Path) -> None:
        self.src = src
        self.out = tmp / f"{src}.out"
        self.err = tmp / f"{src}.err"
        self.history = tmp / "history"
        env = {**os.environ, "ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": src}
        env["PYTHONPATH"] = str(ROOT)
        with self.out.open("ab") as out, self.err.open("ab") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_line(self, pattern: str, timeout_s: float = 15.0) -> None:
        regex = re.compile(pattern)

        def seen() -> bool:
            if self.popen.poll() is not None:
                code = self.popen.returncode
                raise AssertionError(f"{self.src} exited with {code}: {self.stderr()[-2000:]}")
            return bool(regex.search(self.out.read_text(errors="replace")))

        wait_until(seen, timeout_s, f"{pattern!r} from {self.src}")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace") if self.err.exists() else ""

    def send_signal(self, sig: int) -> None:
        os.killpg(self.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> int | None:
        """End the group (``sig``, then SIGKILL after the deadline); the exit code."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.pid, sig)
                if sig == signal.SIGSTOP:
                    return None
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(timeout_s)
            except ProcessLookupError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):  # a child left in its group
            os.killpg(self.pid, signal.SIGKILL)
        return self.popen.returncode


class Procs:
    """Starts processes for one test and ends them all afterwards."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[Proc] = []

    def start(self, module: str, args: list[str], src: str, ready: str | None = "ready") -> Proc:
        proc = Proc(module, args, src, self.tmp)
        self.started.append(proc)
        if ready:
            proc.wait_line(ready)
        return proc

    def events(self, ev: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """History events recorded so far (of kind ``ev``, with fields equal to ``match``)."""
        history = self.tmp / "history"
        if not history.exists():
            return []
        found = []
        for e in read_events(history):
            if (ev is None or e["ev"] == ev) and all(e.get(k) == v for k, v in match.items()):
                found.append(e)
        return sorted(found, key=lambda e: e["ts"])

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # a frozen process cannot handle SIGTERM
                    os.killpg(proc.pid, signal.SIGCONT)
            proc.stop()
