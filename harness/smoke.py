"""``zchaos check MANIFEST --smoke``: start a manifest's system, send it a few requests, stop.

The first thing a user wants to know of a new manifest is whether zchaos can start the
system and talk to it at all, in seconds and without a scenario: every role started as a
run starts it (its default count, each readiness waited for), then each client kind's
adapter sends a few requests straight to the endpoints (no fault proxy, no Locust), and
everything is stopped, also on an error or Ctrl-C. Logs and history go to a temporary run
folder that is removed afterwards; what was seen is printed.

A manifest that says ``network = "hosts"`` is smoked in hosts mode where the machine can
make them (root, ``ip``: chaos/hosts.py), each instance in its namespace and the requests
sent from this process over the run's bridge, as the runner's readiness checks reach them;
where it cannot, on loopback, and it says why in one line.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from contract.history import HistoryWriter
from contract.outcomes import PASSED, VIOLATED, exit_code
from contract.payload import payload_for, request_id
from contract.ports import PortAllocator
from contract.rundir import RunDir
from harness.manifest import Manifest
from harness.scenario import parse_scenario
from harness.supervisor import Supervisor, log_tail
from harness.topology import Topology

if TYPE_CHECKING:
    from chaos.hosts import Hosts

#: Requests each client kind sends.
SMOKE_REQUESTS = 3
#: An asynchronous client's requests are given up after this long (its own timers end them sooner).
ASYNC_LIMIT_S = 60.0
PAYLOAD_BYTES = 64


def smoke(manifest: Manifest, *, requests: int = SMOKE_REQUESTS, say: Callable[[str], None] = print) -> int:
    """Start ``manifest``'s system, send ``requests`` requests per client kind, stop it; the
    exit code: 0 when every request was answered with its own body, 1 otherwise (a process
    that does not start or get ready is a SetupError, exit 2)."""
    scenario = parse_scenario(
        {"implementation": str(manifest.path), "duration_s": 1}, None, manifest=manifest
    )
    with tempfile.TemporaryDirectory(prefix="zchaos-smoke-") as tmp, PortAllocator() as ports:
        run = RunDir.create(Path(tmp), "smoke")
        topology = Topology(scenario, run, ports)
        history = HistoryWriter(run.history / "runner.jsonl", "runner")
        supervisor = Supervisor(history, topology.base_env())
        answered = sent = 0
        hosts = _hosts(scenario.network, topology, say)
        try:
            for role in topology.start_order():
                for instance in scenario.instances(role):
                    began = time.monotonic()
                    managed = supervisor.start(topology.proc_spec(role, instance))
                    ready = manifest.roles[role].ready
                    rule = f"{ready.kind}:{ready.arg}" if ready.arg else ready.kind
                    say(
                        f"  {instance}: pid {managed.pid}, ready ({rule}) in {time.monotonic() - began:.2f} s"
                    )
            context = zmq.Context()
            try:
                for kind in scenario.load.clients:
                    a, s = _requests(kind, topology, history, context, requests, say)
                    answered, sent = answered + a, sent + s
            finally:
                context.destroy(linger=0)
        finally:
            supervisor.stop_all()
            history.close()
            for what in hosts.close() if hosts is not None else []:
                say(f"  could not remove a host of the smoke: {what}")
        for name in sorted(p.stem for p in run.logs.glob("*.log")):
            if answered < sent:  # what the processes said, for the user to see why
                say(f"  last lines of {name}'s log:")
                say("\n".join(f"    {line}" for line in log_tail(run.log(name), 5).splitlines()))
    say(f"smoke: {answered} of {sent} requests answered with their own body; every process stopped")
    return exit_code(PASSED if answered == sent else VIOLATED)


def _hosts(network: str, topology: Topology, say: Callable[[str], None]) -> Hosts | None:
    """The smoke's hosts when the manifest asks for them and the machine can make them (the
    topology then starts each instance in its own), else None, having said why."""
    if network != "hosts":
        return None
    from chaos.hosts import Hosts, HostsError, missing

    why = missing()
    if why is None:
        hosts = Hosts(topology.host_names())
        try:
            hosts.open()
        except HostsError as exc:
            hosts.close()
            why = str(exc)
        else:
            topology.use_hosts(hosts)
            made = f"{len(hosts.hosts)} network namespaces on bridge {hosts.bridge}"
            say(f"  hosts: {made} ({hosts.prefix}.0/24)")
            return hosts
    say(f'  network = "hosts" smoked on loopback instead: {why}')
    return None


def _requests(
    kind: Any, topology: Topology, history: HistoryWriter, context: zmq.Context, n: int, say: Callable
) -> tuple[int, int]:
    """Send ``n`` requests through a client kind's adapter; (answered as expected, sent)."""
    from loadtests.adapters import adapter_class
    from loadtests.adapters.base import Abandoned, AsyncClientAdapter, Lost, Reply, RequestLog

    cls = adapter_class(kind.adapter)
    cid = f"smoke-{kind.name}"
    extra: dict[str, Any] = {}
    if cls.RUNS_PROGRAM:
        log_path = str(topology.run.log(cid))
        extra = {
            "command": topology.client_command(kind),
            "log_path": log_path,
            "writer": history,
            "kind": kind.name,
        }
    adapter = cls(topology.client_addresses(kind), kind.options, cid, context, **extra)
    bodies: dict[str, list[bytes]] = {}
    outcomes: list[tuple[RequestLog, Any, float]] = []
    self_driven = bool(getattr(adapter, "self_driven", False))

    def log_for(rid: str, body: str) -> RequestLog:
        # a self-driven program makes its own requests: the first n it says it sent are judged
        bodies[rid] = [body.encode("utf-8", "replace")]
        return RequestLog(history, cid, len(bodies), rid, kind.name)

    if self_driven:
        adapter.make_log = log_for  # type: ignore[attr-defined]
    try:
        for seq in range(1, 0 if self_driven else n + 1):
            rid = request_id(cid, seq)
            body = [payload_for(rid, PAYLOAD_BYTES, b"smoke")]
            log = RequestLog(history, cid, seq, rid, kind.name)
            bodies[rid] = body
            began = time.monotonic()
            if isinstance(adapter, AsyncClientAdapter):
                adapter.submit(body, log)
                continue
            try:
                outcomes.append((log, adapter.request(body, log), time.monotonic() - began))
            except (Abandoned, Lost) as exc:
                outcomes.append((log, exc, time.monotonic() - began))
        if isinstance(adapter, AsyncClientAdapter):
            began = time.monotonic()
            while (
                len(outcomes) < n if self_driven else adapter.in_flight()
            ) and time.monotonic() - began < ASYNC_LIMIT_S:
                outcomes += [(log, out, time.monotonic() - began) for log, out in adapter.poll(0.1)]
            if self_driven:
                adapter.begin_stop()  # type: ignore[attr-defined]
                outcomes = [o for o in outcomes if o[0].seq <= n]
    finally:
        adapter.close()
    answered = 0
    for log, outcome, took in outcomes:
        if isinstance(outcome, Reply) and outcome.frames == adapter.expected_reply(bodies[log.rid]):
            answered += 1
            what = f"answered in {took * 1000:.1f} ms"
        elif isinstance(outcome, Reply):
            what = f"answered with another body: {outcome.frames!r:.120}"
        else:
            what = f"{type(outcome).__name__.lower()}: {outcome.reason}"
        say(f"  client kind {kind.name} ({kind.adapter}) request {log.seq}: {what}")
    if len(outcomes) < n:
        say(f"  client kind {kind.name}: {n - len(outcomes)} request(s) unanswered after {ASYNC_LIMIT_S:g} s")
    return answered, n
