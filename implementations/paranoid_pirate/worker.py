"""Paranoid Pirate worker: an echo worker that heartbeats the queue and reconnects.

It sends READY, then answers each request with its body unchanged. It heartbeats the
queue every interval; after ``liveness`` intervals without hearing from the queue it
waits (1 s, doubling up to 32 s), reconnects on a new socket and sends READY again.

    python -m implementations.paranoid_pirate.worker --connect tcp://127.0.0.1:5556 --identity worker-1
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.paranoid_pirate.protocol import (
    HEARTBEAT,
    READY,
    Enveloped,
    Malformed,
    describe,
    parse_to_worker,
)
from implementations.runtime import announce_ready, start_role


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the queue's backend endpoint")
    parser.add_argument(
        "--identity", default=f"worker-{os.getpid()}", help="worker name (default worker-PID)"
    )
    parser.add_argument("--heartbeat-ms", type=int, default=1000, help="heartbeat interval (default 1000)")
    parser.add_argument(
        "--liveness", type=int, default=3, help="silent intervals before reconnecting (default 3)"
    )
    parser.add_argument(
        "--reconnect-ms", type=int, default=1000, help="first reconnect back-off (default 1000)"
    )
    parser.add_argument(
        "--reconnect-max-ms", type=int, default=32000, help="back-off ceiling (default 32000)"
    )
    parser.add_argument("--work-ms", type=float, default=0, help="simulated work per request (default 0)")
    return parser.parse_args(argv)


class Worker:
    """The worker's state machine; ``handle`` is the job (echo), which tests may override."""

    def __init__(self, args: argparse.Namespace, log: logging.Logger, history: HistoryWriter) -> None:
        self.args = args
        self.log = log
        self.history = history
        self.ctx = zmq.Context()
        self.socket: zmq.Socket | None = None
        self.name = args.identity

    def connect(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
        self.socket = self.ctx.socket(zmq.DEALER)
        self.socket.linger = 0
        self.name = f"{self.args.identity}-{os.urandom(2).hex()}"
        self.socket.identity = self.name.encode()
        self.socket.connect(self.args.connect)
        self.socket.send(READY)
        self.log.info("connected to %s as %s, READY sent", self.args.connect, self.name)

    def handle(self, request: Enveloped) -> list[list[bytes]]:
        """Run one job: the messages to send back (echo: the request itself, once)."""
        return [request.frames()]

    def serve(self, request: Enveloped) -> None:
        rid = rid_of(request.body[0])
        if rid is not None:
            self.history.emit("exec", rid=rid, worker=self.name)
        if self.args.work_ms:
            time.sleep(self.args.work_ms / 1000)  # a slow job blocks heartbeats, as the guide's does
        replies = self.handle(request)
        if rid is not None:
            self.history.emit("done", rid=rid, worker=self.name)
        assert self.socket is not None  # run() connected before serving
        for reply in replies:
            self.socket.send_multipart(reply)

    def run(self) -> None:
        interval = self.args.heartbeat_ms / 1000
        backoff = self.args.reconnect_ms / 1000
        self.connect()
        assert self.socket is not None  # connect() made it
        announce_ready(self.log, self.name)
        liveness = self.args.liveness
        heartbeat_at = time.monotonic() + interval
        while True:
            if self.socket.poll(int(max(0.0, heartbeat_at - time.monotonic()) * 1000), zmq.POLLIN):
                frames = self.socket.recv_multipart()
                liveness = self.args.liveness
                backoff = self.args.reconnect_ms / 1000
                try:
                    _, request = parse_to_worker(frames)
                except Malformed as exc:
                    self.log.warning("malformed message from the queue: %s %s", exc, describe(frames))
                    self.history.emit("malformed", worker=self.name, detail=f"{exc}: {describe(frames)}")
                    continue
                if request is not None:
                    self.serve(request)
            now = time.monotonic()
            if now >= heartbeat_at:
                heartbeat_at = now + interval
                liveness -= 1
                if liveness <= 0:
                    self.log.warning(
                        "queue silent for %d intervals; reconnecting in %.0f s", self.args.liveness, backoff
                    )
                    time.sleep(backoff)
                    backoff = min(backoff * 2, self.args.reconnect_max_ms / 1000)
                    self.connect()
                    liveness = self.args.liveness
                    heartbeat_at = time.monotonic() + interval
                else:
                    self.socket.send(HEARTBEAT)

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(linger=0)
        self.ctx.term()
        self.history.close()


def main(argv: list[str] | None = None, worker_class: type[Worker] = Worker) -> None:
    args = parse_args(argv)
    log, history = start_role(args.identity)
    worker = worker_class(args, log, history)
    try:
        worker.run()
    finally:
        worker.close()


if __name__ == "__main__":
    main()
