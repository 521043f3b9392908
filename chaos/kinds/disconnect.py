"""``disconnect``: the link's proxy disabled (connections closed with FIN, new ones refused),
then enabled again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, duration
from chaos.netfaults import hold, network_of

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    hold(nemesis, fault, network_of(nemesis).disable(fault.target))


KIND = FaultKind(
    "disconnect",
    "close the link's connections and refuse new ones for duration_s (proxy disabled)",
    "link",
    run,
    {"duration_s": duration()},
    lossy=True,
)
