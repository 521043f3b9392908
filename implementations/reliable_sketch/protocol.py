"""The sketch's messages: LRU framing between REQ clients, the queue and REQ servers.

A server's REQ says ``READY`` (one frame) when it starts; the queue sends it
``[server_id, "", client_id, "", body...]``, which its REQ hands over as
``[client_id, "", body...]``, and the server answers with the same envelope. Every
``parse_*`` function returns what the frames mean or raises ``Malformed``; callers log,
record ``malformed`` and drop (or, for a REQ server that must answer, say READY again).
"""

from __future__ import annotations

from dataclasses import dataclass

from implementations.runtime import describe

READY = b"READY"
EMPTY = b""


class Malformed(ValueError):
    """Frames that are not a message of the sketch."""


@dataclass(frozen=True)
class Request:
    """A client's request: who sent it (the frontend ROUTER's identity) and its body."""

    client: bytes
    body: tuple[bytes, ...]


def parse_request(frames: list[bytes]) -> Request:
    """``[client_id, "", body...]``: a request at the frontend, or at a server's REQ."""
    if len(frames) < 3 or frames[1] != EMPTY or not frames[0]:
        raise Malformed(f"expected [client_id, '', body...], got {len(frames)} frame(s): {describe(frames)}")
    return Request(frames[0], tuple(frames[2:]))


@dataclass(frozen=True)
class FromServer:
    """What the backend ROUTER received: ``READY``, or a reply for ``client``."""

    server: bytes
    kind: str  # "ready" or "reply"
    client: bytes = b""
    body: tuple[bytes, ...] = ()


def parse_from_server(frames: list[bytes]) -> FromServer:
    """``[server_id, "", READY]`` or ``[server_id, "", client_id, "", body...]``."""
    if len(frames) >= 3 and frames[1] == EMPTY and frames[0]:
        if len(frames) == 3 and frames[2] == READY:
            return FromServer(frames[0], "ready")
        if len(frames) >= 5 and frames[3] == EMPTY and frames[2]:
            return FromServer(frames[0], "reply", frames[2], tuple(frames[4:]))
    raise Malformed(
        f"expected [server_id, '', READY] or [server_id, '', client_id, '', body...], "
        f"got {len(frames)} frame(s): {describe(frames)}"
    )


def to_server(server: bytes, request: Request) -> list[bytes]:
    return [server, EMPTY, request.client, EMPTY, *request.body]


def to_client(client: bytes, body: tuple[bytes, ...]) -> list[bytes]:
    return [client, EMPTY, *body]


def reply(request: Request, body: tuple[bytes, ...]) -> list[bytes]:
    """A server's answer on its REQ (the socket adds the empty delimiter)."""
    return [request.client, EMPTY, *body]
