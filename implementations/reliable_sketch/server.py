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

Prints ``<identity> ready`` once connected; exits 0 on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

import zmq

from harness.history import HistoryWriter, rid_of, writer_from_env
from implementations.reliable_sketch.protocol import READY, Malformed, parse_request, reply

log = logging.getLogger("sketch.server")
MAX_POLL_MS = 250


class Server:
    def __init__(self, socket: zmq.Socket, name: str, writer: HistoryWriter, *, work_s: float = 0.0) -> None:
        self.socket = socket
        self.name = name
        self.writer = writer
        self.work_s = work_s
        self.last_request: tuple[bytes, ...] | None = None
        self.last_reply: tuple[bytes, ...] = ()
        self.stopping = False

    def answer(self, frames: list[bytes]) -> list[bytes]:
        """The frames to send back for ``frames`` (recording exec/done, replay or malformed)."""
        try:
            request = parse_request(frames)
        except Malformed as exc:
            log.warning("%s: malformed request answered with READY: %s", self.name, exc)
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
        while not self.stopping:
            if self.socket.poll(MAX_POLL_MS, zmq.POLLIN):
                self.socket.send_multipart(self.answer(self.socket.recv_multipart()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", required=True, help="the queue's backend endpoint")
    parser.add_argument("--identity", required=True, help="instance name, e.g. server-2")
    parser.add_argument("--work-ms", type=float, default=0, help="simulated work per request")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    name = f"{args.identity}-{os.urandom(2).hex()}"
    context = zmq.Context()
    socket = context.socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt_string(zmq.IDENTITY, name)
    socket.connect(args.connect)
    server = Server(socket, name, writer_from_env(args.identity), work_s=args.work_ms / 1000)

    def stop(signum: int, _frame: object) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"{args.identity} ready as {name}", flush=True)
    server.run()
    socket.close()
    server.writer.close()
    context.term()
    log.info("%s stopped", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
