"""Simple Pirate worker (ZeroMQ guide, chapter 4): a REQ socket that says READY once and
then echoes every request.

    python -m implementations.simple_pirate.worker --connect tcp://127.0.0.1:5556 \
        --identity worker-2 [--work-ms 0]

Protocol choices: the identity is ``<instance>-<8 hex>`` (the guide's is random
``XXXX-XXXX``; the prefix lets the history name the instance). READY is one frame 0x01.
A request arrives as ``[client, '', body...]`` and the same frames go back as the reply,
so multi-frame bodies work. No heartbeats, faithfully: the worker cannot tell that its
queue restarted and never registers again. A message it cannot parse is recorded as
``malformed``; since a REQ socket must answer before it can receive again, the worker then
starts over with a new socket and READY. Records ``exec``/``done``; logs ``ready:`` once
READY left; exits cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import zmq

from contract.payload import rid_of
from implementations.runtime import announce_ready, end_role, start_role

log = logging.getLogger("worker")

#: Blocking waits are cut into slices this long: a SIGTERM delivered to one of libzmq's
#: threads only runs its Python handler when the main thread is back in the interpreter.
WAIT_SLICE_MS = 250

READY = b"\x01"


def connect(ctx: zmq.Context, endpoint: str, instance: str) -> tuple[zmq.Socket, str]:
    name = f"{instance}-{os.urandom(4).hex()}"
    socket = ctx.socket(zmq.REQ)
    socket.identity = name.encode()
    socket.linger = 0
    socket.connect(endpoint)
    socket.send(READY)
    log.info("connected to %s as %s, READY", endpoint, name)
    return socket, name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the queue's backend endpoint")
    parser.add_argument("--identity", default="worker", help="instance name (prefix of the identity)")
    parser.add_argument("--work-ms", type=int, default=0)
    args = parser.parse_args(argv)
    _, writer = start_role(args.identity)
    ctx = zmq.Context()
    work_s = args.work_ms / 1000
    socket, name = connect(ctx, args.connect, args.identity)
    announce_ready(log, name)
    try:
        while True:
            if not socket.poll(WAIT_SLICE_MS):
                continue
            frames = socket.recv_multipart()
            if len(frames) < 3 or frames[1] != b"" or not frames[0]:
                detail = f"expected [client, '', body...]: {[f[:24] for f in frames[:4]]}"
                log.warning("malformed message dropped: %s; starting over", detail)
                writer.emit("malformed", detail=detail[:500], worker=name)
                socket.close(linger=0)
                socket, name = connect(ctx, args.connect, args.identity)
                continue
            rid = rid_of(frames[2])
            if rid is not None:
                writer.emit("exec", rid=rid, worker=name)
            if work_s:
                time.sleep(work_s)
            socket.send_multipart(frames)
            if rid is not None:
                writer.emit("done", rid=rid, worker=name)
    finally:
        log.info("stopping")
        end_role(writer, ctx, socket, linger=0)


if __name__ == "__main__":
    main()
