"""A planted-bug subject for ``zchaos explore``: a Simple Pirate queue (the guide's
load-balancing queue, no heartbeats) that loses its idle workers to junk on its backend.

Clients (REQ) on a ROUTER frontend; REQ workers on a ROUTER backend say READY (one frame
0x01), then answer each ``[client, '', body...]`` with the same frames. The queue hands each
request to the least recently used idle worker; a worker's reply makes it idle again.

``--bug evict-on-unknown-command``: a one-frame command from a worker that is not READY is
taken as that worker leaving, and the worker is looked up in the idle list by position, not
by identity: the queue drops the idle worker at the head of its list, whoever sent the
command. Workers never say READY again (Simple Pirate has no heartbeats), so each such
command costs the queue one real worker for good, and once it has none it never serves
again. Only junk on the queue's backend (``malformed`` at the endpoint its workers use,
with enough "unknown command" cases among it to cost every worker) shows it: its clients'
junk, kills, restarts and freezes of its workers do not (a restarted Simple Pirate worker
registers anew). No stock scenario sends the queue junk. With ``--bug none`` an unknown
command is dropped. Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/junk_queue.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections import OrderedDict

import zmq

READY = b"\x01"
BUGS = ("none", "evict-on-unknown-command")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--bug", choices=BUGS, default="evict-on-unknown-command")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    backend.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a gone worker fails the hand-off at once
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print(f"ready: {args.frontend} {args.backend}", flush=True)
    idle: OrderedDict[bytes, None] = OrderedDict()  # workers to hand requests to, LRU first
    waiting: list[list[bytes]] = []  # requests a gone worker failed to take, sent first
    try:
        while True:
            poller = zmq.Poller()
            poller.register(backend, zmq.POLLIN)
            if idle and not waiting:
                poller.register(frontend, zmq.POLLIN)
            events = dict(poller.poll(250 if waiting else 1000))
            if backend in events:
                worker, *rest = backend.recv_multipart()
                if len(rest) == 2 and rest[0] == b"" and rest[1] == READY:
                    idle.pop(worker, None)
                    idle[worker] = None
                elif len(rest) == 2 and rest[0] == b"":  # a command the queue does not know
                    if args.bug != "none" and idle:
                        # The bug: "that worker is leaving", found by position, not identity.
                        gone, _ = idle.popitem(last=False)
                        print(f"unknown command from {worker!r}: dropped {gone!r}", flush=True)
                elif len(rest) >= 4 and rest[0] == b"" and rest[2] == b"":  # a reply
                    frontend.send_multipart(rest[1:])  # a gone client's is dropped (not mandatory)
                    idle.pop(worker, None)
                    idle[worker] = None
                # anything else is junk, dropped
            if frontend in events and idle and not waiting:
                waiting.append(frontend.recv_multipart())
            while waiting and idle:
                worker, _ = idle.popitem(last=False)
                try:
                    backend.send_multipart([worker, b"", *waiting[0]])
                    waiting.pop(0)
                except zmq.ZMQError:  # that worker is gone (killed while idle): the next one
                    continue
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
