"""A black-box test subject: a Paranoid Pirate queue (6/PPP) that may forget what a dead
worker held.

Clients (REQ) on a ROUTER frontend, workers on a ROUTER backend speaking 6/PPP: READY
(0x01), HEARTBEAT (0x02), requests and replies as ``[client, '', body...]``. It hands each
request to the least recently used idle worker, heartbeats the idle ones and expires a
worker silent for ``liveness`` heartbeats. It remembers the request each worker holds and,
when that worker expires (or says READY again, restarted), hands it to the next idle
worker ahead of new requests, so a client that never resends is answered too.

``--bug forget-dead-workers-request`` is the guide's queue (ppqueue): it forgets what it
handed out, and a worker killed while idle stays on its list until it expires (about
liveness x heartbeat, 3 s), so the request it holds when it dies, or the next one handed
to it, is gone. A client's resend hides that; only a client that never resends sees it.

``--clock wall`` times heartbeats and expiry with the wall clock (``time.time()``), as the
guide's own ppqueue does: a clock stepped forward expires every worker at once, and one
stepped back keeps a dead worker on the list (tests/test_clock_faults.py). The default,
``monotonic``, is immune to both. Unlike the guide's loop, it reads the clock once a turn
and expires before it reads the turn's message: the guide's refreshes the worker whose
message it has just read with a clock read after the step, so a step left that one worker
serving every client (about half the runs), and whether the clients noticed was chance.
Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/blackbox/pirate_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import OrderedDict, deque

import zmq

READY, HEARTBEAT = b"\x01", b"\x02"
BUGS = ("none", "forget-dead-workers-request")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=3)
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--clock", choices=("monotonic", "wall"), default="monotonic")
    args = parser.parse_args()
    now = time.time if args.clock == "wall" else time.monotonic
    forget = args.bug == "forget-dead-workers-request"
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
    held: dict[bytes, list[bytes]] = {}  # worker -> the request it works on
    waiting: deque[list[bytes]] = deque()  # dead workers' requests, handed on first
    heartbeat_at = now() + interval
    try:
        while True:
            poller = zmq.Poller()
            poller.register(backend, zmq.POLLIN)
            if idle and not waiting:
                poller.register(frontend, zmq.POLLIN)
            events = dict(poller.poll(max(0, int((heartbeat_at - now()) * 1000))))
            turn = now()  # one reading per turn: a step lands between turns, never inside one
            due = turn >= heartbeat_at
            if due:  # expire first: a message read in this turn is from a worker still listed
                for worker in [w for w, expiry in alive.items() if expiry < turn]:
                    del alive[worker]
                    idle.pop(worker, None)
                    if worker in held:
                        waiting.appendleft(held.pop(worker))
            if backend in events:
                worker, *rest = backend.recv_multipart()
                if rest == [READY] or worker in alive:
                    alive[worker] = turn + interval * args.liveness
                    if len(rest) >= 3:  # a reply: back to its client
                        held.pop(worker, None)
                        frontend.send_multipart(rest)
                    elif rest == [READY] and worker in held:  # restarted: what it held is gone
                        waiting.appendleft(held.pop(worker))
                    if worker not in held:
                        idle.pop(worker, None)
                        idle[worker] = None
            if frontend in events:
                waiting.append(frontend.recv_multipart())
            while idle and waiting:
                request = waiting.popleft()
                worker, _ = idle.popitem(last=False)
                backend.send_multipart([worker, *request])
                if not forget:
                    held[worker] = request
            if due:
                heartbeat_at = turn + interval
                for worker in idle:
                    backend.send_multipart([worker, HEARTBEAT])
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
