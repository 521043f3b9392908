"""The nemesis: turns a scenario's fault lines into a seeded plan and carries it out.

``plan_faults`` is the one place a seed becomes a plan, and it is pure: the same seed,
fault lines and topology give the same plan (at which seconds each line fires, from its
``Schedule``, and which instance each ``worker:random`` hits). ``Nemesis`` then runs the
plan against the live processes, one thread per fault occurrence so a long freeze does
not delay the next kill, and records each fault as a ``fault_start``/``fault_stop`` pair
in the history (Jepsen's nemesis model), with the fault's class from its card
(chaos/kinds/). Faults on the same instance never overlap: they take the instance's lock in
turn. How each kind is carried out is its card's ``run``; the nemesis gives it the
``chaos.faults.FaultRun`` it needs (the processes, the links, the history, the clock).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from chaos.faults import ProcessControl
from chaos.kinds import FAULT_KINDS
from contract.rundir import PlanEntry

if TYPE_CHECKING:
    from chaos.clock import Clocks
    from chaos.disk import Disks
    from chaos.hosts import Hosts
    from chaos.lazyfs import Layers
    from chaos.netfaults import NetworkFaults

log = logging.getLogger("zchaos.nemesis")


class EventSink(Protocol):
    def emit(self, ev: str, **fields: Any) -> None: ...


@dataclass(frozen=True)
class PlannedFault:
    fault_id: int
    at_s: float  # offset from the start of the load
    kind: str
    target: str  # one instance (or one link)
    selector: str  # what the scenario said: worker:random
    params: dict[str, Any]

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.at_s:6.1f}s  {self.kind:<8} {self.target}" + (f"  ({extra})" if extra else "")

    def as_dict(self) -> PlanEntry:
        """The fault as run.json's plan records it, with its class (scope, lossy, harm, stops, lasting)."""
        cls = FAULT_KINDS[self.kind].fault_class()
        return {
            "fault_id": self.fault_id,
            "at_s": self.at_s,
            "kind": self.kind,
            "target": self.target,
            "selector": self.selector,
            "params": self.params,
            "fault_scope": cls["fault_scope"],
            "fault_lossy": cls["fault_lossy"],
            "fault_harm": cls["fault_harm"],
            "fault_stops": cls["fault_stops"],
            "fault_lasting": cls["fault_lasting"],
        }


@dataclass(frozen=True)
class Schedule:
    """When one fault line fires, as the scenario says it: at given times, every N seconds,
    or ``count`` times drawn from the seed within ``between``. Offsets from the load's start."""

    at_s: tuple[float, ...] = ()
    every_s: float | None = None
    start_s: float = 0.0
    until_s: float = 0.0
    count: int = 0  # random: how many times, drawn within ``between``
    between: tuple[float, float] = (0.0, 0.0)

    def times(self, seed: int, index: int) -> tuple[float, ...]:
        """The offsets of line ``index`` (from 1) of a run with ``seed``, in time order."""
        if self.every_s is not None:
            times, t = [], self.start_s
            while t < self.until_s:
                times.append(round(t, 3))
                t += self.every_s
            return tuple(times)
        if self.count:
            rng = random.Random(f"{seed}:{index}")
            return tuple(sorted(round(rng.uniform(*self.between), 3) for _ in range(self.count)))
        return self.at_s

    def as_dict(self) -> dict[str, Any]:
        """The schedule as the scenario file gives it."""
        if self.every_s is not None:
            return {"every_s": self.every_s, "start_s": self.start_s, "until_s": self.until_s}
        if self.count:
            return {"random": {"count": self.count, "between": list(self.between)}}
        return {"at_s": list(self.at_s)}


def resolve_target(selector: str, instances: dict[str, list[str]], rng: random.Random) -> list[str]:
    """The instances a target names: ``worker-2``, ``queue``, ``worker`` (all), ``worker:half``."""
    role, _, how = selector.partition(":")
    if role not in instances and role.endswith("s") and role[:-1] in instances:
        role = role[:-1]
    if role not in instances:
        return [selector]  # an instance name (or a link), validated with the scenario
    members = instances[role]
    if how == "random":
        return [rng.choice(members)]
    if how == "half":
        return sorted(rng.sample(members, math.ceil(len(members) / 2)))
    return list(members)  # "all", or the bare role name


def plan_faults(fault_lines: Sequence[Any], instances: dict[str, list[str]], seed: int) -> list[PlannedFault]:
    """Every fault occurrence of the run, in time order: its times and its target drawn from
    the seed.

    ``fault_lines`` are ``harness.scenario.FaultSpec``-like (index, kind, target, schedule,
    params); ``instances`` maps each role to its instance names.
    """
    planned: list[tuple[float, int, str, str, str, dict[str, Any]]] = []
    for line in fault_lines:
        for n, at_s in enumerate(line.schedule.times(seed, line.index)):
            rng = random.Random(f"{seed}:{line.index}:{n}")
            for target in resolve_target(line.target, instances, rng):
                planned.append((at_s, line.index, line.kind, target, line.target, dict(line.params)))
    planned.sort(key=lambda p: (p[0], p[1], p[3]))
    return [
        PlannedFault(fault_id, at_s, kind, target, selector, params)
        for fault_id, (at_s, _, kind, target, selector, params) in enumerate(planned, start=1)
    ]


class Nemesis:
    """Carries out a plan from ``start()`` on, until ``stop()``."""

    def __init__(
        self,
        plan: list[PlannedFault],
        control: ProcessControl,
        history: EventSink,
        network: NetworkFaults | None = None,
        endpoints: dict[str, tuple[str, str]] | None = None,
        clocks: Clocks | None = None,
        disks: Disks | None = None,
        hosts: Hosts | None = None,
        lazyfs: Layers | None = None,
    ) -> None:
        self.plan = plan
        self.control = control
        self.history = history
        self.network = network  # the run's links behind the fault proxy (None: no link faults)
        # endpoint -> (the address it is bound on, "client" or "worker" side): where the
        # malformed fault sends its junk, straight, never through a link's proxy.
        self.endpoints = endpoints or {}
        self.clocks = clocks  # the faked clocks of the roles a clock fault targets (chaos/clock.py)
        self.disks = disks  # the data folders' file systems a disk fault fills (chaos/disk.py)
        self.hosts = hosts  # the run's network namespaces, for packet faults (chaos/hosts.py)
        self.lazyfs = lazyfs  # the lazy layers whose unsynced writes a crash drops (chaos/lazyfs.py)
        self.injected = 0
        self._stopping = threading.Event()
        self._locks: dict[str, threading.Lock] = {}
        self._threads: list[threading.Thread] = []
        self._errors: list[str] = []

    def start(self, t0: float | None = None) -> None:
        t0 = time.monotonic() if t0 is None else t0
        for fault in self.plan:
            self._locks.setdefault(fault.target, threading.Lock())
            thread = threading.Thread(target=self._run_one, args=(fault, t0), name=f"fault-{fault.fault_id}")
            thread.daemon = True
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 10.0) -> list[str]:
        """Cancel what has not begun, end what is under way (unfreeze), wait; the errors seen."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return list(self._errors)

    @property
    def errors(self) -> list[str]:
        """The faults that failed so far, one line each."""
        return list(self._errors)

    def next_fault(self, elapsed_s: float) -> PlannedFault | None:
        return next((f for f in self.plan if f.at_s > elapsed_s), None)

    # -- one fault ------------------------------------------------------------------

    def wait(self, seconds: float) -> bool:
        """Wait, unless the run is ending; True if the full time passed."""
        return not self._stopping.wait(max(0.0, seconds))

    def _emit(self, ev: str, fault: PlannedFault, **extra: Any) -> None:
        # Its parameters are not repeated: run.json's plan holds them under the same fault_id.
        self.history.emit(ev, fault=fault.kind, target=fault.target, fault_id=fault.fault_id, **extra)

    def started(self, fault: PlannedFault, **extra: Any) -> None:
        """``fault_start`` with the fault's class from its card (what the checkers excuse by)."""
        self._emit("fault_start", fault, **FAULT_KINDS[fault.kind].fault_class(), **extra)
        self.injected += 1

    def stopped(self, fault: PlannedFault, **extra: Any) -> None:
        self._emit("fault_stop", fault, **extra)

    def missed(self, fault: PlannedFault) -> None:
        """The target was not running: the history still says the fault came, and did nothing."""
        self._emit(
            "fault_start", fault, **FAULT_KINDS[fault.kind].fault_class(), detail="target was not running"
        )
        self._emit("fault_stop", fault, detail="nothing to do")

    def target_pid(self, fault: PlannedFault) -> int | None:
        pid = self.control.running(fault.target)
        if pid is None:
            self.missed(fault)
        return pid

    def record(self, ev: str, fault: PlannedFault, **fields: Any) -> None:
        self.history.emit(ev, fault=fault.kind, target=fault.target, fault_id=fault.fault_id, **fields)

    def _run_one(self, fault: PlannedFault, t0: float) -> None:
        if not self.wait(t0 + fault.at_s - time.monotonic()):
            return
        with self._locks[fault.target]:
            if self._stopping.is_set():
                return
            try:
                kind = FAULT_KINDS[fault.kind]
                kind.run(self, kind, fault)
            except Exception as exc:  # a fault that fails must not kill the run: record it
                # The run then did not carry out its plan (incomplete, never passed); the
                # user sees the message, the traceback goes to the debug log only.
                log.debug("fault %s failed", fault.describe(), exc_info=True)
                message = f"{type(exc).__name__}: {exc}"
                self._emit("fault_error", fault, detail=message)
                self._errors.append(f"{fault.describe().strip()}: {message}")
