"""``reset``: Toxiproxy ``reset_peer``. Connections opened during the fault are reset (RST)
on their first data; ones already open are closed (Toxiproxy can set SO_LINGER 0 only when
a connection starts)."""

from __future__ import annotations

from chaos.faults import FaultKind, Toxic, count, direction, duration, toxicity
from chaos.netfaults import toxic_fault
from contract.promises import STOPS_CONNECTIONS

KIND = FaultKind(
    "reset",
    "reset connections (RST) timeout_ms after their first data, for duration_s (reset_peer)",
    "link",
    toxic_fault,
    {
        "duration_s": duration(),
        "timeout_ms": count("wait before the reset", "ms", 0, explore=(0, 1000)),
        "direction": direction("upstream"),
        "toxicity": toxicity(),
    },
    lossy=True,
    # each connection is reset after its first data (and timeout_ms) and the peers reconnect
    stops=STOPS_CONNECTIONS,
    toxic=Toxic("reset_peer", {"timeout_ms": "timeout"}),
    hosts_instead='disconnect (TCP resets of the link at the IP level) or host_partition with how = "reset"',
)
