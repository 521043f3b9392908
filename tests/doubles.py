"""The tests' stand-ins for the parts around the nemesis: an event sink that keeps what it
is told, and the process controls (``chaos.faults.ProcessControl``) a test gives it — over
a real supervisor, over one real process, over processes that have all gone, or over
processes whose every operation fails."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.supervisor import ProcSpec, Supervisor


class EventList:
    """An event sink (``HistoryWriter.emit``'s shape) that keeps each event, stamped now."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def emit(self, ev: str, **fields: Any) -> None:
        self.items.append({"ev": ev, "ts": time.time_ns(), **fields})

    def kinds(self) -> list[str]:
        return [e["ev"] for e in self.items]


class SupervisorControl:
    """The runner's control over a real supervisor, whose one restartable process is ``spec``."""

    def __init__(self, supervisor: Supervisor, spec: ProcSpec) -> None:
        self.supervisor = supervisor
        self.spec = spec

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        return self.supervisor.signal(instance, sig, expected_exit=expected_exit)

    def running(self, instance: str) -> int | None:
        return self.supervisor.running(instance)

    def stop(self, instance: str) -> None:
        self.supervisor.stop(instance)

    def start(self, instance: str) -> int:
        return self.supervisor.start(self.spec).pid


class PidControl:
    """Control over one real process, whatever the instance's name (never restarted)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        os.kill(self.pid, sig)
        return self.pid

    def running(self, instance: str) -> int | None:
        return self.pid

    def stop(self, instance: str) -> None: ...

    def start(self, instance: str) -> int:
        return self.pid


class GoneControl:
    """Every target has already gone: the nemesis records its faults as missed."""

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        return None

    def running(self, instance: str) -> int | None:
        return None

    def stop(self, instance: str) -> None: ...

    def start(self, instance: str) -> int:
        return 0


class FailingControl:
    """Every operation fails, as a supervisor's whose process will not start."""

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        raise OSError(f"cannot signal {instance}")

    def running(self, instance: str) -> int | None:
        raise OSError(f"cannot ask about {instance}")

    def stop(self, instance: str) -> None:
        raise OSError(f"cannot stop {instance}")

    def start(self, instance: str) -> int:
        raise OSError(f"cannot start {instance}")


def as_our_system(scenario: Any) -> Any:
    """A stock scenario (relative loads and bounds: ``users = "0.5x capacity, at most 10"``)
    resolved against OUR_SYSTEM, so that a test that runs it on one of our fast systems (or
    a user's behind our fast probe workers) runs what it ran before the scenarios became
    relative, without spending a real calibration (~40 s) first. A scenario with no
    relative value is returned as it is."""
    from dataclasses import replace

    from harness.scenario import reparse

    if not scenario.uncalibrated:
        return scenario
    return replace(reparse(scenario, scenario.source, calibration=our_system()), sets=scenario.sets)


def our_system() -> Any:
    """The calibration of our Paranoid Pirate (3 echo workers) measured on this kind of
    machine on 2026-12-01 (`zchaos calibrate paranoid-pirate`): at these figures every
    stock scenario's relative value resolves to its "at most" / "at least" bound, the
    absolute value it had before. tests/test_calibrate_runs.py measures real ones."""
    from contract.calibration import Calibration

    return Calibration(
        manifest="paranoid-pirate",
        manifest_path="implementations/paranoid_pirate/manifest.toml",
        key="our-system",
        machine="test double",
        date="2026-12-01T21:26:00Z",
        setup={"topology": {"queue": 1, "worker": 3}, "options": {"heartbeat_ms": 1000, "liveness": 3}},
        capacity_rps=1699.67,
        capacity_users=8,
        capped=False,
        p50_ms=1.731,
        p90_ms=5.182,
        p99_ms=18.486,
        moderate_users=4,
        timeout_ms=100.0,
    )
