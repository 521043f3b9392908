"""The supervisor's readiness on real processes: a ``log:`` rule is met only by output of
the incarnation being started, also when a restart appends to the previous one's log; a
``port:`` rule only by a listener of the started process's own group."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from chaos.nemesis import Nemesis, PlannedFault
from contract.errors import SetupError
from contract.history import read_events
from contract.ports import PortAllocator, listening_pids
from harness.supervisor import ProcSpec, Supervisor
from tests.doubles import EventList, SupervisorControl
from tests.procs import ROOT, wait_for

pytestmark = pytest.mark.timeout(60)

READY = re.compile(r"ready pid=(\d+) ts=(\d+)")


def late_ready(tmp_path: Path, delay_s: float) -> ProcSpec:
    return ProcSpec(
        instance="server",
        role="server",
        argv=[sys.executable, str(ROOT / "tests" / "late_ready.py"), "--delay", str(delay_s)],
        log=tmp_path / "server.log",
        env={"PYTHONUNBUFFERED": "1"},
        ready_line=r"ready pid=\d+",
    )


def ready_lines(log: Path) -> dict[int, int]:
    """pid -> when it said it was ready (ns)."""
    return {int(m[1]): int(m[2]) for m in READY.finditer(log.read_text())}


def test_a_restart_waits_for_the_new_incarnations_ready_line(supervisor: Supervisor, tmp_path: Path) -> None:
    spec = late_ready(tmp_path, 1.0)
    first = supervisor.start(spec)
    assert first.pid in ready_lines(spec.log), "start() returned before the process was ready"

    sink = EventList()
    events = sink.items
    plan = [PlannedFault(1, 0.0, "restart", "server", "server", {"delay_s": 0.0})]
    nemesis = Nemesis(plan, SupervisorControl(supervisor, spec), sink)
    nemesis.start()
    try:
        wait_for(lambda: len(events) == 2, 30, "the restart to finish")
    finally:
        assert nemesis.stop() == []
    stop = events[1]
    assert stop["ev"] == "fault_stop" and stop["pid"] != first.pid
    # The previous incarnation's "ready" is in the same log; only the new one's counts.
    ready = ready_lines(spec.log)
    assert stop["pid"] in ready, f"the restart was called ready before the new process said so: {ready}"
    assert ready[stop["pid"]] <= stop["ts"]
    starts = [e for e in read_events(tmp_path / "runner.jsonl") if e["ev"] == "proc_start"]
    assert [e["pid"] for e in starts] == [first.pid, stop["pid"]]


def test_an_old_ready_line_does_not_hide_a_start_that_never_gets_ready(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    spec = late_ready(tmp_path, 30.0)
    spec.log.write_text("ready pid=1 ts=1\n")  # what an earlier incarnation wrote
    with pytest.raises(SetupError, match="was not ready after 2 s"):
        supervisor.start(spec, ready_timeout=2.0)


LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "print('listening', flush=True)\n"
    "time.sleep(3600)\n"
)


def listener(tmp_path: Path, port: int, *, child: str | None = None) -> ProcSpec:
    """A subject that listens on ``port`` itself, or through a child of its own started with
    subprocess.run's keyword arguments ``child`` (``start_new_session=True``: the child
    leaves the subject's process group)."""
    argv = [sys.executable, "-c", LISTEN, str(port)]
    if child is not None:
        argv = [sys.executable, "-c", f"import subprocess, sys; subprocess.run(sys.argv[1:], {child})", *argv]
    return ProcSpec(instance="broker", role="broker", argv=argv, log=tmp_path / "broker.log", ready_port=port)


def test_a_port_another_program_listens_on_is_not_the_subject_being_ready(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    # Another program took the subject's port first: it accepts connections, but the
    # subject cannot bind it, and its clients would talk to that program.
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        with pytest.raises(SetupError, match=rf"port {port} was taken.* another program: pid {os.getpid()}"):
            supervisor.start(listener(tmp_path, port), ready_timeout=20.0)
    assert "Address already in use" in (tmp_path / "broker.log").read_text()


@pytest.mark.parametrize(
    "child",
    [None, "check=True", "start_new_session=True"],
    ids=["itself", "a-child", "a-child-in-its-own-session"],
)
def test_the_subjects_own_listener_is_readiness(
    supervisor: Supervisor, tmp_path: Path, child: str | None
) -> None:
    with PortAllocator() as ports:
        port = ports.allocate()
        try:
            managed = supervisor.start(listener(tmp_path, port, child=child), ready_timeout=20.0)
            [owner] = listening_pids(port) or [-1]
            assert owner > 0 and managed.popen.poll() is None
            assert (owner == managed.pid) == (child is None)
            assert (os.getpgid(owner) == managed.pid) == (child != "start_new_session=True")
        finally:
            # A child in its own session is not the supervisor's to stop, listening or not.
            for proc in psutil.Process().children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if LISTEN in proc.cmdline():
                        proc.kill()


def test_a_reaped_commands_pid_number_is_no_longer_the_instance(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    """Once Popen has reaped an instance's command, its pid number may be another process's:
    a stop or a fault of that instance must not reach it (a daemon of another test was once
    ended with SIGTERM in CI, the likely way). The reuse is made here by naming a live
    process of the test's as the reaped command's pid."""
    spec = ProcSpec(
        instance="brief", role="brief", argv=[sys.executable, "-c", "pass"], log=tmp_path / "brief.log"
    )
    managed = supervisor.start(spec)
    managed.popen.wait(10)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        managed.popen.pid = other.pid  # the number taken again
        # (an exit with code 0 is looked past for FOLLOW_SETTLE_S: a daemon's fork in transit)
        wait_for(lambda: supervisor.running("brief") is None, 10, "the ended instance not running")
        supervisor.stop("brief")
        assert other.poll() is None, "the stop of a finished instance reached another process"
    finally:
        other.kill()
        other.wait()
