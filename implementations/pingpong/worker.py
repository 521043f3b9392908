"""PING/PONG worker: a DEALER that says READY, pings every second and runs echo jobs.

    python -m implementations.pingpong.worker --connect tcp://127.0.0.1:5556 --identity worker-2

Choices where the seed (``seeds/pingpong-dialogue.txt``) leaves a detail open:

- Identity: every connection gets a fresh one, ``<identity>-<4 hex digits>``, so a new
  socket never collides with the broker's memory of the old one (a ROUTER refuses a second
  connection under a known identity) and the history tells connections apart.
- Liveness: any message from the broker (PONG, job, even a malformed one) counts as a sign
  of life. When nothing has arrived for N_TIMEOUTS x BROKER_TIMEOUT the worker closes its
  socket (LINGER 0), opens a new one at once (the seed names no back-off) and sends READY.
- PINGs go out every ``--ping-ms`` (1000, the seed's second) while the worker is idle; a
  job runs to the end before the next PING (the seed: no heartbeats while working).
- The job is echoed: the result equals the job. ``--work-ms`` simulates work before the
  result is sent (a kill then finds the worker busy).

Records ``ping``, ``pong``, ``reconnect``, ``exec``, ``done`` and ``malformed`` events;
logs ``ready`` once connected; exits 0 on SIGTERM or SIGINT (``implementations.runtime``).
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.pingpong.protocol import PING, READY, Malformed, parse_from_broker, to_broker
from implementations.runtime import announce_ready, start_role

#: Longest a poll may block, so SIGTERM is acted on promptly.
MAX_POLL_S = 0.25


class Worker:
    def __init__(
        self,
        context: zmq.Context,
        endpoint: str,
        identity: str,
        writer: HistoryWriter,
        log: logging.Logger,
        *,
        broker_timeout_s: float = 1.0,
        n_timeouts: int = 3,
        ping_s: float = 1.0,
        work_s: float = 0.0,
    ) -> None:
        self.context = context
        self.endpoint = endpoint
        self.identity = identity
        self.writer = writer
        self.log = log
        self.silence_s = broker_timeout_s * n_timeouts
        self.ping_s = ping_s
        self.work_s = work_s
        self.socket: zmq.Socket | None = None
        self.name = ""

    def connect(self, reason: str = "") -> None:
        """Open a new DEALER under a fresh identity and announce it with READY.

        With a ``reason`` it is a reconnect, recorded before READY can register the new identity.
        """
        old = self.name
        if self.socket is not None:
            self.socket.close(linger=0)
        self.name = f"{self.identity}-{os.urandom(2).hex()}"
        if reason:
            self.writer.emit("reconnect", worker=self.name, reason=reason, detail=old)
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt_string(zmq.IDENTITY, self.name)
        self.socket.connect(self.endpoint)
        self.socket.send_multipart(to_broker(READY))
        self.log.info("%s connected to %s, READY sent", self.name, self.endpoint)

    def run(self) -> None:
        self.connect()
        assert self.socket is not None  # connect() made it
        announce_ready(self.log, self.name)
        heard = time.monotonic()
        next_ping = heard + self.ping_s
        while True:
            now = time.monotonic()
            timeout = min(next_ping - now, heard + self.silence_s - now, MAX_POLL_S)
            if self.socket.poll(max(0, int(timeout * 1000)), zmq.POLLIN):
                frames = self.socket.recv_multipart()
                heard = time.monotonic()
                self.handle(frames)
            now = time.monotonic()
            if now - heard >= self.silence_s:
                old = self.name
                self.connect(reason=f"nothing heard for {self.silence_s * 1000:.0f} ms")
                self.log.warning(
                    "%s heard nothing for %.1f s: reconnected as %s", old, now - heard, self.name
                )
                heard = now = time.monotonic()
                next_ping = now + self.ping_s
            elif now >= next_ping:
                self.socket.send_multipart(to_broker(PING))
                self.writer.emit("ping", worker=self.name)
                next_ping = now + self.ping_s

    def handle(self, frames: list[bytes]) -> None:
        try:
            msg = parse_from_broker(frames)
        except Malformed as exc:
            self.log.warning("%s dropped a malformed message: %s", self.name, exc)
            self.writer.emit("malformed", worker=self.name, detail=str(exc)[:200])
            return
        if msg.kind == "pong":
            self.writer.emit("pong", worker=self.name)
            return
        rid = rid_of(msg.job) or ""
        self.writer.emit("exec", rid=rid, worker=self.name)
        if self.work_s:
            time.sleep(self.work_s)
        assert self.socket is not None  # run() connected before handling
        self.socket.send_multipart(to_broker(msg.job))
        self.writer.emit("done", rid=rid, worker=self.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the broker's backend endpoint")
    parser.add_argument("--identity", required=True, help="instance name, e.g. worker-2")
    parser.add_argument("--broker-timeout-ms", type=float, default=1000, help="BROKER_TIMEOUT (default 1000)")
    parser.add_argument("--n-timeouts", type=int, default=3, help="N_TIMEOUTS (default 3)")
    parser.add_argument("--ping-ms", type=float, default=1000, help="interval between PINGs (default 1000)")
    parser.add_argument("--work-ms", type=float, default=0, help="simulated work per job (default 0)")
    args = parser.parse_args(argv)
    log, history = start_role(args.identity)
    context = zmq.Context()
    worker = Worker(
        context,
        args.connect,
        args.identity,
        history,
        log,
        broker_timeout_s=args.broker_timeout_ms / 1000,
        n_timeouts=args.n_timeouts,
        ping_s=args.ping_ms / 1000,
        work_s=args.work_ms / 1000,
    )
    try:
        worker.run()
    finally:
        if worker.socket is not None:
            worker.socket.close(linger=0)
        context.term()
        history.close()


if __name__ == "__main__":
    main()
