"""A test subject (issue 37's acceptance): a Paranoid Pirate worker whose reconnect trusts
TCP's connect. After the queue falls silent it reconnects on a new socket, as the guide's
worker does, and then waits for the queue's first word before it counts silence again. With
``--connect-timeout-ms 0`` (no ZMQ_CONNECT_TIMEOUT) that wait lasts as long as the kernel's
connect: through a proxy that refuses it ZeroMQ retries every 100 ms, but a SYN dropped at
the IP level is retried by TCP at 1, 3, 7, 15, 31 s, so the worker comes back long after the
partition healed (recovery VIOLATED). Its twin, ``--connect-timeout-ms 1000``, gives up a
hanging connect after a second and tries again, and is back within a second or two.

    python tests/reconnect_subject/worker.py --connect tcp://10.96.0.2:5556 --identity worker-1
"""

from __future__ import annotations

import argparse
import os
import sys

import zmq

from implementations.paranoid_pirate import worker as pp


class TrustingWorker(pp.Worker):
    """Reconnects, then waits for the queue with no deadline of its own."""

    connect_timeout_ms = 0

    def connect(self) -> None:
        reconnecting = self.socket is not None
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None
        sock = self.ctx.socket(zmq.DEALER)
        if self.connect_timeout_ms:
            sock.setsockopt(zmq.CONNECT_TIMEOUT, self.connect_timeout_ms)
        sock.linger = 0
        self.socket = sock
        self.name = f"{self.args.identity}-{os.urandom(2).hex()}"  # a ROUTER drops a name in use
        sock.identity = self.name.encode()
        sock.connect(self.args.connect)
        sock.send(pp.READY)
        self.log.info("connected to %s as %s, READY sent", self.args.connect, self.name)
        if reconnecting:
            # The bug: no deadline of its own on the way back; the connect's own is TCP's.
            sock.poll(-1, zmq.POLLIN)
            self.log.info("the queue answered %s", self.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # not --connect
    parser.add_argument("--connect-timeout-ms", type=int, default=0)
    own, rest = parser.parse_known_args(argv if argv is not None else sys.argv[1:])
    TrustingWorker.connect_timeout_ms = own.connect_timeout_ms
    pp.main(rest, TrustingWorker)


if __name__ == "__main__":
    main()
