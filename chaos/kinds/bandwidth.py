"""``bandwidth``: Toxiproxy ``bandwidth`` in KB/s (0 blocks the direction). With ``network =
"hosts"`` (no proxy) each of the link's own TCP flows is held to the rate in a userspace
packet queue in the binder's host instead, and a rate of 0 drops its packets (chaos/packets.py
``hold_link``)."""

from __future__ import annotations

from chaos.faults import FaultKind, Toxic, count, direction, duration, toxicity
from chaos.netfaults import toxic_fault
from contract.promises import SLOWDOWN

KIND = FaultKind(
    "bandwidth",
    "limit the link to rate_kb_s KB/s for duration_s (0 stalls it: use partition for an outage; on hosts: "
    "each connection's packets, in a packet queue)",
    "link",
    toxic_fault,
    {
        "duration_s": duration(),
        "rate_kb_s": count("the rate allowed (0 stalls the link)", "KB/s", explore=(1, 64)),
        "direction": direction("downstream"),
        "toxicity": toxicity(),
    },
    lossy=True,
    harm=SLOWDOWN,
    toxic=Toxic("bandwidth", {"rate_kb_s": "rate"}),
    on_hosts="rate",
)
