"""The PING/PONG dialogue's messages: how they are framed, and how received frames are read.

Control words are ASCII frames (``READY``, ``PING``, ``PONG``); a job and its result are
one frame each. Every ``parse_*`` function takes the frames a socket handed over and
either returns what they mean or raises ``Malformed`` with a description: the caller logs
it, records a ``malformed`` event and drops the message, so no input can crash a peer.
"""

from __future__ import annotations

from dataclasses import dataclass

from implementations.runtime import describe

READY = b"READY"
PING = b"PING"
PONG = b"PONG"
EMPTY = b""
CONTROL_WORDS = frozenset({READY, PING, PONG})


class Malformed(ValueError):
    """Frames that are not a message of the dialogue."""


@dataclass(frozen=True)
class FromWorker:
    """A message the broker's backend received: ``kind`` is ready, ping or result."""

    worker: bytes
    kind: str
    body: bytes = b""


def parse_from_worker(frames: list[bytes]) -> FromWorker:
    """``[worker_id, "", READY | PING | result]`` as the broker's ROUTER sees it."""
    if len(frames) != 3 or frames[1] != EMPTY or not frames[0]:
        raise Malformed(f"expected [worker_id, '', message], got {len(frames)} frame(s): {describe(frames)}")
    worker, _, body = frames
    if body == READY:
        return FromWorker(worker, "ready")
    if body == PING:
        return FromWorker(worker, "ping")
    return FromWorker(worker, "result", body)


@dataclass(frozen=True)
class FromClient:
    client: bytes
    job: bytes


def parse_from_client(frames: list[bytes]) -> FromClient:
    """``[client_id, "", job]`` as the broker's frontend ROUTER sees a REQ client's request."""
    if len(frames) != 3 or frames[1] != EMPTY or not frames[0]:
        raise Malformed(f"expected [client_id, '', job], got {len(frames)} frame(s): {describe(frames)}")
    if frames[2] in CONTROL_WORDS:
        # A worker reads a job PONG as the broker's PONG, and the broker reads an echoed READY
        # or PING as the worker's: such a job wedges its worker until it is expired.
        raise Malformed(f"a job whose body is the control word {frames[2].decode()} cannot be carried")
    return FromClient(frames[0], frames[2])


@dataclass(frozen=True)
class FromBroker:
    """What a worker's DEALER received: a PONG, or a job (anything else that is one frame)."""

    kind: str  # "pong" or "job"
    job: bytes = b""


def parse_from_broker(frames: list[bytes]) -> FromBroker:
    """``["", PONG]`` or ``["", job]`` as the worker's DEALER sees it."""
    if len(frames) != 2 or frames[0] != EMPTY:
        raise Malformed(f"expected ['', PONG or job], got {len(frames)} frame(s): {describe(frames)}")
    if frames[1] == PONG:
        return FromBroker("pong")
    return FromBroker("job", frames[1])


def to_broker(body: bytes) -> list[bytes]:
    """A worker's message (READY, PING or a result) on its DEALER."""
    return [EMPTY, body]


def to_worker(worker: bytes, body: bytes) -> list[bytes]:
    """A broker's message (PONG or a job) to one worker through the backend ROUTER."""
    return [worker, EMPTY, body]


def to_client(client: bytes, result: bytes) -> list[bytes]:
    """A result for the REQ client that sent the job, through the frontend ROUTER."""
    return [client, EMPTY, result]
