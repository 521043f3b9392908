"""A synchronous dwork API client (REQ, Lazy Pirate style): one QueryMsg out, one back.

Used by the worker and the monitor roles, and by the load adapter. On a timeout the REQ
socket is closed (linger 0) and a fresh one opened, so the next request can go out; the
caller decides whether to resend.
"""

from __future__ import annotations

import zmq

from implementations.dwork import messages as m


class Timeout(Exception):
    """No reply within the timeout (the socket has been replaced)."""


class ApiClient:
    def __init__(self, context: zmq.Context, endpoint: str, timeout_ms: int) -> None:
        self.context = context
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self.sock: zmq.Socket | None = None

    def _open(self) -> zmq.Socket:
        self.close()
        self.sock = self.context.socket(zmq.REQ)
        self.sock.linger = 0
        self.sock.connect(self.endpoint)
        return self.sock

    def call(self, req: m.QueryMsg, timeout_ms: int | None = None) -> m.QueryMsg:
        """Send ``req``, return the reply; Timeout (socket replaced) or IllFormed (a garbled reply)."""
        sock = self.sock or self._open()
        sock.send(req.SerializeToString())
        if not sock.poll(self.timeout_ms if timeout_ms is None else timeout_ms, zmq.POLLIN):
            self._open()
            raise Timeout(f"no reply to {m.type_name(req.type)} in {self.timeout_ms} ms")
        return m.parse_reply(sock.recv())

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(linger=0)
            self.sock = None
