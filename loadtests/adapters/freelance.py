"""The Freelance client (zguide chapter 4, 10/FLP model 3): one ROUTER socket connected
to every server, pings to know which are alive, each request to one server at a time
with failover, replies matched by sequence.

A server's identity is the endpoint the client connected to (10/FLP), so the client
addresses a server by its endpoint string. The request is ``[server, sequence, body...]``
(the sequence is the request's ``seq``, the control frame); the server returns the control
frame and the body. ``PING`` (one frame) is answered with ``PONG``.

Which server gets a request: the first alive one in the order of the endpoints. A server
is alive once anything came from it (a PONG or a reply) and stays so while it keeps
talking: a server silent for ``ping_interval_ms`` is pinged, and one silent for
``server_ttl_ms`` is dead until it talks again. A request unanswered after ``timeout_ms``
makes its server suspect (dead until it talks again) and goes to the next alive server
(a retry), up to ``retries`` times; with no server alive the request waits for one
within the same budget (timeout x attempts) and is abandoned after it.

Where it improves on the guide's flcliapi (which resends every second to the head of its
list and drops a server only after 6 s of silence, so a dead first server stalls every
request until then): the socket is ROUTER_MANDATORY and IMMEDIATE, so a send to a
server with no connection (killed, not yet started) fails at once instead of vanishing or
waiting in a queue for the server's next incarnation (which would run it long after the
client gave up on it), and the client fails over on each request's own timeout rather
than on the server's TTL.

Replies are matched by sequence: one for another sequence (a late answer from a server
it failed over from, or a duplicate) is discarded and recorded as ``unexpected`` with the
endpoint it came from. Every ``send`` records the endpoint it went to, every ``reply``
the endpoint that answered.

The guide's model 1 (a REQ per attempt, the servers in turn) is the ``lazy_pirate``
adapter given several endpoints: it works against the same servers (their echo keeps
the REQ envelope). Model 2 (each request to every server, first reply wins) is not
offered: its losing replies would fill the history with discarded duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from loadtests.adapters.base import Abandoned, ClientAdapter, Reply, RequestLog

PING, PONG = b"PING", b"PONG"
#: How soon a ping is tried again when the server has no connection yet (a local check,
#: it costs nothing on the wire): a server that comes up is found this quickly.
UNCONNECTED_RETRY_S = 0.05


@dataclass
class _Server:
    address: str
    identity: bytes
    alive: bool = False
    heard: float = 0.0  # monotonic time anything last came from it
    ping_at: float = 0.0  # when to ping it next


class FreelanceClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {
        "timeout_ms": 1000,
        "retries": 2,
        "ping_interval_ms": 500,
        "server_ttl_ms": 1500,
    }
    MAX_ENDPOINTS = None
    SUMMARY = (
        "Freelance model 3 client: ROUTER to every server, pings, one server at a time with "
        "failover, replies matched by sequence"
    )

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        problems = super().check_options(options)
        for key in ("timeout_ms", "ping_interval_ms", "server_ttl_ms"):
            value = options.get(key, cls.DEFAULTS[key])
            if isinstance(value, int) and value < 1:
                problems.append((key, f"must be at least 1, got {value}"))
        retries = options.get("retries", 0)
        if isinstance(retries, int) and retries < 0:
            problems.append(("retries", f"must be at least 0, got {retries}"))
        return problems

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.servers = [_Server(a, a.encode()) for a in self.endpoints]
        self.by_identity = {s.identity: s for s in self.servers}
        self.socket = context.socket(zmq.ROUTER)
        self.socket.linger = 0
        self.socket.router_mandatory = 1  # a send to a server with no connection fails at once
        # ... also once its connection is gone: without IMMEDIATE the pipe outlives it and
        # queues requests for a burst to the server's next incarnation.
        self.socket.immediate = 1
        self.socket.router_handover = 1  # a restarted server's new connection takes its name over
        for address in self.endpoints:
            self.socket.connect(address)
        self.ping_s = self.options["ping_interval_ms"] / 1000
        self.ttl_s = self.options["server_ttl_ms"] / 1000
        self.timeout_s = self.options["timeout_ms"] / 1000

    # -- the servers ---------------------------------------------------------------------

    def _send(self, server: _Server, frames: list[bytes]) -> bool:
        """Hand ``frames`` to ``server``; False (and the server dead) if it has no connection."""
        try:
            self.socket.send_multipart([server.identity, *frames], zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            if exc.errno not in (zmq.EHOSTUNREACH, zmq.EAGAIN):
                raise
            server.alive = False
            return False
        return True

    def _tend(self, now: float) -> float:
        """Expire silent servers and ping the quiet ones; the time of the next ping due."""
        for server in self.servers:
            if server.alive and now - server.heard >= self.ttl_s:
                server.alive = False
            if now >= server.ping_at:
                sent = self._send(server, [PING])
                server.ping_at = max(server.heard, now) + self.ping_s if sent else now + UNCONNECTED_RETRY_S
        return min(s.ping_at for s in self.servers)

    def _alive(self) -> list[_Server]:
        return [s for s in self.servers if s.alive]

    # -- requests ------------------------------------------------------------------------

    def _receive(self, control: bytes, log: RequestLog) -> tuple[list[bytes], _Server] | None:
        """Take what has arrived; the reply with ``control`` (and who sent it) if it came."""
        while True:
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return None
            server = self.by_identity.get(frames[0])
            if server is None or len(frames) < 2:
                continue  # not one of our servers, or not FLP: nothing to take from it
            server.alive, server.heard = True, time.monotonic()
            server.ping_at = server.heard + self.ping_s
            head, body = frames[1], frames[2:]
            if head == PONG and not body:
                continue
            if head == control:
                return body, server
            log.unexpected(
                body, f"reply with sequence {head[:20]!r} while awaiting {control.decode()}: discarded",
                endpoint=server.address,
            )  # fmt: skip

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        control = str(log.seq).encode()
        started = time.monotonic()
        budget_end = started + self.timeout_s * (self.options["retries"] + 1)
        waiting_on: _Server | None = None  # the server the current attempt went to
        attempt_end = 0.0
        reason = "no server alive"
        while True:
            now = time.monotonic()
            got = self._receive(control, log)
            if got is not None:
                frames, server = got
                return Reply(frames, endpoint=server.address)
            next_ping = self._tend(now)
            if waiting_on is not None and now >= attempt_end:
                waiting_on.alive = False  # silent past the timeout: suspect until it talks again
                who = log.endpoint_name(waiting_on.address)
                reason = f"no reply from {who} in {self.options['timeout_ms']} ms"
                waiting_on = None
                if log.attempts > self.options["retries"]:
                    break
                log.retried(reason)
            if waiting_on is None:
                if now >= budget_end:
                    break
                waiting_on = self._dispatch(control, body, log)
                attempt_end = now + self.timeout_s
            wake = min(next_ping, attempt_end if waiting_on else budget_end, budget_end)
            self.socket.poll(max(0, int((wake - time.monotonic()) * 1000)) + 1, zmq.POLLIN)
        if not log.attempts:
            # Never sent: no server had a connection or answered a ping in the whole budget.
            reason += " (a Freelance server's identity must be the endpoint its clients connect to)"
        raise Abandoned(f"{reason}; gave up after {log.attempts} attempt(s)")

    def _dispatch(self, control: bytes, body: list[bytes], log: RequestLog) -> _Server | None:
        """Send the request to the first alive server that takes it (None: none did)."""
        for server in self._alive():
            if self._send(server, [control, *body]):
                log.sent(endpoint=server.address)
                return server
        return None

    def close(self) -> None:
        self.socket.close(linger=0)


ADAPTER = FreelanceClient
