"""The PING/PONG broker and worker: message decoding, and each protocol rule with real processes.

Timers are shortened (PING every 200 ms, silence 3 x 200 ms, expiry 0.6 s) so that the
rules show within seconds; every wait polls the history with a deadline and bounds carry
margins for a loaded two-core machine.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from contract.history import read_events
from implementations.pingpong import protocol as pp
from tests.procs import Proc, Procs, procs, wait_for

__all__ = ["Cluster", "cluster", "procs"]  # fixtures the sketch tests share
FAST = ["--ping-ms", "200", "--broker-timeout-ms", "200", "--n-timeouts", "3"]
EXPIRE_S = 0.6


# --- message decoding ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "kind"),
    [([b"w1", b"", b"READY"], "ready"), ([b"w1", b"", b"PING"], "ping"), ([b"w1", b"", b"c:1|x"], "result")],
)
def test_worker_messages_at_the_broker(frames: list[bytes], kind: str) -> None:
    msg = pp.parse_from_worker(frames)
    assert (msg.worker, msg.kind) == (b"w1", kind)


@pytest.mark.parametrize(
    "frames",
    [[], [b"w1"], [b"w1", b"READY"], [b"w1", b"x", b"PING"], [b"", b"", b"PING"], [b"w1", b"", b"a", b"b"]],
)
def test_malformed_worker_messages_raise_malformed(frames: list[bytes]) -> None:
    with pytest.raises(pp.Malformed):
        pp.parse_from_worker(frames)


@pytest.mark.parametrize(
    "frames",
    [[b"c1"], [b"c1", b"job"], [b"c1", b"", b"a", b"b"], [b"", b"", b"x"]]
    + [[b"c1", b"", word] for word in (b"READY", b"PING", b"PONG")],
)
def test_malformed_client_requests_raise_malformed(frames: list[bytes]) -> None:
    with pytest.raises(pp.Malformed):
        pp.parse_from_client(frames)


def test_broker_messages_at_the_worker() -> None:
    assert pp.parse_from_broker([b"", b"PONG"]).kind == "pong"
    assert pp.parse_from_broker([b"", b"c:1|x"]) == pp.FromBroker("job", b"c:1|x")
    for frames in ([b"PONG"], [b"x", b"PONG"], [b"", b"a", b"b"], []):
        with pytest.raises(pp.Malformed):
            pp.parse_from_broker(frames)
    assert pp.to_worker(b"w", pp.PONG) == [b"w", b"", b"PONG"]
    assert pp.to_client(b"c", b"r") == [b"c", b"", b"r"]


# --- real processes --------------------------------------------------------------------


class Cluster:
    """A broker (or queue) and its workers for one test, recording to the test's history folder."""

    def __init__(self, procs: Procs, tmp: Path) -> None:
        self.procs = procs
        self.tmp = tmp
        self.frontend = procs.endpoint()
        self.backend = procs.endpoint()
        self.context = zmq.Context()

    def start(self, module: str, args: list[str], name: str) -> Proc:
        env = {"ZCHAOS_HISTORY_DIR": str(self.tmp / "history"), "ZCHAOS_SRC": name}
        proc = self.procs.python(name, module, *args, env=env)
        proc.wait_log("ready", timeout=20)
        return proc

    def events(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        history = self.tmp / "history"
        if not history.exists():
            return []
        found = [e for e in read_events(history) if kind is None or e["ev"] == kind]
        found = [e for e in found if all(e.get(k) == v for k, v in match.items())]
        return sorted(found, key=lambda e: e["ts"])

    def wait_event(self, kind: str, timeout: float = 10.0, **match: Any) -> dict[str, Any]:
        return wait_for(lambda: self.events(kind, **match), timeout, f"a {kind} event {match}")[0]

    def request(self, body: bytes, timeout_ms: int = 5000) -> bytes | None:
        """One Lazy Pirate style attempt: a fresh REQ socket, one send, one receive or nothing."""
        sock = self.context.socket(zmq.REQ)
        sock.linger = 0
        sock.connect(self.frontend)
        try:
            sock.send(body)
            return sock.recv() if sock.poll(timeout_ms, zmq.POLLIN) else None
        finally:
            sock.close()


@pytest.fixture
def cluster(procs: Procs, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(procs, tmp_path)
    try:
        yield c
    finally:
        procs.stop_all()
        c.context.destroy(linger=0)


def start_pingpong(c: Cluster, workers: int, *broker_args: str, work_ms: int = 0) -> tuple[Proc, list[Proc]]:
    broker = c.start(
        "implementations.pingpong.broker",
        ["--frontend", c.frontend, "--backend", c.backend, "--worker-expire-s", str(EXPIRE_S), *broker_args],
        "broker",
    )
    started = [
        c.start(
            "implementations.pingpong.worker",
            ["--connect", c.backend, "--identity", f"worker-{i}", *FAST, "--work-ms", str(work_ms)],
            f"worker-{i}",
        )
        for i in range(1, workers + 1)
    ]
    wait_for(lambda: len(c.events("worker_ready")) >= workers, 10, "workers registered")
    return broker, started


def test_jobs_are_served_every_ping_is_answered_and_malformed_input_is_survived(cluster: Cluster) -> None:
    broker, workers = start_pingpong(cluster, 2)
    assert cluster.request(b"c:1|hello") == b"c:1|hello"
    # Garbage on both broker sockets, and a job of two frames.
    junk = []
    for endpoint in (cluster.frontend, cluster.backend):
        sock = cluster.context.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(endpoint)
        sock.send_multipart([b"only-one-frame"])
        sock.send_multipart([b"x", b"y", b"z"])
        sock.send_multipart([b"", b"a", b"b"])
        junk.append(sock)
    junk[1].send_multipart([b"", b"c:0|a result nobody asked for"])
    wait_for(lambda: len(cluster.events("malformed", src="broker")) >= 6, 10, "six malformed messages")
    # A result from an unknown worker: dropped, and its sender does not become a worker.
    cluster.wait_event("discard", rid="c:0")
    for sock in junk:
        sock.close()
    assert cluster.request(b"c:2|again") == b"c:2|again"
    wait_for(lambda: len(cluster.events("pong")) >= 6, 10, "PONGs")
    pings = cluster.events("ping")
    pongs = cluster.events("pong")
    for ping in pings[:-2]:  # the last ones may still be on their way
        answered = [
            p for p in pongs if p["worker"] == ping["worker"] and 0 < p["ts"] - ping["ts"] < 200_000_000
        ]
        assert answered, f"PING {ping} has no PONG within BROKER_TIMEOUT"
    assert all(e["worker"].startswith(("worker-1-", "worker-2-")) for e in cluster.events("worker_ready"))
    execs = cluster.events("exec")
    assert [e["rid"] for e in execs] == ["c:1", "c:2"]
    assert all(e["worker"].startswith(("worker-1-", "worker-2-")) for e in execs)
    assert broker.popen.poll() is None
    assert broker.stop() == 0 and all(w.stop() == 0 for w in workers)


def test_silent_idle_worker_expires_on_time_and_gets_no_job(cluster: Cluster) -> None:
    _, (_, w2) = start_pingpong(cluster, 2)
    victim = next(e["worker"] for e in cluster.events("worker_ready") if e["worker"].startswith("worker-2-"))
    w2.signal(signal.SIGKILL)
    expired = cluster.wait_event("worker_expired", timeout=10, worker=victim)
    last = [e for e in cluster.events(worker=victim) if e["ev"] in ("ping", "done", "worker_ready")][-1]
    silence = (expired["ts"] - last["ts"]) / 1e9
    assert EXPIRE_S - 0.05 <= silence <= EXPIRE_S + 1.5, silence
    for n in range(3, 7):
        assert cluster.request(f"c:{n}|x".encode()) == f"c:{n}|x".encode()
    after = [d for d in cluster.events("dispatch") if d["ts"] > expired["ts"]]
    assert len(after) == 4 and all(d["worker"] != victim for d in after)


def test_worker_reconnects_when_the_broker_is_gone_and_returns_after_its_restart(cluster: Cluster) -> None:
    broker, _ = start_pingpong(cluster, 1)
    first = cluster.events("worker_ready")[0]["worker"]
    cluster.wait_event("pong")
    broker.signal(signal.SIGKILL)
    broker.popen.wait(5)
    reconnect = cluster.wait_event("reconnect", timeout=10)
    heard = [e for e in cluster.events(src="worker-1") if e["ev"] in ("pong", "exec")]
    silence = (reconnect["ts"] - heard[-1]["ts"]) / 1e9
    assert 0.6 - 0.05 <= silence <= 0.6 + 1.5, silence
    assert reconnect["detail"] == first and reconnect["worker"].startswith("worker-1-")
    t_restart = time.time_ns()
    cluster.start(
        "implementations.pingpong.broker",
        ["--frontend", cluster.frontend, "--backend", cluster.backend, "--worker-expire-s", str(EXPIRE_S)],
        "broker",
    )
    back = wait_for(
        lambda: [e for e in cluster.events("worker_ready") if e["ts"] > t_restart],
        10,
        "the worker registered again",
    )[0]
    assert back["worker"].startswith("worker-1-")
    assert cluster.request(b"c:9|back") == b"c:9|back"


def test_resend_moves_the_job_of_a_dead_busy_worker(cluster: Cluster) -> None:
    _, workers = start_pingpong(cluster, 2, "--resend-ms", "500", work_ms=300)
    sock = cluster.context.socket(zmq.REQ)
    sock.linger = 0
    sock.connect(cluster.frontend)
    sock.send(b"c:1|busy")
    execd = cluster.wait_event("exec", rid="c:1")
    victim = next(w for w in workers if w.name == execd["src"])
    victim.signal(signal.SIGKILL)
    assert sock.poll(5000, zmq.POLLIN), "no reply: the job was not resent"
    assert sock.recv() == b"c:1|busy"
    sock.close()
    dispatches = cluster.events("dispatch", rid="c:1")
    assert len(dispatches) == 2 and dispatches[1]["detail"] == "resend 1"
    assert dispatches[1]["worker"] != dispatches[0]["worker"]
    assert (dispatches[1]["ts"] - dispatches[0]["ts"]) / 1e9 >= 0.5 - 0.05
    assert cluster.events("worker_expired", worker=execd["worker"], reason="no result")
