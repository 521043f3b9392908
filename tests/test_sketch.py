"""The reliable-sketch queue and server: message decoding, and each rule with real processes."""

from __future__ import annotations

import signal

import pytest
import zmq

from implementations.reliable_sketch import protocol as sk
from tests.procs import Proc, procs, wait_for
from tests.test_pingpong import Cluster, cluster

__all__ = ["cluster", "procs"]  # fixtures

# --- message decoding ------------------------------------------------------------------


def test_server_messages_at_the_queue() -> None:
    assert sk.parse_from_server([b"s1", b"", b"READY"]) == sk.FromServer(b"s1", "ready")
    msg = sk.parse_from_server([b"s1", b"", b"c1", b"", b"r1", b"r2"])
    assert (msg.kind, msg.client, msg.body) == ("reply", b"c1", (b"r1", b"r2"))
    for frames in (
        [],
        [b"s1"],
        [b"s1", b"", b"other"],
        [b"s1", b"x", b"READY"],
        [b"s1", b"", b"c1", b"x", b"r"],
    ):
        with pytest.raises(sk.Malformed):
            sk.parse_from_server(frames)


def test_requests_and_replies() -> None:
    request = sk.parse_request([b"c1", b"", b"a", b"b"])
    assert request == sk.Request(b"c1", (b"a", b"b"))
    assert sk.to_server(b"s1", request) == [b"s1", b"", b"c1", b"", b"a", b"b"]
    assert sk.reply(request, request.body) == [b"c1", b"", b"a", b"b"]
    for frames in ([b"c1"], [b"c1", b""], [b"c1", b"x", b"a"], [b"", b"", b"a"]):
        with pytest.raises(sk.Malformed):
            sk.parse_request(frames)


# --- real processes --------------------------------------------------------------------


def start_sketch(c: Cluster, servers: int, reply_timeout_ms: int = 10) -> tuple[Proc, list[Proc]]:
    queue = c.start(
        "implementations.reliable_sketch.queue",
        ["--frontend", c.frontend, "--backend", c.backend, "--reply-timeout-ms", str(reply_timeout_ms)],
        "queue",
    )
    started = [start_sketch_server(c, f"server-{i}") for i in range(1, servers + 1)]
    wait_for(lambda: len(c.events("worker_ready")) >= servers, 10, "servers registered")
    return queue, started


def start_sketch_server(c: Cluster, name: str) -> Proc:
    """One echo server of the sketch, connected to the queue's backend (not yet registered)."""
    return c.start(
        "implementations.reliable_sketch.server", ["--connect", c.backend, "--identity", name], name
    )


def test_a_stalled_server_is_disabled_passed_over_and_its_late_reply_discarded(cluster: Cluster) -> None:
    # 200 ms: long enough that a busy machine does not disable a healthy server in this test.
    queue, servers = start_sketch(cluster, 2, reply_timeout_ms=200)
    first = cluster.events("worker_ready")[0]["worker"]  # ready longest: the next request goes there
    stalled = next(s for s in servers if first.startswith(s.name + "-"))
    stalled.signal(signal.SIGSTOP)
    assert cluster.request(b"c:1|x") == b"c:1|x"
    disabled = cluster.wait_event("worker_expired", worker=first)
    assert disabled["reason"] == "disabled"
    dispatches = cluster.events("dispatch", rid="c:1")
    assert dispatches[0]["worker"] == first and dispatches[1]["detail"] == "resend 1"
    # While disabled it gets nothing.
    for n in range(2, 5):
        assert cluster.request(f"c:{n}|x".encode()) == f"c:{n}|x".encode()
    assert all(d["worker"] != first for d in cluster.events("dispatch") if d["rid"] != "c:1")
    stalled.signal(signal.SIGCONT)
    discard = cluster.wait_event("discard", worker=first)
    assert discard["rid"] == "c:1" and discard["reason"] == "disabled server"
    cluster.wait_event("worker_ready", worker=first, detail="re-enabled")
    assert queue.popen.poll() is None


def test_a_repeated_request_is_answered_from_the_cache(cluster: Cluster) -> None:
    start_sketch(cluster, 1, reply_timeout_ms=500)
    assert cluster.request(b"c:1|same") == b"c:1|same"
    assert cluster.request(b"c:1|same") == b"c:1|same"  # a client's retry, on a new socket
    assert cluster.request(b"c:2|other") == b"c:2|other"
    assert [e["rid"] for e in cluster.events("exec")] == ["c:1", "c:2"]
    assert [e["rid"] for e in cluster.events("replay")] == ["c:1"]


def test_malformed_input_is_survived(cluster: Cluster) -> None:
    queue, (server,) = start_sketch(cluster, 1, reply_timeout_ms=500)
    junk = []
    for endpoint in (cluster.frontend, cluster.backend):
        sock = cluster.context.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(endpoint)
        sock.send_multipart([b"one"])
        sock.send_multipart([b"x", b"y"])
        junk.append(sock)
    wait_for(lambda: len(cluster.events("malformed", src="queue")) >= 4, 10, "four malformed messages")
    # A server's REQ handed a request with no envelope answers READY and keeps serving.
    direct = cluster.context.socket(zmq.ROUTER)
    direct.linger = 0
    port = direct.bind_to_random_port("tcp://127.0.0.1")
    cluster.start(
        "implementations.reliable_sketch.server",
        ["--connect", f"tcp://127.0.0.1:{port}", "--identity", "server-9"],
        "server-9",
    )
    assert direct.poll(10000, zmq.POLLIN)
    ident, _, ready = direct.recv_multipart()
    assert ready == b"READY"
    direct.send_multipart([ident, b"", b"no-envelope"])
    assert direct.poll(10000, zmq.POLLIN) and direct.recv_multipart()[2] == b"READY"
    direct.send_multipart([ident, b"", b"c9", b"", b"c:9|ok"])
    assert direct.poll(10000, zmq.POLLIN) and direct.recv_multipart()[2:] == [b"c9", b"", b"c:9|ok"]
    for sock in [*junk, direct]:
        sock.close()
    assert cluster.request(b"c:1|x") == b"c:1|x"
    assert queue.popen.poll() is None and server.popen.poll() is None
    assert queue.stop() == 0 and server.stop() == 0


def test_a_reply_to_the_previous_queues_request_reaches_no_client(cluster: Cluster) -> None:
    # libzmq numbers a ROUTER's peers from an unseeded rand(): a queue started again gives
    # its first client the identity its predecessor gave its own first client. A server that
    # answers a predecessor's request after the restart must not reach the new client.
    args = ["--frontend", cluster.frontend, "--backend", cluster.backend, "--reply-timeout-ms", "2000"]
    queue = cluster.start("implementations.reliable_sketch.queue", args, "queue1")
    server = cluster.context.socket(zmq.REQ)  # a server of the sketch, by hand
    old_client = cluster.context.socket(zmq.DEALER)
    for sock in (server, old_client):
        sock.linger = 0
    server.connect(cluster.backend)
    server.send(sk.READY)
    cluster.wait_event("worker_ready", src="queue1")
    old_client.connect(cluster.frontend)
    old_client.send_multipart([b"", b"c:1|old"])
    assert server.poll(10_000), "the queue never handed the server the request"
    held = server.recv_multipart()
    assert held[-1] == b"c:1|old"
    old_client.close()
    queue.stop()

    cluster.start("implementations.reliable_sketch.queue", args, "queue2")
    new_client = cluster.context.socket(zmq.DEALER)
    new_client.linger = 0
    new_client.connect(cluster.frontend)
    new_client.send_multipart([b"", b"c:2|new"])
    server.send_multipart(held)  # the old request's reply, which reaches the new queue
    assert server.poll(10_000), "the new queue never handed the server the new request"
    request = server.recv_multipart()
    assert request[-1] == b"c:2|new"
    server.send_multipart(request)
    assert new_client.poll(10_000), "the new client got no reply"
    assert new_client.recv_multipart() == [b"", b"c:2|new"]
    discard = cluster.wait_event("discard", src="queue2")
    assert discard["rid"] == "c:1" and discard["reason"] == "another queue's request"


def test_servers_say_ready_to_a_restarted_queue(cluster: Cluster) -> None:
    # A REQ server says READY once: a queue started again knew none of them and served nobody
    # (explore, reliable-sketch seed 1: the queue killed, no ok reply ever after).
    queue, _ = start_sketch(cluster, 2, reply_timeout_ms=500)
    assert cluster.request(b"c:1|x") == b"c:1|x"
    queue.signal(signal.SIGKILL)
    queue.popen.wait(10)
    args = ["--frontend", cluster.frontend, "--backend", cluster.backend, "--reply-timeout-ms", "500"]
    cluster.start("implementations.reliable_sketch.queue", args, "queue2")
    wait_for(lambda: len(cluster.events("worker_ready", src="queue2")) >= 2, 10, "both servers' READY again")
    assert cluster.request(b"c:2|x") == b"c:2|x"
