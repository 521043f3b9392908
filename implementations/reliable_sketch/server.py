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
- The identity is ``<identity>-<4 hex digits>``, fresh per process: a restarted server is
  a new server to the queue, and its cache starts empty.
- A malformed request is answered with READY (a REQ must answer to receive again), which
  the queue reads as "this server is free".

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
from implementations.runtime import announce_ready, end_role, start_role

MAX_POLL_MS = 250


class Server:
    def __init__(
        self,
        socket: zmq.Socket,
        name: str,
        writer: HistoryWriter,
        log: logging.Logger,
        *,
        work_s: float = 0.0,
    ) -> None:
        self.socket = socket
        self.name = name
        self.writer = writer
        self.log = log
        self.work_s = work_s
        self.last_request: tuple[bytes, ...] | None = None
        self.last_reply: tuple[bytes, ...] = ()

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
        self.socket.send(READY)
        while True:
            if self.socket.poll(MAX_POLL_MS, zmq.POLLIN):
                self.socket.send_multipart(self.answer(self.socket.recv_multipart()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the queue's backend endpoint")
    parser.add_argument("--identity", required=True, help="instance name, e.g. server-2")
    parser.add_argument("--work-ms", type=float, default=0, help="simulated work per request (default 0)")
    args = parser.parse_args(argv)
    log, history = start_role(args.identity)
    name = f"{args.identity}-{os.urandom(2).hex()}"
    context = zmq.Context()
    socket = context.socket(zmq.REQ)
    socket.linger = 0
    socket.identity = name.encode()
    try:
        socket.connect(args.connect)
        server = Server(socket, name, history, log, work_s=args.work_ms / 1000)
        announce_ready(log, name)
        server.run()
    finally:
        end_role(history, context, socket)


if __name__ == "__main__":
    main()
