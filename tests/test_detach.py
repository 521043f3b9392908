"""Subjects whose start command detaches the server (tests/detach/): the supervisor
follows the server it leaves, a kill fault reaches it and the restart starts a new one on
the same port, and nothing of them is left after the stop, also when the test fails."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from chaos.nemesis import Nemesis, PlannedFault
from contract.history import HistoryWriter, read_events
from contract.ports import PortAllocator
from harness.supervisor import ProcSpec, Supervisor
from tests.doubles import EventList, SupervisorControl
from tests.procs import ROOT, wait_for

pytestmark = pytest.mark.timeout(90)

DETACH = ROOT / "tests" / "detach"
SERVER = [sys.executable, str(DETACH / "server.py")]
#: variant -> the command that starts the server through it, and whether the command
#: leaves the server behind when it exits (then the server is followed).
VARIANTS = {
    "setsid": (["sh", str(DETACH / "setsid.sh")], True),
    "nohup": (["sh", str(DETACH / "nohup.sh")], True),
    "double-fork-daemon": ([sys.executable, str(DETACH / "daemon.py")], True),
    "fork-and-exit": ([sys.executable, str(DETACH / "fork.py")], True),
    "exec": (["sh", str(DETACH / "exec.sh")], False),
    "child-and-wait": (["sh", str(DETACH / "wait.sh")], False),
}


def pids(pidfile: Path) -> list[int]:
    """The servers started so far, in order."""
    return [int(n) for n in pidfile.read_text().split()] if pidfile.exists() else []


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def served_by(port: int) -> int:
    """The pid the server on ``port`` answers with."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        return int(conn.recv(64))


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where the servers write their pids; after the test (failed or not) any of them still
    running is killed, and the test fails for having left it."""
    path = tmp_path / "servers.pid"
    yield path
    left = [pid for pid in pids(path) if running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"servers left running after the test: {left}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_kill_fault_reaches_the_server_and_nothing_is_left(
    tmp_path: Path, pidfile: Path, variant: str
) -> None:
    launcher, detaches = VARIANTS[variant]
    history = HistoryWriter(tmp_path / "runner.jsonl", "runner")
    supervisor = Supervisor(history, dict(os.environ))
    notes: list[str] = []
    supervisor.notify = notes.append
    try:
        with PortAllocator() as ports:
            port = ports.allocate()
            spec = ProcSpec(
                instance="server", role="server", argv=[*launcher, *SERVER, str(port), str(pidfile)],
                log=tmp_path / "server.log", ready_port=port,
            )  # fmt: skip
            managed = supervisor.start(spec, ready_timeout=30)
            [first] = wait_for(lambda: pids(pidfile), 10, "the server's pid")
            assert served_by(port) == first
            if detaches:
                # The command is gone; the server it left is the instance.
                # (a double fork's middle process may be followed for its last moments first)
                wait_for(
                    lambda: managed.followed is not None and managed.pid == first, 10, "the server followed"
                )
                assert f"pid {first}" in notes[-1] and "followed as server" in notes[-1]
                assert "followed as server" in spec.log.read_text()
            assert supervisor.alive("server")
            # A freeze stops the server itself, and thaws it.
            assert supervisor.signal("server", signal.SIGSTOP) == managed.pid
            wait_for(lambda: psutil.Process(first).status() == psutil.STATUS_STOPPED, 10, "the freeze")
            supervisor.signal("server", signal.SIGCONT)
            wait_for(lambda: psutil.Process(first).status() != psutil.STATUS_STOPPED, 10, "the thaw")
            assert supervisor.running("server") == managed.pid  # whom starve takes CPU from

            sink = EventList()
            events = sink.items
            plan = [PlannedFault(1, 0.0, "kill", "server", "server", {"restart_after_s": 0.2})]
            nemesis = Nemesis(plan, SupervisorControl(supervisor, spec), sink)
            nemesis.start()
            try:
                wait_for(lambda: len(events) == 2, 40, "the kill and the restart")
            finally:
                assert nemesis.stop() == []
            assert [e["ev"] for e in events] == ["fault_start", "fault_stop"], events
            assert events[0]["pid"] == managed.pid
            assert not running(first), "the kill did not reach the server"
            second = pids(pidfile)[-1]
            assert second != first and served_by(port) == second  # the restart got the port
        supervisor.stop_all()
        assert [pid for pid in pids(pidfile) if running(pid)] == []
    finally:
        supervisor.stop_all()
        history.close()
    exits = [e for e in read_events(tmp_path / "runner.jsonl") if e["ev"] == "proc_exit"]
    assert len(exits) == 2 and all(e["expected"] for e in exits), exits
    assert exits[0]["signal"] == signal.SIGKILL or variant == "child-and-wait"  # sh reports 137


SCENARIO = """
implementation = "{manifest}"
duration_s = 10
drain_s = 5
[load]
users = 4
wait_ms = 20
[[faults]]
kind = "kill"
target = "server"
at_s = [3]
restart_after_s = 1
"""


@pytest.mark.slow
def test_a_run_kills_restarts_and_stops_a_daemonized_server(tmp_path: Path) -> None:
    """Through the runner, with a manifest by path: the server is a double-fork daemon
    (tests/detach/lazy-pirate-daemon.toml). Once the kill missed it, the restart found the
    port taken and the run was VIOLATED; the daemon outlived zchaos."""
    from tests.procs import processes_of, run_process

    scenario = tmp_path / "daemon.toml"
    scenario.write_text(SCENARIO.format(manifest=DETACH / "lazy-pirate-daemon.toml"))
    runs = tmp_path / "runs"
    with run_process(scenario, runs) as runner:
        output, _ = runner.communicate(timeout=240)
    text = output.decode(errors="replace")
    assert runner.returncode == 0, text
    assert "is followed as server" in text
    [run] = runs.glob("*-daemon")
    nemesis = [e for e in read_events(run / "history" / "nemesis.jsonl") if e["ev"] == "fault_start"]
    exits = [e for e in read_events(run / "history" / "runner.jsonl") if e["ev"] == "proc_exit"]
    servers = [e for e in exits if e["instance"] == "server"]
    # The kill's target was the daemon, and the daemon died of it; then the restarted one stopped.
    assert [e["pid"] for e in nemesis] == [servers[0]["pid"]] and servers[0]["signal"] == signal.SIGKILL
    assert len(servers) == 2 and all(e["expected"] for e in exits)
    assert processes_of(runs) == []
    assert not any(running(e["pid"]) for e in servers)


@pytest.mark.slow
def test_a_daemon_left_by_a_runner_killed_with_sigkill_is_ended_by_the_next_run(tmp_path: Path) -> None:
    """A runner killed with SIGKILL has no teardown, and a daemon has no PR_SET_PDEATHSIG:
    the daemon outlives it, until the next run's sweep (remove_leftovers) ends it."""
    from harness.supervisor import remove_leftovers
    from tests.procs import processes_of, run_process

    scenario = tmp_path / "daemon.toml"
    scenario.write_text(SCENARIO.format(manifest=DETACH / "lazy-pirate-daemon.toml").replace("10", "120", 1))
    runs = tmp_path / "runs"

    def servers() -> list[psutil.Process]:
        # The server itself, not daemon.py on its way to it (which may be gone by the time
        # its command line is asked: NoSuchProcess failed this test once, 2026-12-02).
        server = ["-m", "implementations.lazy_pirate.server"]
        found = []
        for proc in processes_of(runs):
            with contextlib.suppress(psutil.Error):
                if proc.cmdline()[1:3] == server:
                    found.append(proc)
        return found

    try:
        with run_process(scenario, runs, output=False) as runner:
            [server] = wait_for(servers, 60, "the daemonized server")
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        assert running(server.pid), "the daemon died with the runner: nothing to sweep"
        ended = remove_leftovers()
        assert any(f"pid {server.pid} " in what for what in ended), ended
        wait_for(lambda: not processes_of(runs), 30, "every process of the killed run to end")
    finally:
        for proc in processes_of(runs):
            proc.kill()


def test_the_sweep_spares_a_live_runners_processes_when_the_wall_clock_moved(monkeypatch) -> None:
    """A live runner is told by its pid and its start in ticks after boot. Its start as psutil
    gives it (boot time from the wall clock + ticks) moved when the machine's clock was stepped
    (a virtual machine restored), and another run's sweep then killed a live run mid-way."""
    from chaos.host_marks import start_ticks
    from harness.supervisor import ENV_OWNER, _runner_gone, _runner_id, remove_leftovers

    owner = f"{_runner_id(os.getpid())}.sweep-test"
    assert not _runner_gone(owner)
    assert _runner_gone(f"{os.getpid()}@{start_ticks(os.getpid()) + 1}.x")  # a pid reused since
    assert not _runner_gone(f"{os.getpid()}-123.x")  # an older zchaos's mark: not judged
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE, env={**os.environ, ENV_OWNER: owner},
    )  # fmt: skip
    try:
        wait_for(lambda: psutil.Process(child.pid).environ().get(ENV_OWNER) == owner, 10, "the child's env")
        shifted = psutil.Process.create_time
        monkeypatch.setattr(psutil.Process, "create_time", lambda self: shifted(self) + 3600.0)
        ended = remove_leftovers()
        assert not any(f"pid {child.pid} " in what for what in ended), ended
        assert child.poll() is None, "the live runner's process was killed"
    finally:
        child.kill()
        child.wait()


def test_the_reaper_may_wake_before_the_supervisor_is_made(tmp_path: Path, monkeypatch) -> None:
    """The reaper thread reaps as soon as it runs; it once started in the middle of
    ``Supervisor.__init__`` and, waking first, died on an attribute not yet set (seen in CI
    as an unhandled thread exception). Here it reaps at the very moment it is started."""
    import threading

    start = threading.Thread.start
    reaped: list[str] = []

    def reap_first(thread: threading.Thread) -> None:
        if thread.name == "zchaos-reaper":
            thread._target.__self__.reap()  # type: ignore[attr-defined]
            reaped.append(thread.name)
        start(thread)

    # A child of this process for the reaper to look at (in CI: another test's leftover).
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    monkeypatch.setattr(threading.Thread, "start", reap_first)
    try:
        supervisor = Supervisor(HistoryWriter(tmp_path / "runner.jsonl", "runner"), dict(os.environ))
        supervisor.stop_all()
        assert reaped == ["zchaos-reaper"]
    finally:
        child.kill()
        child.wait()
