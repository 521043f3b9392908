"""CPU starvation of one process: most of its CPU taken away for a while, then given back.

Three ways, tried in this order by ``method="auto"``:

- ``cgroup2``: a child cgroup with ``cpu.max`` = share of one CPU, the process moved in;
- ``cgroup1``: the same with the v1 ``cpu`` controller (``cpu.cfs_quota_us``), for hosts
  where the cpu controller is still bound to v1;
- ``competitors``: the process (every thread) pinned to one of its CPUs, with busy
  processes pinned to the same CPU, so the scheduler gives it about 1/(n+1) of it.

``stop()`` undoes everything: the process goes back to its cgroup and the temporary cgroup
is removed, or the competitors are killed and every thread's affinity restored. It runs on
leaving the ``with`` block, also on Ctrl-C or an exception. Competitors also exit on their
own when their parent dies or their time is up, so a SIGKILLed caller leaves none behind.

A cgroup cannot remove itself when its creator is SIGKILLed, so its name says who made it:
``zchaos-starve-runner<PID>.<START>-pid<TARGET>-<random>`` (the creating process's pid and
its start time in clock ticks, so a reused pid is not taken for the dead runner).
``remove_leftovers()`` finds the cgroups whose creator is gone, moves any process still in
them back to the parent cgroup and removes them; every ``zchaos run`` calls it first. A
cgroup named by an older zchaos (``zchaos-starve-<TARGET>-<random>``) goes once it is empty.

``ZCHAOS_STARVE_METHOD`` (auto, cgroup2, cgroup1, competitors) forces the method the
nemesis uses, for a host whose cgroups cannot be trusted (and to test each method).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from chaos.host_marks import runner_alive, start_ticks

PERIOD_US = 100_000
METHODS = ("auto", "cgroup2", "cgroup1", "competitors")
ENV_METHOD = "ZCHAOS_STARVE_METHOD"
CGROUP_PREFIX = "zchaos-starve-"
_OWNED = re.compile(r"zchaos-starve-runner(\d+)\.(\d+)-pid\d+-[0-9a-f]+")

_COMPETITOR = """
import os, sys, time
parent, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
n = 0
while True:
    n += 1
    if n & 0x3FFFF == 0 and (os.getppid() != parent or time.monotonic() > deadline):
        break
"""


class StarveError(Exception):
    """The process cannot be starved here (gone, or no method works)."""


def _mounts() -> list[tuple[str, Path, set[str]]]:
    """(fstype, mount point, options) of every cgroup mount."""
    out: list[tuple[str, Path, set[str]]] = []
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            out.append((parts[2], Path(parts[1]), set(parts[3].split(","))))
    return out


def _proc_cgroup(pid: int) -> dict[str, str]:
    """controller (or "" for v2) -> the process's cgroup path."""
    result = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            result[c] = path
    return result


def cgroup2_root() -> Path | None:
    """The cgroup2 mount if its cpu controller is available and we may write there."""
    for fstype, mount, _ in _mounts():
        if fstype != "cgroup2":
            continue
        try:
            if "cpu" in (mount / "cgroup.controllers").read_text().split() and os.access(mount, os.W_OK):
                return mount
        except OSError:
            continue
    return None


def cgroup1_root() -> Path | None:
    """The v1 mount of the ``cpu`` controller if we may write there."""
    for fstype, mount, opts in _mounts():
        writable = os.access(mount, os.W_OK)
        if fstype == "cgroup" and "cpu" in opts and (mount / "cpu.cfs_quota_us").exists() and writable:
            return mount
    return None


def _write(path: Path, text: str) -> None:
    with path.open("w") as fh:
        fh.write(text)


class Starvation:
    """Takes CPU from process ``pid`` between ``start()`` and ``stop()`` (or in a ``with``).

    ``share`` is the part of one CPU it keeps (0.1 = 10 %). ``max_s`` bounds the life of
    competitor processes in case ``stop()`` is never called.
    """

    def __init__(self, pid: int, share: float = 0.1, method: str = "auto", max_s: float = 3600.0) -> None:
        if method not in METHODS:
            raise StarveError(f"unknown starvation method {method!r} (one of {', '.join(METHODS)})")
        if not 0 < share < 1:
            raise StarveError(f"share must be between 0 and 1, got {share}")
        self.pid = pid
        self.share = share
        self.method = method
        self.max_s = max_s
        self.used: str | None = None
        self._cgroup: Path | None = None
        self._home: Path | None = None
        self._competitors: list[subprocess.Popen[bytes]] = []
        self._affinity: dict[int, set[int]] = {}

    # -- public ----------------------------------------------------------------------
    def start(self) -> str:
        """Begin; the method used."""
        if self.used is not None:
            return self.used
        if not Path(f"/proc/{self.pid}").exists():
            raise StarveError(f"no process {self.pid}")
        order = ("cgroup2", "cgroup1", "competitors") if self.method == "auto" else (self.method,)
        errors = []
        for method in order:
            try:
                getattr(self, f"_start_{method}")()
            except (OSError, StarveError) as exc:
                self._undo()
                errors.append(f"{method}: {exc}")
                continue
            self.used = method
            return method
        raise StarveError(f"cannot starve pid {self.pid}: " + "; ".join(errors))

    def stop(self) -> None:
        """Undo everything (idempotent; safe if the process has gone)."""
        self._undo()
        self.used = None

    def __enter__(self) -> Starvation:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- cgroups ---------------------------------------------------------------------
    def _start_cgroup2(self) -> None:
        root = cgroup2_root()
        if root is None:
            raise StarveError("no writable cgroup2 hierarchy with the cpu controller")
        with contextlib.suppress(OSError):
            _write(root / "cgroup.subtree_control", "+cpu")
        self._home = root / _proc_cgroup(self.pid)[""].lstrip("/")
        self._make_cgroup(root)
        _write(self._cgroup / "cpu.max", f"{max(int(self.share * PERIOD_US), 1000)} {PERIOD_US}")  # type: ignore[operator]
        _write(self._cgroup / "cgroup.procs", str(self.pid))  # type: ignore[operator]

    def _start_cgroup1(self) -> None:
        root = cgroup1_root()
        if root is None:
            raise StarveError("no writable cgroup v1 cpu controller")
        self._home = root / _proc_cgroup(self.pid)["cpu"].lstrip("/")
        # v1 nests freely: under the process's own cgroup it keeps the limits it had (a container's).
        try:
            self._make_cgroup(self._home)
        except OSError:
            self._make_cgroup(root)
        _write(self._cgroup / "cpu.cfs_period_us", str(PERIOD_US))  # type: ignore[operator]
        _write(self._cgroup / "cpu.cfs_quota_us", str(max(int(self.share * PERIOD_US), 1000)))  # type: ignore[operator]
        _write(self._cgroup / "cgroup.procs", str(self.pid))  # type: ignore[operator]

    def _make_cgroup(self, root: Path) -> None:
        me = os.getpid()
        path = root / f"{CGROUP_PREFIX}runner{me}.{start_ticks(me)}-pid{self.pid}-{uuid.uuid4().hex[:6]}"
        path.mkdir()
        self._cgroup = path

    def _undo_cgroup(self) -> None:
        cg, self._cgroup = self._cgroup, None
        if cg is not None:
            _dissolve(cg, self._home if self._home is not None else cg.parent)

    # -- competitors -----------------------------------------------------------------
    def _threads(self) -> list[int]:
        try:
            return [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return [self.pid]

    def _start_competitors(self) -> None:
        cpus = os.sched_getaffinity(self.pid)
        cpu = min(cpus)
        for tid in self._threads():
            with contextlib.suppress(OSError):
                self._affinity[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {cpu})
        count = max(1, min(round(1 / self.share) - 1, 32))
        for _ in range(count):
            proc = subprocess.Popen(
                [sys.executable, "-c", _COMPETITOR, str(os.getpid()), str(self.max_s)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._competitors.append(proc)
            os.sched_setaffinity(proc.pid, {cpu})

    def _undo_competitors(self) -> None:
        procs, self._competitors = self._competitors, []
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait(10)
        saved, self._affinity = self._affinity, {}
        if not saved:
            return
        # Threads started while pinned inherited the pin: they get the process's old set.
        default = saved.get(self.pid, os.sched_getaffinity(0))
        for tid in set(saved) | set(self._threads()):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, saved.get(tid, default))

    def _undo(self) -> None:
        try:
            self._undo_competitors()
        finally:
            self._undo_cgroup()


def _dissolve(cg: Path, home: Path) -> None:
    """Move every process of cgroup ``cg`` to ``home``, then remove ``cg``."""
    with contextlib.suppress(OSError):
        for pid in (cg / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                _write(home / "cgroup.procs", pid)
    for _ in range(50):  # rmdir fails while a dying task is still listed
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    raise StarveError(f"could not remove cgroup {cg}")


def _in_use(cg: Path) -> bool:
    """True if the process that made cgroup ``cg`` still runs. A name of an older zchaos,
    without its creator, counts as in use while a process is still inside it."""
    m = _OWNED.fullmatch(cg.name)
    if m is not None:
        return runner_alive(int(m[1]), int(m[2]))
    try:
        return bool((cg / "cgroup.procs").read_text().split())
    except OSError:
        return False


@dataclass
class Leftovers:
    """What ``remove_leftovers`` found: cgroups removed, and those it could not remove (why)."""

    removed: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)


def remove_leftovers() -> Leftovers:
    """Remove the starvation cgroups of creators that are gone (a runner killed mid-fault).

    Every cgroup v1 ``cpu`` and cgroup2 hierarchy is searched, since a v1 cgroup is made
    under the starved process's own cgroup. A process still inside one goes back to the
    parent cgroup first, its full CPU restored.
    """
    found = Leftovers()
    for fstype, mount, opts in _mounts():
        if fstype == "cgroup" and "cpu" not in opts:
            continue
        for parent, dirs, _ in os.walk(mount):
            ours = [d for d in dirs if d.startswith(CGROUP_PREFIX)]
            dirs[:] = [d for d in dirs if d not in ours]  # ours have no children
            for name in ours:
                cg = Path(parent) / name
                if _in_use(cg):
                    continue
                try:
                    _dissolve(cg, Path(parent))
                except (OSError, StarveError) as exc:
                    found.failed.append((cg, str(exc)))
                else:
                    found.removed.append(cg)
    return found
