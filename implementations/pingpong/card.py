"""The PING/PONG dialogue family's card: its probe worker, its junk, its checks."""

from __future__ import annotations

from contract.family import Family, Junk, Probe, ProbeOption, work_option
from implementations.junk import once, req_client_cases, req_worker_cases
from implementations.pingpong import protocol

CARD = Family(
    "pingpong",
    "PING/PONG dialogue: a broker and workers that PING it and reconnect when it falls silent",
    probe=Probe(
        "pingpong",
        "PING/PONG dialogue worker: READY, PING every ping_ms, reconnects after n_timeouts silent",
        "implementations.pingpong.worker",
        "for a PING/PONG broker",
        {
            "broker_timeout_ms": ProbeOption("--broker-timeout-ms", 1000, "BROKER_TIMEOUT"),
            "n_timeouts": ProbeOption("--n-timeouts", 3, "N_TIMEOUTS"),
            "ping_ms": ProbeOption("--ping-ms", 1000, "interval between PINGs"),
            "work_ms": work_option(),
        },
    ),
    junk=Junk(
        "PING/PONG broker: one-frame READY/PING/result",
        req_client_cases(protocol.PING),
        req_worker_cases(
            protocol.READY,
            {
                "PING from a stranger": once(lambda rng: [b"", protocol.PING]),
                "job body READY": once(lambda rng: [b"", protocol.READY]),
            },
        ),
    ),
    checkers=("pingpong",),
)
