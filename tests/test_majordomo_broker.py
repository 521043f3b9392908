"""Integration tests of the Majordomo broker and worker: real processes on loopback.

Each liveness rule is checked with short timers (heartbeat 200 ms x 3) and generous
margins; hand-driven DEALER sockets stand in for clients and workers where a test needs
to misbehave on purpose.
"""

from __future__ import annotations

import time

import zmq

from contract.history import HistoryWriter
from contract.payload import payload_for
from loadtests.adapters.base import Abandoned, RequestLog
from loadtests.adapters.mdp_async import MdpAsyncClient
from loadtests.adapters.mdp_sync import MdpSyncClient
from tests.pirate_support import Pirates, pirates_fixture  # noqa: F401 - a fixture
from tests.procs import bind_again, wait_for

HB_MS, LIVENESS = 200, 3
EXPIRY_S = HB_MS * LIVENESS / 1000
MARGIN_S = 3.0  # two shared cores, other tests running: generous


def start_broker(pirates: Pirates, endpoint: str, *extra: str, src: str = "broker"):
    args = ["--frontend", endpoint, "--heartbeat-ms", str(HB_MS), "--liveness", str(LIVENESS), *extra]
    return pirates.start("implementations.majordomo.broker", args, src)


def start_worker(pirates: Pirates, endpoint: str, instance: str, *extra: str):
    args = ["--connect", endpoint, "--identity", instance, "--heartbeat-ms", str(HB_MS),
            "--liveness", str(LIVENESS), "--reconnect-ms", str(HB_MS), *extra]  # fmt: skip
    return pirates.start("implementations.majordomo.worker", args, instance)


def registered(pirates: Pirates, instance: str, src: str = "broker") -> list[dict]:
    return [e for e in pirates.events("worker_ready", src=src) if e["worker"].startswith(instance + "-")]


def dealer(zctx: zmq.Context, endpoint: str, identity: bytes | None = None) -> zmq.Socket:
    sock = zctx.socket(zmq.DEALER)
    sock.linger = 0
    if identity:
        sock.identity = identity
    sock.connect(endpoint)
    return sock


def recv(sock: zmq.Socket, timeout_s: float = 5.0) -> list[bytes] | None:
    return sock.recv_multipart() if sock.poll(int(timeout_s * 1000)) else None


def mmi(zctx: zmq.Context, endpoint: str, service: bytes, name: bytes = b"mmi.service") -> bytes:
    sock = dealer(zctx, endpoint)
    try:
        sock.send_multipart([b"", b"MDPC01", name, service])
        reply = recv(sock)
        assert reply is not None, "no MMI answer"
        assert reply[:3] == [b"", b"MDPC01", name]
        return reply[-1]
    finally:
        sock.close()


def one_request(client, writer: HistoryWriter, cid: str, seq: int, frames: int = 1) -> list[bytes]:
    rid = f"{cid}:{seq}"
    body = [payload_for(rid, 64, b"z")]
    reply = client.request(body, RequestLog(writer, cid, seq, rid))
    assert reply.frames == client.expected_reply(body)
    assert len(reply.frames) == frames
    return reply.frames


def test_echo_through_the_broker_sync_and_async(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    start_worker(pirates, endpoint, "worker-1")
    start_worker(pirates, endpoint, "worker-2")
    writer = HistoryWriter(pirates.history / "clients.jsonl", "clients")
    sync = MdpSyncClient(endpoint, {"body_frames": 3, "timeout_ms": 5000}, "client-1", zctx)
    for seq in range(1, 21):
        one_request(sync, writer, "client-1", seq, frames=3)
    sync.close()

    async_client = MdpAsyncClient(endpoint, {"timeout_ms": 5000}, "client-2", zctx)
    for seq in range(1, 101):
        rid = f"client-2:{seq}"
        async_client.submit([payload_for(rid, 32, b"a")], RequestLog(writer, "client-2", seq, rid))
    got: dict[str, list[bytes]] = {}
    deadline = time.monotonic() + 20
    while async_client.in_flight() and time.monotonic() < deadline:
        for log, outcome in async_client.poll(0.5):
            assert not isinstance(outcome, Abandoned), outcome
            got[log.rid] = outcome.frames
    async_client.close()
    assert len(got) == 100
    assert all(frames == [payload_for(rid, 32, b"a")] for rid, frames in got.items())
    execs = pirates.events("exec")
    assert len(execs) == 120 and {e["worker"].rsplit("-", 1)[0] for e in execs} <= {"worker-1", "worker-2"}
    assert len(pirates.events("dispatch")) == 120


def test_dead_idle_worker_expires_within_liveness(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    worker = start_worker(pirates, endpoint, "worker-1")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    assert mmi(zctx, endpoint, b"echo") == b"200"
    killed_ns = time.time_ns()
    pirates.kill(worker)
    expired = wait_for(lambda: pirates.events("worker_expired"), EXPIRY_S + MARGIN_S, "worker-1 expired")
    lag_s = (expired[0]["ts"] - killed_ns) / 1e9
    assert expired[0]["reason"] == "silent" and expired[0]["service"] == "echo"
    assert lag_s <= EXPIRY_S + MARGIN_S
    # Alive and heard from until the kill: not expired before it.
    assert all(e["ts"] > killed_ns for e in expired)
    assert mmi(zctx, endpoint, b"echo") == b"404"


def test_workers_register_again_after_a_broker_restart(pirates: Pirates, zctx: zmq.Context):
    endpoint = pirates.endpoint()
    broker = start_broker(pirates, endpoint)
    start_worker(pirates, endpoint, "worker-1")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    pirates.kill(broker)  # a crash: no DISCONNECT to the workers
    start_broker(pirates, endpoint, src="broker-2")
    again = wait_for(lambda: registered(pirates, "worker-1", "broker-2"), 10 + MARGIN_S, "re-registration")
    assert again[0]["worker"] != registered(pirates, "worker-1")[0]["worker"]  # a new socket, a new identity
    writer = HistoryWriter(pirates.history / "client.jsonl", "client-1")
    client = MdpSyncClient(endpoint, {"timeout_ms": 5000}, "client-1", zctx)
    one_request(client, writer, "client-1", 1)
    client.close()


def test_broker_disconnect_on_sigterm_makes_workers_reconnect(pirates: Pirates) -> None:
    endpoint = pirates.endpoint()
    broker = start_broker(pirates, endpoint, "--heartbeat-ms", "5000")  # liveness alone would take 15 s
    worker = start_worker(pirates, endpoint, "worker-1", "--heartbeat-ms", "5000")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    assert broker.stop() == 0
    wait_for(lambda: "DISCONNECT from the broker" in worker.text(), 5, "the worker saw DISCONNECT")


def test_worker_disconnect_idle_and_busy(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    idle = dealer(zctx, endpoint, b"fake-idle")
    idle.send_multipart([b"", b"MDPW01", b"\x01", b"svc"])
    wait_for(lambda: pirates.events("worker_ready", worker="fake-idle"), 5, "fake-idle registered")
    idle.send_multipart([b"", b"MDPW01", b"\x05"])
    gone = wait_for(lambda: pirates.events("worker_expired", worker="fake-idle"), 5, "fake-idle forgotten")
    assert gone[0]["reason"] == "disconnected"

    busy = dealer(zctx, endpoint, b"fake-busy")
    busy.send_multipart([b"", b"MDPW01", b"\x01", b"svc"])
    client = dealer(zctx, endpoint)
    client.send_multipart([b"", b"MDPC01", b"svc", b"c:1|hello"])
    request = recv(busy)
    while request is not None and request[2] == b"\x04":  # heartbeats may come first
        request = recv(busy)
    assert request is not None and request[2] == b"\x02" and request[-1] == b"c:1|hello"
    busy.send_multipart([b"", b"MDPW01", b"\x05"])
    requeued = wait_for(lambda: pirates.events("requeue"), 5, "the busy worker's request re-queued")
    assert requeued[0]["rid"] == "c:1" and requeued[0]["worker"] == "fake-busy"
    start_worker(pirates, endpoint, "worker-1", "--service", "svc")
    reply = recv(client, 10)
    assert reply == [b"", b"MDPC01", b"svc", b"c:1|hello"]


def test_busy_worker_that_dies_gives_its_request_to_another(pirates: Pirates, zctx: zmq.Context):
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    slow = start_worker(pirates, endpoint, "worker-1", "--work-ms", "60000")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    client = dealer(zctx, endpoint)
    client.send_multipart([b"", b"MDPC01", b"echo", b"c:7|payload"])
    wait_for(lambda: pirates.events("exec", rid="c:7"), 10, "worker-1 executing c:7")
    killed_ns = time.time_ns()
    pirates.kill(slow)
    start_worker(pirates, endpoint, "worker-2")
    reply = recv(client, EXPIRY_S + MARGIN_S + 10)
    assert reply == [b"", b"MDPC01", b"echo", b"c:7|payload"]
    requeue = pirates.events("requeue", rid="c:7")
    assert len(requeue) == 1 and requeue[0]["reason"] == "silent"
    assert (requeue[0]["ts"] - killed_ns) / 1e9 <= EXPIRY_S + MARGIN_S
    execs = pirates.events("exec", rid="c:7")
    assert [e["worker"].rsplit("-", 1)[0] for e in execs] == ["worker-1", "worker-2"]  # at-least-once


def test_two_workers_silent_in_the_same_tick_one_busy(pirates: Pirates, zctx: zmq.Context) -> None:
    """Expiring a busy worker requeues its request, and dispatching that request meets the
    other silent worker and deletes it; the timer must not delete it a second time (a
    KeyError that killed the broker once in majordomo-kill-all-workers)."""
    endpoint = pirates.endpoint()
    broker = start_broker(pirates, endpoint)
    busy, idle = dealer(zctx, endpoint, b"ghost-busy"), dealer(zctx, endpoint, b"ghost-idle")
    busy.send_multipart([b"", b"MDPW01", b"\x01", b"echo"])  # READY, then never a heartbeat
    idle.send_multipart([b"", b"MDPW01", b"\x01", b"echo"])
    wait_for(lambda: len(pirates.events("worker_ready")) == 2, 10, "both registered")
    client = dealer(zctx, endpoint)
    client.send_multipart([b"", b"MDPC01", b"echo", b"c:9|payload"])
    assert recv(busy) is not None, "the request never reached the first worker"
    wait_for(lambda: len(pirates.events("worker_expired")) == 2, EXPIRY_S + MARGIN_S, "both expired")
    start_worker(pirates, endpoint, "worker-1")
    assert recv(client, 10) == [b"", b"MDPC01", b"echo", b"c:9|payload"]
    assert broker.popen.poll() is None, "the broker died"
    assert sorted(e["worker"] for e in pirates.events("worker_expired")) == ["ghost-busy", "ghost-idle"]


def test_requests_for_a_service_nobody_serves_expire(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint, "--request-expiry-ms", "300")
    client = dealer(zctx, endpoint)
    sent_ns = time.time_ns()
    client.send_multipart([b"", b"MDPC01", b"nobody", b"c:1|x"])
    expired = wait_for(lambda: pirates.events("request_expired"), 300 / 1000 + MARGIN_S, "request expiry")
    assert expired[0]["rid"] == "c:1" and expired[0]["service"] == "nobody"
    assert (expired[0]["ts"] - sent_ns) / 1e9 >= 0.3
    # A worker arriving later must not get it.
    start_worker(pirates, endpoint, "worker-1", "--service", "nobody")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    assert recv(client, 1.0) is None
    assert pirates.events("exec") == []


def test_worker_reconnects_with_a_new_identity_on_disconnect(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    fake_broker = zctx.socket(zmq.ROUTER)
    fake_broker.linger = 0
    fake_broker.bind(endpoint)
    start_worker(pirates, endpoint, "worker-1", "--heartbeat-ms", "5000")
    first = recv(fake_broker, 10)
    assert first is not None and first[1:] == [b"", b"MDPW01", b"\x01", b"echo"]
    assert first[0].startswith(b"worker-1-")
    fake_broker.send_multipart([first[0], b"", b"MDPW01", b"\x05"])
    second = recv(fake_broker, 10)
    assert second is not None and second[1:] == [b"", b"MDPW01", b"\x01", b"echo"]
    assert second[0] != first[0] and second[0].startswith(b"worker-1-")
    # A malformed message does not kill the worker; it still answers a well-formed request.
    fake_broker.send_multipart([second[0], b"garbage"])
    fake_broker.send_multipart([second[0], b"", b"MDPW01", b"\x02", b"C", b"", b"c:1|x"])
    reply = recv(fake_broker, 10)
    while reply is not None and reply[3] == b"\x04":
        reply = recv(fake_broker, 10)
    assert reply == [second[0], b"", b"MDPW01", b"\x03", b"C", b"", b"c:1|x"]
    assert len(pirates.events("malformed", src="worker-1")) == 1


def test_worker_says_ready_again_when_its_connection_comes_back(pirates: Pirates, zctx: zmq.Context) -> None:
    # A broker that lost the worker's connection (a link reset, a restart) and says nothing:
    # the worker must register again at once, not heartbeat on under the old identity (a
    # request lost in the reset stayed on it for good: explore, titanic seed 1).
    endpoint = pirates.endpoint()
    fake_broker = zctx.socket(zmq.ROUTER)
    fake_broker.linger = 0
    fake_broker.bind(endpoint)
    start_worker(pirates, endpoint, "worker-1", "--heartbeat-ms", "5000")  # liveness alone: 15 s
    first = recv(fake_broker, 10)
    assert first is not None and first[1:] == [b"", b"MDPW01", b"\x01", b"echo"]
    fake_broker.close(linger=0)
    again = zctx.socket(zmq.ROUTER)
    again.linger = 0

    bind_again(again, endpoint)
    second = recv(again, 8)
    while second is not None and second[3:4] == [b"\x04"]:  # a heartbeat under the old identity
        assert second[0] != first[0], "the worker heartbeats on under the identity of the lost connection"
        second = recv(again, 8)
    assert second is not None, "no READY again within 8 s of the broker's return"
    assert second[1:] == [b"", b"MDPW01", b"\x01", b"echo"]
    assert second[0] != first[0] and second[0].startswith(b"worker-1-")
    again.close(linger=0)


def test_broker_survives_malformed_messages_and_keeps_serving(pirates: Pirates, zctx: zmq.Context):
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    start_worker(pirates, endpoint, "worker-1")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    bad = dealer(zctx, endpoint, b"rogue")
    garbage = [
        [b"only-one-frame"],
        [b"not-empty", b"MDPC01", b"echo", b"x"],
        [b"", b"HTTP/1.1", b"GET"],
        [b"", b"MDPC01", b"echo"],  # a request with no body
        [b"", b"MDPC01", b"\xff", b"x"],
        [b"", b"MDPW01"],
        [b"", b"MDPW01", b"\x42"],
        [b"", b"MDPW01", b"\x01"],  # READY without a service
        [b"", b"MDPW01", b"\x03", b"C"],  # REPLY without an envelope
        [b"", b"MDPW01", b"\x04", b"x"],
    ]
    for frames in garbage:
        bad.send_multipart(frames)
    malformed = wait_for(
        lambda: len(pirates.events("malformed")) >= len(garbage) and pirates.events("malformed"),
        10,
        "every malformed message recorded",
    )
    assert len(malformed) == len(garbage)
    # Valid but unexpected commands: answered with DISCONNECT, and the broker carries on.
    bad.send_multipart([b"", b"MDPW01", b"\x04"])  # HEARTBEAT before READY
    assert recv(bad) == [b"", b"MDPW01", b"\x05"]
    bad.send_multipart([b"", b"MDPW01", b"\x01", b"mmi.sneaky"])  # a worker may not serve mmi.*
    assert recv(bad) == [b"", b"MDPW01", b"\x05"]
    bad.send_multipart([b"", b"MDPW01", b"\x01", b"svc"])
    bad.send_multipart([b"", b"MDPW01", b"\x01", b"svc"])  # a second READY
    answer = recv(bad)
    while answer == [b"", b"MDPW01", b"\x04"]:
        answer = recv(bad)
    assert answer == [b"", b"MDPW01", b"\x05"]
    gone = wait_for(lambda: pirates.events("worker_expired", worker="rogue"), 5, "rogue forgotten")
    assert gone[0]["reason"] == "second READY"
    writer = HistoryWriter(pirates.history / "client.jsonl", "client-1")
    client = MdpSyncClient(endpoint, {"timeout_ms": 5000}, "client-1", zctx)
    for seq in range(1, 6):
        one_request(client, writer, "client-1", seq)
    client.close()


def test_mmi_answers(pirates: Pirates, zctx: zmq.Context) -> None:
    endpoint = pirates.endpoint()
    start_broker(pirates, endpoint)
    assert mmi(zctx, endpoint, b"echo") == b"404"
    start_worker(pirates, endpoint, "worker-1")
    wait_for(lambda: registered(pirates, "worker-1"), 10, "worker-1 registered")
    assert mmi(zctx, endpoint, b"echo") == b"200"
    assert mmi(zctx, endpoint, b"other") == b"404"
    assert mmi(zctx, endpoint, b"echo", name=b"mmi.version") == b"501"
    answers = wait_for(lambda: len(pirates.events("mmi_reply")) == 4 and pirates.events("mmi_reply"), 5, "4")
    assert [(e["service"], e["code"]) for e in answers] == [
        ("echo", 404),
        ("echo", 200),
        ("other", 404),
        ("mmi.version", 501),
    ]
