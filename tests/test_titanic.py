"""Titanic (implementations/titanic): its store, and the server with real processes.

The integration test stores requests while no worker serves their service, kills the
Titanic server with SIGKILL, starts it again on the same store, and only then starts a
worker: every acknowledged request is executed and its reply obtainable; closed uuids
stay closed across a further restart; malformed requests get an answer and harm nothing
(they reach Titanic only as MDP requests through the broker, whose own malformed-input
handling tests/test_majordomo_broker.py covers).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter, read_events
from implementations.titanic.store import Store, decode, encode
from loadtests.adapters.base import RequestLog
from loadtests.adapters.titanic import TitanicClient
from tests.procs import Proc, Procs, wait_for

MDPC01 = b"MDPC01"

# --- the store --------------------------------------------------------------------------


def test_store_round_trip_reload_and_close(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.put_request("echo", [b"one", b""])
    b = store.put_request("echo", [b"two"])
    assert store.reply(a) == ("300", []) and store.reply("0" * 32) == ("400", [])
    assert store.reply("../../etc/passwd") == ("400", [])  # never a path from client text
    assert store.put_reply(a, [b"ONE"])
    assert not list(tmp_path.glob("*.tmp"))
    # A new process finds what is stored: the replied request is not dispatched again.
    again = Store(tmp_path)
    assert list(again.pending) == [(b, "echo")]
    assert again.reply(a) == ("200", [b"ONE"])
    assert again.next_pending() == (b, "echo", [b"two"])
    again.close(a)
    again.close(a)  # idempotent
    again.close("not-a-uuid")
    assert again.reply(a) == ("400", []) and not again.put_reply(a, [b"late"])
    assert Store(tmp_path).reply(a) == ("400", [])


def test_store_drops_half_written_and_foreign_files(tmp_path: Path) -> None:
    (tmp_path / f"{'a' * 32}.req.tmp").write_bytes(b"TSP1")  # a crash during a write
    (tmp_path / f"{'b' * 32}.req").write_bytes(b"garbage")
    (tmp_path / f"{'c' * 32}.req").write_bytes(encode([b"echo", b"x"]))
    store = Store(tmp_path)
    assert list(store.pending) == [("c" * 32, "echo")]
    assert (tmp_path / f"{'b' * 32}.req.bad").exists() and not list(tmp_path.glob("*.tmp"))
    assert decode(encode([b"", b"\x00" * 5])) == [b"", b"\x00" * 5]


# --- the server with real processes ------------------------------------------------------


class Titanic:
    def __init__(self, procs: Procs, store: Path) -> None:
        self.procs = procs
        self.store = store
        self.frontend, self.backend = procs.endpoint(), procs.endpoint()
        self.broker = procs.python(
            "broker", "implementations.majordomo.broker", "--frontend", self.frontend,
            "--backend", self.backend, "--heartbeat-ms", "300", "--request-expiry-ms", "60000",
        )  # fmt: skip
        self.broker.wait_log("ready:")
        self.starts = 0

    def start_server(self, module: str = "implementations.titanic.server", timeout_ms: int = 2000) -> Proc:
        self.starts += 1
        server = self.procs.python(
            f"titanic-{self.starts}", module, "--backend", self.backend,
            "--frontend", self.frontend, "--storage", str(self.store), "--heartbeat-ms", "300",
            "--dispatch-timeout-ms", str(timeout_ms),
        )  # fmt: skip
        server.wait_log("titanic server ready")
        return server


@pytest.fixture
def titanic(procs: Procs, tmp_path: Path) -> Iterator[Titanic]:
    yield Titanic(procs, tmp_path / "store")


def call(
    zctx: zmq.Context, endpoint: str, service: str, *frames: bytes, timeout: float = 10.0
) -> list[bytes]:
    """One MDP request, resent on a new socket until answered (the server may be restarting)."""

    def attempt() -> list[bytes] | None:
        with zctx.socket(zmq.REQ) as socket:
            socket.linger = 0
            socket.connect(endpoint)
            socket.send_multipart([MDPC01, service.encode(), *frames])
            if socket.poll(1000):
                reply = socket.recv_multipart()
                assert reply[:2] == [MDPC01, service.encode()]
                return reply[2:]
        return None

    return wait_for(attempt, timeout, f"an answer from {service}")  # type: ignore[return-value]


def test_acknowledged_requests_survive_a_kill_of_the_server(titanic: Titanic, zctx: zmq.Context) -> None:
    server = titanic.start_server()
    bodies = [f"client-1:{i}|payload-{i}".encode() for i in range(5)]
    uuids = []
    for body in bodies:
        status, uuid = call(zctx, titanic.frontend, "titanic.request", b"echo", body)
        assert status == b"200" and len(uuid) == 32
        uuids.append(uuid)
    # No worker serves echo yet: every request is stored and pending.
    assert all(call(zctx, titanic.frontend, "titanic.reply", u) == [b"300"] for u in uuids)
    server.signal(signal.SIGKILL)
    server.popen.wait(5)
    titanic.start_server()
    worker = titanic.procs.python(
        "worker", "implementations.majordomo.worker", "--connect", titanic.backend,
        "--identity", "worker-1", "--heartbeat-ms", "300",
    )  # fmt: skip
    worker.wait_log("ready:")

    def replied(uuid: bytes) -> list[bytes] | None:
        answer = call(zctx, titanic.frontend, "titanic.reply", uuid)
        return answer if answer[0] == b"200" else None

    for uuid, body in zip(uuids, bodies, strict=True):
        assert wait_for(lambda u=uuid: replied(u), 15, f"the reply of {uuid!r}") == [b"200", body]
    assert call(zctx, titanic.frontend, "titanic.close", uuids[0]) == [b"200"]
    assert call(zctx, titanic.frontend, "titanic.close", b"f" * 32) == [b"200"]  # unknown: still 200
    assert call(zctx, titanic.frontend, "titanic.reply", uuids[0]) == [b"400"]
    # Closed stays closed, replied stays replied, across another restart.
    titanic.procs.started[-2].signal(signal.SIGKILL)
    titanic.start_server()
    assert call(zctx, titanic.frontend, "titanic.reply", uuids[0]) == [b"400"]
    assert call(zctx, titanic.frontend, "titanic.reply", uuids[1]) == [b"200", bodies[1]]
    # The store holds the unclosed requests with their replies, nothing of the closed one.
    assert sorted(os.listdir(titanic.store)) == sorted(
        f"{u.decode()}.{x}" for u in uuids[1:] for x in ("req", "rep")
    )


def test_the_skip_keeps_order_and_passes_over_services(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a, b, c = (store.put_request(service, [b"x"]) for service in ("nobody", "nobody", "echo"))
    assert store.next_pending(skip={"nobody"}) == (c, "echo", [b"x"])
    assert store.next_pending(skip={"nobody"}) is None
    assert [store.next_pending()[0], store.next_pending()[0]] == [a, b]


@pytest.mark.slow
def test_a_silent_service_does_not_hold_every_dispatch_slot(titanic: Titanic, zctx: zmq.Context) -> None:
    """Requests for a service nobody serves time out once; then they take one slot at a time,
    and a request for a working service is dispatched at once instead of behind them."""
    timeout_ms = 4000
    server = titanic.start_server(timeout_ms=timeout_ms)
    titanic.procs.python(
        "worker", "implementations.majordomo.worker", "--connect", titanic.backend,
        "--identity", "worker-1", "--heartbeat-ms", "300",
    ).wait_log("ready:")  # fmt: skip
    for _ in range(8):  # twice the window (4)
        assert call(zctx, titanic.frontend, "titanic.request", b"nobody", b"x")[0] == b"200"
    server.wait_log("no reply for .* from nobody", timeout=timeout_ms / 1000 + 10)
    started = time.monotonic()
    uuid = call(zctx, titanic.frontend, "titanic.request", b"echo", b"client-1:1|x")[1]
    wait_for(lambda: call(zctx, titanic.frontend, "titanic.reply", uuid)[0] == b"200", 10, "the echo reply")
    # Behind four requests for nobody it would wait for their timeout (4 s) first.
    assert time.monotonic() - started < timeout_ms / 1000 / 2


def test_the_write_behind_server_forgets_acknowledged_requests(titanic: Titanic, zctx: zmq.Context) -> None:
    """The faulty subject of tests/faulty_titanic really loses what it acknowledged."""
    faulty = "tests.faulty_titanic.server"
    server = titanic.start_server(faulty)
    status, uuid = call(zctx, titanic.frontend, "titanic.request", b"echo", b"client-1:1|x")
    assert status == b"200" and call(zctx, titanic.frontend, "titanic.reply", uuid) == [b"300"]
    server.signal(signal.SIGKILL)
    server.popen.wait(5)
    titanic.start_server(faulty)
    assert call(zctx, titanic.frontend, "titanic.reply", uuid) == [b"400"]


def test_malformed_requests_are_answered_and_harm_nothing(titanic: Titanic, zctx: zmq.Context) -> None:
    server = titanic.start_server()
    for service, frames, want in [
        ("titanic.request", [b"echo"], b"400"),
        ("titanic.request", [b"\xff\xfe", b"x"], b"400"),
        ("titanic.request", [b"titanic.reply", b"x"], b"400"),
        ("titanic.reply", [b"a", b"b"], b"400"),
        ("titanic.reply", [b"\xff" * 40], b"400"),
        ("titanic.close", [b"a", b"b"], b"400"),
        ("titanic.close", [b"../x"], b"200"),  # not a uuid it holds: closing it is a no-op
    ]:
        assert call(zctx, titanic.frontend, service, *frames)[0][:3] == want, (service, frames)
    assert call(zctx, titanic.frontend, "titanic.request", b"echo", b"client-1:1|x")[0] == b"200"
    assert server.popen.poll() is None


def test_the_client_adapter_records_the_whole_cycle(
    titanic: Titanic, zctx: zmq.Context, tmp_path: Path
) -> None:
    """The Locust adapter against the real server: ticket, polls, reply, close, probes."""
    titanic.start_server()
    titanic.procs.python(
        "worker", "implementations.majordomo.worker", "--connect", titanic.backend,
        "--identity", "worker-1", "--heartbeat-ms", "300", "--work-ms", "100",
    ).wait_log("ready:")  # fmt: skip
    client = TitanicClient(titanic.frontend, {"probe_every": 2, "poll_ms": 20}, "client-1", zctx)
    with HistoryWriter(tmp_path / "client.jsonl", "client-1") as writer:
        for seq in (1, 2, 3):
            body = [f"client-1:{seq}|x".encode()]
            assert client.request(body, RequestLog(writer, "client-1", seq, f"client-1:{seq}")).frames == body
        client.close()
    events = list(read_events(writer.path))
    kinds = [e["ev"] for e in events if e.get("seq") == 1]
    assert kinds[:2] == ["send", "ticket"] and kinds.count("send") == 1
    answers = [(e["service"], e["code"], e.get("probe")) for e in events if e["ev"] == "ticket_answer"]
    assert ("titanic.reply", 300, None) in answers  # 100 ms of work: at least one poll finds it pending
    assert answers.count(("titanic.close", 200, None)) == 3
    # The probes before request 2: a forged uuid, and the uuid closed after request 1; both unknown.
    assert ("titanic.reply", 400, "forged") in answers and ("titanic.reply", 400, "closed") in answers
