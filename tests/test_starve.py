"""CPU starvation on a real CPU-bound child: its progress rate drops while starved, comes
back after, and nothing (cgroup, competitor, pinning) is left behind."""

from __future__ import annotations

import mmap
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from chaos.starve import Starvation, StarveError, _proc_cgroup, cgroup1_root, cgroup2_root

pytestmark = pytest.mark.timeout(90)

SPINNER = """
import mmap, struct, sys
f = open(sys.argv[1], "r+b")
m = mmap.mmap(f.fileno(), 8)
n = 0
while True:
    n += 1
    if n & 0xFFF == 0:
        m[:8] = struct.pack("q", n)
"""


class Spinner:
    """A CPU-bound child that publishes its loop counter through a shared file."""

    def __init__(self, tmp: Path) -> None:
        path = tmp / "counter"
        path.write_bytes(b"\0" * 8)
        self.file = path.open("r+b")
        self.map = mmap.mmap(self.file.fileno(), 8)
        self.proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(path)], start_new_session=True)
        deadline = time.monotonic() + 10
        while self.count() == 0:
            assert time.monotonic() < deadline, "spinner did not start"
            time.sleep(0.01)

    def count(self) -> int:
        return struct.unpack("q", self.map[:8])[0]

    def rate(self, window_s: float) -> float:
        """Loop iterations per second over a measurement window."""
        c0, t0 = self.count(), time.monotonic()
        time.sleep(window_s)  # the measurement window, not a synchronisation
        return (self.count() - c0) / (time.monotonic() - t0)

    def close(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.map.close()
        self.file.close()


@pytest.fixture
def spinner(tmp_path: Path) -> Iterator[Spinner]:
    s = Spinner(tmp_path)
    yield s
    s.close()


def available(method: str) -> bool:
    return {"cgroup2": cgroup2_root, "cgroup1": cgroup1_root}.get(method, lambda: True)() is not None


def competitor_pids() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "getppid" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.Error:
            continue  # gone, or a zombie left by another test
    return found


@pytest.mark.parametrize("method", ["cgroup2", "cgroup1", "competitors"])
def test_starved_process_slows_down_and_recovers(spinner: Spinner, method: str) -> None:
    if not available(method):
        pytest.skip(f"{method} not available on this machine")
    pid = spinner.proc.pid
    cgroups_before = _proc_cgroup(pid)
    affinity_before = os.sched_getaffinity(pid)
    before = spinner.rate(1.0)
    with Starvation(pid, share=0.05, method=method) as s:
        assert s.used == method
        during = spinner.rate(1.5)
    after = spinner.rate(1.0)
    assert during < 0.5 * before, (before, during)
    assert after > 0.4 * before and after > 2 * during, (before, during, after)
    assert _proc_cgroup(pid) == cgroups_before
    assert os.sched_getaffinity(pid) == affinity_before
    assert competitor_pids() == []
    for root in filter(None, (cgroup1_root(), cgroup2_root())):
        assert not list(root.rglob("zchaos-starve-*"))


def test_interrupted_caller_still_undoes(spinner: Spinner) -> None:
    pid = spinner.proc.pid
    affinity = os.sched_getaffinity(pid)
    with pytest.raises(KeyboardInterrupt), Starvation(pid, share=0.2, method="competitors"):
        assert competitor_pids()
        raise KeyboardInterrupt
    assert competitor_pids() == []
    assert os.sched_getaffinity(pid) == affinity


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_competitors_exit_when_their_parent_dies(spinner: Spinner) -> None:
    code = (
        "import sys; from chaos.starve import Starvation\n"
        f"s = Starvation({spinner.proc.pid}, share=0.25, method='competitors'); s.start()\n"
        "print(' '.join(str(p.pid) for p in s._competitors), flush=True)\n"
        "import os; os._exit(0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parents[1],
    )
    pids = [int(p) for p in out.stdout.split()]
    assert pids, out.stderr
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, "competitors outlived their parent"
        time.sleep(0.02)


def test_bad_arguments_are_errors() -> None:
    with pytest.raises(StarveError, match="share"):
        Starvation(os.getpid(), share=1.5)
    with pytest.raises(StarveError, match="method"):
        Starvation(os.getpid(), method="magic")
    with pytest.raises(StarveError, match="no process"):
        Starvation(2**22 + 12345).start()


class _Control:
    """The nemesis's handle on one real process (what the runner's supervisor answers)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        os.kill(self.pid, sig)
        return self.pid

    def stop(self, instance: str) -> None: ...

    def start(self, instance: str) -> int:
        return self.pid


def test_nemesis_starves_from_the_plan(spinner: Spinner) -> None:
    from chaos.nemesis import Nemesis, PlannedFault

    events: list[dict] = []

    class Sink:
        def emit(self, ev: str, **fields: object) -> None:
            events.append({"ev": ev, **fields})

    pid = spinner.proc.pid
    affinity = os.sched_getaffinity(pid)
    before = spinner.rate(0.5)
    plan = [PlannedFault(1, 0.0, "starve", "worker-1", "worker-1", {"duration_s": 1.5, "share": 0.05})]
    nemesis = Nemesis(plan, _Control(pid), Sink())
    nemesis.start()
    try:
        deadline = time.monotonic() + 10
        while not events:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        during = spinner.rate(0.8)
        while len(events) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        assert nemesis.stop() == []
    assert [e["ev"] for e in events] == ["fault_start", "fault_stop"]
    assert events[0]["detail"] in ("cgroup2", "cgroup1", "competitors")
    assert during < 0.5 * before, (before, during)
    assert os.sched_getaffinity(pid) == affinity and competitor_pids() == []
