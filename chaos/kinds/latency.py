"""``latency``: Toxiproxy ``latency`` (+ ``jitter``) in ms. With ``network = "hosts"`` (no
proxy) the link's own TCP packets are held that long in a userspace packet queue in the
binder's host instead (chaos/packets.py ``hold_link``)."""

from __future__ import annotations

from chaos.faults import FaultKind, Toxic, count, direction, duration, toxicity
from chaos.netfaults import toxic_fault
from contract.promises import SLOWDOWN

KIND = FaultKind(
    "latency",
    "delay the link's data by latency_ms ± jitter_ms for duration_s (on hosts: its packets, in a queue)",
    "link",
    toxic_fault,
    {
        "duration_s": duration(),
        "latency_ms": count("added delay", "ms", explore=(20, 2000)),
        "jitter_ms": count("random spread around latency_ms", "ms", 0, explore=(0, 500)),
        "direction": direction("downstream"),
        "toxicity": toxicity(),
    },
    harm=SLOWDOWN,
    toxic=Toxic("latency", {"latency_ms": "latency", "jitter_ms": "jitter"}),
    on_hosts="delay",
)
