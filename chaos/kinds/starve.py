"""``starve``: keep only ``share`` of one CPU for the process for duration_s (chaos/starve.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, Param, duration
from chaos.starve import ENV_METHOD, Starvation
from contract.promises import SLOWDOWN

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    pid = nemesis.target_pid(fault)
    if pid is None:
        return
    forced = os.environ.get(ENV_METHOD, "auto")
    starvation = Starvation(
        pid, fault.params.get("share", 0.1), forced, max_s=fault.params["duration_s"] + 60
    )
    method = starvation.start()
    try:
        nemesis.started(fault, pid=pid, detail=method)
        nemesis.wait(fault.params["duration_s"])
    finally:
        starvation.stop()
        nemesis.stopped(fault, pid=pid)


KIND = FaultKind(
    "starve",
    "keep only `share` of one CPU for the process for duration_s (CPU overload, a slow host)",
    "process",
    run,
    {
        "duration_s": duration(),
        # chaos/starve.py: a quota of 0 stops the process (that is freeze), 1 is no fault.
        "share": Param(
            float, 0.1, "the part of one CPU the process keeps", min=0.01, max=0.99, explore=(0.01, 0.3)
        ),
    },
    harm=SLOWDOWN,
)
