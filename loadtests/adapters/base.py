"""What a client adapter is: one protocol client, owned by one Locust user.

The Locust user (``loadtests/user.py``) makes each request: it numbers it, gives it a
run-unique id, builds the payload, records ``send``'s outcome (``reply`` or ``abandon``)
and fires Locust's request event. The adapter only speaks the protocol: it sends, waits,
retries as its protocol's client rule says, and tells the history what happened on the
way through the ``RequestLog`` it is handed (each attempt sent, each retry, anything
unexpected that arrived).

A synchronous adapter implements ``request``. Adapters live in ``loadtests/adapters/<name>.py``
and expose ``ADAPTER = TheClass``; a manifest names them by module name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import zmq

from harness.history import HistoryWriter, payload_for, rid_of

__all__ = ["payload_for", "rid_of"]


class RequestLog:
    """What an adapter records about the request it is working on."""

    __slots__ = ("attempts", "cid", "rid", "seq", "writer")

    def __init__(self, writer: HistoryWriter, cid: str, seq: int, rid: str) -> None:
        self.writer = writer
        self.cid = cid
        self.seq = seq
        self.rid = rid
        self.attempts = 0

    def sent(self) -> None:
        """An attempt left (the first send, or a resend after ``retried``)."""
        self.attempts += 1
        self.writer.emit(
            "send", src=self.cid, cid=self.cid, seq=self.seq, rid=self.rid, attempt=self.attempts
        )

    def retried(self, reason: str) -> None:
        """The current attempt failed (timeout, ...) and the request will be sent again."""
        self.writer.emit(
            "retry", src=self.cid, cid=self.cid, seq=self.seq, rid=self.rid,
            attempt=self.attempts + 1, reason=reason,
        )  # fmt: skip

    def unexpected(self, frames: list[bytes], detail: str) -> None:
        """Something arrived that is not the reply to this request (a stale or foreign reply)."""
        got = next((r for r in map(rid_of, frames) if r), None)
        fields: dict[str, Any] = {"detail": detail[:200]}
        if got is not None:
            fields["got_rid"] = got
        self.writer.emit("unexpected", src=self.cid, cid=self.cid, seq=self.seq, rid=self.rid, **fields)


@dataclass
class Reply:
    frames: list[bytes]  # the reply body as the application sees it (envelopes removed)
    worker: str | None = None  # which worker answered, when the protocol says


class Abandoned(Exception):
    """The client gave up on the request (its retries are spent, or the protocol refused it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Lost(Exception):
    """A client that never resends waited its reply deadline out (recorded as ``lost``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ClientAdapter(ABC):
    """One client of a protocol, with one identity, used by one user at a time."""

    #: client options and their defaults; the manifest's [client] options override them
    DEFAULTS: dict[str, Any] = {}

    def __init__(self, endpoint: str, options: dict[str, Any], cid: str, context: zmq.Context) -> None:
        unknown = set(options) - set(self.DEFAULTS)
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown client option(s) {sorted(unknown)}")
        self.endpoint = endpoint
        self.options = {**self.DEFAULTS, **options}
        self.cid = cid
        self.context = context

    @abstractmethod
    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        """Send ``body``, follow the protocol's client rule, return the reply or raise Abandoned."""

    def expected_reply(self, body: list[bytes]) -> list[bytes]:
        """The reply a correct system gives to ``body`` (echo by default)."""
        return body

    def close(self) -> None:
        """Release sockets (called when the user stops)."""


class AsyncClientAdapter(ClientAdapter):
    """A client that keeps many requests in flight on one socket (Majordomo's async client).

    The Locust user keeps up to ``options["window"]`` requests submitted and collects
    whatever ``poll`` says is finished. Replies are matched to requests by the request id
    carried in the body; the adapter applies its own timeout and retry rule inside ``poll``.
    """

    DEFAULTS: dict[str, Any] = {"window": 10}

    @abstractmethod
    def submit(self, body: list[bytes], log: RequestLog) -> None:
        """Send the first attempt of a request (calling ``log.sent()``) without waiting."""

    @abstractmethod
    def poll(self, timeout_s: float) -> list[tuple[RequestLog, Reply | Abandoned | Lost]]:
        """Wait up to ``timeout_s`` for progress; return the requests that finished."""

    def in_flight(self) -> int:
        """How many submitted requests have not finished."""
        raise NotImplementedError

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        self.submit(body, log)
        while True:
            for done_log, outcome in self.poll(0.1):
                if done_log is log:
                    if isinstance(outcome, Abandoned | Lost):
                        raise outcome
                    return outcome
