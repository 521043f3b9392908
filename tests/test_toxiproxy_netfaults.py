"""Network faults on a real ZeroMQ link through the fault proxy: each kind has its effect on
REQ/REP traffic while applied, and the link serves again once it is reverted; the nemesis
carries them out from a plan and records start/stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import zmq

from chaos.kinds import FAULT_KINDS
from chaos.nemesis import Nemesis, PlannedFault
from chaos.netfaults import DIRECTIONS, ActiveFault, NetworkFaultError, NetworkFaults
from chaos.toxiproxy_client import ServerInfo, toxiproxy_server
from tests.doubles import EventList, GoneControl

pytestmark = pytest.mark.timeout(90)
NO_REPLY_S = 0.5
RECOVER_S = 10.0


class RepEcho:
    """A ZeroMQ REP echo on 127.0.0.1, in a thread."""

    def __init__(self, zctx: zmq.Context) -> None:
        self.sock = zctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            if self.sock.poll(50):
                self.sock.send(self.sock.recv())
        self.sock.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerInfo]:
    with toxiproxy_server(use_path=False) as info:
        yield info


@pytest.fixture
def link(zctx: zmq.Context, server: ServerInfo) -> Iterator[tuple[NetworkFaults, zmq.Socket]]:
    """A REP echo, the link proxy in front of it, and a REQ client connected through it."""
    echo = RepEcho(zctx)
    net = NetworkFaults(server.client, prefix=f"t{id(echo) % 10**6}")
    address = net.add_link("link:worker-1", echo.port)
    req = zctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.setsockopt(zmq.REQ_RELAXED, 1)  # a lost request must not wedge the socket
    req.setsockopt(zmq.REQ_CORRELATE, 1)
    req.connect(address)
    assert ask(req, RECOVER_S) is not None
    yield net, req
    req.close()
    net.close()
    echo.close()


def ask(req: zmq.Socket, timeout_s: float, payload: bytes = b"x" * 64) -> float | None:
    """Round-trip time of one request, or None if no reply came within ``timeout_s``."""
    t0 = time.perf_counter()
    req.send(payload)
    if req.poll(int(timeout_s * 1000)):
        assert req.recv() == payload
        return time.perf_counter() - t0
    return None


def recovers(req: zmq.Socket) -> bool:
    """The link serves again (retrying the request as a client would) before a deadline."""
    deadline = time.monotonic() + RECOVER_S
    while time.monotonic() < deadline:
        if ask(req, 1.0) is not None:
            return True
    return False


def apply(net: NetworkFaults, kind: str, target: str, params: dict) -> ActiveFault:
    """Start a link fault as its card would (without the nemesis's history and timing)."""
    card = FAULT_KINDS[kind]
    return net.disable(target) if card.toxic is None else net.poison(card, target, params)


@pytest.mark.parametrize("kind", sorted(k for k, card in FAULT_KINDS.items() if card.toxic is not None))
def test_a_toxic_without_a_direction_acts_on_its_cards_default_streams(
    kind: str, link: tuple[NetworkFaults, zmq.Socket], server: ServerInfo
) -> None:
    """The card's direction parameter is the one default: no other copy decides the streams."""
    net, _ = link
    card = FAULT_KINDS[kind]
    required = {name: spec.min or 1 for name, spec in card.params.items() if spec.required}
    fault = net.poison(card, "link:worker-1", {k: v for k, v in required.items() if k != "duration_s"})
    try:
        streams = sorted(t.stream for p in set(fault.proxies) for t in server.client.toxics(p).values())
        assert streams == sorted(DIRECTIONS[card.params["direction"].default])
    finally:
        fault.revert()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("partition", {}),
        ("partition", {"direction": "upstream"}),
        ("disconnect", {}),
        ("reset", {"timeout_ms": 0}),
        ("bandwidth", {"rate_kb_s": 0}),
        ("limit_data", {"bytes": 10}),
    ],
)
def test_fault_cuts_the_link_and_it_recovers(
    link: tuple[NetworkFaults, zmq.Socket], kind: str, params: dict
) -> None:
    net, req = link
    fault = apply(net, kind, "worker-1", params)
    try:
        assert ask(req, NO_REPLY_S) is None, f"{kind} let a request through"
    finally:
        fault.revert()
    assert recovers(req), f"no service after {kind} was reverted"
    assert net.client.toxics(net.proxy_name("link:worker-1")) == {}


def test_latency_and_slicer_slow_but_keep_the_link(link: tuple[NetworkFaults, zmq.Socket]) -> None:
    net, req = link
    fault = apply(net, "latency", "link:worker-1", {"latency_ms": 300, "jitter_ms": 0})
    try:
        rtt = ask(req, RECOVER_S)
        assert rtt is not None and rtt >= 0.295
    finally:
        fault.revert()
    assert min(ask(req, RECOVER_S) or 99 for _ in range(3)) < 0.28
    fault = apply(net, "slicer", "worker-1", {"average_size": 8, "size_variation": 2, "delay_us": 1000})
    try:
        assert ask(req, RECOVER_S, b"y" * 200) is not None  # ZeroMQ reassembles the pieces
    finally:
        fault.revert()


def test_bad_targets_and_parameters(link: tuple[NetworkFaults, zmq.Socket]) -> None:
    net, _ = link
    with pytest.raises(NetworkFaultError, match="no proxied link"):
        apply(net, "partition", "worker-9", {})
    with pytest.raises(NetworkFaultError, match="direction"):
        apply(net, "latency", "worker-1", {"latency_ms": 1, "direction": "sideways"})


def test_nemesis_runs_a_partition_from_the_plan(link: tuple[NetworkFaults, zmq.Socket]) -> None:
    net, req = link
    plan = [
        PlannedFault(
            1, 0.0, "partition", "worker-1", "worker:random", {"duration_s": 1.0, "direction": "both"}
        )
    ]
    events = EventList()
    nemesis = Nemesis(plan, GoneControl(), events, net)
    nemesis.start()
    try:
        deadline = time.monotonic() + RECOVER_S
        while not any(e["ev"] == "fault_start" for e in events.items):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert ask(req, NO_REPLY_S) is None
        while not any(e["ev"] == "fault_stop" for e in events.items):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        errors = nemesis.stop()
    assert errors == []
    assert [e["ev"] for e in events.items] == ["fault_start", "fault_stop"]
    assert "timeout" not in str(net.client.toxics(net.proxy_name("link:worker-1")))
    assert recovers(req)


def test_nemesis_without_a_network_reports_an_error(link: tuple[NetworkFaults, zmq.Socket]) -> None:
    plan = [PlannedFault(1, 0.0, "latency", "worker-1", "worker-1", {"duration_s": 0.1, "latency_ms": 5})]
    nemesis = Nemesis(plan, GoneControl(), EventList())  # a run without the fault proxy
    nemesis.start()
    deadline = time.monotonic() + RECOVER_S
    while not nemesis._errors:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert "fault proxy" in nemesis.stop()[0]
