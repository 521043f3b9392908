"""``restart``: SIGTERM, wait for the exit, start again after delay_s (a deploy, a clean restart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, Param, start_again

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    nemesis.started(fault)
    nemesis.control.stop(fault.target)
    start_again(nemesis, fault, fault.params.get("delay_s", 0.0))


KIND = FaultKind(
    "restart",
    "SIGTERM, wait for the exit, start again after delay_s (a deploy, a clean restart)",
    "process",
    run,
    {
        "delay_s": Param(
            float,
            0.0,
            "pause between the exit and the new start",
            "s",
            min=0,
            length=True,
            explore=(0.0, 4.0),
        )
    },
)
