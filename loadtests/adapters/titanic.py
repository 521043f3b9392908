"""Titanic (9/TSP) client: submit, poll for the reply with back-off, close.

Each request runs the guide's ticlient cycle over Majordomo (``mdp_sync``'s client half,
one REQ socket per call, a new one after a timeout):

1. ``titanic.request`` [service, body]: each attempt is a ``send``; a timeout, or a
   ``300``/``500`` answer, a ``retry``; ``200`` + uuid is recorded as ``ticket`` (the
   server says the request is stored). After ``retries`` resends it is abandoned.
2. ``titanic.reply`` [uuid], first after ``poll_ms``, the wait doubling up to
   ``poll_max_ms``, until ``200`` + the reply. Every answer is a ``ticket_answer`` with its
   status code (a poll that times out records nothing: the broker or the server is away,
   and the client keeps polling). ``400`` for a uuid it was given and never closed means
   the server lost the request: the client abandons it. So does ``reply_deadline_s``
   after the first send without a reply (the manifest's ``[promises] recovery_bound_s``
   must fit in it).
3. ``titanic.close`` [uuid], retried like a submission; the answer is a ``ticket_answer``.

The reply is the stored reply frames, checked against the request (echo) by the Locust
user like any other client's. Every ``probe_every`` requests (0: never) the client also
asks ``titanic.reply`` about a uuid nobody was ever given (``probe = "forged"``) and
about the oldest uuid it closed (``probe = "closed"``): a correct server answers ``400``
to both, and the Titanic checks judge the answers (reports/checkers/titanic.py).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from contract.history import HistoryWriter
from loadtests.adapters.base import Abandoned, ClientAdapter, Reply, RequestLog
from loadtests.adapters.mdp_sync import MDPC01

REQUEST, REPLY, CLOSE = "titanic.request", "titanic.reply", "titanic.close"
Emit = Callable[..., None]
#: how many closed uuids a client keeps to ask about again
CLOSED_KEPT = 64


class TitanicClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {
        "service": "echo",
        "timeout_ms": 2500,
        "retries": 3,
        "poll_ms": 50,
        "poll_max_ms": 1000,
        "reply_deadline_s": 30.0,
        "probe_every": 10,
    }
    SUMMARY = "Titanic (9/TSP) client over MDP: titanic.request, poll titanic.reply with back-off, close"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        problems = super().check_options(options)
        for key in ("timeout_ms", "poll_ms", "poll_max_ms", "reply_deadline_s"):
            value = options.get(key, cls.DEFAULTS[key])
            if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
                problems.append((key, f"must be positive, got {value}"))
        return problems

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.service = str(self.options["service"])
        self.timeout_ms = int(self.options["timeout_ms"])
        self.retries = max(0, int(self.options["retries"]))
        self.poll_s = self.options["poll_ms"] / 1000
        self.poll_max_s = max(self.poll_s, self.options["poll_max_ms"] / 1000)
        self.deadline_s = float(self.options["reply_deadline_s"])
        self.probe_every = int(self.options["probe_every"])
        self.socket: zmq.Socket | None = None
        self.closed: deque[str] = deque(maxlen=CLOSED_KEPT)
        self.count = 0

    # --- one MDP call ------------------------------------------------------------------

    def _call(self, service: str, frames: list[bytes]) -> tuple[list[bytes] | None, int]:
        """The reply body of one MDP request (None: no valid reply in time), and its latency (us)."""
        if self.socket is None:
            self.socket = self.context.socket(zmq.REQ)
            self.socket.linger = 0
            self.socket.connect(self.endpoint)
        started = time.perf_counter()
        self.socket.send_multipart([MDPC01, service.encode(), *frames])
        if self.socket.poll(self.timeout_ms):
            reply = self.socket.recv_multipart()
            latency = int((time.perf_counter() - started) * 1e6)
            if len(reply) >= 3 and reply[0] == MDPC01 and reply[1] == service.encode():
                return reply[2:], latency
        # No reply, or a malformed one: a REQ socket cannot go on, so take a new one.
        self._reset()
        return None, int((time.perf_counter() - started) * 1e6)

    def _reset(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None

    @staticmethod
    def _status(body: list[bytes]) -> int:
        """The three-digit status of an answer (0 if it has none); text after it is ignored."""
        head = body[0][:3] if body else b""
        return int(head) if len(head) == 3 and head.isdigit() else 0

    def _answer(self, emit: Emit, service: str, uuid: str, **extra: Any) -> tuple[int | None, list[bytes]]:
        """Ask ``service`` about ``uuid`` and record the answer with ``emit``: (status, answer),
        (None, []) when no answer came."""
        body, latency = self._call(service, [uuid.encode()])
        if body is None:
            return None, []
        code = self._status(body)
        fields: dict[str, Any] = {"latency_us": latency, **extra}
        if code == 0:
            fields["detail"] = f"no status: {body[:1]!r}"[:200]
        emit("ticket_answer", uuid=uuid, service=service, code=code, **fields)
        return code, body

    # --- the cycle ---------------------------------------------------------------------

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        self.count += 1
        if self.probe_every and self.count % self.probe_every == 0:
            self._probe(log.writer)
        started = time.monotonic()
        deadline = started + self.deadline_s
        uuid = self._submit(body, log, started)
        frames = self._poll(uuid, log, deadline)
        self._close(uuid, log)
        return Reply(frames)

    def _submit(self, body: list[bytes], log: RequestLog, started: float) -> str:
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                log.retried(why)
            log.sent()
            answer, _ = self._call(REQUEST, [self.service.encode(), *body])
            if answer is None:
                why = f"no answer in {self.timeout_ms} ms"
                continue
            code = self._status(answer)
            if code == 200 and len(answer) == 2:
                uuid = answer[1].decode(errors="replace")
                log.emit("ticket", uuid=uuid, latency_us=int((time.monotonic() - started) * 1e6))
                return uuid
            if code == 400:
                raise Abandoned(f"titanic.request refused: {answer[0][:80]!r}")
            why = f"titanic.request answered {answer[0][:40]!r}"
            time.sleep(self.poll_s)  # 300/500: retry later, as the protocol says
        raise Abandoned(f"titanic.request: no ticket after {self.retries + 1} attempt(s) ({why})")

    def _poll(self, uuid: str, log: RequestLog, deadline: float) -> list[bytes]:
        wait = self.poll_s
        while True:
            time.sleep(min(wait, max(0.0, deadline - time.monotonic())))
            code, answer = self._answer(log.emit, REPLY, uuid)
            if code == 200:
                return answer[1:]
            if code == 400:
                raise Abandoned(f"titanic.reply: 400 (unknown) for acknowledged uuid {uuid}")
            if time.monotonic() >= deadline:
                raise Abandoned(f"titanic.reply: no reply for {uuid} within {self.deadline_s:g} s")
            wait = min(wait * 2, self.poll_max_s)

    def _close(self, uuid: str, log: RequestLog) -> None:
        for _ in range(self.retries + 1):
            if self._answer(log.emit, CLOSE, uuid)[0] is not None:
                self.closed.append(uuid)
                return

    def _probe(self, writer: HistoryWriter) -> None:
        """Ask about a uuid never issued, and about the oldest one closed (both must be 400)."""

        def emit(ev: str, **fields: Any) -> None:
            writer.emit(ev, src=self.cid, cid=self.cid, **fields)

        self._answer(emit, REPLY, os.urandom(16).hex(), probe="forged")
        if self.closed:
            self._answer(emit, REPLY, self.closed.popleft(), probe="closed")

    def close(self) -> None:
        self._reset()


ADAPTER = TitanicClient
