"""The Freelance (10/FLP) family's card: its junk, its client, its checks."""

from __future__ import annotations

import random
from typing import Any

from contract.family import Family, Junk, JunkCase
from implementations.junk import once


def _pings(wire: Any, rng: random.Random, service: bytes) -> None:
    """A peer that pings and never reads: the server's PONGs pile up for it."""
    peer = wire.stranger()
    for _ in range(100):
        wire.send(peer, [b"PING"])


FREELANCE_CLIENT: dict[str, JunkCase] = {
    "control frame without a body": once(lambda rng: [str(rng.randrange(1, 10**6)).encode()]),
    "empty control frame alone": once(lambda rng: [b""]),
    "PONG to the server": once(lambda rng: [b"PONG"]),
    # Bodies without a request id: the server echoes them, and records no execution of a
    # request nobody sent.
    "PING with a body": once(lambda rng: [b"PING", rng.randbytes(8).hex().encode()]),
    "request with a binary control frame": once(lambda rng: [rng.randbytes(8), b"junk"]),
    "request with a huge control frame": once(lambda rng: [b"7" * 100_000, b"junk"]),
    "a hundred PINGs": _pings,
}

CARD = Family(
    "freelance",
    "Freelance (10/FLP, model 3): brokerless servers, clients that ping them and fail over",
    junk=Junk(
        "10/FLP servers (ROUTER, identity = endpoint): PING/PONG and control-frame junk", FREELANCE_CLIENT
    ),
    adapters=("freelance",),
    checkers=("freelance",),
)
