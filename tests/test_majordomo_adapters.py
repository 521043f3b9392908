"""The Majordomo client adapters against a hand-driven fake broker (a ROUTER in the test):
retries on fresh sockets, abandon, unexpected replies, matching by request id, body frames."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter, read_events
from loadtests.adapters.base import Abandoned, RequestLog
from loadtests.adapters.mdp_async import MdpAsyncClient
from loadtests.adapters.mdp_sync import MdpSyncClient
from tests.procs import wait_for


@pytest.fixture
def broker(zctx: zmq.Context) -> tuple[zmq.Socket, str]:
    sock = zctx.socket(zmq.ROUTER)
    sock.linger = 0
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    return sock, f"tcp://127.0.0.1:{port}"


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[HistoryWriter]:
    with HistoryWriter(tmp_path / "client.jsonl", "client-1") as w:
        yield w


def events(writer: HistoryWriter, ev: str) -> list[dict]:
    return [e for e in read_events(writer.path) if e["ev"] == ev]


def recv(sock: zmq.Socket, timeout_ms: int = 5000) -> list[bytes]:
    assert sock.poll(timeout_ms), "nothing arrived at the fake broker"
    return sock.recv_multipart()


def in_thread(result: dict, call) -> threading.Thread:
    """Run a blocking request beside the fake broker; its outcome lands in result["r"]."""
    thread = threading.Thread(target=lambda: result.setdefault("r", call()))
    thread.start()
    return thread


def log_for(writer: HistoryWriter, seq: int) -> RequestLog:
    return RequestLog(writer, "client-1", seq, f"client-1:{seq}")


def test_sync_resends_on_a_new_socket_after_a_timeout(zctx, broker, writer) -> None:
    sock, endpoint = broker
    client = MdpSyncClient(endpoint, {"timeout_ms": 300, "retries": 2, "body_frames": 2}, "client-1", zctx)
    body = [b"client-1:1|abc"]
    result: dict = {}
    thread = in_thread(result, lambda: client.request(body, log_for(writer, 1)))
    first = recv(sock)
    assert first[1:] == [b"", b"MDPC01", b"echo", b"client-1:1|abc", b"client-1:1|abc"]  # two body frames
    second = recv(sock)  # the first attempt is ignored: a resend, from another socket
    assert second[0] != first[0] and second[1:] == first[1:]
    sock.send_multipart([second[0], b"", b"MDPC01", b"echo", *second[4:]])
    thread.join(10)
    assert result["r"].frames == client.expected_reply(body) == [body[0], body[0]]
    assert [e["attempt"] for e in events(writer, "send")] == [1, 2]
    assert [e["attempt"] for e in events(writer, "retry")] == [2]
    client.close()


def test_sync_abandons_after_its_retries(zctx, writer) -> None:
    with zmq.Context() as other:
        sock = other.socket(zmq.ROUTER)
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        sock.close(linger=0)  # nobody listens there any more
    client = MdpSyncClient(f"tcp://127.0.0.1:{port}", {"timeout_ms": 100, "retries": 2}, "client-1", zctx)
    with pytest.raises(Abandoned, match="3 attempt"):
        client.request([b"client-1:1|x"], log_for(writer, 1))
    assert len(events(writer, "send")) == 3 and len(events(writer, "retry")) == 2
    client.close()


def test_sync_records_a_wrong_reply_and_resends(zctx, broker, writer) -> None:
    sock, endpoint = broker
    client = MdpSyncClient(endpoint, {"timeout_ms": 2000, "retries": 1}, "client-1", zctx)
    result: dict = {}
    thread = in_thread(result, lambda: client.request([b"client-1:2|x"], log_for(writer, 2)))
    first = recv(sock)
    sock.send_multipart([first[0], b"", b"MDPC01", b"echo", b"client-1:1|stale"])
    second = recv(sock)
    sock.send_multipart([second[0], b"", b"MDPC01", b"echo", b"client-1:2|x"])
    thread.join(10)
    assert result["r"].frames == [b"client-1:2|x"]
    unexpected = events(writer, "unexpected")
    assert len(unexpected) == 1 and unexpected[0]["got_rid"] == "client-1:1"
    # The evidence: what arrived, the protocol's frames included (the separator between frames).
    assert unexpected[0]["body"] == "MDPC01\u241fecho\u241fclient-1:1|stale"
    assert unexpected[0]["body_len"] == len(b"MDPC01echoclient-1:1|stale")


def test_async_matches_replies_by_request_id_and_flags_late_duplicates(zctx, broker, writer) -> None:
    sock, endpoint = broker
    client = MdpAsyncClient(endpoint, {"timeout_ms": 5000, "mmi_every": 3}, "client-1", zctx)
    for seq in (1, 2, 3):
        client.submit([f"client-1:{seq}|x".encode()], log_for(writer, seq))
    got = [recv(sock) for _ in range(4)]  # three requests and one mmi.service probe
    requests = [m for m in got if m[3] == b"echo"]
    probes = [m for m in got if m[3] == b"mmi.service"]
    assert len(requests) == 3 and probes and probes[0][4:] == [b"echo"]
    assert probes[0][0] != requests[0][0]  # asked on a side socket, so answers never mix with replies
    for m in reversed(requests):  # answered in reverse order
        sock.send_multipart([m[0], b"", b"MDPC01", b"echo", m[4]])
    sock.send_multipart([probes[0][0], b"", b"MDPC01", b"mmi.service", b"404"])
    done: dict[str, list[bytes]] = {}
    wait_for(lambda: done.update({log.rid: r.frames for log, r in client.poll(0.2)}) or len(done) == 3, 10,
             "three replies")  # fmt: skip
    assert done == {f"client-1:{s}": [f"client-1:{s}|x".encode()] for s in (1, 2, 3)}
    assert client.in_flight() == 0
    wait_for(lambda: client.poll(0.1) == [] and events(writer, "mmi_answer"), 10, "the MMI answer recorded")
    (answer,) = events(writer, "mmi_answer")
    assert (answer["cid"], answer["service"], answer["code"]) == ("client-1", "echo", 404)
    assert 0 <= answer["latency_us"] < 10_000_000
    sock.send_multipart([requests[0][0], b"", b"MDPC01", b"echo", requests[0][4]])  # a duplicate
    wait_for(lambda: client.poll(0.2) == [] and events(writer, "unexpected"), 10, "the duplicate recorded")
    assert events(writer, "unexpected")[0]["got_rid"] == "client-1:1"
    client.close()


def test_async_resends_on_the_same_socket_then_abandons(zctx, broker, writer) -> None:
    sock, endpoint = broker
    client = MdpAsyncClient(endpoint, {"timeout_ms": 200, "retries": 1}, "client-1", zctx)
    client.submit([b"client-1:1|x"], log_for(writer, 1))
    first = recv(sock)
    outcome: list = []
    wait_for(lambda: outcome.extend(client.poll(0.1)) or outcome, 10, "the abandon")
    assert recv(sock) == first  # the resend: same socket, same identity, same request
    assert isinstance(outcome[0][1], Abandoned) and "2 attempt" in outcome[0][1].reason
    assert [e["attempt"] for e in events(writer, "send")] == [1, 2]
    client.close()


def test_sync_records_each_mmi_answer_when_it_arrives_while_waiting_for_a_reply(zctx, broker, writer) -> None:
    sock, endpoint = broker
    client = MdpSyncClient(endpoint, {"timeout_ms": 5000, "mmi_every": 1}, "client-1", zctx)
    result: dict = {}
    thread = in_thread(result, lambda: client.request([b"client-1:1|x"], log_for(writer, 1)))
    got = [recv(sock) for _ in range(2)]
    (probe,) = [m for m in got if m[3] == b"mmi.service"]
    (request,) = [m for m in got if m[3] == b"echo"]
    sock.send_multipart([probe[0], b"", b"MDPC01", b"mmi.service", b"200"])
    wait_for(lambda: events(writer, "mmi_answer"), 10, "the answer recorded before the reply came")
    sock.send_multipart([request[0], b"", b"MDPC01", b"echo", request[4]])
    thread.join(10)
    assert result["r"].frames == [b"client-1:1|x"]
    (answer,) = events(writer, "mmi_answer")
    assert answer["code"] == 200 and "detail" not in answer
    client.close()


def test_a_lost_mmi_query_is_dropped_with_its_socket_so_later_answers_keep_their_time(
    zctx, broker, writer
) -> None:
    from loadtests.adapters.mdp_sync import MmiProbe

    sock, endpoint = broker
    probe = MmiProbe(zctx, endpoint, "echo", timeout_ms=100)
    probe.ask(writer, "client-1")
    lost = recv(sock)  # never answered: the broker died with it
    wait_for(lambda: probe.asked and time.time_ns() - probe.asked[0] > 100_000_000, 5, "the query to age")
    probe.ask(writer, "client-1")
    second = recv(sock)
    assert second[0] != lost[0]  # a new socket
    sock.send_multipart([lost[0], b"", b"MDPC01", b"mmi.service", b"200"])  # too late: nobody hears it
    sock.send_multipart([second[0], b"", b"MDPC01", b"mmi.service", b"garbage"])
    wait_for(lambda: probe.collect(writer, "client-1") or events(writer, "mmi_answer"), 5, "one answer")
    (answer,) = events(writer, "mmi_answer")
    assert answer["code"] == 0 and "malformed MMI answer" in answer["detail"]
    assert answer["latency_us"] < 5_000_000
    probe.close()


def test_waiting_on_reply_and_mmi_answer_lets_other_locust_users_run(tmp_path, writer) -> None:
    """Inside Locust (gevent, zmq.green) the wait on both sockets must yield to other users."""
    import gevent
    import zmq.green

    green = zmq.green.Context()
    with zmq.Context() as other:
        sock = other.socket(zmq.ROUTER)
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        sock.close(linger=0)  # nobody answers: the client waits its whole timeout
    client = MdpSyncClient(
        f"tcp://127.0.0.1:{port}", {"timeout_ms": 400, "retries": 0, "mmi_every": 1}, "client-1", green
    )
    ticks = []

    def other_user() -> None:
        while len(ticks) < 1000:
            ticks.append(1)
            gevent.sleep(0.01)

    def request() -> None:
        with pytest.raises(Abandoned):
            client.request([b"client-1:1|x"], log_for(writer, 1))

    beside = gevent.spawn(other_user)
    waiting = gevent.spawn(request)
    waiting.join(10)
    beside.kill()
    assert waiting.successful(), waiting.exception
    assert len(ticks) >= 10  # the other user ran during the 400 ms wait
    client.close()
    green.destroy(linger=0)
