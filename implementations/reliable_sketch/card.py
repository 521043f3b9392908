"""The reliable request-reply sketch family's card: its probe server, its junk, its checks."""

from __future__ import annotations

from contract.family import Family, Junk, Probe, work_option
from implementations.junk import once, req_client_cases, req_worker_cases

CARD = Family(
    "reliable-sketch",
    "reliable request-reply sketch: a queue with a disabled list, de-duplicating REQ servers",
    probe=Probe(
        "sketch",
        "reliable request-reply sketch server: REQ with READY, answers a repeated request from its cache",
        "implementations.reliable_sketch.server",
        "for a sketch queue (disabled list)",
        {"work_ms": work_option()},
    ),
    junk=Junk(
        "reliable request-reply sketch queue: REQ servers, READY",
        {
            **req_client_cases(b"READY"),
            # The issue-11 wedge: a request no server echoes within the reply wait.
            "10 MB request": once(lambda rng: [b"", b"x:0|" + b"z" * 10_000_000]),
        },
        req_worker_cases(b"READY"),
    ),
    checkers=("reliable_sketch",),
)
