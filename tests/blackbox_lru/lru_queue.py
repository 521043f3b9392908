"""A user's broker that zchaos knows nothing about: a load-balancing (LRU) queue for REQ
clients and Simple Pirate workers, written with pyzmq alone.

    python lru_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556 \
        [--on-malformed drop|exit|wedge]

Workers say READY (one frame 0x01) and get ``[client, '', body...]``, which they send back
as the reply. ``--on-malformed`` picks what the first message it cannot parse does: with
``drop`` (the default) it is dropped, and the queue takes a reply only from the worker that
holds that client's request and lists no worker twice; ``exit`` and ``wedge`` are the bugs
a test subject needs: the queue exits (code 3), or stays up and never reads a socket again.
It prints ``ready`` once bound and exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import OrderedDict

import zmq

READY = b"\x01"


class Malformed(ValueError):
    pass


def parse_worker(frames: list[bytes]) -> tuple[bytes, bytes | None, list[bytes]]:
    """(worker, client or None for READY, body)."""
    if len(frames) == 3 and frames[1] == b"" and frames[2] == READY:
        return frames[0], None, []
    if len(frames) >= 5 and frames[1] == b"" and frames[2] and frames[3] == b"":
        return frames[0], frames[2], frames[4:]
    raise Malformed(f"worker message of {len(frames)} frames")


def parse_client(frames: list[bytes]) -> tuple[bytes, list[bytes]]:
    if len(frames) >= 3 and frames[1] == b"":
        return frames[0], frames[2:]
    raise Malformed(f"client message of {len(frames)} frames")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--on-malformed", choices=("drop", "exit", "wedge"), default="drop")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print("ready", flush=True)
    idle: OrderedDict[bytes, None] = OrderedDict()
    busy: OrderedDict[bytes, bytes] = OrderedDict()  # worker -> the client it serves
    poll_both, poll_backend = zmq.Poller(), zmq.Poller()
    for poller in (poll_both, poll_backend):
        poller.register(backend, zmq.POLLIN)
    poll_both.register(frontend, zmq.POLLIN)
    wedged = False
    try:
        while True:
            if wedged:
                time.sleep(0.25)
                continue
            events = dict((poll_both if idle else poll_backend).poll(250))
            try:
                if backend in events:
                    worker, client, body = parse_worker(backend.recv_multipart())
                    if client is None:
                        busy.pop(worker, None)
                        idle[worker] = None
                    elif busy.get(worker) == client:
                        del busy[worker]
                        frontend.send_multipart([client, b"", *body])
                        idle[worker] = None
                if frontend in events and idle:
                    client, body = parse_client(frontend.recv_multipart())
                    worker, _ = idle.popitem(last=False)
                    backend.send_multipart([worker, b"", client, b"", *body])
                    busy[worker] = client
                    while len(busy) > 10_000:
                        busy.popitem(last=False)
            except Malformed as exc:
                print(f"malformed: {exc}", file=sys.stderr, flush=True)
                if args.on_malformed == "exit":
                    return 3
                wedged = args.on_malformed == "wedge"
    finally:
        frontend.close()
        backend.close()
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
