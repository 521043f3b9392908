"""bench/broker_throughput.py measures what it says: its one bench worker speaks each
broker's worker protocol (an echo comes back through every line, real processes and
sockets), and its load-balancing baseline hands a worker one request at a time."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import zmq

from contract.ports import PortAllocator
from tests.procs import ROOT

_spec = importlib.util.spec_from_file_location("broker_throughput", ROOT / "bench" / "broker_throughput.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules["broker_throughput"] = bench  # dataclasses look their module up
_spec.loader.exec_module(bench)


def dealer(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    return sock


def recv(sock: zmq.Socket, timeout_ms: int = 10_000) -> list[bytes]:
    assert sock.poll(timeout_ms), "nothing came back within the deadline"
    return sock.recv_multipart()


@pytest.mark.slow
@pytest.mark.parametrize("line", bench.LINES, ids=lambda line: line.name)
def test_an_echo_comes_back_through_every_line(line) -> None:
    group = bench.Group()
    ctx = zmq.Context()
    try:
        client = dealer(ctx, bench.start_line(group, line, workers=1))
        request = bench.client_request(line.mdp_client)
        client.send_multipart(request)
        assert recv(client) == request
    finally:
        ctx.destroy(linger=0)
        group.stop()
    assert all(proc.poll() is not None for proc in group.procs)


def test_the_lb_baseline_gives_a_worker_one_request_at_a_time() -> None:
    ports = PortAllocator()
    fe, be = f"tcp://127.0.0.1:{ports.allocate()}", f"tcp://127.0.0.1:{ports.allocate()}"
    group = bench.Group()
    ctx = zmq.Context()
    try:
        group.start(bench.me("--role", "lb", fe, be, "ppp"))
        worker = dealer(ctx, be)
        worker.send(b"\x01")  # READY
        client = dealer(ctx, fe)
        client.send_multipart([b"", b"first"])
        client.send_multipart([b"", b"second"])
        client_id, empty, body = recv(worker)
        assert (empty, body) == (b"", b"first")
        assert not worker.poll(500), "a second request reached a worker that had not answered"
        worker.send_multipart([client_id, b"", b"first"])
        assert recv(client) == [b"", b"first"]
        assert recv(worker)[2] == b"second"
    finally:
        ctx.destroy(linger=0)
        group.stop()
