"""``kill``: SIGKILL the process group (a crash); start it again after restart_after_s if given."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, Param, start_again

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    pid = nemesis.control.signal(fault.target, signal.SIGKILL, expected_exit=True)
    if pid is None:
        nemesis.missed(fault)
        return
    nemesis.started(fault, pid=pid)
    restart_after = fault.params.get("restart_after_s")
    if restart_after is None:
        nemesis.stopped(fault, detail="not restarted")
        return
    start_again(nemesis, fault, restart_after)


KIND = FaultKind(
    "kill",
    "SIGKILL the process group (a crash); start it again after restart_after_s if given",
    "process",
    run,
    {
        "restart_after_s": Param(
            float,
            None,
            "start it again this long after (none: never)",
            "s",
            min=0,
            length=True,
            # explored always restarted: a process never started again breaks any system
            explore=(0.5, 5.0),
        )
    },
)
