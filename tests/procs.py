"""Helpers for tests that run real processes: start in a new process group, wait for a
condition with a deadline, and stop everything at the end of the test."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from contract.history import read_events
from contract.ports import PortAllocator

ROOT = Path(__file__).resolve().parent.parent


def wait_for(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> object:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def bind_again(socket: zmq.Socket, endpoint: str, timeout: float = 10) -> None:
    """Bind ``socket`` to ``endpoint`` once the port a closed socket held there is free again
    (a peer that restarted on the same address)."""

    def bound() -> bool:
        try:
            socket.bind(endpoint)
        except zmq.ZMQError:
            return False  # the old socket's port not released yet
        return True

    wait_for(bound, timeout, f"{endpoint} bound again")


def processes_of(runs: Path) -> list:
    """The live processes of the runs under ``runs`` (by the history folder they inherit)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            mine = proc.environ().get("ZCHAOS_HISTORY_DIR", "").startswith(str(runs))
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def nemesis_events(runs: Path, ev: str) -> list[dict]:
    """The nemesis's events of kind ``ev`` (``fault_start``...) so far, of the run under ``runs``."""
    nemesis = list(runs.glob("*/history/nemesis.jsonl"))
    return [e for e in read_events(nemesis[0]) if e["ev"] == ev] if nemesis else []


@contextlib.contextmanager
def run_process(
    scenario: Path, runs: Path, *args: str, env: dict[str, str] | None = None, output: bool = True
) -> Iterator[subprocess.Popen]:
    """``zchaos run SCENARIO --runs-dir RUNS ARGS`` in a process group of its own, its output
    piped (dropped without ``output``). If it still runs after the block, the group is killed."""
    out = subprocess.PIPE if output else subprocess.DEVNULL
    runner = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", str(scenario), "--runs-dir", str(runs), *args],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
        start_new_session=True, env=env,
    )  # fmt: skip
    try:
        yield runner
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()


@contextlib.contextmanager
def report_process(
    run_root: Path, env: dict[str, str] | None = None, wait_s: float = 60
) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """``zchaos report RUN`` as ``zchaos_process`` runs it."""
    with zchaos_process("report", str(run_root), env=env, wait_s=wait_s) as found:
        yield found


@contextlib.contextmanager
def zchaos_process(
    *args: str, env: dict[str, str] | None = None, wait_s: float = 60
) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """``zchaos ARGS`` in a process group of its own (SIGINT to the group is a terminal's
    Ctrl-C), with the lines it prints collected as they come. After the block it is waited for
    (``wait_s``); if the block fails, the group is killed."""
    import threading

    report = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        env=env, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(report.stdout), daemon=True)
    reader.start()
    try:
        yield report, lines
        report.wait(timeout=wait_s)
        reader.join(timeout=10)
    finally:
        if report.poll() is None:
            os.killpg(report.pid, signal.SIGKILL)
            report.wait()


def check_says(scenario: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """``zchaos check SCENARIO`` with ``env``: its exit code and the lines it wrote to stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(scenario)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def running(proc: Any) -> bool:
    """Whether psutil process ``proc`` is alive and not a zombie (one that ends while asked is not)."""
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def jvms_under(pid: int) -> list:
    """The JVMs among the descendants of process ``pid`` (psutil processes)."""
    import psutil

    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        # spark-class's own short-lived children (a ps, a subshell) may end before their name is read.
        with contextlib.suppress(psutil.NoSuchProcess):  # a zombie is one too
            if "java" in proc.name():
                found.append(proc)
    return found


class Proc:
    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as fh:
            self.popen = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.popen.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_log(self, pattern: str, timeout: float = 15.0, *, after: int = 0) -> re.Match:
        """Wait until the log (from character ``after`` on) matches ``pattern``."""
        regex = re.compile(pattern)
        return wait_for(lambda: regex.search(self.text(), after), timeout, f"{self.name} to log {pattern!r}")

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def stop(self, timeout: float = 5.0) -> int:
        if self.popen.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.popen.wait()
        self.signal(signal.SIGKILL)  # anything left in its group
        return self.popen.returncode


class Procs:
    """Starts ``python -m module`` processes for one test and stops them all at its end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[Proc] = []
        self.ports = PortAllocator()

    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.ports.allocate()}"

    def python(self, name: str, module: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
        proc = Proc(name, [sys.executable, "-m", module, *args], self.tmp / f"{name}.log", full_env)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.stop()
        self.ports.release()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    group = Procs(tmp_path)
    try:
        yield group
    finally:
        group.stop_all()
