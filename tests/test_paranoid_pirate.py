"""Paranoid Pirate: the wire format, and the liveness rules with real processes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter, read_events
from contract.payload import payload_for, request_id
from implementations.paranoid_pirate.protocol import (
    HEARTBEAT,
    READY,
    Malformed,
    parse_from_worker,
    parse_to_worker,
    split_envelope,
)
from loadtests.adapters.base import RequestLog
from loadtests.adapters.lazy_pirate import LazyPirateClient
from tests.procs import Procs, wait_for

HEARTBEAT_MS = 300
LIVENESS = 3
TIMERS = ["--heartbeat-ms", str(HEARTBEAT_MS), "--liveness", str(LIVENESS)]


# -- wire format ------------------------------------------------------------------------


def test_control_frames_and_envelopes_parse() -> None:
    assert parse_from_worker([READY]) == ("READY", None)
    assert parse_from_worker([HEARTBEAT]) == ("HEARTBEAT", None)
    kind, message = parse_from_worker([b"client", b"", b"body", b"more"])
    assert kind == "REPLY" and message.envelope == [b"client"] and message.body == [b"body", b"more"]
    assert message.frames() == [b"client", b"", b"body", b"more"]
    assert parse_to_worker([HEARTBEAT]) == ("HEARTBEAT", None)


@pytest.mark.parametrize(
    "frames",
    [[b"\x07"], [READY + b"x"], [b"client", b"body"], [b"", b"body"], [b"client", b""], [b"a", b"b", b"c"]],
)
def test_malformed_messages_are_refused(frames: list[bytes]) -> None:
    with pytest.raises(Malformed):
        parse_from_worker(frames)


def test_queue_never_sends_ready_to_a_worker() -> None:
    with pytest.raises(Malformed):
        parse_to_worker([READY])
    with pytest.raises(Malformed):
        split_envelope([b"addr", b"", b"x"][:2])


# -- real processes ---------------------------------------------------------------------


class System:
    """A queue and workers with their history in ``tmp/history``."""

    def __init__(self, procs: Procs, tmp: Path) -> None:
        self.procs = procs
        self.history = tmp / "history"
        self.frontend = procs.endpoint()
        self.backend = procs.endpoint()
        self.queues = 0

    def start_queue(self):
        self.queues += 1
        env = {"ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": f"queue{self.queues}"}
        queue = self.procs.python(
            f"queue{self.queues}", "implementations.paranoid_pirate.queue",
            "--frontend", self.frontend, "--backend", self.backend, *TIMERS, env=env,
        )  # fmt: skip
        queue.wait_log("ready")
        return queue

    def start_worker(self, name: str):
        env = {"ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": name}
        worker = self.procs.python(
            name, "implementations.paranoid_pirate.worker",
            "--connect", self.backend, "--identity", name, *TIMERS, env=env,
        )  # fmt: skip
        worker.wait_log("ready")
        return worker

    def events(self, source: str, ev: str) -> list[dict]:
        path = self.history / f"{source}.jsonl"
        return [e for e in read_events(path) if e["ev"] == ev] if path.exists() else []

    def registered(self, source: str, worker: str) -> list[dict]:
        return [e for e in self.events(source, "worker_ready") if e["worker"].startswith(worker)]


@pytest.fixture
def system(procs: Procs, tmp_path: Path) -> System:
    return System(procs, tmp_path)


@pytest.fixture
def client(system: System, tmp_path: Path):
    ctx = zmq.Context()
    adapter = LazyPirateClient(system.frontend, {"timeout_ms": 1500, "retries": 3}, "client-1", ctx)
    writer = HistoryWriter(tmp_path / "client.jsonl", "client-1")
    seq = 0

    def call() -> list[bytes]:
        nonlocal seq
        seq += 1
        rid = request_id("client-1", seq)
        body = [payload_for(rid, 32, b"x")]
        reply = adapter.request(body, RequestLog(writer, "client-1", seq, rid))
        assert reply.frames == body
        return reply.frames

    yield call
    adapter.close()
    ctx.term()


def test_a_killed_idle_worker_is_expired_within_liveness(system: System, client) -> None:
    system.start_queue()
    worker = system.start_worker("worker-1")
    wait_for(lambda: system.registered("queue1", "worker-1"), 10, "the worker to register")
    client()

    worker.signal(signal.SIGKILL)
    killed_ns = time.time_ns()
    expired = wait_for(lambda: system.events("queue1", "worker_expired"), 10, "the dead worker to expire")
    after_s = (expired[0]["ts"] - killed_ns) / 1e9
    bound_s = HEARTBEAT_MS * LIVENESS / 1000
    # It may have heard from the worker up to one interval before the kill, and checks
    # expiry once per interval: bound ± one interval, plus scheduling slack.
    assert bound_s - HEARTBEAT_MS / 1000 - 0.1 <= after_s <= bound_s + HEARTBEAT_MS / 1000 + 1.5


@pytest.mark.slow
def test_a_frozen_worker_is_expired_and_serves_again_after_sigcont(system: System, client) -> None:
    system.start_queue()
    worker = system.start_worker("worker-1")
    wait_for(lambda: system.registered("queue1", "worker-1"), 10, "the worker to register")

    worker.signal(signal.SIGSTOP)
    wait_for(lambda: system.events("queue1", "worker_expired"), 10, "the frozen worker to expire")
    worker.signal(signal.SIGCONT)
    wait_for(
        lambda: len(system.registered("queue1", "worker-1")) >= 2, 10, "the thawed worker to register again"
    )
    client()  # the only worker serves again
    assert system.events("worker-1", "done")


def test_after_a_queue_restart_workers_register_again_and_clients_recover(system: System, client) -> None:
    queue = system.start_queue()
    for name in ("worker-1", "worker-2"):
        system.start_worker(name)
    wait_for(lambda: len(system.events("queue1", "worker_ready")) == 2, 10, "both workers to register")
    client()

    queue.stop()
    system.start_queue()
    wait_for(
        lambda: (
            {e["worker"].rsplit("-", 1)[0] for e in system.events("queue2", "worker_ready")}
            == {"worker-1", "worker-2"}
        ),
        15,
        "both workers to register with the new queue",
    )
    for _ in range(5):
        client()


def test_the_queue_survives_malformed_messages(system: System, client) -> None:
    queue = system.start_queue()
    system.start_worker("worker-1")
    wait_for(lambda: system.registered("queue1", "worker-1"), 10, "the worker to register")
    ctx = zmq.Context()
    try:
        rogue_worker = ctx.socket(zmq.DEALER)
        rogue_client = ctx.socket(zmq.DEALER)
        for sock, endpoint in ((rogue_worker, system.backend), (rogue_client, system.frontend)):
            sock.linger = 0
            sock.connect(endpoint)
        for frames in ([b"\x07"], [b"no", b"delimiter"], [b"client", b""], [b""]):
            rogue_worker.send_multipart(frames)
        for frames in ([b"garbage"], [b"", b""], [b"x", b"y", b"z"]):
            rogue_client.send_multipart(frames)
        wait_for(lambda: len(system.events("queue1", "malformed")) >= 6, 10, "the queue to record the junk")
        for _ in range(3):
            client()
        assert queue.popen.poll() is None
    finally:
        ctx.destroy(linger=0)


def test_the_worker_survives_malformed_messages(procs: Procs, tmp_path: Path) -> None:
    ctx = zmq.Context()
    fake_queue = ctx.socket(zmq.ROUTER)
    fake_queue.linger = 0
    port = fake_queue.bind_to_random_port("tcp://127.0.0.1")
    try:
        worker = procs.python(
            "worker", "implementations.paranoid_pirate.worker",
            "--connect", f"tcp://127.0.0.1:{port}", "--identity", "worker-1", *TIMERS,
        )  # fmt: skip
        assert fake_queue.poll(10_000), "the worker never sent READY"
        identity, ready = fake_queue.recv_multipart()
        assert ready == READY
        for junk in ([b"\x09"], [b"a", b"b"], [b"", b"body"]):
            fake_queue.send_multipart([identity, *junk])
        fake_queue.send_multipart([identity, b"client", b"", b"echo me"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and fake_queue.poll(int((deadline - time.monotonic()) * 1000)):
            frames = fake_queue.recv_multipart()
            if frames[1:] == [b"client", b"", b"echo me"]:
                break
        else:
            pytest.fail("the worker did not answer after malformed messages")
        assert worker.popen.poll() is None
        assert worker.text().count("malformed") == 3
    finally:
        ctx.destroy(linger=0)


def test_a_reply_to_the_previous_queues_request_reaches_no_client(system: System) -> None:
    # libzmq numbers a ROUTER's peers from an unseeded rand(): a queue started again gives
    # its first client the identity its predecessor gave its own first client. A worker that
    # held a request across the restart (frozen, explore's paranoid-pirate seed 1) must not
    # have its reply handed to the new client of that identity.
    queue = system.start_queue()
    ctx = zmq.Context()
    try:
        worker = ctx.socket(zmq.DEALER)
        worker.identity = b"worker-x"
        old_client = ctx.socket(zmq.DEALER)
        for sock in (worker, old_client):
            sock.linger = 0
        worker.connect(system.backend)
        worker.send(READY)
        wait_for(lambda: system.registered("queue1", "worker-x"), 10, "the worker to register")
        old_client.connect(system.frontend)
        old_client.send_multipart([b"", b"old request"])
        assert worker.poll(10_000), "the queue never handed the worker the request"
        held = worker.recv_multipart()
        while held == [HEARTBEAT]:
            assert worker.poll(10_000)
            held = worker.recv_multipart()
        assert held[-1] == b"old request"
        old_client.close()
        queue.stop()

        system.start_queue()
        new_client = ctx.socket(zmq.DEALER)
        new_client.linger = 0
        new_client.connect(system.frontend)
        new_client.send_multipart([b"", b"new request"])
        worker.send_multipart(held)  # the old request's reply, sent to the new queue
        worker.send(READY)
        deadline = time.monotonic() + 10
        while True:
            assert worker.poll(int(max(0.0, deadline - time.monotonic()) * 1000)), "no request came"
            frames = worker.recv_multipart()
            if frames != [HEARTBEAT]:
                break
        assert frames[-1] == b"new request"
        worker.send_multipart(frames)
        assert new_client.poll(10_000), "the new client got no reply"
        assert new_client.recv_multipart() == [b"", b"new request"]
        discards = wait_for(lambda: system.events("queue2", "discard"), 10, "the old reply's discard")
        assert discards[0]["worker"] == "worker-x"
    finally:
        ctx.destroy(linger=0)


def test_a_request_handed_on_from_an_expired_worker_is_answered_once(system: System) -> None:
    # The queue hands a dead worker's request to the next (requeue); the expired worker may
    # still answer once it thaws (explore, paranoid-pirate seed 1: client-5's first request
    # delivered twice). The client gets the first answer only.
    system.start_queue()
    ctx = zmq.Context()
    try:
        frozen, alive, client = (ctx.socket(t) for t in (zmq.DEALER, zmq.DEALER, zmq.DEALER))
        frozen.identity, alive.identity = b"worker-f", b"worker-a"
        for sock in (frozen, alive, client):
            sock.linger = 0
        for sock in (frozen, alive):
            sock.connect(system.backend)
            sock.send(READY)
            wait_for(lambda s=sock: system.registered("queue1", s.identity.decode()), 10, "a worker's READY")
        client.connect(system.frontend)
        client.send_multipart([b"", b"c:1|x"])  # to worker-f, registered first

        def request_at(sock: zmq.Socket, deadline: float, heartbeat: bool) -> list[bytes]:
            while True:
                left = deadline - time.monotonic()
                assert left > 0, "no request came"
                if sock.poll(min(100, int(left * 1000))):
                    frames = sock.recv_multipart()
                    if frames != [HEARTBEAT]:
                        return frames
                if heartbeat:
                    sock.send(HEARTBEAT)

        held = request_at(frozen, time.monotonic() + 10, heartbeat=False)  # then silent: it expires
        handed_on = request_at(alive, time.monotonic() + 10, heartbeat=True)
        assert handed_on == held
        alive.send_multipart(handed_on)
        assert client.poll(10_000) and client.recv_multipart() == [b"", b"c:1|x"]
        frozen.send_multipart(held)  # thawed: its answer to the same request
        wait_for(lambda: system.events("queue1", "discard") or client.poll(0), 10, "the second answer")
        assert not client.poll(200), "the client got the request answered twice"
        discard = system.events("queue1", "discard")
        assert discard[0]["worker"] == "worker-f" and discard[0]["reason"] == "answered already"
    finally:
        ctx.destroy(linger=0)
