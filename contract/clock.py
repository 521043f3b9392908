"""One true time base for the history, and the check that the host's clocks agreed over a run.

Every event's ``ts`` is the host's wall clock (``time.time_ns()``), comparable across the
run's processes. A clock fault (``chaos/clock.py``) fakes the wall clock of a role's
processes through a preload library (libfaketime), and our own subjects write history from
inside such a process: their events must not carry the faked time, or a fault would move
its own victims' events on the run's time line. So every writer of ours stamps with
``true_time_ns``: ``time.time_ns()``, except in a process the runner started under a clock
fault (``ENV_TRUE_BASE`` set), where it is the C library's own ``clock_gettime`` of the
wall clock, looked up in libc's handle (ctypes), which the preload's interposed symbol does
not shadow: the host's true wall clock, as every other writer reads it, for about half a
microsecond a call. Where libc cannot be loaded that way, the stamp is ``CLOCK_MONOTONIC``
plus ``ENV_TRUE_BASE``, the host's wall clock minus its monotonic clock as the runner
measured them (the preload leaves the monotonic clock alone,
``FAKETIME_DONT_FAKE_MONOTONIC=1``). That sum alone was the stamp once, and it is true
time only while the host's wall clock runs with its monotonic clock: on a virtual machine
resumed from a snapshot, this machine's ran 5 ms/s ahead of it, so a faked server's events
fell 15-85 ms before the queue's dispatch of the same request, and a check that orders
them called the correct reliable sketch's replies undiscarded (explore, reliable-sketch
seed 1, runs 13-14).

A host whose clock is stepped (an NTP step, a suspended machine) breaks the cross-process
``ts`` of every run; so the runner samples both clocks at the run's start and end (run.json
``clocks``), and a run over which they drifted apart by more than ``MAX_CLOCK_DRIFT_NS`` is
incomplete (``clock_drift_reason``), never judged as if its time line were sound. Standard
library only.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import TypedDict

#: In a process under a clock fault: the host's wall clock minus its monotonic clock (ns), as
#: the runner measured them at its start.
ENV_TRUE_BASE = "ZCHAOS_WALL_MINUS_MONOTONIC_NS"
#: How far the host's wall clock may drift from its monotonic clock over one run before the
#: run's time line is not trusted (an NTP slew is at most 0.5 ms/s: 15 ms over 30 s).
MAX_CLOCK_DRIFT_NS = 1_000_000_000


def _base_from_env() -> int | None:
    text = os.environ.get(ENV_TRUE_BASE)
    try:
        return int(text) if text else None
    except ValueError:  # not ours to judge here; the wall clock is the fallback
        return None


_BASE = _base_from_env()


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def libc_wall_clock() -> Callable[[], int] | None:
    """The host's wall clock (ns) read by the C library's own ``clock_gettime``, past any
    preloaded one (a symbol looked up in libc's handle is libc's), or None where libc cannot
    be loaded so."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        gettime = libc.clock_gettime
    except (OSError, AttributeError):
        return None
    gettime.argtypes = [ctypes.c_int, ctypes.POINTER(_Timespec)]
    gettime.restype = ctypes.c_int
    realtime = time.CLOCK_REALTIME

    def now() -> int:
        spec = _Timespec()  # one per call: the foreign call lets other threads run meanwhile
        gettime(realtime, ctypes.byref(spec))
        return spec.tv_sec * 1_000_000_000 + spec.tv_nsec

    return now


def _true_clock() -> Callable[[], int]:
    if _BASE is None:
        return time.time_ns
    wall = libc_wall_clock()
    if wall is not None:
        return wall
    base = _BASE
    return lambda: time.monotonic_ns() + base


#: Now, as the history records it: the host's true wall clock, also under a faked one.
true_time_ns: Callable[[], int] = _true_clock()


def wall_minus_monotonic_ns() -> int:
    """The host's wall clock minus its monotonic clock now (the pair read closest together
    of three, so a preemption between the two reads does not skew it)."""
    best: tuple[int, int] | None = None
    for _ in range(3):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    assert best is not None
    return best[1]


class ClockSample(TypedDict):
    """Both host clocks read together (run.json ``clocks.start`` and ``clocks.end``)."""

    wall_ns: int
    monotonic_ns: int


class ClocksMeta(TypedDict, total=False):
    """run.json ``clocks``: the host's clocks at the run's start and end."""

    start: ClockSample
    end: ClockSample


def clock_sample() -> ClockSample:
    mono = time.monotonic_ns()
    return {"wall_ns": mono + wall_minus_monotonic_ns(), "monotonic_ns": mono}


def clock_drift_ns(clocks: ClocksMeta) -> int | None:
    """How far the wall clock moved apart from the monotonic clock between start and end
    (positive: the wall clock gained), None without both samples."""
    start, end = clocks.get("start"), clocks.get("end")
    if start is None or end is None:
        return None
    return (end["wall_ns"] - start["wall_ns"]) - (end["monotonic_ns"] - start["monotonic_ns"])


def clock_drift_reason(clocks: ClocksMeta | None) -> str | None:
    """The incomplete run's reason when the host's clocks disagreed over it, else None."""
    drift = clock_drift_ns(clocks or {})
    if drift is None or abs(drift) <= MAX_CLOCK_DRIFT_NS:
        return None
    return (
        f"the host's wall clock moved {drift / 1e9:+.1f} s against its monotonic clock during the run "
        "(a clock step or a suspended machine): the history's times are not one time line, so the "
        "run is incomplete"
    )
