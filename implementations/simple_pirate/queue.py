"""Simple Pirate queue (ZeroMQ guide, chapter 4): the load-balancing broker, unchanged.

    python -m implementations.simple_pirate.queue --frontend tcp://127.0.0.1:5555 \
        --backend tcp://127.0.0.1:5556

Two ROUTERs: clients (REQ, Lazy Pirate rule) on the frontend, workers (REQ) on the
backend, and a FIFO list of idle worker identities. Faithful to the guide, so its known
weaknesses stay visible to the harness:

- No heartbeats and no expiry: a worker that dies while idle stays on the list until it
  is handed a request, which the ROUTER then drops silently (the client's retry
  recovers it); a restarted queue knows no worker until workers send READY again, which
  Simple Pirate workers never do, so a queue restart is not recovered from.
- The frontend is read only while at least one worker is idle.

Where the guide trusts every peer, a stranger could wedge the queue (issue 11), so:

- A reply is taken only from a worker the queue handed a request, and only for that
  request's client; any other "reply" (from a stranger, from an idle worker, a second
  reply) is dropped as ``discard`` and lists nobody. The guide's queue lists whoever
  replies, so a stranger's junk put it on the list once per message and took the requests.
- A worker is never on the idle list twice: a READY from an idle worker is ignored; a
  READY from a busy worker (it started over) puts it back once, its request lost.
- A stranger's READY cannot be told from a worker's (Simple Pirate has nothing else): it
  is listed, and a ghost that never answers costs one request (the client retries
  elsewhere) and then stays busy, off the list, until it sends READY again.

Messages: READY from a worker = ``[worker, '', 0x01]``; a request from a client =
``[client, '', body...]`` goes to the oldest idle worker as ``[worker, '', client, '',
body...]``; a worker's reply ``[worker, '', client, '', body...]`` goes back as ``[client,
'', body...]`` and puts the worker at the tail of the list. Anything else is logged,
recorded as ``malformed`` and dropped (a worker that sent it is not put back on the list).
Records ``worker_ready``, ``dispatch`` and ``discard``. Logs ``ready:`` once bound.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import OrderedDict
from typing import Any

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.runtime import announce_ready, describe, end_role, start_role

log = logging.getLogger("queue")

#: Blocking waits are cut into slices this long: a SIGTERM delivered to one of libzmq's
#: threads only runs its Python handler when the main thread is back in the interpreter.
WAIT_SLICE_MS = 250

READY = b"\x01"
#: Busy workers remembered (with the client they serve); a worker that vanished while busy
#: is forgotten, oldest first, beyond this.
MAX_BUSY = 10_000


def parse_backend(frames: list[bytes]) -> tuple[bytes, bytes | None, list[bytes]]:
    """``(worker, client, body)`` of a worker message; ``client`` None for READY.

    Raises ValueError (with the reason) for anything else.
    """
    if len(frames) < 3 or frames[1] != b"":
        raise ValueError("expected [worker, '', ...]")
    if len(frames) == 3:
        if frames[2] != READY:
            raise ValueError("a one-frame worker message that is not READY (0x01)")
        return frames[0], None, []
    if len(frames) < 5 or frames[3] != b"" or not frames[2]:
        raise ValueError("a reply must be [worker, '', client, '', body...]")
    return frames[0], frames[2], frames[4:]


def parse_frontend(frames: list[bytes]) -> tuple[bytes, list[bytes]]:
    """``(client, body)`` of a client request; ValueError for anything else."""
    if len(frames) < 3 or frames[1] != b"":
        raise ValueError("expected [client, '', body...]")
    return frames[0], frames[2:]


def worker_name(identity: bytes) -> str:
    return identity.decode("utf-8", "backslashreplace")


class Queue:
    def __init__(self, frontend: zmq.Socket, backend: zmq.Socket, writer: HistoryWriter) -> None:
        self.frontend = frontend
        self.backend = backend
        self.writer = writer
        self.idle: OrderedDict[bytes, None] = OrderedDict()  # first: idle longest
        self.busy: OrderedDict[bytes, bytes] = OrderedDict()  # worker -> the client it serves

    def malformed(self, side: str, frames: list[bytes], why: str) -> None:
        detail = f"{side}: {why}: {describe(frames)}"
        log.warning("malformed message dropped: %s", detail)
        self.writer.emit("malformed", detail=detail[:500])

    def on_backend(self, frames: list[bytes]) -> None:
        try:
            worker, client, body = parse_backend(frames)
        except ValueError as exc:
            self.malformed("backend", frames, str(exc))
            return
        if client is None:
            if worker in self.idle:
                return
            if self.busy.pop(worker, None) is not None:
                log.warning("busy worker %s said READY again: its request is lost", worker_name(worker))
            log.info("worker %s ready", worker_name(worker))
            self.writer.emit("worker_ready", worker=worker_name(worker))
        elif self.busy.get(worker) != client:
            why = "not from a worker serving that client"
            log.warning("dropped a reply from %s: %s", worker_name(worker), why)
            rid = rid_of(body[0]) if body else None
            extra: dict[str, Any] = {"rid": rid} if rid else {}
            self.writer.emit("discard", worker=worker_name(worker), reason=why, **extra)
            return
        else:
            del self.busy[worker]
            self.frontend.send_multipart([client, b"", *body])
        self.idle[worker] = None

    def on_frontend(self, frames: list[bytes]) -> None:
        try:
            client, body = parse_frontend(frames)
        except ValueError as exc:
            self.malformed("frontend", frames, str(exc))
            return
        worker, _ = self.idle.popitem(last=False)
        self.backend.send_multipart([worker, b"", client, b"", *body])
        self.busy[worker] = client
        while len(self.busy) > MAX_BUSY:
            self.busy.popitem(last=False)
        rid = rid_of(body[0]) if body else None
        if rid is not None:
            self.writer.emit("dispatch", worker=worker_name(worker), rid=rid)
        else:
            self.writer.emit("dispatch", worker=worker_name(worker))

    def run(self) -> None:
        backend_only = zmq.Poller()
        backend_only.register(self.backend, zmq.POLLIN)
        both = zmq.Poller()
        both.register(self.backend, zmq.POLLIN)
        both.register(self.frontend, zmq.POLLIN)
        while True:
            ready = dict((both if self.idle else backend_only).poll(WAIT_SLICE_MS))
            if self.backend in ready:
                self.on_backend(self.backend.recv_multipart())
            if self.frontend in ready and self.idle:
                self.on_frontend(self.frontend.recv_multipart())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--name", default="queue", help="name in logs and history (default queue)")
    args = parser.parse_args(argv)
    _, writer = start_role(args.name)
    ctx = zmq.Context()
    frontend = ctx.socket(zmq.ROUTER)
    backend = ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    try:
        for sock, endpoint in ((frontend, args.frontend), (backend, args.backend)):
            try:
                sock.bind(endpoint)
            except zmq.ZMQError as exc:
                log.error("cannot bind %s: %s", endpoint, exc)
                return 2
        announce_ready(log, f"frontend {args.frontend} backend {args.backend}")
        Queue(frontend, backend, writer).run()
    finally:
        log.info("stopping")
        end_role(writer, ctx, frontend, backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
