"""``partition``: blackhole a link's data (Toxiproxy ``timeout`` 0); removing the toxic closes
the connections, as Toxiproxy does, so peers reconnect. With ``network = "hosts"`` (no proxy)
iptables rules drop the link's own TCP packets instead (chaos/packets.py ``hold_link``)."""

from __future__ import annotations

from chaos.faults import FaultKind, Toxic, direction, duration, toxicity
from chaos.netfaults import toxic_fault

KIND = FaultKind(
    "partition",
    "blackhole the link's data for duration_s (Toxiproxy timeout 0); connections close at the end",
    "link",
    toxic_fault,
    {"duration_s": duration(), "direction": direction("both"), "toxicity": toxicity()},
    lossy=True,
    toxic=Toxic("timeout", fixed={"timeout": 0}),
    on_hosts="drop",
)
