"""Unit tests of the 7/MDP wire format: parsing (malformed frames included) and building."""

from __future__ import annotations

import pytest

from implementations.majordomo import mdp


def test_client_request_parses_service_and_body() -> None:
    msg = mdp.parse_broker_inbound([b"C", b"", b"MDPC01", b"echo", b"a", b"b"])
    assert msg == mdp.ClientRequest(b"C", "echo", [b"a", b"b"])


def test_worker_commands_parse() -> None:
    ready = mdp.parse_broker_inbound([b"W", b"", b"MDPW01", mdp.READY, b"echo"])
    assert (ready.command, ready.service, ready.name) == (mdp.READY, "echo", "READY")
    reply = mdp.parse_broker_inbound([b"W", b"", b"MDPW01", mdp.REPLY, b"C", b"", b"x", b"y"])
    assert (reply.client, reply.body) == (b"C", (b"x", b"y"))
    for command in (mdp.HEARTBEAT, mdp.DISCONNECT):
        assert mdp.parse_broker_inbound([b"W", b"", b"MDPW01", command]).command == command


@pytest.mark.parametrize(
    ("frames", "why"),
    [
        ([b"C"], "at least 3"),
        ([b"C", b"x", b"MDPC01", b"echo", b"a"], "empty delimiter"),
        ([b"C", b"", b"MDPX99", b"echo", b"a"], "unknown protocol header"),
        ([b"C", b"", b"MDPC01", b"echo"], "at least one body frame"),
        ([b"C", b"", b"MDPC01", b"\xff\xfe", b"a"], "not UTF-8"),
        ([b"C", b"", b"MDPC01", b"", b"a"], "empty service"),
        ([b"W", b"", b"MDPW01"], "without a command"),
        ([b"W", b"", b"MDPW01", b"\x09"], "unknown worker command"),
        ([b"W", b"", b"MDPW01", mdp.READY], "exactly one service"),
        ([b"W", b"", b"MDPW01", mdp.READY, b"a", b"b"], "exactly one service"),
        ([b"W", b"", b"MDPW01", mdp.REPLY, b"C", b"x"], "client address, empty frame and body"),
        ([b"W", b"", b"MDPW01", mdp.REPLY, b"C", b"x", b"body"], "not followed by an empty frame"),
        ([b"W", b"", b"MDPW01", mdp.REPLY, b"", b"", b"body"], "empty client address"),
        ([b"W", b"", b"MDPW01", mdp.HEARTBEAT, b"extra"], "takes no frames"),
    ],
)
def test_malformed_broker_inbound_is_a_protocol_error(frames: list[bytes], why: str) -> None:
    with pytest.raises(mdp.ProtocolError, match=why):
        mdp.parse_broker_inbound(frames)


def test_worker_inbound() -> None:
    req = mdp.parse_worker_inbound([b"", b"MDPW01", mdp.REQUEST, b"C", b"", b"body"])
    assert (req.command, req.client, req.body) == (mdp.REQUEST, b"C", (b"body",))
    assert mdp.parse_worker_inbound([b"", b"MDPW01", mdp.DISCONNECT]).command == mdp.DISCONNECT
    for bad in ([b"MDPW01", mdp.REQUEST], [b"", b"MDPC01", mdp.HEARTBEAT], [b"", b"MDPW01", mdp.READY, b"s"],
                [b"", b"MDPW01", mdp.REQUEST, b"C", b"body"]):  # fmt: skip
        with pytest.raises(mdp.ProtocolError):
            mdp.parse_worker_inbound(bad)


def test_builders_round_trip_through_the_parsers() -> None:
    assert mdp.client_reply(b"C", "echo", [b"a"]) == [b"C", b"", b"MDPC01", b"echo", b"a"]
    to_worker = mdp.worker_request(b"W", b"C", [b"a", b"b"])
    assert to_worker == [b"W", b"", b"MDPW01", mdp.REQUEST, b"C", b"", b"a", b"b"]
    parsed = mdp.parse_worker_inbound(to_worker[1:])
    assert (parsed.client, parsed.body) == (b"C", (b"a", b"b"))
    reply = mdp.parse_broker_inbound([b"W", *mdp.worker_reply(b"C", [b"a"])])
    assert (reply.command, reply.client, reply.body) == (mdp.REPLY, b"C", (b"a",))
    assert mdp.from_worker(mdp.READY, b"echo") == [b"", b"MDPW01", b"\x01", b"echo"]


def test_describe_is_short() -> None:
    text = mdp.describe([b"x" * 100] * 10)
    assert "+6 more" in text and len(text) < 300
