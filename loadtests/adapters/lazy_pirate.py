"""The Lazy Pirate client (zguide chapter 4): REQ, poll with a timeout, and on a timeout
close the socket, open a new one and resend, abandoning after ``retries`` resends.

Given several endpoints it fails over (the guide's simplest Freelance client, "sequential
failover"): it stays on the endpoint that answered last, and each resend after a timeout
goes to the next endpoint of the list, round-robin. Each send says which endpoint it went to,
and the reply which one answered.
With ``settle_ms`` it pauses that long before each resend (the guide's Binary Star client,
bstarcli: 1000 ms timeout, then 2000 ms to let the pair settle, so that its resend reaches
the passive server after the silent active one has expired there and counts as a vote).

A reply that carries another request's id (a stale or duplicated reply) cannot be waited
past on a REQ socket, which allows one receive per send; it is recorded as ``unexpected``
and the request is resent on a fresh socket like after a timeout.

``reply_deadline_s`` > 0 makes a client that never resends (as ``mdp_async``'s option of
that name): each request is sent once and waited for up to that many seconds; with no
reply by then it is recorded as ``lost`` (not abandoned). Retries cannot hide a request
the server side dropped, so ``no_lost`` sees it (the manifest's ``requeue`` promise says
whether a loss during a fault counts). ``timeout_ms``, ``retries`` and ``settle_ms`` are
then unused. The socket is a DEALER that sends and receives what a REQ socket does (an
empty frame, then the body), because it must wait past a reply that is not its request's
(recorded as ``unexpected``, such as a late reply to a request it recorded lost) instead of
resending; it is kept from one request to the next. Given several endpoints, the request
after a lost one goes to the next endpoint, on a new socket (a late reply to the lost one
is then not seen): a lost request is never resent, but a client
that stayed on a server that had failed over was never served again (explore,
stall-hold-star's correct twin: the primary restarted while the backup was frozen, and
clients that asked the primary, passive now, after their deadlines were "not recovered").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import zmq

from contract.payload import rid_of
from loadtests.adapters.base import (
    Abandoned,
    ClientAdapter,
    Lost,
    Reply,
    RequestLog,
    client_socket,
    recv_within,
    send_message,
)


class LazyPirateClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {"timeout_ms": 2500, "retries": 3, "settle_ms": 0, "reply_deadline_s": 0.0}
    MAX_ENDPOINTS = None
    NO_RESEND_DEADLINE = True
    SUMMARY = (
        "Lazy Pirate client (REQ, timeout, new socket, resend); fails over across several endpoints "
        "(settle_ms: a pause before each resend, as Binary Star's client); reply_deadline_s > 0: "
        "never resends, records a request unanswered by then as lost"
    )

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        problems = super().check_options(options)
        for key in ("timeout_ms", "retries", "settle_ms"):
            value = options.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                problems.append((key, f"must be at least 0, got {value}"))
        return problems

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.socket: zmq.Socket | None = None
        self.current = 0  # index of the endpoint the socket is connected to
        self.deadline_s = float(self.options["reply_deadline_s"])  # > 0: never resend
        self.timeout_ms = self.options["timeout_ms"]
        self.retries = self.options["retries"]

    def _next_endpoint(self) -> None:
        """Close the socket and move on to the next endpoint, round-robin."""
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None
        self.current = (self.current + 1) % len(self.endpoints)

    def _reopen(self, *, fail_over: bool = False) -> zmq.Socket:
        if fail_over:
            self._next_endpoint()
        elif self.socket is not None:
            self.socket.close(linger=0)
        self.socket = client_socket(self.context, zmq.REQ)
        self.socket.linger = 0
        self.socket.connect(self.endpoints[self.current])
        return self.socket

    def _where(self) -> str | None:
        """The endpoint an attempt goes to, recorded on its ``send`` when there are several
        to choose from (steady_state tells a new client's first request that found the
        serving one of a failover pair by it)."""
        return self.endpoints[self.current] if len(self.endpoints) > 1 else None

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        if self.deadline_s:
            return self._request_once(body, log)
        socket = self.socket or self._reopen()
        retries = self.retries
        for attempt in range(retries + 1):
            if attempt:
                if self.options["settle_ms"]:
                    time.sleep(self.options["settle_ms"] / 1000)  # gevent's sleep under Locust
                socket = self._reopen(fail_over=True)
            send_message(socket, body)
            log.sent(self._where())
            frames = recv_within(socket, self.timeout_ms)
            if frames is not None:
                if rid_of(frames[0]) == log.rid:
                    return Reply(frames, endpoint=self.endpoints[self.current])
                log.unexpected(frames, "reply to another request")
                reason = "unexpected reply"
            else:
                reason = f"no reply in {self.timeout_ms} ms"
            if attempt < retries:
                log.retried(reason)
        # The socket may still get the late reply: never reuse it.
        self._reopen(fail_over=True)
        raise Abandoned(f"no reply after {retries + 1} attempts ({reason})")

    def _request_once(self, body: list[bytes], log: RequestLog) -> Reply:
        """Send once, wait for this request's reply until the deadline, else raise Lost."""
        if self.socket is None:
            self.socket = client_socket(self.context, zmq.DEALER)
            self.socket.linger = 0
            self.socket.connect(self.endpoints[self.current])
        self.socket.send_multipart([b"", *body])
        log.sent(self._where())
        deadline = time.monotonic() + self.deadline_s
        while (left := deadline - time.monotonic()) > 0:
            frames = recv_within(self.socket, left * 1000)
            if frames is None:
                break
            frames = frames[1:] if frames and frames[0] == b"" else frames
            if frames and rid_of(frames[0]) == log.rid:
                return Reply(frames, endpoint=self.endpoints[self.current])
            log.unexpected(frames, "reply to another request")
        if len(self.endpoints) > 1:  # the next request tries the next server
            self._next_endpoint()
        raise Lost(f"no reply within the {self.deadline_s:g} s reply deadline")

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None


ADAPTER = LazyPirateClient
