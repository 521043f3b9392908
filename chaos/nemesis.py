"""The nemesis: turns a scenario's fault lines into a seeded plan and carries it out.

``plan_faults`` is pure: the same seed, fault lines and topology give the same plan
(which instance each ``worker:random`` hits, at which second). ``Nemesis`` then runs the
plan against the live processes, one thread per fault occurrence so a long freeze does
not delay the next kill, and records each fault as a ``fault_start``/``fault_stop`` pair
in the history (Jepsen's nemesis model). Faults on the same instance never overlap: they
take the instance's lock in turn.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import zmq

from chaos.faults import FAULT_KINDS
from chaos.malformed import Wire, send_batch
from chaos.starve import ENV_METHOD, Starvation

if TYPE_CHECKING:
    from chaos.netfaults import NetworkFaults

log = logging.getLogger("zchaos.nemesis")


class ProcessControl(Protocol):
    """What the nemesis needs from the supervisor of the run."""

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None: ...
    def stop(self, instance: str) -> None: ...
    def start(self, instance: str) -> int: ...


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
    """Every fault occurrence of the run, in time order, with its target chosen by the seed.

    ``fault_lines`` are ``harness.scenario.FaultSpec``-like (index, kind, target, times_s,
    params); ``instances`` maps each role to its instance names.
    """
    planned: list[tuple[float, int, str, str, str, dict[str, Any]]] = []
    for line in fault_lines:
        for n, at_s in enumerate(line.times_s):
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
    ) -> None:
        self.plan = plan
        self.control = control
        self.history = history
        self.network = network  # the run's links behind the fault proxy (None: no link faults)
        # endpoint -> (the address it is bound on, "client" or "worker" side): where the
        # malformed fault sends its junk, straight, never through a link's proxy.
        self.endpoints = endpoints or {}
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

    def _wait(self, seconds: float) -> bool:
        """Wait, unless the run is ending; True if the full time passed."""
        return not self._stopping.wait(max(0.0, seconds))

    def _emit(self, ev: str, fault: PlannedFault, **extra: Any) -> None:
        params = json.dumps({"selector": fault.selector, **fault.params}, sort_keys=True)
        if ev == "fault_start":  # the fault's class, from the table: what the checkers excuse by
            kind = FAULT_KINDS[fault.kind]
            extra.update(fault_scope=kind.target, fault_lossy=kind.lossy)
        self.history.emit(
            ev, fault=fault.kind, target=fault.target, fault_id=fault.fault_id, params=params, **extra
        )

    def _run_one(self, fault: PlannedFault, t0: float) -> None:
        if not self._wait(t0 + fault.at_s - time.monotonic()):
            return
        with self._locks[fault.target]:
            if self._stopping.is_set():
                return
            try:
                handler = getattr(self, f"_do_{fault.kind}")
                handler(fault)
            except Exception as exc:  # a fault that fails must not kill the run: record it
                # The run then did not carry out its plan (incomplete, never passed); the
                # user sees the message, the traceback goes to the debug log only.
                log.debug("fault %s failed", fault.describe(), exc_info=True)
                message = f"{type(exc).__name__}: {exc}"
                self._emit("fault_error", fault, detail=message)
                self._errors.append(f"{fault.describe().strip()}: {message}")

    def _missed(self, fault: PlannedFault) -> None:
        """The target was not running: the history still says the fault came, and did nothing."""
        self._emit("fault_start", fault, detail="target was not running")
        self._emit("fault_stop", fault, detail="nothing to do")

    def _do_kill(self, fault: PlannedFault) -> None:
        pid = self.control.signal(fault.target, signal.SIGKILL, expected_exit=True)
        if pid is None:
            self._missed(fault)
            return
        self._emit("fault_start", fault, pid=pid)
        self.injected += 1
        restart_after = fault.params.get("restart_after_s")
        if restart_after is None:
            self._emit("fault_stop", fault, detail="not restarted")
            return
        if self._wait(restart_after):
            new_pid = self.control.start(fault.target)
            self._emit("fault_stop", fault, pid=new_pid, detail="restarted")
        else:
            self._emit("fault_stop", fault, detail="run ended before the restart")

    def _do_restart(self, fault: PlannedFault) -> None:
        self._emit("fault_start", fault)
        self.injected += 1
        self.control.stop(fault.target)
        if self._wait(fault.params.get("delay_s", 0.0)):
            new_pid = self.control.start(fault.target)
            self._emit("fault_stop", fault, pid=new_pid, detail="restarted")
        else:
            self._emit("fault_stop", fault, detail="run ended before the restart")

    def _do_freeze(self, fault: PlannedFault) -> None:
        pid = self.control.signal(fault.target, signal.SIGSTOP)
        if pid is None:
            self._missed(fault)
            return
        self._emit("fault_start", fault, pid=pid)
        self.injected += 1
        self._wait(fault.params["duration_s"])
        self.control.signal(fault.target, signal.SIGCONT)
        self._emit("fault_stop", fault, pid=pid)

    def _do_starve(self, fault: PlannedFault) -> None:
        pid = self.control.signal(fault.target, 0)  # signal 0: only its pid
        if pid is None:
            self._missed(fault)
            return
        forced = os.environ.get(ENV_METHOD, "auto")
        starvation = Starvation(
            pid, fault.params.get("share", 0.1), forced, max_s=fault.params["duration_s"] + 60
        )
        method = starvation.start()
        try:
            self._emit("fault_start", fault, pid=pid, detail=method)
            self.injected += 1
            self._wait(fault.params["duration_s"])
        finally:
            starvation.stop()
            self._emit("fault_stop", fault, pid=pid)

    def _do_network(self, fault: PlannedFault) -> None:
        if self.network is None:
            raise RuntimeError("network faults need the run's links routed through the fault proxy")
        active = self.network.apply(fault.kind, fault.target, fault.params)
        try:
            self._emit("fault_start", fault, detail=active.describe())
            self.injected += 1
            self._wait(fault.params["duration_s"])
        finally:
            active.revert()
            self._emit("fault_stop", fault)

    def _do_malformed(self, fault: PlannedFault) -> None:
        endpoint, family = fault.params["endpoint"], fault.params["family"]
        if endpoint not in self.endpoints:
            raise RuntimeError(f"the malformed fault needs the address of endpoint {endpoint!r}")
        address, side = self.endpoints[endpoint]
        if self.control.signal(fault.target, 0) is None:  # signal 0: only whether it runs
            self._missed(fault)
            return
        rate = fault.params.get("rate_per_s", 20.0)
        period = max(1.0, 1.0 / rate)  # a batch a second, or one message per batch when slower
        per_batch = max(1, round(rate * period))
        service = fault.params.get("service", "echo").encode()
        # Seeded by the plan: the same scenario seed sends the same junk.
        rng = random.Random(f"malformed:{fault.fault_id}:{fault.at_s}:{fault.target}")
        context = zmq.Context()
        wire = Wire(context, address)
        try:
            self._emit("fault_start", fault, detail=f"{family} {side}-side junk to {endpoint} at {address}")
            self.injected += 1
            end = time.monotonic() + fault.params["duration_s"]
            next_at = time.monotonic()
            while True:
                sent = send_batch(wire, family, side, rng, per_batch, service=service)
                detail = {"endpoint": endpoint, "side": side, "family": family, "sent": dict(sent)}
                self.history.emit(
                    "malformed_batch",
                    fault=fault.kind,
                    target=fault.target,
                    fault_id=fault.fault_id,
                    detail=json.dumps(detail),
                )
                next_at += period
                if next_at >= end or not self._wait(next_at - time.monotonic()):
                    break
            self._wait(end - time.monotonic())
        finally:
            wire.close()
            context.term()
            self._emit("fault_stop", fault)

    _do_partition = _do_disconnect = _do_reset = _do_latency = _do_network
    _do_bandwidth = _do_slicer = _do_limit_data = _do_network


assert all(hasattr(Nemesis, f"_do_{name}") for name in FAULT_KINDS), "every fault kind needs a handler"
