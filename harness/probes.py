"""Probe workers: zchaos's own instrumented workers, one per protocol family, that a user's
broker can be run with.

A user's broker and workers write nothing into the history, so the checks that count
executions (``execution_count``, ``stale_execution``, the recovery of a worker) have
nothing to go on. A probe worker speaks the worker side of its family's protocol exactly
(it *is* the built-in implementation's worker), echoes every request and records ``exec``
and ``done`` for each one, so a black-box broker gets the same execution checks as ours.

A manifest names a probe instead of a command (``harness/manifest.py`` builds the command
from this table)::

    [roles.worker]
    probe = "majordomo"
    connect = "backend"              # the endpoint(s) it connects to (default: "backend")
    options = { service = "echo" }   # probe options; else [options] of the same name, else the default
    count = 3
    scalable = true

This module is the one table of probes: the manifest reader, ``zchaos list`` and the README
take the names, options and defaults from here. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProbeOption:
    flag: str  # the worker's command-line flag
    default: int | float | str
    doc: str


@dataclass(frozen=True)
class Probe:
    name: str
    speaks: str  # the protocol side it speaks, for `zchaos list`
    module: str  # run as `python -m MODULE`
    use: str  # what it is run with
    options: dict[str, ProbeOption] = field(default_factory=dict)
    #: it may connect to several endpoints at once (a WMP worker serves several managers)
    multi_connect: bool = False
    #: the flag that binds an endpoint instead of connecting (a REP server is the server itself)
    bind_flag: str | None = None
    #: the option naming the service it serves (Majordomo), for mmi_service
    service_option: str | None = None
    ready: str = "log:ready"

    def option_values(self, given: dict[str, Any]) -> dict[str, Any]:
        """Every option's value: ``given`` where it has one, else the default."""
        return {name: given.get(name, opt.default) for name, opt in self.options.items()}


def _work() -> ProbeOption:
    return ProbeOption("--work-ms", 0, "simulated work per request, ms (a slow worker)")


PROBES: dict[str, Probe] = {
    p.name: p
    for p in (
        Probe(
            "paranoid-pirate",
            "Paranoid Pirate (6/PPP) worker: DEALER, READY, heartbeats both ways, reconnect with back-off",
            "implementations.paranoid_pirate.worker",
            "for a Paranoid Pirate queue",
            {
                "heartbeat_ms": ProbeOption("--heartbeat-ms", 1000, "heartbeat interval"),
                "liveness": ProbeOption("--liveness", 3, "silent heartbeats before it reconnects"),
                "reconnect_ms": ProbeOption("--reconnect-ms", 1000, "first reconnect back-off"),
                "reconnect_max_ms": ProbeOption("--reconnect-max-ms", 32000, "back-off ceiling"),
                "work_ms": _work(),
            },
        ),
        Probe(
            "simple-pirate",
            "Simple Pirate worker: REQ that says READY, then echoes (no heartbeats)",
            "implementations.simple_pirate.worker",
            "for a Simple Pirate (load-balancing) queue",
            {"work_ms": _work()},
        ),
        Probe(
            "majordomo",
            "Majordomo 0.1 (7/MDP) worker: READY for a service, heartbeats, DISCONNECT, reconnect",
            "implementations.majordomo.worker",
            "for a Majordomo broker",
            {
                "service": ProbeOption("--service", "echo", "the service it registers for"),
                "heartbeat_ms": ProbeOption("--heartbeat-ms", 2500, "heartbeat interval"),
                "liveness": ProbeOption("--liveness", 3, "silent heartbeats before it reconnects"),
                "reconnect_ms": ProbeOption("--reconnect-ms", 2500, "wait before reconnecting"),
                "work_ms": _work(),
            },
            service_option="service",
        ),
        Probe(
            "rep",
            "plain REP echo: connects to a DEALER backend (a queue, a front server), or binds "
            "as a Lazy Pirate server",
            "implementations.lazy_pirate.server",
            "for a ROUTER/DEALER queue or as a Lazy Pirate server",
            {"work_ms": _work()},
            bind_flag="--frontend",
        ),
        Probe(
            "pingpong",
            "PING/PONG dialogue worker: READY, PING every ping_ms, reconnects after n_timeouts silent",
            "implementations.pingpong.worker",
            "for a PING/PONG broker",
            {
                "broker_timeout_ms": ProbeOption("--broker-timeout-ms", 1000, "BROKER_TIMEOUT"),
                "n_timeouts": ProbeOption("--n-timeouts", 3, "N_TIMEOUTS"),
                "ping_ms": ProbeOption("--ping-ms", 1000, "interval between PINGs"),
                "work_ms": _work(),
            },
        ),
        Probe(
            "sketch",
            "reliable request-reply sketch server: REQ with READY, answers a repeated request from its cache",
            "implementations.reliable_sketch.server",
            "for a sketch queue (disabled list)",
            {"work_ms": _work()},
        ),
        Probe(
            "wmp",
            "Worker-Manager Protocol (14/WMP) worker: READY/WAKE/GIVE/TAKE/DONE with a capacity",
            "implementations.wmp.worker",
            "for WMP managers or devices",
            {
                "capacity": ProbeOption("--capacity", 2, "jobs (held or locked) at once"),
                "work_ms": ProbeOption("--work-ms", 0, "simulated work per job, ms"),
                "lock_timeout_ms": ProbeOption("--lock-timeout-ms", 1000, "a lock's timeout"),
                "ready_min_ms": ProbeOption("--ready-min-ms", 250, "READY back-off start"),
                "ready_max_ms": ProbeOption("--ready-max-ms", 2000, "READY back-off ceiling"),
            },
            multi_connect=True,
        ),
    )
}
