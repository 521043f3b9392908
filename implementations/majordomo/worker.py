"""Majordomo 0.1 (7/MDP) echo worker.

    python -m implementations.majordomo.worker --connect tcp://127.0.0.1:5555 \
        --identity worker-2 [--service echo] [--heartbeat-ms 2500] [--liveness 3] \
        [--reconnect-ms 2500] [--work-ms 0]

Registers for one service with READY, answers each REQUEST with a REPLY carrying the
same body (echo), and records ``exec``/``done`` for every request whose first body frame
carries a request id. Logs ``ready:`` after its first READY left.

Protocol choices:

- A DEALER socket whose identity is ``<instance>-<8 hex>``, new on every connection, so
  the broker never mistakes a reconnected worker for the old one and history events
  still name the instance.
- Heartbeat to the broker every ``heartbeat-ms``; the broker is dead after ``liveness``
  intervals without any message from it; then wait ``reconnect-ms`` and start over with a
  new socket and READY (no backoff, as in the guide's mdwrkapi).
- A DISCONNECT from the broker means start over at once: new socket, READY (this is how
  a worker re-registers with a restarted broker that did not know it).
- A connection to the broker that comes back after going down (a link reset, a broker
  restarted) means start over too. ZeroMQ reconnects the old socket by itself, and a
  request in flight at the reset is lost: the broker holds it on a worker that heartbeats
  on, idle, for ever (explore, titanic seed 1: a reset on Titanic's backend link, and every
  later ``titanic.reply`` expired with "no worker in time"). Under a new identity the old
  one falls silent, and the broker expires it and hands its request on.
- ``work-ms`` simulates the application's work (a sleep before the reply); no heartbeats
  are sent meanwhile, as with any single-threaded worker.
- A malformed message from the broker is logged and dropped; it still counts as a sign
  of the broker's life.
- On SIGTERM/SIGINT the worker sends DISCONNECT to the broker and exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.majordomo import mdp
from implementations.runtime import LinkWatch, announce_ready, end_role, start_role

log = logging.getLogger("worker")


class MdpWorker:
    def __init__(
        self,
        ctx: zmq.Context,
        endpoint: str,
        instance: str,
        service: str,
        writer: HistoryWriter,
        *,
        heartbeat_ms: int = 2500,
        liveness: int = 3,
        reconnect_ms: int = 2500,
        work_ms: int = 0,
    ) -> None:
        self.ctx = ctx
        self.endpoint = endpoint
        self.instance = instance
        self.service = service
        self.writer = writer
        self.heartbeat_s = heartbeat_ms / 1000
        self.liveness_max = liveness
        self.reconnect_s = reconnect_ms / 1000
        self.work_s = work_ms / 1000
        self.socket: zmq.Socket | None = None
        self.watch: LinkWatch | None = None
        self.poller = zmq.Poller()
        self.name = instance
        self.liveness = liveness
        self.heartbeat_at = 0.0

    def connect(self) -> None:
        """A new socket and identity, watched, then READY."""
        if self.watch is not None:
            self.watch.close()
        if self.socket is not None:
            self.socket.close(linger=0)
        self.name = f"{self.instance}-{os.urandom(4).hex()}"
        self.socket = self.ctx.socket(zmq.DEALER)
        self.socket.identity = self.name.encode()
        self.socket.linger = 0
        self.watch = LinkWatch(self.socket)
        self.poller = zmq.Poller()
        self.poller.register(self.socket, zmq.POLLIN)
        self.poller.register(self.watch.monitor, zmq.POLLIN)
        self.socket.connect(self.endpoint)
        self.socket.send_multipart(mdp.from_worker(mdp.READY, self.service.encode()))
        self.liveness = self.liveness_max
        self.heartbeat_at = time.monotonic() + self.heartbeat_s
        log.info("connected to %s as %s, READY for %s", self.endpoint, self.name, self.service)

    def run(self, stop: threading.Event | None = None) -> None:
        """Serve until ``stop`` is set (checked every heartbeat at least), or forever."""
        self.connect()
        announce_ready(log, self.name)
        while stop is None or not stop.is_set():
            assert self.socket is not None and self.watch is not None  # connect() made them
            ready = dict(self.poller.poll(int(self.heartbeat_s * 1000)))
            if self.watch.monitor in ready and self.watch.came_back():
                before = self.name
                self.connect()
                log.info("%s: the broker's connection came back: READY again as %s", before, self.name)
            elif self.socket in ready:
                frames = self.socket.recv_multipart()
                self.liveness = self.liveness_max
                self.on_message(frames)
            elif not ready:
                self.liveness -= 1
                if self.liveness == 0:
                    log.warning("broker silent for %d intervals; reconnecting in %.1f s",
                                self.liveness_max, self.reconnect_s)  # fmt: skip
                    time.sleep(self.reconnect_s)
                    self.connect()
            if time.monotonic() >= self.heartbeat_at:
                self.socket.send_multipart(mdp.from_worker(mdp.HEARTBEAT))
                self.heartbeat_at = time.monotonic() + self.heartbeat_s

    def on_message(self, frames: list[bytes]) -> None:
        try:
            cmd = mdp.parse_worker_inbound(frames)
        except mdp.ProtocolError as exc:
            detail = f"{exc}: {mdp.describe(frames)}"
            log.warning("malformed message dropped: %s", detail)
            self.writer.emit("malformed", detail=detail[:500], worker=self.name)
            return
        if cmd.command == mdp.REQUEST:
            self.serve(cmd.client, list(cmd.body))
        elif cmd.command == mdp.DISCONNECT:
            log.info("DISCONNECT from the broker; reconnecting")
            self.connect()

    def serve(self, client: bytes, body: list[bytes]) -> None:
        rid = rid_of(body[0])
        if rid is not None:
            self.writer.emit("exec", rid=rid, worker=self.name, service=self.service)
        if self.work_s:
            time.sleep(self.work_s)
        assert self.socket is not None
        self.socket.send_multipart(mdp.worker_reply(client, body))
        if rid is not None:
            self.writer.emit("done", rid=rid, worker=self.name, service=self.service)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        if self.socket is not None:
            self.socket.send_multipart(mdp.from_worker(mdp.DISCONNECT))
            self.socket.close(linger=200)
            self.socket = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the broker's endpoint")
    parser.add_argument("--identity", default="worker", help="instance name (prefix of the identity)")
    parser.add_argument("--service", default="echo")
    parser.add_argument("--heartbeat-ms", type=int, default=2500)
    parser.add_argument("--liveness", type=int, default=3)
    parser.add_argument("--reconnect-ms", type=int, default=2500)
    parser.add_argument("--work-ms", type=int, default=0)
    args = parser.parse_args(argv)
    _, writer = start_role(args.identity)
    ctx = zmq.Context()
    worker = MdpWorker(
        ctx,
        args.connect,
        args.identity,
        args.service,
        writer,
        heartbeat_ms=args.heartbeat_ms,
        liveness=args.liveness,
        reconnect_ms=args.reconnect_ms,
        work_ms=args.work_ms,
    )
    try:
        worker.run()
    finally:
        log.info("stopping")
        worker.close()
        end_role(writer, ctx)


if __name__ == "__main__":
    main()
