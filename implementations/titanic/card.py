"""The Titanic (9/TSP) family's card: its junk (MDP junk, and titanic.* requests with
malformed bodies), its client, its checks. It runs on the Majordomo family's broker and
workers, whose probe it uses."""

from __future__ import annotations

import random
from collections.abc import Callable

from contract.family import Family, Junk, JunkCase
from implementations.junk import once, rand
from implementations.majordomo import mdp
from implementations.majordomo.card import MDP_CLIENT, MDP_WORKER


def _titanic(service: bytes, body: Callable[[random.Random], list[bytes]]) -> JunkCase:
    """A well-formed MDP request to a Titanic service, with a malformed Titanic body: it
    passes the broker and reaches the Titanic server (none of them stores a request)."""
    return once(lambda rng: [b"", mdp.C_CLIENT, service, *body(rng)])


TITANIC_CLIENT: dict[str, JunkCase] = {
    "titanic.request without body": _titanic(b"titanic.request", lambda rng: [b"echo"]),
    "titanic.request service not UTF-8": _titanic(b"titanic.request", lambda rng: [b"\xff\xfe", b"x:0|b"]),
    "titanic.request for a titanic service": _titanic(
        b"titanic.request", lambda rng: [b"titanic.reply", b"x"]
    ),
    "titanic.reply not a uuid": _titanic(b"titanic.reply", lambda rng: [rand(rng)]),
    "titanic.reply path as uuid": _titanic(b"titanic.reply", lambda rng: [b"../../../../etc/passwd"]),
    "titanic.reply two frames": _titanic(
        b"titanic.reply", lambda rng: [rng.randbytes(16).hex().encode()] * 2
    ),
    "titanic.close not a uuid": _titanic(b"titanic.close", lambda rng: [rand(rng)]),
    "titanic.close forged uuid": _titanic(b"titanic.close", lambda rng: [rng.randbytes(16).hex().encode()]),
}

CARD = Family(
    "titanic",
    "Titanic (9/TSP): durable request-reply on top of a Majordomo broker",
    junk=Junk(
        "9/TSP over a 7/MDP broker: MDP junk, and titanic.* requests with malformed bodies",
        {**MDP_CLIENT, **TITANIC_CLIENT},
        MDP_WORKER,
    ),
    adapters=("titanic",),
    checkers=("titanic",),
)
