"""Protocol-aware junk for a broker's endpoint: what the ``malformed`` fault sends, and what
the built-in brokers' fuzz tests send (one set of generators for both).

A *family* (``FAMILIES``, named like the built-in manifests) knows the junk that matters
on each side of a broker: the ``client`` side (the endpoint its clients talk to) and the
``worker`` side (where its workers talk). Every family also gets the generic junk: random
frames, empty frames, a message of hundreds of frames and an oversized frame. The
family-specific cases are the ones that wedged brokers before (issue 11): heartbeats,
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
from dataclasses import dataclass, field

import zmq

from implementations.majordomo import mdp
from implementations.paranoid_pirate import protocol as ppp
from implementations.pingpong import protocol as pingpong
from implementations.wmp import wire as wmp


def endpoint_side(endpoint: str, client_endpoints: Collection[str]) -> str:
    """Which junk an endpoint gets: an endpoint the manifest's clients connect to the client
    side, any other endpoint the worker side."""
    return "client" if endpoint in client_endpoints else "worker"


#: The size of an oversized frame (a Majordomo or Pirate broker copies it whole).
OVERSIZED_BYTES = 1 << 20
#: Cases of megabytes: sent at most once per batch, so a batch stays a test of parsing,
#: not of bandwidth.
HEAVY = frozenset({"oversized frame", "10 MB request"})
#: How long a case that waits for the broker (a busy worker's DISCONNECT) waits at most.
WAIT_MS = 200


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


#: A case does its harm on a wire (``service`` is what a Majordomo worker registers for).
Case = Callable[[Wire, random.Random, bytes], None]


@dataclass(frozen=True)
class Family:
    """The junk cases of one protocol family, by side."""

    name: str
    doc: str
    client: dict[str, Case] = field(default_factory=dict)
    worker: dict[str, Case] = field(default_factory=dict)

    def cases(self, side: str) -> dict[str, Case]:
        specific = self.client if side == "client" else self.worker
        return {**GENERIC, **specific}


def _rand(rng: random.Random, most: int = 40) -> bytes:
    return rng.randbytes(rng.randrange(most + 1))


def _once(frames: Callable[[random.Random], list[bytes]]) -> Case:
    """A case that is one message from a stranger."""

    def case(wire: Wire, rng: random.Random, service: bytes) -> None:
        wire.send(wire.stranger(), frames(rng))

    return case


GENERIC: dict[str, Case] = {
    "random frames": _once(lambda rng: [_rand(rng) for _ in range(rng.randrange(1, 7))]),
    "empty frames": _once(lambda rng: [b""] * rng.randrange(1, 5)),
    "hundreds of frames": _once(lambda rng: [_rand(rng, 8) for _ in range(rng.randrange(100, 400))]),
    "oversized frame": _once(lambda rng: [b"", rng.randbytes(16) * (OVERSIZED_BYTES // 16)]),
}


# --- the REQ-framed families: Simple Pirate, the sketch, PING/PONG (["", ...] on the wire) ----


def _req_client_cases(ready: bytes) -> dict[str, Case]:
    return {
        "request without delimiter": _once(lambda rng: [b"x:0|" + _rand(rng)]),
        "request with empty body": _once(lambda rng: [b"", b""]),
        "request of many body frames": _once(lambda rng: [b"", *(_rand(rng, 8) for _ in range(5))]),
        "request whose body is a control word": _once(lambda rng: [b"", ready]),
    }


def _req_worker_cases(ready: bytes, extra: dict[str, Case] | None = None) -> dict[str, Case]:
    return {
        "READY from a stranger": _once(lambda rng: [b"", ready]),
        "reply from a stranger": _once(lambda rng: [b"", b"client-" + _rand(rng, 4), b"", b"x:0|reply"]),
        "unknown command": _once(lambda rng: [b"", bytes([rng.randrange(2, 256)])]),
        "reply without delimiter": _once(lambda rng: [b"", b"client", b"x:0|reply"]),
        "READY without delimiter": _once(lambda rng: [ready]),
        **(extra or {}),
    }


# --- Paranoid Pirate (6/PPP: DEALER workers, one-frame commands) -----------------------------

PPP_CLIENT: dict[str, Case] = {
    "request without delimiter": _once(lambda rng: [b"x:0|" + _rand(rng)]),
    "request without body": _once(lambda rng: [b""]),
    "request with empty body": _once(lambda rng: [b"", b""]),
}
PPP_WORKER: dict[str, Case] = {
    "READY from a stranger": _once(lambda rng: [ppp.READY]),
    "HEARTBEAT from a stranger": _once(lambda rng: [ppp.HEARTBEAT]),
    "reply from a stranger": _once(lambda rng: [b"client-" + _rand(rng, 4), b"", b"x:0|reply"]),
    "unknown command": _once(lambda rng: [bytes([rng.randrange(3, 256)])]),
    "reply without delimiter": _once(lambda rng: [b"client", b"x:0|reply"]),
    "reply without address": _once(lambda rng: [b"", b"x:0|reply"]),
}


# --- Majordomo (7/MDP) ------------------------------------------------------------------------


def _mdp_ready_then(then: Callable[[Wire, bytes], None]) -> Case:
    def case(wire: Wire, rng: random.Random, service: bytes) -> None:
        worker = wire.stranger()
        wire.send(worker, [b"", mdp.W_WORKER, mdp.READY, service])
        then(wire, worker)

    return case


def _disconnect(wire: Wire, worker: bytes) -> None:
    wire.send(worker, [b"", mdp.W_WORKER, mdp.DISCONNECT])


def _disconnect_when_busy(wire: Wire, worker: bytes) -> None:
    # Wait for a request (under load one comes at once), then leave holding it.
    wire.recv(worker, WAIT_MS)
    _disconnect(wire, worker)


def _second_ready(wire: Wire, worker: bytes) -> None:
    wire.send(worker, [b"", mdp.W_WORKER, mdp.READY, b"other"])


MDP_CLIENT: dict[str, Case] = {
    "request without empty frame": _once(lambda rng: [mdp.C_CLIENT, b"echo", b"x:0|body"]),
    "bad protocol header": _once(lambda rng: [b"", b"MDPC99", b"echo", b"x:0|body"]),
    "request without body": _once(lambda rng: [b"", mdp.C_CLIENT, b"echo"]),
    "request without service": _once(lambda rng: [b"", mdp.C_CLIENT]),
    "request for an unknown service": _once(lambda rng: [b"", mdp.C_CLIENT, b"junk.nobody", b"x:0|body"]),
    "unknown MMI query": _once(lambda rng: [b"", mdp.C_CLIENT, b"mmi.junk", b"echo"]),
    "service name not UTF-8": _once(lambda rng: [b"", mdp.C_CLIENT, b"\xff\xfe", b"x:0|body"]),
}
MDP_WORKER: dict[str, Case] = {
    "READY then DISCONNECT (idle)": _mdp_ready_then(_disconnect),
    "READY then DISCONNECT (busy)": _mdp_ready_then(_disconnect_when_busy),
    "second READY": _mdp_ready_then(_second_ready),
    "HEARTBEAT from a stranger": _once(lambda rng: [b"", mdp.W_WORKER, mdp.HEARTBEAT]),
    "DISCONNECT from a stranger": _once(lambda rng: [b"", mdp.W_WORKER, mdp.DISCONNECT]),
    "REPLY from a stranger": _once(
        lambda rng: [b"", mdp.W_WORKER, mdp.REPLY, b"client-" + _rand(rng, 4), b"", b"x:0|reply"]
    ),
    "REQUEST from a worker": _once(lambda rng: [b"", mdp.W_WORKER, mdp.REQUEST, b"c", b"", b"x"]),
    "READY for an mmi service": _once(lambda rng: [b"", mdp.W_WORKER, mdp.READY, b"mmi.service"]),
    "READY without service": _once(lambda rng: [b"", mdp.W_WORKER, mdp.READY]),
    "REPLY without envelope": _once(lambda rng: [b"", mdp.W_WORKER, mdp.REPLY]),
    "bad protocol header": _once(lambda rng: [b"", b"MDPW99", mdp.READY, b"echo"]),
    "unknown command": _once(lambda rng: [b"", mdp.W_WORKER, bytes([rng.randrange(6, 256)])]),
    "command without empty frame": _once(lambda rng: [mdp.W_WORKER, mdp.HEARTBEAT]),
}


# --- Titanic (9/TSP): MDP requests to the titanic.* services with bodies Titanic must refuse ----


def _titanic(service: bytes, body: Callable[[random.Random], list[bytes]]) -> Case:
    """A well-formed MDP request to a Titanic service, with a malformed Titanic body: it
    passes the broker and reaches the Titanic server (none of them stores a request)."""
    return _once(lambda rng: [b"", mdp.C_CLIENT, service, *body(rng)])


TITANIC_CLIENT: dict[str, Case] = {
    "titanic.request without body": _titanic(b"titanic.request", lambda rng: [b"echo"]),
    "titanic.request service not UTF-8": _titanic(b"titanic.request", lambda rng: [b"\xff\xfe", b"x:0|b"]),
    "titanic.request for a titanic service": _titanic(
        b"titanic.request", lambda rng: [b"titanic.reply", b"x"]
    ),
    "titanic.reply not a uuid": _titanic(b"titanic.reply", lambda rng: [_rand(rng)]),
    "titanic.reply path as uuid": _titanic(b"titanic.reply", lambda rng: [b"../../../../etc/passwd"]),
    "titanic.reply two frames": _titanic(
        b"titanic.reply", lambda rng: [rng.randbytes(16).hex().encode()] * 2
    ),
    "titanic.close not a uuid": _titanic(b"titanic.close", lambda rng: [_rand(rng)]),
    "titanic.close forged uuid": _titanic(b"titanic.close", lambda rng: [rng.randbytes(16).hex().encode()]),
}


# --- WMP (14/WMP as implementations/wmp encodes it: version, command, header, payload) ----


def _wmp(command: str, **headers: str) -> Callable[[random.Random], list[bytes]]:
    return lambda rng: wmp.encode(wmp.make(command, "junk-" + rng.randbytes(3).hex(), **headers))


WMP_WORKER: dict[str, Case] = {
    "READY from a stranger": _once(_wmp("READY", slots="2")),
    "READY with a huge slot count": _once(_wmp("READY", slots="1000000000")),
    "READY with a negative slot count": _once(_wmp("READY", slots="-1")),
    "GIVE with an unknown lock": _once(_wmp("GIVE", lock="nolock")),
    "DONE for an unknown job": _once(_wmp("DONE", job="nojob")),
    "TAKE towards a manager": _once(_wmp("TAKE", lock="l", job="j", manager="m")),
    "READY without its header": _once(_wmp("READY")),
    "bad version": _once(lambda rng: [b"WMP\x09", wmp.READY, b"path=junk\nslots=1"]),
    "unknown command": _once(lambda rng: [wmp.VERSION, bytes([rng.randrange(7, 256)]), b"path=junk"]),
    "header not ASCII": _once(lambda rng: [wmp.VERSION, wmp.READY, b"path=\xff\xfe"]),
    "oversized header": _once(lambda rng: [wmp.VERSION, wmp.READY, b"path=" + b"a" * 5000]),
    "too many hops": _once(
        lambda rng: [wmp.VERSION, wmp.DONE, b"path=" + b" ".join([b"h"] * 40) + b"\njob=j"]
    ),
    "unknown header": _once(lambda rng: [wmp.VERSION, wmp.READY, b"path=junk\nslots=1\ncolour=red"]),
}


# --- Freelance (10/FLP): a ROUTER server that answers PING and echoes [control, body...] ----


def _pings(wire: Wire, n: int) -> None:
    """A peer that pings and never reads: the server's PONGs pile up for it."""
    peer = wire.stranger()
    for _ in range(n):
        wire.send(peer, [b"PING"])


FREELANCE_CLIENT: dict[str, Case] = {
    "control frame without a body": _once(lambda rng: [str(rng.randrange(1, 10**6)).encode()]),
    "empty control frame alone": _once(lambda rng: [b""]),
    "PONG to the server": _once(lambda rng: [b"PONG"]),
    # Bodies without a request id: the server echoes them, and records no execution of a
    # request nobody sent.
    "PING with a body": _once(lambda rng: [b"PING", rng.randbytes(8).hex().encode()]),
    "request with a binary control frame": _once(lambda rng: [rng.randbytes(8), b"junk"]),
    "request with a huge control frame": _once(lambda rng: [b"7" * 100_000, b"junk"]),
    "a hundred PINGs": lambda wire, rng, service: _pings(wire, 100),
}


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "paranoid-pirate",
            "6/PPP queue: one-frame READY/HEARTBEAT, enveloped replies",
            PPP_CLIENT,
            PPP_WORKER,
        ),
        Family(
            "simple-pirate",
            "Simple Pirate queue: REQ workers, READY 0x01",
            _req_client_cases(b"\x01"),
            _req_worker_cases(b"\x01"),
        ),
        Family("majordomo", "7/MDP broker: MDPC01 clients, MDPW01 workers", MDP_CLIENT, MDP_WORKER),
        Family(
            "pingpong",
            "PING/PONG broker: one-frame READY/PING/result",
            _req_client_cases(pingpong.PING),
            _req_worker_cases(
                pingpong.READY,
                {
                    "PING from a stranger": _once(lambda rng: [b"", pingpong.PING]),
                    "job body READY": _once(lambda rng: [b"", pingpong.READY]),
                },
            ),
        ),
        Family(
            "reliable-sketch",
            "reliable request-reply sketch queue: REQ servers, READY",
            {
                **_req_client_cases(b"READY"),
                # The issue-11 wedge: a request no server echoes within the reply wait.
                "10 MB request": _once(lambda rng: [b"", b"x:0|" + b"z" * 10_000_000]),
            },
            _req_worker_cases(b"READY"),
        ),
        Family(
            "binary-star",
            "Binary Star server: REQ clients on its ROUTER frontend (a state digit as a body); "
            "its state PUB takes no input",
            _req_client_cases(b"3"),
        ),
        Family(
            "wmp",
            "WMP manager: REQ clients, workers speaking implementations/wmp's encoding",
            _req_client_cases(b"READY"),
            WMP_WORKER,
        ),
        Family(
            "freelance",
            "10/FLP servers (ROUTER, identity = endpoint): PING/PONG and control-frame junk",
            FREELANCE_CLIENT,
        ),
        Family(
            "titanic",
            "9/TSP over a 7/MDP broker: MDP junk, and titanic.* requests with malformed bodies",
            {**MDP_CLIENT, **TITANIC_CLIENT},
            MDP_WORKER,
        ),
    )
}


def send_batch(
    wire: Wire, family: str, side: str, rng: random.Random, n: int, *, service: bytes = b"echo"
) -> Counter[str]:
    """Send ``n`` junk cases of ``family`` for ``side``, chosen by ``rng``; how many of each."""
    cases = FAMILIES[family].cases(side)
    names = sorted(cases)
    light = [name for name in names if name not in HEAVY]
    sent: Counter[str] = Counter()
    for _ in range(n):
        name = rng.choice(names)
        if name in sent and name in HEAVY:
            name = rng.choice(light)
        cases[name](wire, rng, service)
        sent[name] += 1
    return sent
