"""A user's own Simple Pirate queue (the guide's spqueue): a load-balancing queue with no
heartbeats. pyzmq only, nothing of zchaos, no history.

Clients (REQ) on a ROUTER frontend, workers (REQ) on a ROUTER backend: a worker's first
message is READY (0x01), each later one a reply ``[client, '', body...]``; the queue
hands each request to the least recently used ready worker. It has the guide's stated
weakness: a restarted queue never hears of the workers its predecessor had (they wait for
a request that never comes), so after a restart nothing is served.

    python tests/slow_subject/simple_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections import deque

import zmq

READY = b"\x01"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print(f"ready: {args.frontend} {args.backend}", flush=True)
    workers: deque[bytes] = deque()
    try:
        while True:
            poller = zmq.Poller()
            poller.register(backend, zmq.POLLIN)
            if workers:
                poller.register(frontend, zmq.POLLIN)
            events = dict(poller.poll())
            if backend in events:
                worker, _, *rest = backend.recv_multipart()
                workers.append(worker)
                if rest != [READY]:
                    frontend.send_multipart(rest)
            if frontend in events:
                request = frontend.recv_multipart()
                backend.send_multipart([workers.popleft(), b"", *request])
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
