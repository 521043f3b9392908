"""Built-in brokers wedged by one hostile input (issue 11 part 5): each case against the real
process, then a correct client must still be served."""

from __future__ import annotations

import time

import zmq

from implementations.pingpong.broker import MAX_RESENDS
from tests.procs import procs, wait_for
from tests.test_pingpong import EXPIRE_S, FAST, Cluster, cluster, start_pingpong
from tests.test_sketch import start_sketch, start_sketch_server

__all__ = ["cluster", "procs"]  # fixtures


def test_sketch_gives_up_on_a_request_no_server_answers_in_time(cluster: Cluster) -> None:
    queue, _ = start_sketch(cluster, 0)
    # The one server is the test's: it echoes each send only once the queue has disabled it
    # for missing the 10 ms reply wait, so every send is late by construction. (Real servers
    # echoing 10 MB were late only while the machine was idle: the queue counts a reply that
    # arrived before it looked at its deadlines as on time, and a busy CI machine once left it
    # waiting that long, so the request was answered and never given up.)
    late = hostile_worker(cluster, b"late-server")
    cluster.wait_event("worker_ready", worker="late-server")
    huge = cluster.context.socket(zmq.REQ)
    huge.linger = 0
    huge.connect(cluster.frontend)
    huge.send(b"big:1|" + b"x" * 10_000_000)
    deadline = time.monotonic() + 60
    received = 0
    while not cluster.events("request_expired", rid="big:1"):
        assert time.monotonic() < deadline, "the queue kept resending the request no server answers in time"
        if late.poll(50, zmq.POLLIN):
            request = late.recv_multipart()
            received += 1
            # The n-th send is echoed after the n-th disabling (not after the n-th dispatch
            # event: the queue writes that just after sending, so the test may not see it yet).
            wait_for(
                lambda n=received: (
                    len(cluster.events("worker_expired", worker="late-server", reason="disabled")) >= n
                ),
                15,
                f"the late server disabled for send {received}",
            )
            late.send_multipart(request)  # the envelope back as it came: an echo
    dropped = cluster.events("request_expired", rid="big:1")[0]
    assert "sends" in dropped["reason"]
    sends = cluster.events("dispatch", rid="big:1")
    assert 1 < len(sends) <= 8, len(sends)
    assert all(s["worker"] == "late-server" for s in sends), sends
    late.close()
    # A correct client is still served, by a real server.
    start_sketch_server(cluster, "server-1")
    wait_for(lambda: len(cluster.events("worker_ready")) >= 2, 10, "the real server registered")
    for n in range(1, 4):
        assert cluster.request(f"c:{n}|x".encode(), timeout_ms=5000) == f"c:{n}|x".encode()
    huge.close()
    assert queue.popen.poll() is None


def stranger_on_backend(cluster: Cluster) -> zmq.Socket:
    """A DEALER named ``stranger`` on the broker's backend: no worker, whatever it sends."""
    stranger = cluster.context.socket(zmq.DEALER)
    stranger.linger = 0
    stranger.setsockopt(zmq.ROUTING_ID, b"stranger")
    stranger.connect(cluster.backend)
    return stranger


def test_simple_pirate_lists_no_stranger_for_its_replies_nor_anyone_twice(cluster: Cluster) -> None:
    cluster.start(
        "implementations.simple_pirate.queue",
        ["--frontend", cluster.frontend, "--backend", cluster.backend],
        "queue",
    )
    cluster.start(
        "implementations.simple_pirate.worker",
        ["--connect", cluster.backend, "--identity", "worker-1"],
        "worker-1",
    )
    cluster.wait_event("worker_ready")
    stranger = stranger_on_backend(cluster)
    # Unsolicited "replies", a ghost READY (it will never answer), and more of both.
    for _ in range(20):
        stranger.send_multipart([b"", b"nobody", b"", b"s:0|junk"])
    stranger.send_multipart([b"", b"\x01"])
    for _ in range(20):
        stranger.send_multipart([b"", b"\x01"])
        stranger.send_multipart([b"", b"nobody", b"", b"s:0|junk"])
    stranger.send_multipart([b"", b"\x07"])  # malformed: once it is recorded, all of the above was read
    cluster.wait_event("malformed")
    # Each request is served within a retry (the ghost may hold one request, once).
    retries = 0
    for n in range(1, 9):
        for _attempt in range(2):
            if cluster.request(f"c:{n}|x".encode(), timeout_ms=1000) == f"c:{n}|x".encode():
                break
            retries += 1
        else:
            raise AssertionError(f"request c:{n} not served in two attempts")
    assert retries <= 1, retries
    wait_for(lambda: len(cluster.events("discard")) >= 40, 10, "the stranger's replies dropped")
    assert len(cluster.events("worker_ready", worker="stranger")) == 1
    stranger.close()


def test_paranoid_pirate_registers_a_worker_only_on_ready(cluster: Cluster) -> None:
    timers = ["--heartbeat-ms", "500", "--liveness", "3"]
    cluster.start(
        "implementations.paranoid_pirate.queue",
        ["--frontend", cluster.frontend, "--backend", cluster.backend, *timers],
        "queue",
    )
    cluster.start(
        "implementations.paranoid_pirate.worker",
        ["--connect", cluster.backend, "--identity", "worker-1", *timers],
        "worker-1",
    )
    cluster.wait_event("worker_ready")
    stranger = stranger_on_backend(cluster)
    stranger.send_multipart([b"nobody", b"", b"s:0|junk"])  # a "reply"
    stranger.send_multipart([b"\x02"])  # a HEARTBEAT
    stranger.send_multipart([b"\x07"])  # malformed: once it is recorded, all of the above was read
    cluster.wait_event("malformed")
    for n in range(1, 7):
        assert cluster.request(f"c:{n}|x".encode(), timeout_ms=1500) == f"c:{n}|x".encode()
    assert cluster.events("worker_ready", worker="stranger") == []
    stranger.send_multipart([b"\x01"])  # READY does register it
    cluster.wait_event("worker_ready", worker="stranger")
    stranger.close()


def test_pingpong_refuses_a_job_that_is_a_control_word(cluster: Cluster) -> None:
    start_pingpong(cluster, 1)
    hostile = cluster.context.socket(zmq.REQ)
    hostile.linger = 0
    hostile.connect(cluster.frontend)
    hostile.send(b"PING")  # echoed, its result would read as the worker's heartbeat
    refused = cluster.wait_event("malformed")
    assert "control word PING" in refused["detail"]
    assert cluster.request(b"c:1|x") == b"c:1|x"
    assert [e["rid"] for e in cluster.events("dispatch")] == ["c:1"]
    assert not cluster.events("worker_expired")
    hostile.close()


def hostile_worker(cluster: Cluster, identity: bytes) -> zmq.Socket:
    """A DEALER that registers as a worker and is then driven by hand."""
    sock = cluster.context.socket(zmq.DEALER)
    sock.linger = 0
    sock.setsockopt(zmq.ROUTING_ID, identity)
    sock.connect(cluster.backend)
    sock.send_multipart([b"", b"READY"])
    return sock


def test_pingpong_a_worker_whose_result_reads_as_a_ping_is_expired_as_wedged(cluster: Cluster) -> None:
    start_pingpong(cluster, 0)
    hostile = hostile_worker(cluster, b"hostile")
    cluster.wait_event("worker_ready", worker="hostile")
    client = cluster.context.socket(zmq.REQ)
    client.linger = 0
    client.connect(cluster.frontend)
    client.send(b"c:1|x")
    assert hostile.poll(5000) and hostile.recv_multipart() == [b"", b"c:1|x"]
    # Its result is the word PING, and it goes on PINGing as an idle worker does: the
    # broker holds it busy, then expires it as wedged within WORKER_EXPIRE_SECONDS.
    deadline = time.monotonic() + EXPIRE_S + 5
    while not cluster.events("worker_expired", worker="hostile") and time.monotonic() < deadline:
        hostile.send_multipart([b"", b"PING"])
        # A PING interval of reading its PONGs. Left unread, the first PONG ended every later
        # poll at once: the loop flooded PINGs until the broker's PONGs would block, and the
        # PING of the wedged expiry could then fail to register it again (no second expiry).
        interval_end = time.monotonic() + 0.2
        while (left_ms := (interval_end - time.monotonic()) * 1000) > 0:
            if hostile.poll(left_ms):
                hostile.recv_multipart()
    assert cluster.events("worker_expired", worker="hostile", reason="wedged")
    # Its PING registered it again; gone for good, it expires, and a real worker serves.
    hostile.close()
    wait_for(lambda: len(cluster.events("worker_expired", worker="hostile")) >= 2, EXPIRE_S + 5, "expired")
    cluster.start(
        "implementations.pingpong.worker",
        ["--connect", cluster.backend, "--identity", "worker-1", *FAST],
        "worker-1",
    )
    assert cluster.request(b"c:2|x") == b"c:2|x"
    client.close()


def test_pingpong_a_result_that_reads_as_ready_is_resent_a_bounded_number_of_times(cluster: Cluster) -> None:
    start_pingpong(cluster, 0, "--resend-ms", "2000")
    hostiles = [hostile_worker(cluster, f"hostile-{i}".encode()) for i in (1, 2)]
    wait_for(lambda: len(cluster.events("worker_ready")) >= 2, 10, "the hostile workers registered")
    client = cluster.context.socket(zmq.REQ)
    client.linger = 0
    client.connect(cluster.frontend)
    client.send(b"c:1|x")
    # Each answers every job with READY, which reads as a restart: the job comes back.
    poller = zmq.Poller()
    for sock in hostiles:
        poller.register(sock, zmq.POLLIN)
    deadline = time.monotonic() + 15
    while not cluster.events("request_expired") and time.monotonic() < deadline:
        for sock in dict(poller.poll(100)):
            if sock.recv_multipart()[-1] != b"PONG":
                sock.send_multipart([b"", b"READY"])
    dropped = cluster.wait_event("request_expired", timeout=1)
    assert "resends" in dropped["reason"]
    assert len(cluster.events("dispatch", rid="c:1")) == 1 + MAX_RESENDS
    client.close()
    for sock in hostiles:
        sock.close()
