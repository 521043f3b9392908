"""The Paranoid Pirate (6/PPP) family's card: its probe worker, its junk, its checks."""

from __future__ import annotations

from contract.family import Family, Junk, Probe, ProbeOption, work_option
from implementations.junk import once, rand
from implementations.paranoid_pirate import protocol as ppp

CARD = Family(
    "paranoid-pirate",
    "Paranoid Pirate (6/PPP): a queue and DEALER workers with heartbeats both ways",
    probe=Probe(
        "paranoid-pirate",
        "Paranoid Pirate (6/PPP) worker: DEALER, READY, heartbeats both ways, reconnect with back-off",
        "implementations.paranoid_pirate.worker",
        "for a Paranoid Pirate queue",
        {
            "heartbeat_ms": ProbeOption("--heartbeat-ms", 1000, "heartbeat interval"),
            "liveness": ProbeOption("--liveness", 3, "silent heartbeats before it reconnects"),
            "reconnect_ms": ProbeOption("--reconnect-ms", 1000, "first reconnect back-off"),
            "reconnect_max_ms": ProbeOption("--reconnect-max-ms", 32000, "back-off ceiling"),
            "work_ms": work_option(),
        },
    ),
    junk=Junk(
        "6/PPP queue: one-frame READY/HEARTBEAT, enveloped replies",
        {
            "request without delimiter": once(lambda rng: [b"x:0|" + rand(rng)]),
            "request without body": once(lambda rng: [b""]),
            "request with empty body": once(lambda rng: [b"", b""]),
        },
        {
            "READY from a stranger": once(lambda rng: [ppp.READY]),
            "HEARTBEAT from a stranger": once(lambda rng: [ppp.HEARTBEAT]),
            "reply from a stranger": once(lambda rng: [b"client-" + rand(rng, 4), b"", b"x:0|reply"]),
            "unknown command": once(lambda rng: [bytes([rng.randrange(3, 256)])]),
            "reply without delimiter": once(lambda rng: [b"client", b"x:0|reply"]),
            "reply without address": once(lambda rng: [b"", b"x:0|reply"]),
        },
    ),
    checkers=("pirates",),
)
