"""Simple Pirate: message parsing, and the queue and workers as real processes, including
the guide's two stated weaknesses (a dead idle worker stays listed; a queue restart leaves
workers unregistered)."""

from __future__ import annotations

import pytest
import zmq

from implementations.simple_pirate.queue import parse_backend, parse_frontend
from tests.pirate_support import Pirates, pirates_fixture  # noqa: F401 - a fixture
from tests.procs import wait_for

TIMEOUT_MS = 1000


def test_parse_backend_and_frontend() -> None:
    assert parse_backend([b"W", b"", b"\x01"]) == (b"W", None, [])
    assert parse_backend([b"W", b"", b"C", b"", b"a", b"b"]) == (b"W", b"C", [b"a", b"b"])
    assert parse_frontend([b"C", b"", b"a"]) == (b"C", [b"a"])
    for bad in ([b"W"], [b"W", b"x", b"\x01"], [b"W", b"", b"\x02"], [b"W", b"", b"C", b""],
                [b"W", b"", b"C", b"x", b"body"], [b"W", b"", b"", b"", b"body"]):  # fmt: skip
        with pytest.raises(ValueError):
            parse_backend(bad)
    for bad in ([b"C"], [b"C", b""], [b"C", b"x", b"a"]):
        with pytest.raises(ValueError):
            parse_frontend(bad)


QUEUE, WORKER = "implementations.simple_pirate.queue", "implementations.simple_pirate.worker"


def start(pirates: Pirates, n_workers: int = 2) -> tuple[str, str]:
    frontend, backend = pirates.endpoint(), pirates.endpoint()
    pirates.start(QUEUE, ["--frontend", frontend, "--backend", backend], "queue")
    for i in range(1, n_workers + 1):
        pirates.start(WORKER, ["--connect", backend, "--identity", f"worker-{i}"], f"worker-{i}")
    wait_for(lambda: len(pirates.events("worker_ready")) == n_workers, 10, "workers registered")
    return frontend, backend


def lazy_request(zctx: zmq.Context, endpoint: str, body: list[bytes], attempts: int = 3):
    """The Lazy Pirate rule: (reply, attempts used); fails when every attempt timed out."""
    for attempt in range(1, attempts + 1):
        sock = zctx.socket(zmq.REQ)
        sock.linger = 0
        sock.connect(endpoint)
        try:
            sock.send_multipart(body)
            if sock.poll(TIMEOUT_MS):
                return sock.recv_multipart(), attempt
        finally:
            sock.close()
    raise AssertionError(f"no reply after {attempts} attempts")


def test_echo_through_the_queue(pirates: Pirates, zctx: zmq.Context) -> None:
    frontend, _ = start(pirates)
    for i in range(1, 21):
        body = [f"c:{i}|payload".encode(), b"second frame"]
        assert lazy_request(zctx, frontend, body) == (body, 1)
    execs = pirates.events("exec")
    assert len(execs) == 20 and len(pirates.events("dispatch")) == 20
    assert {e["worker"].rsplit("-", 1)[0] for e in execs} == {"worker-1", "worker-2"}  # load balanced


def test_a_dead_idle_worker_stays_listed_and_costs_a_retry(pirates: Pirates, zctx: zmq.Context) -> None:
    frontend, _ = start(pirates)
    first = pirates.events("worker_ready")[0]["worker"]
    pirates.kill(pirates.proc(first.rsplit("-", 1)[0]))
    reply, attempts = lazy_request(zctx, frontend, [b"c:1|x"])
    assert reply == [b"c:1|x"] and attempts == 2
    assert pirates.events("dispatch", rid="c:1")[0]["worker"] == first  # handed to the dead one


def test_a_restarted_queue_knows_no_worker(pirates: Pirates, zctx: zmq.Context) -> None:
    frontend, backend = start(pirates, n_workers=1)
    pirates.kill(pirates.proc("queue"))
    pirates.start(QUEUE, ["--frontend", frontend, "--backend", backend], "queue-2")
    with pytest.raises(AssertionError, match="no reply"):
        lazy_request(zctx, frontend, [b"c:1|x"], attempts=2)
    assert pirates.events("worker_ready", src="queue-2") == []
    assert pirates.events("exec") == []


def test_queue_survives_malformed_messages(pirates: Pirates, zctx: zmq.Context) -> None:
    frontend, backend = start(pirates)
    rogue_client = zctx.socket(zmq.DEALER)
    rogue_worker = zctx.socket(zmq.DEALER)
    for sock, endpoint in ((rogue_client, frontend), (rogue_worker, backend)):
        sock.linger = 0
        sock.connect(endpoint)
    rogue_client.send_multipart([b"no delimiter"])
    rogue_worker.send_multipart([b"", b"\x07"])
    rogue_worker.send_multipart([b"", b"client", b"not empty", b"body"])
    wait_for(lambda: len(pirates.events("malformed")) == 3, 10, "3 malformed messages recorded")
    for i in range(1, 6):
        assert lazy_request(zctx, frontend, [f"c:{i}|x".encode()])[0] == [f"c:{i}|x".encode()]


def test_worker_starts_over_after_a_malformed_request(pirates: Pirates, zctx: zmq.Context) -> None:
    backend = pirates.endpoint()
    queue = zctx.socket(zmq.ROUTER)
    queue.linger = 0
    queue.bind(backend)
    pirates.start(WORKER, ["--connect", backend, "--identity", "worker-1"], "worker-1")
    assert queue.poll(10000)
    ready = queue.recv_multipart()
    assert ready[1:] == [b"", b"\x01"] and ready[0].startswith(b"worker-1-")
    queue.send_multipart([ready[0], b"", b"garbage"])
    assert queue.poll(10000)
    again = queue.recv_multipart()
    assert again[1:] == [b"", b"\x01"] and again[0] != ready[0]
    queue.send_multipart([again[0], b"", b"C", b"", b"c:1|x"])
    assert queue.poll(10000)
    assert queue.recv_multipart() == [again[0], b"", b"C", b"", b"c:1|x"]
    assert len(pirates.events("malformed", src="worker-1")) == 1
