"""Clock faults: a role's processes run with a faked wall clock that the run moves at will.

Through libfaketime (Debian's ``libfaketime``), preloaded into every process of a role that
the scenario's plan has a clock fault on, and into no other (a run that plans none starts
every process as before). Each instance reads its faked time from a control file of its
own, ``<run>/clock/<instance>.faketime`` (``FAKETIME_TIMESTAMP_FILE``), re-read on every
call (``FAKETIME_NO_CACHE=1``); it holds ``+0`` (true time) until a fault writes an offset
in seconds (``+30.000``) and clears it again. A process started again by a fault meets the
same file, so a restart during a step keeps the stepped clock, as a host's would.

What the preload changes, and what it must not:

- the wall clock (``time()``, ``gettimeofday``, ``clock_gettime(CLOCK_REALTIME)``: Python's
  ``time.time()``) and file times follow the offset;
- the monotonic clock is left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``): without it,
  libfaketime 0.9.10 answers ``CLOCK_MONOTONIC`` with the faked wall clock, and a program
  that rightly times with it would be broken by a fault that does not concern it. The
  history's own time rests on it too (``contract/clock.py``);
- libfaketime 0.9.10 turns an absolute ``clock_nanosleep`` on ``CLOCK_MONOTONIC`` into a
  negative time when the monotonic clock is not faked (wolfcw/libfaketime#426), and Python
  3.11's ``time.sleep`` is one: every ``time.sleep`` failed with EINVAL. A small shim,
  preloaded before libfaketime, sends the monotonic clocks' sleeps straight to the C
  library (``SHIM_SOURCE``); it is compiled with ``cc`` once per machine into zchaos's
  cache folder;
- libfaketime 0.9.10 also takes every ``pthread_cond_timedwait`` through its own, which
  made a hand-off between two Python threads 40x slower (the GIL is such a wait) and our
  Titanic server serve a sixth of its load before any fault (95 requests in 30 s against
  671). The shim sends the waits of the monotonic clock's condition variables (Python's, all
  of them) straight to the C library as well; those of the wall clock stay libfaketime's;
- libfaketime keeps a semaphore and a shared memory segment in ``/dev/shm``, made by each
  process that finds none and removed at its exit, which a killed process never reaches
  (and Python's exit did not either): the run makes one pair for all its processes
  (``FAKETIME_SHARED``), named after the runner (``zchaos-clock-runner<PID>.<START>-...``,
  as the starvation cgroups are), removes it at its end, and ``remove_leftovers`` removes
  the pairs of runners that are gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.host_marks import runner_alive, start_ticks
from contract.clock import ENV_TRUE_BASE, wall_minus_monotonic_ns

if TYPE_CHECKING:
    from chaos.faults import FaultRun
    from chaos.nemesis import PlannedFault

#: Where libfaketime may be (Debian's multiarch folders first); ZCHAOS_LIBFAKETIME names another.
ENV_LIBRARY = "ZCHAOS_LIBFAKETIME"
LIBRARY_GLOBS = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                 "/usr/local/lib/faketime/libfaketime.so.1")  # fmt: skip
INSTALL_HINT = "Debian: apt-get install libfaketime"
SHM_DIR = Path("/dev/shm")
SHARED_PREFIX = "zchaos-clock-"
_OWNED = re.compile(r"(?:sem\.)?zchaos-clock-runner(\d+)\.(\d+)-[0-9a-f]+-(?:sem|shm)")
#: libfaketime's shared state (struct ft_shared_s): ticks, file index, then four start times
#: (real, monotonic, raw, boot), each unset (tv_nsec = -1) until a process sets them.
_SHARED_STATE = struct.pack("<QQ" + "qq" * 4, 0, 0, *([0, -1] * 4))

SHIM_SOURCE = r"""
/* zchaos: sleeps and timed waits on a monotonic clock go straight to the C library, around
   libfaketime 0.9.10's, which break or slow them when the monotonic clock is not faked.
   Preloaded before libfaketime. Sleeps: its clock_nanosleep (wolfcw/libfaketime#426). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

typedef int (*sleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req, struct timespec *rem)
{
  static sleep_fn libc_sleep = 0, next_sleep = 0;
  if (clock_id == CLOCK_MONOTONIC || clock_id == CLOCK_MONOTONIC_RAW || clock_id == CLOCK_BOOTTIME) {
    if (!libc_sleep) {
      void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
      if (libc) libc_sleep = (sleep_fn)dlsym(libc, "clock_nanosleep");
    }
    if (libc_sleep) return libc_sleep(clock_id, flags, req, rem);
  }
  if (!next_sleep) next_sleep = (sleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
  return next_sleep ? next_sleep(clock_id, flags, req, rem) : ENOSYS;
}

/* A timed wait on a condition variable of the monotonic clock goes straight to the C library
   too: libfaketime 0.9.10 takes every pthread_cond_timedwait through its own, which cost a
   Python program with threads (its GIL is one, of the monotonic clock) 40x on a hand-off
   between two threads, and our Titanic server a sixth of its throughput before any fault.
   The monotonic clock is not faked, so its deadlines need no translating; those of the wall
   clock still go to libfaketime. glibc (2.25 and later) keeps a condvar's clock in bit 1 of
   __wrefs (1: CLOCK_MONOTONIC); another C library takes every wait to libfaketime. */
typedef int (*wait_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *abstime)
{
  static wait_fn libc_wait = 0, next_wait = 0;
#ifdef __GLIBC__
  if ((cond->__data.__wrefs >> 1) & 1) {
    if (!libc_wait) {
      void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
      if (libc) libc_wait = (wait_fn)dlvsym(libc, "pthread_cond_timedwait", "GLIBC_2.3.2");
    }
    if (libc_wait) return libc_wait(cond, mutex, abstime);
  }
#endif
  if (!next_wait) next_wait = (wait_fn)dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
  if (!next_wait) next_wait = (wait_fn)dlsym(RTLD_NEXT, "pthread_cond_timedwait");
  return next_wait ? next_wait(cond, mutex, abstime) : ENOSYS;
}
"""


class ClockError(Exception):
    """Clock faults cannot run on this machine (no libfaketime, no C compiler, no /dev/shm)."""


def find_library() -> Path | None:
    """libfaketime's path, or None when it is not installed."""
    named = os.environ.get(ENV_LIBRARY)
    if named:
        return Path(named) if Path(named).is_file() else None
    for pattern in LIBRARY_GLOBS:
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        if found:
            return found[0]
    return None


def missing() -> str | None:
    """What this machine lacks for clock faults (one line), or None."""
    if find_library() is None:
        return f"clock faults need libfaketime, which is not installed ({INSTALL_HINT})"
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:16]
    built = (cache_dir() / f"clock-shim-{digest}.so").is_file()
    if not built and not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")):
        return "clock faults need a C compiler (cc) once, to build a small shim; Debian: apt-get install gcc"
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zchaos"


def build_shim() -> Path:
    """The shim's shared library, compiled once per source text (ClockError without cc)."""
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:16]
    target = cache_dir() / f"clock-shim-{digest}.so"
    if target.is_file():
        return target
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ClockError(
            "clock faults need a C compiler (cc) once, to build a small shim; Debian: apt-get install gcc"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".clock-shim-") as tmp:
        source = Path(tmp) / "shim.c"
        source.write_text(SHIM_SOURCE)
        built = Path(tmp) / "shim.so"
        done = subprocess.run(
            [cc, "-shared", "-fPIC", "-O2", "-o", str(built), str(source), "-ldl"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ClockError(f"could not build the clock shim with {cc}: {done.stderr.strip()[:300]}")
        os.replace(built, target)  # whole or not at all, also with two runs building at once
    return target


def offset_text(offset_s: float) -> str:
    """What the control file holds for a clock ``offset_s`` seconds off the true time."""
    return f"{offset_s:+.3f}"


class Clocks:
    """The faked clocks of one run: ``open`` before the processes start, ``close`` at its end."""

    def __init__(self, folder: Path, instances: Iterable[str]) -> None:
        self.folder = folder  # <run>/clock
        self.instances = sorted(set(instances))
        self.library: Path | None = None
        self.shim: Path | None = None
        self.base_ns = 0
        ticks = start_ticks(os.getpid())
        self.name = f"{SHARED_PREFIX}runner{os.getpid()}.{ticks}-{uuid.uuid4().hex[:8]}"
        self._made: list[Path] = []
        self.offsets: dict[str, float] = {}

    def control_file(self, instance: str) -> Path:
        return self.folder / f"{instance}.faketime"

    def open(self) -> None:
        """Find the library, build the shim, make the shared state and a control file per
        instance (true time). ClockError says what is missing."""
        self.library = find_library()
        if self.library is None:
            raise ClockError(f"clock faults need libfaketime, which is not installed ({INSTALL_HINT})")
        self.shim = build_shim()
        if not SHM_DIR.is_dir():
            raise ClockError(f"clock faults need {SHM_DIR} (POSIX shared memory) for libfaketime")
        self.folder.mkdir(parents=True, exist_ok=True)
        for instance in self.instances:
            self.set(instance, 0.0)
        self._make_shared()
        self.base_ns = wall_minus_monotonic_ns()

    def _make_shared(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sem_open.restype = ctypes.c_void_p
        libc.sem_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
        libc.sem_close.argtypes = [ctypes.c_void_p]
        handle = libc.sem_open(f"/{self.name}-sem".encode(), os.O_CREAT | os.O_EXCL, 0o600, 1)
        if handle in (None, ctypes.c_void_p(-1).value):
            raise ClockError(f"could not make libfaketime's semaphore: {os.strerror(ctypes.get_errno())}")
        libc.sem_close(handle)
        self._made.append(SHM_DIR / f"sem.{self.name}-sem")
        shm = SHM_DIR / f"{self.name}-shm"
        fd = os.open(shm, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        self._made.append(shm)
        try:
            os.write(fd, _SHARED_STATE)
        finally:
            os.close(fd)

    def env(self, instance: str) -> dict[str, str]:
        """The environment that puts ``instance`` under its control file (after ``open``)."""
        assert self.library is not None and self.shim is not None, "Clocks.open first"
        preload = " ".join(p for p in (str(self.shim), str(self.library), os.environ.get("LD_PRELOAD")) if p)
        return {
            "LD_PRELOAD": preload,
            "FAKETIME_TIMESTAMP_FILE": str(self.control_file(instance)),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_SHARED": f"/{self.name}-sem /{self.name}-shm",
            ENV_TRUE_BASE: str(self.base_ns),
        }

    def set(self, instance: str, offset_s: float) -> None:
        """Put ``instance``'s clock ``offset_s`` seconds off the true time, at once."""
        path = self.control_file(instance)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(offset_text(offset_s) + "\n")
        os.replace(tmp, path)  # a reader sees the old offset or the new one, never half a line
        self.offsets[instance] = offset_s

    def clear(self, instance: str) -> None:
        self.set(instance, 0.0)

    def close(self) -> None:
        """Remove the shared state (the control files stay in the run folder, at true time)."""
        for instance, offset in list(self.offsets.items()):
            if offset:
                with contextlib.suppress(OSError):
                    self.clear(instance)
        for path in self._made:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._made.clear()


def remove_leftovers() -> list[Path]:
    """Remove the shared state of clock faults whose runner is gone (killed before its end)."""
    removed: list[Path] = []
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return removed
    for name in names:
        m = _OWNED.fullmatch(name)
        if m is None or runner_alive(int(m[1]), int(m[2])):
            continue
        with contextlib.suppress(FileNotFoundError):
            (SHM_DIR / name).unlink()
            removed.append(SHM_DIR / name)
    return removed


def hold(nemesis: FaultRun, fault: PlannedFault, offset_at: Callable[[float], float], tick_s: float) -> None:
    """Carry out a clock fault: the target's clock at ``offset_at(t)`` seconds off the true
    time, ``t`` seconds into the fault, set again every ``tick_s`` (0: once), for the fault's
    duration; then true time again (a step back, as an NTP step makes it), also when the run
    ends first or a write fails."""
    clocks = nemesis.clocks
    if clocks is None or fault.target not in clocks.instances:
        raise ClockError(f"{fault.target} was not started under a faked clock")
    pid = nemesis.target_pid(fault)
    if pid is None:
        return
    duration = float(fault.params["duration_s"])
    started = time.monotonic()
    try:
        clocks.set(fault.target, offset_at(0.0))
        nemesis.started(fault, pid=pid, detail=f"clock file {clocks.control_file(fault.target).name}")
        while (elapsed := time.monotonic() - started) < duration:
            step = duration - elapsed if tick_s <= 0 else min(tick_s, duration - elapsed)
            if not nemesis.wait(step):
                break
            if tick_s > 0:
                clocks.set(fault.target, offset_at(time.monotonic() - started))
    finally:
        clocks.clear(fault.target)
    nemesis.stopped(fault, pid=pid)
