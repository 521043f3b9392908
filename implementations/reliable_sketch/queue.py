"""Sketch queue: LRU routing with a ready list and a disabled list, resending past slow servers.

    python -m implementations.reliable_sketch.queue --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556

As the sketch says: it reads client requests only while a server is ready; it sends each
request to the server that has been ready longest and waits ``--reply-timeout-ms`` (the
sketch's 10 ms) for the reply; a server that misses that is disabled and the request goes
to the next ready server; a reply from a disabled server is discarded; a disabled server
comes back when it signals it is ready again. Choices where the sketch leaves a detail open:

- Many requests are in flight at once (one per busy server), each with its own deadline:
  the sketch's "handles requests and replies asynchronously".
- A REQ server signals "ready" with READY when it starts and with every reply (it can only
  send when it has a request). So a disabled server's late reply is discarded and at the
  same moment takes it off the disabled list.
- A server whose connection is gone (ROUTER_MANDATORY says so at once) is forgotten:
  ``worker_expired`` with reason ``unreachable``, and its request goes to the next server.
  A server that dies while disabled stays on the disabled list; at most ``MAX_DISABLED``
  are remembered.
- A reply is forwarded to the client address in its envelope; a request is forwarded at
  most once (``discard`` for any later reply to it). The client address goes to the server
  behind a random mark of this queue's, and a reply without that mark is discarded: libzmq
  numbers a ROUTER's peers from an unseeded ``rand()``, so a queue started again hands its
  clients its predecessor's identities, and a server's late reply to a predecessor's
  request would reach whichever client has that identity now (the same fault explore
  found in the Paranoid Pirate queue).
- A request is sent at most ``--max-sends`` times (default 8): one that no server answers
  in time however often it is resent (a 10 MB body never echoed within 10 ms) is dropped
  with ``request_expired`` instead of being resent forever, which would keep every later
  request waiting behind it. Its client's own retry or abandon takes it from there.

Records ``worker_ready`` (a server became ready: ``ready`` or ``re-enabled``),
``worker_expired`` (a server was disabled or forgotten: the reason says which),
``dispatch`` (detail ``resend N`` when it is not the first), ``discard``,
``request_expired`` (a request given up after ``--max-sends`` sends) and ``malformed``;
logs ``ready`` once bound; exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.reliable_sketch.protocol import (
    Malformed,
    Request,
    parse_from_server,
    parse_request,
    to_client,
    to_server,
)
from implementations.runtime import announce_ready, drain, end_role, start_role

MAX_POLL_S = 0.1
BATCH = 200
MAX_DISABLED = 1000
#: Sends of one request before the queue gives up on it (the sketch resends without end).
MAX_SENDS = 8
#: Random bytes a queue puts before each client address it sends a server.
MARK_BYTES = 8


@dataclass
class Pending:
    request: Request
    rid: str
    deadline: float = 0.0
    sends: int = 0
    answered: bool = False


class Queue:
    def __init__(
        self,
        frontend: zmq.Socket,
        backend: zmq.Socket,
        writer: HistoryWriter,
        log: logging.Logger,
        *,
        reply_timeout_s: float = 0.01,
        max_sends: int = MAX_SENDS,
    ) -> None:
        self.frontend = frontend
        self.backend = backend
        self.writer = writer
        self.log = log
        self.reply_timeout_s = reply_timeout_s
        self.max_sends = max_sends
        self.ready: OrderedDict[bytes, None] = OrderedDict()  # first: ready longest
        self.busy: dict[bytes, Pending] = {}
        # With the id of the request it missed (not the request: a stranger's READY makes a
        # ghost server, and a thousand ghosts must not hold a thousand request bodies).
        self.disabled: OrderedDict[bytes, str] = OrderedDict()
        self.resend: deque[Pending] = deque()
        self.discarded = 0
        self.mark = os.urandom(MARK_BYTES)  # this queue's, before each client address it sends out

    @staticmethod
    def _name(server: bytes) -> str:
        return server.decode(errors="backslashreplace")

    def _ready(self, server: bytes, how: str) -> None:
        self.ready[server] = None
        self.writer.emit("worker_ready", worker=self._name(server), detail=how)

    def on_backend(self, frames: list[bytes], now: float) -> None:
        try:
            msg = parse_from_server(frames)
        except Malformed as exc:
            self.log.warning("backend: dropped a malformed message: %s", exc)
            self.writer.emit("malformed", detail=f"backend: {exc}"[:200])
            return
        server = msg.server
        if server in self.disabled:
            missed = self.disabled.pop(server)
            if msg.kind == "reply":
                self.discarded += 1
                rid = next(filter(None, map(rid_of, msg.body)), missed)
                self.writer.emit("discard", worker=self._name(server), rid=rid, reason="disabled server")
            self._ready(server, "re-enabled")
            self.log.info("server %s is ready again (%s)", self._name(server), msg.kind)
            return
        pending = self.busy.pop(server, None)
        if msg.kind == "ready":
            if pending is not None:
                self.log.warning(
                    "busy server %s said READY: its request goes to the next", self._name(server)
                )
                self._requeue(pending)
            if server not in self.ready:
                self._ready(server, "ready")
            return
        if pending is not None and pending.answered:
            self.writer.emit("discard", worker=self._name(server), rid=pending.rid, reason="already answered")
        elif not msg.client.startswith(self.mark):
            # An earlier queue's request: its client resent it, another client has its identity.
            rid = next(filter(None, map(rid_of, msg.body)), "")
            self.writer.emit("discard", worker=self._name(server), rid=rid, reason="another queue's request")
        else:
            if pending is not None:
                pending.answered = True
            self.frontend.send_multipart(to_client(msg.client[len(self.mark) :], msg.body))
        if pending is None and server not in self.ready:
            self._ready(server, "ready")
        else:
            self.ready[server] = None

    def _requeue(self, pending: Pending) -> None:
        if pending.answered:
            return
        if pending.sends >= self.max_sends:
            self.writer.emit(
                "request_expired", rid=pending.rid, reason=f"no reply in time to any of {pending.sends} sends"
            )
            self.log.warning("gave up on request %s after %d sends", pending.rid or "?", pending.sends)
            return
        self.resend.appendleft(pending)

    def on_frontend(self, frames: list[bytes], now: float) -> None:
        try:
            request = parse_request(frames)
        except Malformed as exc:
            self.log.warning("frontend: dropped a malformed request: %s", exc)
            self.writer.emit("malformed", detail=f"frontend: {exc}"[:200])
            return
        rid = next(filter(None, map(rid_of, request.body)), "")
        self.resend.append(Pending(request, rid))
        self.dispatch(now)

    def dispatch(self, now: float) -> None:
        while self.resend and self.ready:
            pending = self.resend[0]
            if pending.answered:
                self.resend.popleft()
                continue
            server, _ = self.ready.popitem(last=False)
            try:
                marked = Request(self.mark + pending.request.client, pending.request.body)
                self.backend.send_multipart(to_server(server, marked), zmq.NOBLOCK)
            except zmq.ZMQError as exc:
                if exc.errno not in (zmq.EHOSTUNREACH, zmq.EAGAIN):
                    raise
                self.writer.emit("worker_expired", worker=self._name(server), reason="unreachable")
                continue
            self.resend.popleft()
            pending.sends += 1
            pending.deadline = now + self.reply_timeout_s
            self.busy[server] = pending
            detail = f"resend {pending.sends - 1}" if pending.sends > 1 else ""
            self.writer.emit("dispatch", worker=self._name(server), rid=pending.rid, detail=detail)

    def on_timers(self, now: float) -> None:
        for server in [s for s, p in self.busy.items() if p.deadline <= now]:
            pending = self.busy.pop(server)
            self.disabled[server] = pending.rid
            while len(self.disabled) > MAX_DISABLED:
                self.disabled.popitem(last=False)
            self.writer.emit(
                "worker_expired",
                worker=self._name(server),
                reason="disabled",
                detail=f"no reply to {pending.rid} within {self.reply_timeout_s * 1000:g} ms",
            )
            self._requeue(pending)
        self.dispatch(now)

    def next_deadline(self) -> float:
        return min((p.deadline for p in self.busy.values()), default=float("inf"))

    def run(self) -> None:
        poll_both = zmq.Poller()
        poll_both.register(self.backend, zmq.POLLIN)
        poll_both.register(self.frontend, zmq.POLLIN)
        poll_backend = zmq.Poller()
        poll_backend.register(self.backend, zmq.POLLIN)
        while True:
            poller = poll_both if self.ready and not self.resend else poll_backend
            timeout = max(0.0, min(MAX_POLL_S, self.next_deadline() - time.monotonic()))
            ready = dict(poller.poll(int(timeout * 1000)))
            if self.backend in ready:
                drain(self.backend, self.on_backend, BATCH)
            if self.frontend in ready:
                drain(self.frontend, self.on_frontend, BATCH, lambda: bool(self.ready))
            # Replies that arrived while the frontend was read count before any deadline.
            drain(self.backend, self.on_backend, BATCH)
            self.on_timers(time.monotonic())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for servers")
    parser.add_argument(
        "--reply-timeout-ms", type=float, default=10, help="wait this long for a server's reply (default 10)"
    )
    parser.add_argument(
        "--max-sends",
        type=int,
        default=MAX_SENDS,
        help=f"give up on a request after sending it this often (default {MAX_SENDS})",
    )
    parser.add_argument("--name", default="queue", help="name in logs and history (default queue)")
    args = parser.parse_args(argv)
    if args.max_sends < 1:
        parser.error("--max-sends must be at least 1")
    log, history = start_role(args.name)
    context = zmq.Context()
    frontend = context.socket(zmq.ROUTER)
    backend = context.socket(zmq.ROUTER)
    for sock in (frontend, backend):
        sock.linger = 0
    backend.setsockopt(zmq.ROUTER_MANDATORY, 1)
    queue = Queue(
        frontend,
        backend,
        history,
        log,
        reply_timeout_s=args.reply_timeout_ms / 1000,
        max_sends=args.max_sends,
    )
    try:
        frontend.bind(args.frontend)
        backend.bind(args.backend)
        announce_ready(log, f"frontend {args.frontend} backend {args.backend}")
        queue.run()
    finally:
        log.info("stopping: %d replies from disabled servers discarded", queue.discarded)
        end_role(history, context, frontend, backend)


if __name__ == "__main__":
    main()
