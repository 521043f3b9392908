"""A black-box test subject: a load-balancing queue (Simple Pirate style) with one bug.

Clients (REQ) on a ROUTER frontend, workers on a ROUTER backend speaking 6/PPP: READY
(0x01), HEARTBEAT (0x02), requests and replies as ``[client, '', body...]``. It keeps a
least-recently-used list of idle workers and reads the frontend only while the list is
not empty, heartbeats every worker it has heard from and forgets the silent ones. Its
bug: only READY or a reply puts a worker on the idle list, a heartbeat never does. After
the queue restarts, a worker that was busy gets back on the list with its reply, but one
that was idle only heartbeats (it already sent READY, to the previous queue), and this
queue answers its heartbeats at once, so it never reconnects and never gets work again.
Under load every worker holds a request and the bug hides; with the load idle at the
restart no worker comes back. Standalone on purpose: pyzmq only, nothing of zchaos.

    python tests/blackbox/forgetful_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import OrderedDict

import zmq

READY, HEARTBEAT = b"\x01", b"\x02"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    interval = args.heartbeat_ms / 1000
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print(f"ready: {args.frontend} {args.backend}", flush=True)
    idle: OrderedDict[bytes, None] = OrderedDict()  # workers to hand requests to, LRU first
    alive: dict[bytes, float] = {}  # every worker heard from -> when it expires
    heartbeat_at = time.monotonic() + interval
    try:
        while True:
            poller = zmq.Poller()
            poller.register(backend, zmq.POLLIN)
            if idle:
                poller.register(frontend, zmq.POLLIN)
            events = dict(poller.poll(max(0, int((heartbeat_at - time.monotonic()) * 1000))))
            if backend in events:
                worker, *rest = backend.recv_multipart()
                alive[worker] = time.monotonic() + interval * args.liveness
                if rest == [READY]:
                    idle[worker] = None
                elif len(rest) >= 3 and b"" in rest:  # a reply: back to its client
                    frontend.send_multipart(rest)
                    idle[worker] = None
                elif rest == [HEARTBEAT] and worker not in idle:
                    # Answered at once, so the worker never thinks the queue is gone. The
                    # bug: a heartbeat keeps a worker alive but never puts it on the list.
                    backend.send_multipart([worker, HEARTBEAT])
            if frontend in events and idle:
                request = frontend.recv_multipart()
                worker, _ = idle.popitem(last=False)
                backend.send_multipart([worker, *request])
            if time.monotonic() >= heartbeat_at:
                heartbeat_at = time.monotonic() + interval
                now = time.monotonic()
                for worker in [w for w, expiry in alive.items() if expiry < now]:
                    del alive[worker]
                    idle.pop(worker, None)
                for worker in alive:
                    backend.send_multipart([worker, HEARTBEAT])
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
