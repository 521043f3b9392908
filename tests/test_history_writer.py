"""The load clients' fast path: events written with shared fields are the events ``emit``
writes, checked alike; a green receive with a timeout gets a whole message or nothing, and
a green socket's waits let the other greenlets run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryError, HistoryWriter, NullWriter, read_events
from loadtests.adapters.base import GreenSocket, RequestLog, client_socket, recv_within


def test_shared_fields_write_the_same_event_as_emit(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "h.jsonl", "locust")
    cid = 'client-"7é'  # escapes, and a character JSON writes as \\u
    log = RequestLog(writer, cid, 3, f"{cid}:3", "sync")
    log.sent()
    log.emit("reply", ok=False, latency_us=12, body="é\n", body_len=2)
    writer.emit("send", src=cid, cid=cid, seq=3, rid=f"{cid}:3", kind="sync", attempt=1)
    writer.emit("reply", src=cid, cid=cid, seq=3, rid=f"{cid}:3", kind="sync", ok=False, latency_us=12,
                body="é\n", body_len=2)  # fmt: skip
    writer.close()
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    assert all(line.isascii() for line in lines)
    events = list(read_events(tmp_path / "h.jsonl"))
    assert all(isinstance(e.pop("ts"), int) for e in events)
    assert events[:2] == events[2:] and events[0]["attempt"] == 1 and events[1]["body"] == "é\n"
    assert [json.loads(line)["ev"] for line in lines] == ["send", "reply", "send", "reply"]


@pytest.mark.parametrize("writer", ["file", "null"])
def test_shared_fields_are_checked_like_any_event(tmp_path: Path, writer: str) -> None:
    w = HistoryWriter(tmp_path / "h.jsonl", "locust") if writer == "file" else NullWriter("locust")
    shared = w.shared({"cid": "c", "seq": 1, "rid": "c:1"})
    with pytest.raises(HistoryError, match="missing field"):
        w.emit_shared("send", shared, {})
    with pytest.raises(HistoryError, match="twice"):
        w.emit_shared("send", shared, {"attempt": 1, "seq": 2})
    with pytest.raises(HistoryError, match="does not take"):
        w.emit_shared("send", shared, {"attempt": 1, "latency_us": 3})
    with pytest.raises(HistoryError, match="unknown history event"):
        w.emit_shared("sned", shared, {"attempt": 1})
    w.emit_shared("send", shared, {"attempt": 1})
    w.close()
    written = list(read_events(tmp_path / "h.jsonl")) if writer == "file" else []
    assert [e["ev"] for e in written] == (["send"] if writer == "file" else [])


@pytest.mark.parametrize("green", [True, False])
def test_a_receive_within_a_timeout_gets_the_whole_message_or_none(green: bool) -> None:
    if green:
        import zmq.green as zmq_green

        ctx = zmq_green.Context()
    else:
        ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), client_socket(ctx, zmq.PAIR)
    assert isinstance(b, GreenSocket) == green
    try:
        a.bind("inproc://recv-within")
        b.connect("inproc://recv-within")
        assert recv_within(b, 20) is None
        a.send_multipart([b"one", b"", b"three"])
        assert recv_within(b, 5000) == [b"one", b"", b"three"]
        assert recv_within(b, 20) is None
    finally:
        a.close(linger=0)
        b.close(linger=0)
        ctx.term()


def test_green_receives_each_get_their_whole_timeout() -> None:
    # Thirty receives that each wait 40 ms, 1.2 s in all, under a 1 s timeout: a timer reused
    # from receive to receive would count on from where the last one stopped and strike early.
    import gevent
    import zmq.green as zmq_green

    ctx = zmq_green.Context()
    a = ctx.socket(zmq.PAIR)
    b = client_socket(ctx, zmq.PAIR)
    try:
        a.bind("inproc://each-its-timeout")
        b.connect("inproc://each-its-timeout")
        for n in range(30):
            later = gevent.spawn_later(0.04, a.send, str(n).encode())
            assert recv_within(b, 1000) == [str(n).encode()]
            later.join()
        assert recv_within(b, 20) is None
    finally:
        a.close(linger=0)
        b.close(linger=0)
        ctx.term()


def test_a_green_socket_waits_without_blocking_other_greenlets() -> None:
    # A blocking receive, and a send to a peer whose queue is full, wait for the socket while
    # the process's other greenlets run: one of them answers, or reads to make room.
    import gevent
    import zmq.green as zmq_green

    ctx = zmq_green.Context()
    a = client_socket(ctx, zmq.DEALER)
    b = client_socket(ctx, zmq.DEALER)
    try:
        for s in (a, b):
            s.sndhwm = s.rcvhwm = 1
        a.bind("inproc://waits-green")
        b.connect("inproc://waits-green")
        answer = gevent.spawn_later(0.05, a.send, b"answer")
        assert b.recv() == b"answer" and answer.dead
        sent = 0
        # Fill b's queue and a's (a reads nothing): the next send finds no room.
        while True:
            try:
                b.send(b"%d" % sent, zmq.NOBLOCK)
            except zmq.Again:
                break
            sent += 1
        drain = gevent.spawn_later(0.05, lambda: [a.recv() for _ in range(sent + 1)])
        b.send(b"%d" % sent)  # waits until the drain made room
        drain.join(timeout=5)
        assert drain.successful() and drain.value == [b"%d" % n for n in range(sent + 1)]
    finally:
        a.close(linger=0)
        b.close(linger=0)
        ctx.term()


def test_fault_events_name_their_fault_and_leave_its_parameters_to_the_plan(tmp_path: Path) -> None:
    """Before: every fault_start, fault_stop and fault_error repeated the fault's parameters
    as JSON text (``params``) that nothing read; run.json's plan holds them by fault_id."""
    from chaos.nemesis import Nemesis, PlannedFault
    from tests.doubles import FailingControl, GoneControl
    from tests.procs import wait_for

    for control, kinds in (
        (GoneControl(), ["fault_start", "fault_stop"]),
        (FailingControl(), ["fault_error"]),
    ):
        path = tmp_path / f"{type(control).__name__}.jsonl"
        history = HistoryWriter(path, "nemesis")
        planned = PlannedFault(7, 0.0, "freeze", "worker-1", "worker:random", {"duration_s": 1.0})
        nemesis = Nemesis([planned], control, history)
        nemesis.start()
        wait_for(lambda: len(list(read_events(path))) == len(kinds), 10, "the fault's events")  # noqa: B023
        nemesis.stop()
        history.close()
        events = list(read_events(path))
        assert [e["ev"] for e in events] == kinds
        assert all(e["fault_id"] == 7 and e["fault"] == "freeze" and "params" not in e for e in events)
    with pytest.raises(HistoryError):  # no longer a field of the history
        HistoryWriter(tmp_path / "w.jsonl", "nemesis").emit(
            "fault_stop", fault="kill", target="worker-1", fault_id=1, params="{}"
        )


def test_events_of_some_kinds_are_read_whatever_the_spacing(tmp_path: Path) -> None:
    """``read_events(kinds=...)``: the runner's question (did a client program complete no
    request?) answered by the history's reader, not by a grep for '"ev":"client_error"' that
    a writer spacing its JSON otherwise, or a kind named inside another event's text, fools."""
    writer = HistoryWriter(tmp_path / "locust-0.jsonl", "client-1")
    writer.emit("client_error", cid="client-1", reason="no_request", detail="never replied")
    writer.emit("abandon", cid="client-1", seq=1, rid="r1", reason="client_error seen")
    writer.close()
    with (tmp_path / "locust-0.jsonl").open("a") as fh:
        fh.write(
            '{"ts": 5, "src": "client-2", "ev": "client_error", "cid": "client-2", "reason": "no_request"}\n'
        )
        fh.write('{"ts": 6, "src": "client-3", "ev": "client_er')  # cut short
    (tmp_path / "queue.jsonl").write_text('{"ts": 1, "src": "queue", "ev": "client_error"}\n')
    found = list(read_events(tmp_path, kinds=("client_error",), pattern="locust-*.jsonl"))
    assert [(e["cid"], e["reason"]) for e in found] == [
        ("client-1", "no_request"),
        ("client-2", "no_request"),
    ]
    old_grep = [
        line
        for line in (tmp_path / "locust-0.jsonl").read_bytes().splitlines()
        if b'"ev":"client_error"' in line
    ]
    assert len(old_grep) == 1  # the spaced line was missed
    assert len(list(read_events(tmp_path))) == 4  # every kind, every file, the cut line skipped
