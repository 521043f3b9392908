"""The Lazy Pirate family's card: its REP server as a probe, and its client."""

from __future__ import annotations

from contract.family import Family, Probe, work_option

CARD = Family(
    "lazy-pirate",
    "Lazy Pirate: REQ clients with timeout, retries and abandon, against REP servers",
    probe=Probe(
        "rep",
        "plain REP echo: connects to a DEALER backend (a queue, a front server), or binds "
        "as a Lazy Pirate server",
        "implementations.lazy_pirate.server",
        "for a ROUTER/DEALER queue or as a Lazy Pirate server",
        {"work_ms": work_option()},
        bind_flag="--frontend",
    ),
    adapters=("lazy_pirate",),
)
