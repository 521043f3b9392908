"""Lazy Pirate echo server (ZeroMQ guide, chapter 4): a REP socket that answers each
request with the request itself.

    python -m implementations.lazy_pirate.server --frontend tcp://127.0.0.1:5555 \
        [--identity server] [--work-ms 0]
    python -m implementations.lazy_pirate.server --connect tcp://127.0.0.1:5556 ...

With ``--connect`` instead of ``--frontend`` it is a REP worker behind a queue's DEALER
backend (the ``rep`` probe worker of its family's card).

Protocol choices: the guide's request is one frame holding a sequence number; this server
echoes any number of frames, so the harness's payloads (request id first) come back
intact. It records ``exec``/``done`` for every request whose first frame carries a request
id (``worker`` = ``--identity``) and treats any other request as opaque (echoed, not
recorded). It simulates no faults of its own (the guide's server crashes and stalls at
random): the harness kills and freezes it. ``--work-ms`` simulates the work of a request.
Logs ``ready:`` once bound; exits cleanly on SIGTERM/SIGINT (implementations.runtime).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import zmq

from contract.payload import rid_of
from implementations.runtime import announce_ready, end_role, start_role

log = logging.getLogger("server")

#: Blocking waits are cut into slices this long: a SIGTERM delivered to one of libzmq's
#: threads only runs its Python handler when the main thread is back in the interpreter.
WAIT_SLICE_MS = 250


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--frontend", help="endpoint to bind")
    where.add_argument("--connect", help="endpoint to connect to (a queue's DEALER backend)")
    parser.add_argument("--identity", default="server", help="name in the history (worker field)")
    parser.add_argument("--work-ms", type=int, default=0)
    args = parser.parse_args(argv)
    _, writer = start_role(args.identity)
    ctx = zmq.Context()
    socket = ctx.socket(zmq.REP)
    socket.linger = 0
    work_s = args.work_ms / 1000
    try:
        try:
            if args.frontend:
                socket.bind(args.frontend)
            else:
                socket.connect(args.connect)
        except zmq.ZMQError as exc:
            log.error("cannot bind or connect %s: %s", args.frontend or args.connect, exc)
            return 2
        announce_ready(log, args.frontend or args.connect)
        while True:
            if not socket.poll(WAIT_SLICE_MS):
                continue
            frames = socket.recv_multipart()
            rid = rid_of(frames[0])
            if rid is not None:
                writer.emit("exec", rid=rid, worker=args.identity)
            if work_s:
                time.sleep(work_s)
            socket.send_multipart(frames)
            if rid is not None:
                writer.emit("done", rid=rid, worker=args.identity)
    finally:
        log.info("stopping")
        end_role(writer, ctx, socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
