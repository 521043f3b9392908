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
