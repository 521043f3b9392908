"""Building blocks of the junk the families' cards give the ``malformed`` fault
(contract/family.py ``Junk``; chaos/malformed.py sends it).

A case does its harm on a wire of DEALER peers connected straight to a broker's endpoint
(chaos.malformed.Wire: ``send(identity, frames)``, ``recv(identity, timeout_ms)``,
``stranger()`` for an identity the broker never saw). ``once`` makes the common case, one
message from a stranger; ``req_client_cases`` and ``req_worker_cases`` are the cases of the
REQ-framed families (Simple Pirate, the sketch, PING/PONG: ``["", ...]`` on the wire).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from contract.family import JunkCase


def rand(rng: random.Random, most: int = 40) -> bytes:
    """Up to ``most`` random bytes."""
    return rng.randbytes(rng.randrange(most + 1))


def once(frames: Callable[[random.Random], list[bytes]]) -> JunkCase:
    """A case that is one message from a stranger."""

    def case(wire: Any, rng: random.Random, service: bytes) -> None:
        wire.send(wire.stranger(), frames(rng))

    return case


def req_client_cases(ready: bytes) -> dict[str, JunkCase]:
    """Client-side junk for a broker whose clients are REQ sockets (``ready``: the workers'
    READY word, sent as a request body)."""
    return {
        "request without delimiter": once(lambda rng: [b"x:0|" + rand(rng)]),
        "request with empty body": once(lambda rng: [b"", b""]),
        "request of many body frames": once(lambda rng: [b"", *(rand(rng, 8) for _ in range(5))]),
        "request whose body is a control word": once(lambda rng: [b"", ready]),
    }


def req_worker_cases(ready: bytes, extra: dict[str, JunkCase] | None = None) -> dict[str, JunkCase]:
    """Worker-side junk for a broker whose workers are REQ sockets that say ``ready``."""
    return {
        "READY from a stranger": once(lambda rng: [b"", ready]),
        "reply from a stranger": once(lambda rng: [b"", b"client-" + rand(rng, 4), b"", b"x:0|reply"]),
        "unknown command": once(lambda rng: [b"", bytes([rng.randrange(2, 256)])]),
        "reply without delimiter": once(lambda rng: [b"", b"client", b"x:0|reply"]),
        "READY without delimiter": once(lambda rng: [ready]),
        **(extra or {}),
    }
