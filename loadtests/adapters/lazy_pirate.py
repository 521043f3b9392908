"""The Lazy Pirate client (zguide chapter 4): REQ, poll with a timeout, and on a timeout
close the socket, open a new one and resend, abandoning after ``retries`` resends.

A reply that carries another request's id (a stale or duplicated reply) cannot be waited
past on a REQ socket, which allows one receive per send; it is recorded as ``unexpected``
and the request is resent on a fresh socket like after a timeout.
"""

from __future__ import annotations

from typing import Any

import zmq

from harness.history import rid_of
from loadtests.adapters.base import Abandoned, ClientAdapter, Reply, RequestLog


class LazyPirateClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {"timeout_ms": 2500, "retries": 3}

    def __init__(self, endpoint: str, options: dict[str, Any], cid: str, context: zmq.Context) -> None:
        super().__init__(endpoint, options, cid, context)
        self.socket: zmq.Socket | None = None

    def _reopen(self) -> zmq.Socket:
        if self.socket is not None:
            self.socket.close(linger=0)
        self.socket = self.context.socket(zmq.REQ)
        self.socket.linger = 0
        self.socket.connect(self.endpoint)
        return self.socket

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        timeout_ms = self.options["timeout_ms"]
        socket = self.socket or self._reopen()
        for attempt in range(self.options["retries"] + 1):
            if attempt:
                socket = self._reopen()
            socket.send_multipart(body)
            log.sent()
            if socket.poll(timeout_ms, zmq.POLLIN):
                frames = socket.recv_multipart()
                if frames and rid_of(frames[0]) == log.rid:
                    return Reply(frames)
                log.unexpected(frames, "reply to another request")
                reason = "unexpected reply"
            else:
                reason = f"no reply in {timeout_ms} ms"
            if attempt < self.options["retries"]:
                log.retried(reason)
        # The socket may still get the late reply: never reuse it.
        self._reopen()
        raise Abandoned(f"no reply after {self.options['retries'] + 1} attempts ({reason})")

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None


ADAPTER = LazyPirateClient
