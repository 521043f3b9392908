"""WMP with real processes on loopback: managers, a device, workers, and test-side peers
(a client, or a hand-driven manager) speaking the wire format directly."""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import zmq

from contract.history import read_events
from implementations.wmp import wire
from tests.procs import Proc, Procs, wait_for


class Cluster:
    """WMP role processes of one test (started and stopped by ``Procs``), recording to one history."""

    def __init__(self, procs: Procs, tmp: Path) -> None:
        self.procs = procs
        self.history = tmp / "history"
        self.ports: dict[str, str] = {}
        self.running: dict[str, Proc] = {}

    def ep(self, name: str) -> str:
        if name not in self.ports:
            self.ports[name] = self.procs.endpoint()
        return self.ports[name]

    def start(self, role: str, name: str, *args: str) -> Proc:
        env = {"ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": name}
        proc = self.procs.python(name, f"implementations.wmp.{role}", "--identity", name, *args, env=env)
        proc.wait_log("ready:")
        self.running[name] = proc
        return proc

    def wait_log(self, name: str, text: str, count: int = 1) -> None:
        proc = self.running[name]
        wait_for(lambda: proc.text().count(text) >= count, 15, f"{name} to log {text!r} {count} times")

    def stop(self, name: str, sig: int = signal.SIGTERM) -> int:
        proc = self.running.pop(name)
        if sig == signal.SIGTERM:
            return proc.stop()
        proc.signal(sig)
        return proc.popen.wait(10)

    def events(self, ev: str | None = None) -> list[dict]:
        if not self.history.exists():
            return []
        return [e for e in read_events(self.history) if ev is None or e["ev"] == ev]


@pytest.fixture
def cluster(procs: Procs, tmp_path: Path) -> Cluster:
    return Cluster(procs, tmp_path)


def client(zctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = zctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    return sock


def collect(sock: zmq.Socket, want: set[bytes], timeout: float = 20) -> set[bytes]:
    """Replies (echo bodies) arriving on a DEALER client until all of ``want`` came or the deadline."""
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout
    while not want <= got and time.monotonic() < deadline:
        if sock.poll(100):
            frames = sock.recv_multipart()
            assert frames[0] == b""
            got.add(frames[1])
    return got


def fake_manager(zctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = zctx.socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind(endpoint)
    return sock


def expect(sock: zmq.Socket, command: str, timeout: float = 10) -> tuple[bytes, wire.Message]:
    """The next message of kind ``command`` a fake manager receives (others skipped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sock.poll(50):
            address, *frames = sock.recv_multipart()
            msg = wire.decode(frames)
            if msg.command == command:
                return address, msg
    raise AssertionError(f"no {command} within {timeout} s")


def test_two_managers_a_device_and_workers(cluster: Cluster, zctx: zmq.Context) -> None:
    c = cluster
    c.start("manager", "manager-a", "--frontend", c.ep("fa"), "--backend", c.ep("ba"))
    c.start("manager", "manager-b", "--frontend", c.ep("fb"), "--backend", c.ep("bb"))
    c.start("device", "device", "--backend", c.ep("dev"), "--connect", c.ep("ba"), c.ep("bb"))
    for w in ("worker-1", "worker-2"):
        c.start("worker", w, "--connect", c.ep("dev"), "--capacity", "2", "--work-ms", "30")
    c.start("worker", "worker-3", "--connect", c.ep("ba"), c.ep("bb"), "--capacity", "1", "--work-ms", "30")
    bodies = {}
    for name, fe in (("a", "fa"), ("b", "fb")):
        sock = client(zctx, c.ep(fe))
        want = {f"{name}:{i}|payload".encode() for i in range(60)}
        for body in want:
            sock.send_multipart([b"", body])
        bodies[name] = (sock, want)
    for name, (sock, want) in bodies.items():
        assert collect(sock, want) == want, f"replies missing from manager-{name}"

    given = [e for e in c.events("wmp_take") if e["src"] == e["manager"]]
    accepted = [e for e in c.events("wmp_take") if "pid" in e]
    assert len(given) == 120
    assert Counter((e["manager"], e["job"]) for e in given).most_common(1)[0][1] == 1
    owner = {(e["manager"], e["job"]): e["worker"] for e in given}
    assert {(e["manager"], e["job"]): e["worker"] for e in accepted} == owner
    # Each result reached the manager that gave the job, also from the workers behind the device.
    results = {(e["manager"], e["job"]): e["worker"] for e in c.events("wmp_result")}
    assert results == owner
    assert all("detail" not in e for e in c.events("wmp_result"))
    via_device = {(m, w) for (m, _), w in results.items() if w in ("worker-1", "worker-2")}
    assert {m for m, _ in via_device} == {"manager-a", "manager-b"}
    # Never above capacity; and the load did fill the workers, so the check could have failed.
    held: dict[tuple, int] = defaultdict(int)
    peak: dict[str, int] = defaultdict(int)
    for e in sorted(c.events(), key=lambda e: e["ts"]):
        if e["ev"] in ("wmp_lock", "wmp_unlock", "wmp_done"):
            held[e["worker"], e["pid"]] += 1 if e["ev"] == "wmp_lock" else -1
            peak[e["worker"]] = max(peak[e["worker"]], held[e["worker"], e["pid"]])
    assert peak["worker-3"] <= 1 and max(peak["worker-1"], peak["worker-2"]) == 2
    assert peak["worker-1"] <= 2 and peak["worker-2"] <= 2
    # Every NO released its lock.
    released = {e["lock"] for e in c.events("wmp_unlock")}
    assert all(e["lock"] in released for e in c.events("wmp_no"))


def one_slot_worker(
    cluster: Cluster, zctx: zmq.Context, lock_timeout_ms: int
) -> tuple[zmq.Socket, bytes, wire.Message]:
    """A worker of capacity 1 and the test's fake manager, which has woken it once: (the
    manager, the worker's address, the GIVE it answered with)."""
    manager = fake_manager(zctx, cluster.ep("m"))
    cluster.start(
        "worker", "worker-1", "--connect", cluster.ep("m"), "--capacity", "1", "--lock-timeout-ms",
        str(lock_timeout_ms),
    )  # fmt: skip
    address, _ = expect(manager, "READY")
    manager.send_multipart([address, *wire.encode(wire.make("WAKE", "m"))])
    _, give = expect(manager, "GIVE")
    return manager, address, give


def test_no_releases_the_lock(cluster: Cluster, zctx: zmq.Context) -> None:
    manager, address, give = one_slot_worker(cluster, zctx, 60000)
    manager.send_multipart([address, *wire.encode(wire.make("NO", "m", lock=give.headers["lock"]))])
    # With the lock held for a minute, only the NO can free the single slot for a second GIVE.
    manager.send_multipart([address, *wire.encode(wire.make("WAKE", "m"))])
    _, again = expect(manager, "GIVE")
    assert again.headers["lock"] != give.headers["lock"]
    unlocks = cluster.events("wmp_unlock")
    assert [(e["lock"], e["reason"]) for e in unlocks] == [(give.headers["lock"], "no")]


def test_lock_released_after_its_timeout_and_late_take_still_served(
    cluster: Cluster, zctx: zmq.Context
) -> None:
    manager, address, first = one_slot_worker(cluster, zctx, 1500)
    locked_at = time.monotonic()
    # The one slot is locked: a WAKE now is ignored, until the lock times out.
    manager.send_multipart([address, *wire.encode(wire.make("WAKE", "m"))])
    deadline = time.monotonic() + 10
    while True:
        _, msg = expect(manager, "READY", timeout=deadline - time.monotonic())
        if int(msg.headers["slots"]) == 1 and time.monotonic() - locked_at > 0.1:
            break
    assert time.monotonic() - locked_at >= 1.4
    assert [e["reason"] for e in cluster.events("wmp_unlock")] == ["timeout"]
    # A TAKE arriving after the timeout is still done (a slot is free again).
    take = wire.make("TAKE", "m", payload=(b"c:1|late",), lock=first.headers["lock"], job="1-1", manager="m")
    manager.send_multipart([address, *wire.encode(take)])
    _, done = expect(manager, "DONE")
    assert done.payload == (b"c:1|late",) and done.headers["job"] == "1-1"


def test_ready_goes_to_every_manager_and_is_repeated_with_back_off(
    cluster: Cluster, zctx: zmq.Context
) -> None:
    m1, m2 = fake_manager(zctx, cluster.ep("m1")), fake_manager(zctx, cluster.ep("m2"))
    cluster.start(
        "worker", "worker-1", "--connect", cluster.ep("m1"), cluster.ep("m2"),
        "--ready-min-ms", "50", "--ready-max-ms", "1000",
    )  # fmt: skip
    expect(m2, "READY")
    times = []
    for _ in range(6):
        expect(m1, "READY")
        times.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps[:2]) < 0.4 and max(gaps[-2:]) >= 0.6, gaps


def test_malformed_input_is_dropped_and_service_goes_on(cluster: Cluster, zctx: zmq.Context) -> None:
    c = cluster
    c.start("manager", "manager-a", "--frontend", c.ep("fa"), "--backend", c.ep("ba"))
    c.start("device", "device", "--backend", c.ep("dev"), "--connect", c.ep("ba"))
    c.start("worker", "worker-1", "--connect", c.ep("dev"))
    garbage = [[b"hello"], [b"WMP\x01", b"\x07", b"path=x"], [b"WMP\x01", b"\x03", b"\xff\xfe"], [b""] * 5]
    rogues = []
    for target in ("ba", "dev"):
        sock = zctx.socket(zmq.DEALER)
        rogues.append(sock)  # kept open: a closed socket (linger 0) drops what it queued
        sock.linger = 0
        sock.setsockopt(zmq.ROUTING_ID, b"rogue")
        sock.connect(c.ep(target))
        for frames in garbage:
            sock.send_multipart(frames)
        # Well-formed but wrong where it arrives: TAKE to a manager, DONE without a route to a device.
        sock.send_multipart(
            wire.encode(wire.make("TAKE", "rogue", payload=(b"x",), lock="1", job="1", manager="x"))
        )
        sock.send_multipart(wire.encode(wire.make("DONE", "rogue", payload=(b"x",), job="1")))
    front = zctx.socket(zmq.DEALER)
    front.linger = 0
    front.connect(c.ep("fa"))
    front.send_multipart([b"no delimiter"])
    c.wait_log("manager-a", "malformed", count=len(garbage) + 2)
    c.wait_log("manager-a", "did not give")
    c.wait_log("device", "malformed", count=len(garbage) + 2)
    sock = client(zctx, c.ep("fa"))
    sock.send_multipart([b"", b"c:1|still here"])
    assert collect(sock, {b"c:1|still here"}) == {b"c:1|still here"}
    assert len(c.events("malformed")) == 2 * len(garbage) + 4


def test_worker_killed_while_holding_jobs_the_client_retry_is_served(
    cluster: Cluster, zctx: zmq.Context
) -> None:
    c = cluster
    c.start("manager", "manager-a", "--frontend", c.ep("fa"), "--backend", c.ep("ba"))
    c.start("worker", "worker-1", "--connect", c.ep("ba"), "--capacity", "4", "--work-ms", "60000")
    sock = client(zctx, c.ep("fa"))
    want = {f"c:{i}|x".encode() for i in range(4)}
    for body in want:
        sock.send_multipart([b"", body])
    wait_for(lambda: len([e for e in c.events("wmp_take") if "pid" in e]) == 4, 15, "worker-1 to hold 4 jobs")
    c.stop("worker-1", signal.SIGKILL)
    c.start("worker", "worker-2", "--connect", c.ep("ba"), "--capacity", "2", "--work-ms", "10")
    # The protocol gives nothing back: the client's retries (same request ids) get done.
    for body in want:
        sock.send_multipart([b"", body])
    assert collect(sock, want) == want
    # A worker records `done` just after it sends the result: the client may read first.
    wait_for(lambda: len({e["rid"] for e in c.events("done")}) >= 4, 10, "4 done events")
    done_by = {e["rid"]: e["worker"] for e in c.events("done")}
    assert set(done_by.values()) == {"worker-2"} and len(done_by) == 4


def test_device_restart_loses_only_what_was_in_flight(cluster: Cluster, zctx: zmq.Context) -> None:
    c = cluster
    c.start("manager", "manager-a", "--frontend", c.ep("fa"), "--backend", c.ep("ba"))
    c.start("device", "device", "--backend", c.ep("dev"), "--connect", c.ep("ba"))
    c.start("worker", "worker-1", "--connect", c.ep("dev"), "--work-ms", "5")
    sock = client(zctx, c.ep("fa"))
    sock.send_multipart([b"", b"c:1|before"])
    assert collect(sock, {b"c:1|before"}) == {b"c:1|before"}
    assert c.stop("device") == 0  # SIGTERM: a clean exit
    c.start("device", "device", "--backend", c.ep("dev"), "--connect", c.ep("ba"))
    sock.send_multipart([b"", b"c:2|after"])
    assert collect(sock, {b"c:2|after"}) == {b"c:2|after"}


def test_worker_survives_malformed_messages(cluster: Cluster, zctx: zmq.Context) -> None:
    manager = fake_manager(zctx, cluster.ep("m"))
    cluster.start("worker", "worker-1", "--connect", cluster.ep("m"))
    address, _ = expect(manager, "READY")
    for frames in (
        [b"junk"],
        [b"WMP\x01", b"\x04", b"path=m\nlock=1"],
        [b"WMP\x01", b"\x01", b"path=m\nslots=1"],
    ):
        manager.send_multipart([address, *frames])
    manager.send_multipart([address, *wire.encode(wire.make("WAKE", "m"))])
    expect(manager, "GIVE")
    cluster.wait_log("worker-1", "malformed", count=2)
    assert cluster.running["worker-1"].popen.poll() is None
