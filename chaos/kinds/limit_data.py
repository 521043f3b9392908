"""``limit_data``: Toxiproxy ``limit_data``: each connection closed after ``bytes`` bytes in
that direction."""

from __future__ import annotations

from chaos.faults import FaultKind, Toxic, count, direction, duration, toxicity
from chaos.netfaults import toxic_fault
from contract.promises import STOPS_CONNECTIONS

KIND = FaultKind(
    "limit_data",
    "close each connection of the link after `bytes` bytes, for duration_s",
    "link",
    toxic_fault,
    {
        "duration_s": duration(),
        "bytes": count("bytes let through per connection", "bytes", minimum=1, explore=(64, 4096)),
        "direction": direction("downstream"),
        "toxicity": toxicity(),
    },
    lossy=True,
    # each connection carries its bytes and the peers make new ones: the target is heard
    # between the cuts (a freelance client rightly keeps sending to it)
    stops=STOPS_CONNECTIONS,
    toxic=Toxic("limit_data", {"bytes": "bytes"}),
    hosts_instead='none: it counts the bytes of a connection, which only a proxy can (network = "proxy")',
)
