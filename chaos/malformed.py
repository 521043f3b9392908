"""Protocol-aware junk for a broker's endpoint: what the ``malformed`` fault sends, and what
the built-in brokers' fuzz tests send (one set of generators for both).

A protocol family's card (implementations/<family>/card.py, ``junk``) knows the junk that
matters on each side of its broker: the ``client`` side (the endpoint its clients talk to)
and the ``worker`` side (where its workers talk). Every family also gets the generic junk
here: random frames, empty frames, a message of hundreds of frames and an oversized frame.
The family-specific cases are the ones that wedged brokers before (issue 11): heartbeats,
READYs and replies from identities the broker never saw, unknown commands, bad protocol
headers, missing delimiters, and for Majordomo a DISCONNECT from an idle and from a busy
worker, a second READY and a client message without its empty frame.

The junk goes out through a ``Wire``: DEALER sockets connected straight to the endpoint,
each under its own identity, so to the broker every case comes from a peer it does not
know (or, for a case that registers first, one it has just met). Sends never block: what
a full pipe would not take is dropped, so a stalled broker cannot stall the sender.
``send_batch`` runs ``n`` cases chosen by a seeded ``random.Random``, so the same seed
sends the same junk; the heavy cases (``HEAVY``: megabytes each) at most once per batch.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection

import zmq

from contract.family import JunkCase
from implementations import family_junk


def endpoint_side(endpoint: str, client_endpoints: Collection[str]) -> str:
    """Which junk an endpoint gets: an endpoint the manifest's clients connect to the client
    side, any other endpoint the worker side."""
    return "client" if endpoint in client_endpoints else "worker"


#: The size of an oversized frame (a Majordomo or Pirate broker copies it whole).
OVERSIZED_BYTES = 1 << 20
#: Cases of megabytes: sent at most once per batch, so a batch stays a test of parsing,
#: not of bandwidth.
HEAVY = frozenset({"oversized frame", "10 MB request"})


class Wire:
    """DEALER sockets to one endpoint, one per identity; the oldest closes beyond ``max_peers``."""

    def __init__(self, context: zmq.Context, endpoint: str, *, max_peers: int = 16) -> None:
        self.context = context
        self.endpoint = endpoint
        self.max_peers = max_peers
        self._peers: OrderedDict[bytes, zmq.Socket] = OrderedDict()

    @staticmethod
    def stranger() -> bytes:
        """An identity the broker has never seen (``junk-`` and 8 random hex digits)."""
        return b"junk-" + os.urandom(4).hex().encode()

    def _peer(self, identity: bytes) -> zmq.Socket:
        sock = self._peers.get(identity)
        if sock is None:
            sock = self.context.socket(zmq.DEALER)
            sock.linger = 200  # a closed peer's message still leaves (close does not wait)
            sock.sndhwm = sock.rcvhwm = 100
            sock.setsockopt(zmq.ROUTING_ID, identity)
            sock.connect(self.endpoint)
            self._peers[identity] = sock
            while len(self._peers) > self.max_peers:
                self._peers.popitem(last=False)[1].close()
        return sock

    def send(self, identity: bytes, frames: list[bytes]) -> None:
        with contextlib.suppress(zmq.Again):  # the broker is not reading: junk it would never see
            self._peer(identity).send_multipart(frames, zmq.NOBLOCK)

    def recv(self, identity: bytes, timeout_ms: int) -> list[bytes] | None:
        sock = self._peer(identity)
        if sock.poll(timeout_ms, zmq.POLLIN):
            return sock.recv_multipart(zmq.NOBLOCK)
        return None

    def close(self) -> None:
        for sock in self._peers.values():
            sock.close()
        self._peers.clear()


def _rand(rng: random.Random, most: int = 40) -> bytes:
    return rng.randbytes(rng.randrange(most + 1))


def _once(frames: Callable[[random.Random], list[bytes]]) -> JunkCase:
    """A case that is one message from a stranger."""

    def case(wire: Wire, rng: random.Random, service: bytes) -> None:
        wire.send(wire.stranger(), frames(rng))

    return case


#: The junk every family gets, on both sides.
GENERIC: dict[str, JunkCase] = {
    "random frames": _once(lambda rng: [_rand(rng) for _ in range(rng.randrange(1, 7))]),
    "empty frames": _once(lambda rng: [b""] * rng.randrange(1, 5)),
    "hundreds of frames": _once(lambda rng: [_rand(rng, 8) for _ in range(rng.randrange(100, 400))]),
    "oversized frame": _once(lambda rng: [b"", rng.randbytes(16) * (OVERSIZED_BYTES // 16)]),
}


def families() -> list[str]:
    """The families zchaos has junk for (their cards' names)."""
    return sorted(family_junk())


def cases(family: str, side: str) -> dict[str, JunkCase]:
    """The junk of ``family`` for ``side`` ("client" or "worker"): the generic cases and
    the family's own (its card's ``junk``)."""
    own = family_junk()[family]
    return {**GENERIC, **(own.client if side == "client" else own.worker)}


def send_batch(
    wire: Wire, family: str, side: str, rng: random.Random, n: int, *, service: bytes = b"echo"
) -> Counter[str]:
    """Send ``n`` junk cases of ``family`` for ``side``, chosen by ``rng``; how many of each."""
    chosen = cases(family, side)
    names = sorted(chosen)
    light = [name for name in names if name not in HEAVY]
    sent: Counter[str] = Counter()
    for _ in range(n):
        name = rng.choice(names)
        if name in sent and name in HEAVY:
            name = rng.choice(light)
        chosen[name](wire, rng, service)
        sent[name] += 1
    return sent
