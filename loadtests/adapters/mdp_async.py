"""Majordomo 0.1 asynchronous client (the guide's mdcliapi2, made reliable): DEALER, many
requests in flight, replies matched to requests by the request id in the first body frame.

Each request is sent as ``['', MDPC01, service, body...]`` (a DEALER adds no delimiter of
its own). A request with no reply after ``timeout_ms`` is sent again on the same socket
(other requests are in flight on it, so it is not closed), at most ``retries`` times,
then abandoned. A reply whose request id is not in flight (a late answer to an
earlier attempt of a finished request, or garbage) is recorded as ``unexpected`` against
the request it names when that one finished recently, and dropped. Options as in
``mdp_sync`` (``service``, ``timeout_ms``, ``retries``, ``body_frames``, ``mmi_every``: every
N requests and on every resend, on a side DEALER, each answer recorded as ``mmi_answer``)
plus ``window`` (how many requests the Locust user keeps in flight) and ``reply_deadline_s``.

``reply_deadline_s`` > 0 makes a client that never resends: each request is sent once
and waited for up to that many seconds; with no reply by then it is recorded as ``lost``
(not abandoned), and a reply that comes later is ``unexpected``. Retries cannot hide a
request the broker dropped, so ``no_lost`` sees it (the manifest's ``requeue`` promise
says whether a loss during a fault counts). ``timeout_ms`` and ``retries`` are then unused.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from contract.history import HistoryWriter
from loadtests.adapters.base import Abandoned, AsyncClientAdapter, Lost, Reply, RequestLog, rid_of
from loadtests.adapters.mdp_sync import MDPC01, MmiProbe, body_with_frames, poller_for, reply_mismatch

#: finished requests remembered, to name the request a late duplicate reply belongs to
REMEMBER = 1000


@dataclass
class _InFlight:
    log: RequestLog
    message: list[bytes]
    deadline: float


class MdpAsyncClient(AsyncClientAdapter):
    DEFAULTS: dict[str, Any] = {
        **AsyncClientAdapter.DEFAULTS,
        "service": "echo",
        "timeout_ms": 2500,
        "retries": 3,
        "body_frames": 1,
        "mmi_every": 0,
        "reply_deadline_s": 0.0,
    }
    NO_RESEND_DEADLINE = True
    SUMMARY = "Majordomo 0.1 asynchronous client (DEALER, a window of requests in flight)"

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.service = str(self.options["service"])
        self.timeout_s = int(self.options["timeout_ms"]) / 1000
        self.retries = max(0, int(self.options["retries"]))
        self.body_frames = int(self.options["body_frames"])
        self.mmi_every = int(self.options["mmi_every"])
        self.deadline_s = float(self.options["reply_deadline_s"])  # > 0: never resend
        self.count = 0
        self.pending: dict[str, _InFlight] = {}
        self.finished: OrderedDict[str, RequestLog] = OrderedDict()
        self.socket = context.socket(zmq.DEALER)
        self.socket.linger = 0
        self.socket.connect(self.endpoint)
        timeout_ms = int(self.options["timeout_ms"])
        self.mmi = MmiProbe(context, self.endpoint, self.service, timeout_ms) if self.mmi_every > 0 else None
        self.writer: HistoryWriter | None = None  # the history writer, known from the first request's log

    def expected_reply(self, body: list[bytes]) -> list[bytes]:
        return body_with_frames(body, self.body_frames)

    def submit(self, body: list[bytes], log: RequestLog) -> None:
        self.count += 1
        self.writer = log.writer
        if self.mmi is not None and self.count % self.mmi_every == 0:
            self.mmi.ask(self.writer, self.cid)
        message = [b"", MDPC01, self.service.encode(), *body_with_frames(body, self.body_frames)]
        wait = self.deadline_s or self.timeout_s
        self.pending[log.rid] = _InFlight(log, message, time.monotonic() + wait)
        self.socket.send_multipart(message)
        log.sent()

    def in_flight(self) -> int:
        return len(self.pending)

    def poll(self, timeout_s: float) -> list[tuple[RequestLog, Reply | Abandoned | Lost]]:
        done: list[tuple[RequestLog, Reply | Abandoned | Lost]] = []
        now = time.monotonic()
        wait = timeout_s
        if self.pending:
            wait = max(0.0, min(wait, min(p.deadline for p in self.pending.values()) - now))
        if self.mmi is not None and self.writer is not None:
            poller = poller_for(self.socket, self.mmi.socket)
            ready = dict(poller.poll(int(wait * 1000)))
            if self.mmi.socket in ready:
                self.mmi.collect(self.writer, self.cid)
            readable = self.socket in ready
        else:
            readable = bool(self.socket.poll(int(wait * 1000)))
        if readable:
            while True:
                try:
                    frames = self.socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._on_reply(frames, done)
        self._expire(time.monotonic(), done)
        return done

    def _on_reply(self, frames: list[bytes], done: list) -> None:
        if frames and frames[0] == b"":
            frames = frames[1:]
        why = reply_mismatch(frames, self.service, None)
        rid = rid_of(frames[2]) if why is None else None
        flight = self.pending.pop(rid, None) if rid is not None else None
        if flight is not None:
            self._finish(flight.log)
            done.append((flight.log, Reply(frames[2:])))
            return
        late = self.finished.get(rid) if rid is not None else None
        if late is not None:
            late.unexpected(frames, "late reply to a finished request")
        elif self.pending:
            # Nothing names its request: charge it to the oldest request in flight.
            next(iter(self.pending.values())).log.unexpected(frames, why or "reply to no request in flight")

    def _expire(self, now: float, done: list) -> None:
        for rid, flight in [(r, f) for r, f in self.pending.items() if f.deadline <= now]:
            if self.deadline_s:
                del self.pending[rid]
                self._finish(flight.log)
                done.append((flight.log, Lost(f"no reply within the {self.deadline_s:g} s reply deadline")))
            elif flight.log.attempts <= self.retries:
                flight.log.retried("timeout")
                if self.mmi is not None:
                    self.mmi.ask(flight.log.writer, self.cid)
                flight.deadline = now + self.timeout_s
                self.socket.send_multipart(flight.message)
                flight.log.sent()
            else:
                del self.pending[rid]
                self._finish(flight.log)
                reason = f"no reply after {flight.log.attempts} attempt(s) of {self.timeout_s * 1000:.0f} ms"
                done.append((flight.log, Abandoned(reason)))

    def _finish(self, log: RequestLog) -> None:
        self.finished[log.rid] = log
        if len(self.finished) > REMEMBER:
            self.finished.popitem(last=False)

    def close(self) -> None:
        self.socket.close(linger=0)
        if self.mmi is not None:
            self.mmi.close()


ADAPTER = MdpAsyncClient
