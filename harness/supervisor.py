"""The process supervisor: starts, watches, signals and stops every process of a run.

Each process runs in its own process group (so a signal reaches its children too), with
stdout and stderr in ``logs/<instance>.log``, and is recorded in the history
(``proc_start``/``proc_exit``, with ``expected`` saying whether the harness caused the
exit). Processes are forked from one long-lived thread and ask the kernel to kill them
when that thread's process dies (PR_SET_PDEATHSIG), so even a runner killed with SIGKILL
leaves no broker behind; ``stop_all`` is the normal way out.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from contract.errors import SetupError
from contract.history import HistoryWriter
from contract.ports import describe_pid, listening_pids, listens, port_accepts

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def log_tail(path: Path, lines: int = 10) -> str:
    """The last ``lines`` lines of a log file ('' if there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 8192))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _taken(port: int | None, foreign: set[int]) -> str:
    """What to tell of the others listening on ``port`` (found before, or now that ours is
    gone or not listening: any listener is someone else)."""
    if port is None:
        return ""
    foreign = foreign or listening_pids(port) or set()
    if not foreign:
        return ""
    return (
        f" (port {port} was taken, between zchaos choosing it and the bind, by another "
        f"program: {'; '.join(map(describe_pid, sorted(foreign)))})"
    )


class _NewOutput:
    """The lines a process writes to its log from ``offset`` on, read as they come."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path = path
        self.offset = offset
        self.partial = b""

    def lines(self) -> list[str]:
        """The lines written since the last call, and the unfinished last one so far."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        *done, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in (*done, self.partial)]


@dataclass
class ProcSpec:
    """How to start one process: its instance name, role, argv, readiness and log."""

    instance: str
    role: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    ready_port: int | None = None  # ready when this port accepts connections
    ready_line: str | None = None  # ready when this regex matches a line of the log
    stop_signal: int = signal.SIGTERM


@dataclass
class Managed:
    spec: ProcSpec
    popen: subprocess.Popen
    expected_exit: bool = False
    frozen: bool = False
    recorded: bool = False
    log_offset: int = 0  # where this incarnation's output begins in the (appended) log

    @property
    def pid(self) -> int:
        return self.popen.pid


class Supervisor:
    """Owns the processes of one run."""

    def __init__(self, history: HistoryWriter, base_env: dict[str, str]) -> None:
        self.history = history
        self.base_env = base_env
        self.current: dict[str, Managed] = {}  # instance -> its live (or last) process
        self.every: list[Managed] = []
        self._lock = threading.RLock()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="zchaos-spawn")
        self._stop_watch = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="zchaos-reaper", daemon=True)
        self._watcher.start()
        self.on_unexpected_exit: Callable[[Managed], None] | None = None

    # -- starting -----------------------------------------------------------------

    def _popen(self, spec: ProcSpec) -> tuple[subprocess.Popen, int]:
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("ab") as log:
            # A restarted instance appends to the log of its previous incarnations: readiness
            # must only read from here on.
            offset = log.tell()
            return subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**self.base_env, **spec.env},
                start_new_session=True,
                preexec_fn=_die_with_parent,
            ), offset

    def start(self, spec: ProcSpec, *, ready_timeout: float = 30.0) -> Managed:
        """Start ``spec`` and wait until it is ready; SetupError if it dies or never is."""
        try:
            popen, offset = self._spawner.submit(self._popen, spec).result()
        except (OSError, subprocess.SubprocessError) as exc:
            raise SetupError(f"cannot start {spec.instance} ({spec.argv[0]}): {exc}") from None
        managed = Managed(spec, popen, log_offset=offset)
        with self._lock:
            self.current[spec.instance] = managed
            self.every.append(managed)
        self.history.emit("proc_start", role=spec.role, instance=spec.instance, pid=popen.pid)
        self._wait_ready(managed, ready_timeout)
        return managed

    def _wait_ready(self, managed: Managed, timeout: float) -> None:
        spec = managed.spec
        if spec.ready_port is None and spec.ready_line is None:
            return
        pattern = re.compile(spec.ready_line) if spec.ready_line else None
        output = _NewOutput(spec.log, managed.log_offset)
        deadline = time.monotonic() + timeout
        foreign: set[int] = set()  # who else listens on the ready port
        while time.monotonic() < deadline:
            if managed.popen.poll() is not None:
                raise SetupError(
                    f"{spec.instance} exited with code {managed.popen.returncode} before it was ready"
                    f"{_taken(spec.ready_port, foreign)}; last lines of {spec.log}:\n{log_tail(spec.log)}"
                )
            port = spec.ready_port
            if port is not None and port_accepts(port) and listens(port, managed.pid, foreign):
                return
            if pattern is not None and any(map(pattern.search, output.lines())):
                return
            time.sleep(0.05)  # polling a condition with a deadline, not synchronising on time
        what = (
            f"port {spec.ready_port} to accept" if spec.ready_port else f"a line matching {spec.ready_line!r}"
        )
        raise SetupError(
            f"{spec.instance} was not ready after {timeout:.0f} s (waited for {what})"
            f"{_taken(spec.ready_port, foreign)}; last lines of {spec.log}:\n{log_tail(spec.log)}"
        )

    # -- signalling -----------------------------------------------------------------

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        """Send ``sig`` to the process group of ``instance``; its pid, or None if it is gone."""
        with self._lock:
            managed = self.current.get(instance)
            if managed is None or managed.popen.poll() is not None:
                return None
            if expected_exit:
                managed.expected_exit = True
            if sig == signal.SIGSTOP:
                managed.frozen = True
            elif sig == signal.SIGCONT:
                managed.frozen = False
            with contextlib.suppress(ProcessLookupError):
                os.killpg(managed.pid, sig)
            return managed.pid

    def running(self, instance: str) -> int | None:
        """The pid of ``instance`` if it runs now (a frozen process runs), else None."""
        with self._lock:
            managed = self.current.get(instance)
            return managed.pid if managed is not None and managed.popen.poll() is None else None

    def stop(self, instance: str, timeout: float = 5.0) -> None:
        """Stop ``instance`` (its stop signal, then SIGKILL after ``timeout``) and wait for it."""
        with self._lock:
            managed = self.current.get(instance)
        if managed is not None:
            self._stop([managed], timeout)

    def _stop(self, processes: Sequence[Managed], timeout: float) -> None:
        live = [m for m in processes if m.popen.poll() is None]
        for m in live:
            m.expected_exit = True
            with contextlib.suppress(ProcessLookupError):
                if m.frozen:  # a stopped process cannot act on SIGTERM
                    os.killpg(m.pid, signal.SIGCONT)
                os.killpg(m.pid, m.spec.stop_signal)
        deadline = time.monotonic() + timeout
        for m in live:
            try:
                m.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(m.pid, signal.SIGKILL)
                m.popen.wait()
        for m in live:
            # Whatever the group leader left behind in its group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(m.pid, signal.SIGKILL)
        self.reap()

    def stop_all(self, timeout: float = 5.0) -> None:
        """Stop every process of the run; nothing it started is left afterwards."""
        with self._lock:
            everything = list(self.every)
        self._stop(everything, timeout)
        self._stop_watch.set()
        self._watcher.join(timeout=2)
        self._spawner.shutdown(wait=True)

    # -- watching -------------------------------------------------------------------

    def reap(self) -> None:
        """Record the exit of every process that ended since the last call."""
        with self._lock:
            for m in self.every:
                if m.recorded or m.popen.poll() is None:
                    continue
                m.recorded = True
                code = m.popen.returncode
                fields = {"signal": -code} if code < 0 else {"code": code}
                self.history.emit(
                    "proc_exit", role=m.spec.role, instance=m.spec.instance, pid=m.pid,
                    expected=m.expected_exit, **fields,
                )  # fmt: skip
                if not m.expected_exit and self.on_unexpected_exit is not None:
                    self.on_unexpected_exit(m)

    def _watch(self) -> None:
        while not self._stop_watch.wait(0.1):
            self.reap()

    def alive(self, instance: str) -> bool:
        with self._lock:
            managed = self.current.get(instance)
            return managed is not None and managed.popen.poll() is None
