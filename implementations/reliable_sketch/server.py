"""Sketch server: a REQ that says READY, echoes requests and answers a repeated one from its cache.

    python -m implementations.reliable_sketch.server --connect tcp://127.0.0.1:5556 --identity server-2

It keeps the last request and its reply; when the same request (byte for byte) comes
again, as a client's retry or the queue's resend may bring it, the cached reply is sent
without running the request a second time (a ``replay`` event, not ``exec``). Choices
where the sketch leaves a detail open:

- The reply echoes the request (zchaos's echo contract), instead of the sketch's "unique
  reply messages"; the cache makes the difference visible in the history only.
- The sketch's simulated failures (crash and restart after 5 s, a 1 s busy wait) are not
  built in: the scenarios inject them (kill with restart_after_s = 5, freeze), so they
  come on the seeded schedule and show in the history as faults.
- The identity is ``<identity>-<4 hex digits>``, fresh per process and per connection: a
  restarted server is a new server to the queue, and its cache starts empty.
- A malformed request is answered with READY (a REQ must answer to receive again), which
  the queue reads as "this server is free".
- A server whose connection to the queue comes back (the queue restarted, a link reset)
  starts over on a new socket, with a new identity, and says READY again. A REQ says READY
  once and then only answers: a queue started again knew no server, never read its
  frontend, and the sketch served nobody ever after (explore, reliable-sketch seed 1: a
  kill of the queue, no ok reply in the 5 s of the recovery bound nor after). The sketch
  leaves the queue's failure open; its servers "recover over time" from their own.

Logs ``ready`` once connected; exits 0 on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.reliable_sketch.protocol import READY, Malformed, parse_request, reply
from implementations.runtime import LinkWatch, announce_ready, end_role, start_role

MAX_POLL_MS = 250


class Server:
    def __init__(
        self,
        context: zmq.Context,
        endpoint: str,
        identity: str,
        writer: HistoryWriter,
        log: logging.Logger,
        *,
        work_s: float = 0.0,
    ) -> None:
        self.context = context
        self.endpoint = endpoint
        self.identity = identity
        self.writer = writer
        self.log = log
        self.work_s = work_s
        self.last_request: tuple[bytes, ...] | None = None
        self.last_reply: tuple[bytes, ...] = ()
        self.socket: zmq.Socket | None = None
        self.watch: LinkWatch | None = None
        self.poller = zmq.Poller()
        self.name = ""

    def connect(self) -> None:
        """A new REQ socket with a new identity, connected, watched, and READY said."""
        self.close()
        self.name = f"{self.identity}-{os.urandom(2).hex()}"
        self.socket = self.context.socket(zmq.REQ)
        self.socket.linger = 0
        self.socket.identity = self.name.encode()
        self.watch = LinkWatch(self.socket)
        self.poller = zmq.Poller()
        self.poller.register(self.socket, zmq.POLLIN)
        self.poller.register(self.watch.monitor, zmq.POLLIN)
        self.socket.connect(self.endpoint)
        self.socket.send(READY)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        if self.socket is not None:
            self.socket.close(linger=0)
        self.socket = self.watch = None

    def answer(self, frames: list[bytes]) -> list[bytes]:
        """The frames to send back for ``frames`` (recording exec/done, replay or malformed)."""
        try:
            request = parse_request(frames)
        except Malformed as exc:
            self.log.warning("%s: malformed request answered with READY: %s", self.name, exc)
            self.writer.emit("malformed", worker=self.name, detail=str(exc)[:200])
            return [READY]
        rid = next(filter(None, map(rid_of, request.body)), "")
        if request.body == self.last_request:
            self.writer.emit("replay", rid=rid, worker=self.name)
            return reply(request, self.last_reply)
        self.writer.emit("exec", rid=rid, worker=self.name)
        if self.work_s:
            time.sleep(self.work_s)
        self.last_request, self.last_reply = request.body, request.body
        self.writer.emit("done", rid=rid, worker=self.name)
        return reply(request, self.last_reply)

    def run(self) -> None:
        if self.socket is None:
            self.connect()
        while True:
            assert self.socket is not None and self.watch is not None  # connect() made them
            ready = dict(self.poller.poll(MAX_POLL_MS))
            if self.socket in ready:
                self.socket.send_multipart(self.answer(self.socket.recv_multipart()))
            if self.watch.monitor in ready and self.watch.came_back():
                # Between two answers a REQ waits for a request: a new queue would never send one.
                before = self.name
                self.connect()
                self.log.info("%s: the queue's connection came back: READY again as %s", before, self.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the queue's backend endpoint")
    parser.add_argument("--identity", required=True, help="instance name, e.g. server-2")
    parser.add_argument("--work-ms", type=float, default=0, help="simulated work per request (default 0)")
    args = parser.parse_args(argv)
    log, history = start_role(args.identity)
    context = zmq.Context()
    server = Server(context, args.connect, args.identity, history, log, work_s=args.work_ms / 1000)
    try:
        server.connect()
        announce_ready(log, server.name)
        server.run()
    finally:
        server.close()
        end_role(history, context)


if __name__ == "__main__":
    main()
