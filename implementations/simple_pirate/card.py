"""The Simple Pirate family's card: its probe worker, its junk, its checks."""

from __future__ import annotations

from contract.family import Family, Junk, Probe, work_option
from implementations.junk import req_client_cases, req_worker_cases

CARD = Family(
    "simple-pirate",
    "Simple Pirate: a load-balancing queue and REQ workers that say READY (no heartbeats)",
    probe=Probe(
        "simple-pirate",
        "Simple Pirate worker: REQ that says READY, then echoes (no heartbeats)",
        "implementations.simple_pirate.worker",
        "for a Simple Pirate (load-balancing) queue",
        {"work_ms": work_option()},
    ),
    junk=Junk(
        "Simple Pirate queue: REQ workers, READY 0x01", req_client_cases(b"\x01"), req_worker_cases(b"\x01")
    ),
    checkers=("pirates",),
)
