"""The Majordomo (7/MDP) family's card: its probe worker, its junk, its clients and checks."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from contract.family import Family, Junk, JunkCase, Probe, ProbeOption, work_option
from implementations.junk import once, rand
from implementations.majordomo import mdp

#: How long a case that waits for the broker (a busy worker's DISCONNECT) waits at most.
WAIT_MS = 200


def _ready_then(then: Callable[[Any, bytes], None]) -> JunkCase:
    def case(wire: Any, rng: random.Random, service: bytes) -> None:
        worker = wire.stranger()
        wire.send(worker, [b"", mdp.W_WORKER, mdp.READY, service])
        then(wire, worker)

    return case


def _disconnect(wire: Any, worker: bytes) -> None:
    wire.send(worker, [b"", mdp.W_WORKER, mdp.DISCONNECT])


def _disconnect_when_busy(wire: Any, worker: bytes) -> None:
    # Wait for a request (under load one comes at once), then leave holding it.
    wire.recv(worker, WAIT_MS)
    _disconnect(wire, worker)


def _second_ready(wire: Any, worker: bytes) -> None:
    wire.send(worker, [b"", mdp.W_WORKER, mdp.READY, b"other"])


MDP_CLIENT: dict[str, JunkCase] = {
    "request without empty frame": once(lambda rng: [mdp.C_CLIENT, b"echo", b"x:0|body"]),
    "bad protocol header": once(lambda rng: [b"", b"MDPC99", b"echo", b"x:0|body"]),
    "request without body": once(lambda rng: [b"", mdp.C_CLIENT, b"echo"]),
    "request without service": once(lambda rng: [b"", mdp.C_CLIENT]),
    "request for an unknown service": once(lambda rng: [b"", mdp.C_CLIENT, b"junk.nobody", b"x:0|body"]),
    "unknown MMI query": once(lambda rng: [b"", mdp.C_CLIENT, b"mmi.junk", b"echo"]),
    "service name not UTF-8": once(lambda rng: [b"", mdp.C_CLIENT, b"\xff\xfe", b"x:0|body"]),
}
MDP_WORKER: dict[str, JunkCase] = {
    "READY then DISCONNECT (idle)": _ready_then(_disconnect),
    "READY then DISCONNECT (busy)": _ready_then(_disconnect_when_busy),
    "second READY": _ready_then(_second_ready),
    "HEARTBEAT from a stranger": once(lambda rng: [b"", mdp.W_WORKER, mdp.HEARTBEAT]),
    "DISCONNECT from a stranger": once(lambda rng: [b"", mdp.W_WORKER, mdp.DISCONNECT]),
    "REPLY from a stranger": once(
        lambda rng: [b"", mdp.W_WORKER, mdp.REPLY, b"client-" + rand(rng, 4), b"", b"x:0|reply"]
    ),
    "REQUEST from a worker": once(lambda rng: [b"", mdp.W_WORKER, mdp.REQUEST, b"c", b"", b"x"]),
    "READY for an mmi service": once(lambda rng: [b"", mdp.W_WORKER, mdp.READY, b"mmi.service"]),
    "READY without service": once(lambda rng: [b"", mdp.W_WORKER, mdp.READY]),
    "REPLY without envelope": once(lambda rng: [b"", mdp.W_WORKER, mdp.REPLY]),
    "bad protocol header": once(lambda rng: [b"", b"MDPW99", mdp.READY, b"echo"]),
    "unknown command": once(lambda rng: [b"", mdp.W_WORKER, bytes([rng.randrange(6, 256)])]),
    "command without empty frame": once(lambda rng: [mdp.W_WORKER, mdp.HEARTBEAT]),
}

CARD = Family(
    "majordomo",
    "Majordomo 0.1 (7/MDP): a service broker, workers that register for a service, MMI",
    probe=Probe(
        "majordomo",
        "Majordomo 0.1 (7/MDP) worker: READY for a service, heartbeats, DISCONNECT, reconnect",
        "implementations.majordomo.worker",
        "for a Majordomo broker",
        {
            "service": ProbeOption("--service", "echo", "the service it registers for"),
            "heartbeat_ms": ProbeOption("--heartbeat-ms", 2500, "heartbeat interval"),
            "liveness": ProbeOption("--liveness", 3, "silent heartbeats before it reconnects"),
            "reconnect_ms": ProbeOption("--reconnect-ms", 2500, "wait before reconnecting"),
            "work_ms": work_option(),
        },
        service_option="service",
    ),
    junk=Junk("7/MDP broker: MDPC01 clients, MDPW01 workers", MDP_CLIENT, MDP_WORKER),
    adapters=("mdp_sync", "mdp_async"),
    checkers=("pirates",),
)
