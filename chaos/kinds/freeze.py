"""``freeze``: SIGSTOP for duration_s, then SIGCONT (a GC pause, a stuck process)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, duration

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    pid = nemesis.control.signal(fault.target, signal.SIGSTOP)
    if pid is None:
        nemesis.missed(fault)
        return
    nemesis.started(fault, pid=pid)
    nemesis.wait(fault.params["duration_s"])
    nemesis.control.signal(fault.target, signal.SIGCONT)
    nemesis.stopped(fault, pid=pid)


KIND = FaultKind(
    "freeze",
    "SIGSTOP for duration_s, then SIGCONT (a GC pause, a stuck process)",
    "process",
    run,
    {"duration_s": duration()},
)
