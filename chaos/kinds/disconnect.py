"""``disconnect``: the link's proxy disabled (connections closed with FIN, new ones refused),
then enabled again. With ``network = "hosts"`` (no proxy) the link's own TCP packets are
answered with resets instead (chaos/packets.py ``hold_link``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, duration
from chaos.netfaults import hold, network_of

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    if nemesis.hosts is not None and kind.on_hosts is not None:
        # no proxy on hosts: the link's TCP flows answered with resets (open ones reset at
        # their next packet, new ones refused), as near as packets come to a closed proxy
        from chaos.packets import hold_link

        hold_link(nemesis, fault, kind.on_hosts)
        return
    hold(nemesis, fault, network_of(nemesis).disable(fault.target))


KIND = FaultKind(
    "disconnect",
    "close the link's connections and refuse new ones for duration_s (proxy disabled)",
    "link",
    run,
    {"duration_s": duration()},
    lossy=True,
    on_hosts="reset",
)
