"""Majordomo 0.1 synchronous client (the guide's mdcliapi): one request at a time on REQ.

Client rule (Lazy Pirate's): send ``[MDPC01, service, body...]`` on a REQ socket, poll
``timeout_ms`` for the reply; on timeout close the socket (LINGER 0), open a new one and
resend, at most ``retries`` resends (counted as the ``lazy_pirate`` adapter does), then
abandon. A reply that is not the one in flight (wrong header, service or request id) is
recorded as ``unexpected`` and treated like a timeout, since a REQ socket cannot wait for
a second reply.

Options: ``service`` (default ``echo``), ``timeout_ms``, ``retries``, ``body_frames`` (the
request carries that many copies of the payload frame; the echo must return them all),
``mmi_every`` (every N requests, and after every timeout, also ask ``mmi.service`` about
the service on a side DEALER, without waiting; each answer is recorded as ``mmi_answer``
when it arrives, and the ``mmi_service`` checker compares it with which workers the
supervisor knew to be alive, so a broker that writes no history is judged too; 0 = never).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import zmq

from contract.history import HistoryWriter
from loadtests.adapters.base import Abandoned, ClientAdapter, Reply, RequestLog, rid_of

# The client half of 7/MDP, written here again on purpose: a client that shared the
# broker's codec would share its bugs.
MDPC01 = b"MDPC01"
MMI_SERVICE = b"mmi.service"


def reply_mismatch(frames: list[bytes], service: str, rid: str | None) -> str | None:
    """Why ``[MDPC01, service, body...]`` is not the reply expected (None: it is).

    ``rid`` None accepts any request id (the caller matches it).
    """
    if len(frames) < 3:
        return f"malformed reply: {len(frames)} frame(s)"
    if frames[0] != MDPC01:
        return f"malformed reply: header {frames[0][:16]!r}"
    if frames[1] != service.encode():
        return f"reply for service {frames[1][:32]!r}"
    got = rid_of(frames[2])
    if rid is not None and got != rid:
        return f"reply for request {got!r}"
    return None


def body_with_frames(body: list[bytes], body_frames: int) -> list[bytes]:
    """The request body for ``body_frames`` frames: the payload frame repeated."""
    return body + [body[0]] * max(0, body_frames - len(body))


def poller_for(*sockets: zmq.Socket) -> zmq.Poller:
    """A Poller over ``sockets`` of their own kind: zmq.green's inside Locust (a plain one
    would block every user of the process while it waits), zmq's elsewhere."""
    if type(sockets[0]).__module__.startswith("zmq.green"):
        from zmq.green import Poller

        poller = Poller()
    else:
        poller = zmq.Poller()
    for socket in sockets:
        poller.register(socket, zmq.POLLIN)
    return poller


class MmiProbe:
    """``mmi.service`` queries on a side DEALER, each answer recorded as ``mmi_answer``.

    Answers come back in the order asked (one broker, one connection), so each is matched
    with the oldest query outstanding; its ``latency_us`` bounds when the broker answered.
    When the oldest query is older than ``timeout_ms`` the broker lost it (it died or was
    restarted): the socket is replaced, so that no late answer is matched with a later
    query (which would date the answer wrongly).
    """

    def __init__(self, context: zmq.Context, endpoint: str, service: str, timeout_ms: int) -> None:
        self.context = context
        self.endpoint = endpoint
        self.service = service
        self.timeout_ns = timeout_ms * 1_000_000
        self.query = [b"", MDPC01, MMI_SERVICE, service.encode()]
        self.asked: deque[int] = deque()
        self.socket = self._open()

    def _open(self) -> zmq.Socket:
        socket = self.context.socket(zmq.DEALER)
        socket.linger = 0
        socket.sndhwm = 10
        socket.connect(self.endpoint)
        return socket

    def ask(self, writer: HistoryWriter, cid: str) -> None:
        self.collect(writer, cid)
        now = time.time_ns()
        if self.asked and now - self.asked[0] > self.timeout_ns:
            self.socket.close(linger=0)
            self.socket = self._open()
            self.asked.clear()
        with contextlib.suppress(zmq.Again):  # the broker is unreachable: the next probe tries again
            self.socket.send_multipart(self.query, zmq.NOBLOCK)
            self.asked.append(now)

    def collect(self, writer: HistoryWriter, cid: str) -> None:
        """Record every answer that has arrived (without waiting)."""
        while self.socket.poll(0):
            frames = self.socket.recv_multipart()
            self.record(frames, writer, cid)

    def record(self, frames: list[bytes], writer: HistoryWriter, cid: str) -> None:
        now = time.time_ns()
        fields: dict[str, Any] = {}
        if self.asked:
            fields["latency_us"] = (now - self.asked.popleft()) // 1000
        if frames and frames[0] == b"":
            frames = frames[1:]
        code = 0
        if len(frames) == 3 and frames[:2] == [MDPC01, MMI_SERVICE] and frames[2].isdigit():
            code = int(frames[2])
        else:
            fields["detail"] = f"malformed MMI answer: {[f[:16] for f in frames[:4]]!r}"[:200]
        writer.emit("mmi_answer", src=cid, cid=cid, service=self.service, code=code, **fields)

    def close(self) -> None:
        self.socket.close(linger=0)


class MdpSyncClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {
        "service": "echo",
        "timeout_ms": 2500,
        "retries": 3,
        "body_frames": 1,
        "mmi_every": 0,
    }
    SUMMARY = "Majordomo 0.1 synchronous client (REQ, Lazy Pirate's retry rule)"

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.service = str(self.options["service"])
        self.timeout_ms = int(self.options["timeout_ms"])
        self.retries = max(0, int(self.options["retries"]))
        self.body_frames = int(self.options["body_frames"])
        self.mmi_every = int(self.options["mmi_every"])
        self.mmi = (
            MmiProbe(context, self.endpoint, self.service, self.timeout_ms) if self.mmi_every > 0 else None
        )
        self.count = 0
        self.socket: zmq.Socket | None = None

    def _open(self) -> zmq.Socket:
        socket = self.context.socket(zmq.REQ)
        socket.linger = 0
        socket.connect(self.endpoint)
        return socket

    def _reset(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None

    def expected_reply(self, body: list[bytes]) -> list[bytes]:
        return body_with_frames(body, self.body_frames)

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        self.count += 1
        if self.mmi is not None:
            # An answer that came after the last reply is recorded now, not at the next ask
            # (the later it is read, the wider the time it can be judged by).
            self.mmi.collect(log.writer, self.cid)
            if self.count % self.mmi_every == 0:
                self.mmi.ask(log.writer, self.cid)
        message = [MDPC01, self.service.encode(), *body_with_frames(body, self.body_frames)]
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            if self.socket is None:
                self.socket = self._open()
            self.socket.send_multipart(message)
            log.sent()
            if self._wait(self.socket, self.timeout_ms, log):
                frames = self.socket.recv_multipart()
                why = reply_mismatch(frames, self.service, log.rid)
                if why is None:
                    return Reply(frames[2:])
                log.unexpected(frames, why)
            # REQ cannot resend before a reply: the guide's brute force is a new socket.
            self._reset()
            if self.mmi is not None:
                self.mmi.ask(log.writer, self.cid)  # is anybody serving? (outages are what MMI is about)
            if attempt < attempts:
                log.retried("timeout")
        raise Abandoned(f"no reply after {attempts} attempt(s) of {self.timeout_ms} ms")

    def _wait(self, socket: zmq.Socket, timeout_ms: int, log: RequestLog) -> bool:
        """Wait up to ``timeout_ms`` for ``socket`` to have a message, recording MMI answers
        as they arrive (their time is what the MMI check judges)."""
        if self.mmi is None:
            return bool(socket.poll(timeout_ms))
        poller = poller_for(socket, self.mmi.socket)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            ready = dict(poller.poll(max(0, int((deadline - time.monotonic()) * 1000))))
            if self.mmi.socket in ready:
                self.mmi.collect(log.writer, self.cid)
            if socket in ready:
                return True
            if time.monotonic() >= deadline:
                return False

    def close(self) -> None:
        self._reset()
        if self.mmi is not None:
            self.mmi.close()


ADAPTER = MdpSyncClient
