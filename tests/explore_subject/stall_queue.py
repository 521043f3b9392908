"""A planted-bug subject for ``zchaos explore``: a Paranoid Pirate queue (6/PPP) that forgets
its workers when it is stalled.

Clients (REQ) on a ROUTER frontend, workers on a ROUTER backend speaking 6/PPP: READY
(0x01), HEARTBEAT (0x02), requests and replies as ``[client, '', body...]``. It hands each
request to the least recently used idle worker, heartbeats the workers it knows and
expires a silent one.

``--bug forget-after-stall``: when its loop comes round more than ``--stall-ms`` later than
its poll asked (the process was frozen, or starved of CPU), it takes every worker for expired and
forgets them all, and from then on it knows a worker again only by a new READY. A
forgotten worker's heartbeat is still answered and its reply dropped as a stranger's, so
the worker never misses its queue, never reconnects, and the queue never serves again.
Restarted (a new process, no stall), it learns its predecessor's workers from their next
heartbeat, as the guide's queue does, bug or not; and a worker it counts busy is idle
again at its next heartbeat (the request it held was lost in a cut: explore's benchmark,
``limit_data`` on both workers' links, once left the twin serving nobody).
Only a stall between ``--stall-ms`` and the workers' own patience (their liveness x
heartbeat, after which they reconnect with READY) shows it: a freeze of the queue of a
few seconds, under any load. No stock scenario freezes the queue. With ``--bug none`` it
keeps its workers. Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/stall_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import OrderedDict

import zmq

READY, HEARTBEAT = b"\x01", b"\x02"
BUGS = ("none", "forget-after-stall")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=5)
    parser.add_argument("--stall-ms", type=int, default=1500, help="a wake this late is a stall")
    parser.add_argument("--bug", choices=BUGS, default="forget-after-stall")
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
    alive: dict[bytes, float] = {}  # every worker it knows -> when it expires
    forgot = False  # the bug has struck: a stranger's heartbeat is answered, never learnt
    heartbeat_at = time.monotonic() + interval
    # The loop's last turn and the longest its poll may have waited: a turn that comes round
    # later than that was stalled, whether the freeze found the queue in its poll or busy
    # (under a starved CPU a frozen queue is often not in its poll).
    turned, waited = time.monotonic(), 0.0
    try:
        while True:
            late = time.monotonic() - turned - waited
            if args.bug != "none" and late > args.stall_ms / 1000:
                # The bug: a late turn is taken as every worker's silence.
                print(f"stalled {late:.1f} s: forgetting {len(alive)} workers", flush=True)
                idle.clear()
                alive.clear()
                forgot = True
            turned = time.monotonic()
            poller = zmq.Poller()
            poller.register(backend, zmq.POLLIN)
            if idle:
                poller.register(frontend, zmq.POLLIN)
            waited = max(0.0, heartbeat_at - time.monotonic())
            events = dict(poller.poll(int(waited * 1000)))
            if backend in events:
                worker, *rest = backend.recv_multipart()
                if rest == [READY]:
                    alive[worker] = time.monotonic() + interval * args.liveness
                    idle.pop(worker, None)
                    idle[worker] = None
                elif worker not in alive and forgot:
                    if rest == [HEARTBEAT]:  # answered, so the worker never reconnects
                        backend.send_multipart([worker, HEARTBEAT])
                    # a forgotten worker's reply is dropped as a stranger's
                elif worker not in alive and rest == [HEARTBEAT]:
                    # A worker of this queue's predecessor (restarted): as the guide's queue,
                    # any word from a worker says it is there, so a restart is recovered from
                    # at the workers' next heartbeat.
                    alive[worker] = time.monotonic() + interval * args.liveness
                    idle[worker] = None
                elif worker not in alive:
                    pass  # a reply for a request of the predecessor's: its client resends
                else:
                    alive[worker] = time.monotonic() + interval * args.liveness
                    if len(rest) >= 3 and b"" in rest:  # a reply: back to its client
                        frontend.send_multipart(rest)
                        idle[worker] = None
                    elif rest == [HEARTBEAT] and worker not in idle:
                        # A worker heartbeats only between requests (as the guide's queue
                        # reads any word): the one it held was lost on the way, in a cut.
                        idle[worker] = None
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
