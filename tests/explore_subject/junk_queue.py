"""A planted-bug subject for ``zchaos explore``: a Simple Pirate queue (the guide's
load-balancing queue, no heartbeats) that loses its idle workers to junk on its backend.

Clients (REQ) on a ROUTER frontend; REQ workers on a ROUTER backend say READY (one frame
0x01), then answer each ``[client, '', body...]`` with the same frames. The queue hands each
request to the least recently used idle worker; a worker's reply makes it idle again (a
reply to a request it did not hand that worker, one a predecessor of the queue handed it,
is dropped: its client has since resent it, and another client may have its identity now:
a restarted ROUTER hands out its predecessor's identities again, so the client's identity
goes to the worker with the queue's own random mark before it).
It keeps the names of its workers in ``--state`` and reads them back when it starts, so a
queue restarted or killed serves again with the workers its predecessor knew, as they
reconnect (Simple Pirate workers never say READY again, and a REQ socket takes a request
from whichever queue it is connected to once its old connection is gone). A worker it
cannot reach (not connected yet, or gone for good) is tried again later, never forgotten.

``--bug evict-on-unknown-command``: a one-frame command from a worker that is not READY is
taken as the workers starting over (as if each would say READY again): the queue forgets
every idle worker, whoever sent the command. Workers never say READY again (Simple Pirate
has no heartbeats), so each such command costs the queue every worker idle at that moment,
for good; a busy one is kept until it is idle at a later one. Once it has none it never
serves again. Only junk on the queue's backend (``malformed`` at the endpoint its workers
use: an "unknown command" among it) shows it: its clients' junk, kills, restarts and
freezes of its workers do not (a restarted Simple Pirate worker registers anew). No stock
scenario sends the queue junk. With ``--bug none`` an unknown command is dropped.
(It dropped one idle worker a command before, the head of its list: the junk's own READYs
and stray replies registered strangers there, the drops took those, and the queue served
on: 2 of 3 guided explorations of 2026-12-03 saw the bug strike and hold.)
Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/junk_queue.py --frontend tcp://127.0.0.1:5555 \
        --backend tcp://127.0.0.1:5556 --state /tmp/queue/workers
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections import OrderedDict
from pathlib import Path

import zmq

READY = b"\x01"
BUGS = ("none", "evict-on-unknown-command")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--state", required=True, help="file of the workers' names (kept over restarts)")
    parser.add_argument("--bug", choices=BUGS, default="evict-on-unknown-command")
    args = parser.parse_args()
    state = Path(args.state)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    frontend.linger = backend.linger = 0
    backend.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a gone worker fails the hand-off at once
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print(f"ready: {args.frontend} {args.backend}", flush=True)
    known = set(bytes.fromhex(n) for n in state.read_text().split()) if state.exists() else set()
    idle: OrderedDict[bytes, None] = OrderedDict.fromkeys(sorted(known))  # LRU first
    busy: dict[bytes, bytes] = {}  # worker -> the client whose request it holds
    # A client's identity goes out with this queue's own mark before it: a ROUTER started
    # again hands its clients the same identities as its predecessor did, so a reply to a
    # predecessor's request would otherwise find another client of the same identity.
    mark = os.urandom(8)
    waiting: list[list[bytes]] = []  # a request its worker's hand-off failed for, sent first

    def keep(worker: bytes, *, gone: bool = False) -> None:
        """The set of workers changed: written again whole (a temporary file renamed)."""
        changed = worker in known if gone else worker not in known
        (known.discard if gone else known.add)(worker)
        if changed:
            state.parent.mkdir(parents=True, exist_ok=True)
            temp = state.with_suffix(".new")
            temp.write_text("".join(f"{w.hex()}\n" for w in sorted(known)))
            temp.replace(state)

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
                    busy.pop(worker, None)
                    idle.pop(worker, None)
                    idle[worker] = None
                    keep(worker)
                elif len(rest) == 2 and rest[0] == b"":  # a command the queue does not know
                    if args.bug != "none" and idle:
                        # The bug: "the workers start over", and they never say READY again.
                        for gone in list(idle):
                            keep(gone, gone=True)
                        print(f"unknown command from {worker!r}: forgot {len(idle)} idle workers", flush=True)
                        idle.clear()
                elif len(rest) >= 4 and rest[0] == b"" and rest[2] == b"":  # a reply
                    if busy.pop(worker, None) == rest[1] and rest[1].startswith(mark):
                        # (a gone client's reply is dropped: the frontend is not mandatory)
                        frontend.send_multipart([rest[1][len(mark) :], *rest[2:]])
                    idle.pop(worker, None)
                    idle[worker] = None
                    keep(worker)
                # anything else is junk, dropped
            if frontend in events and idle and not waiting:
                waiting.append(frontend.recv_multipart())
            tried = 0  # workers not connected: tried again a poll later, never forgotten
            while waiting and tried < len(idle):
                worker, _ = idle.popitem(last=False)
                try:
                    client, *request = waiting[0]
                    backend.send_multipart([worker, b"", mark + client, *request])
                except zmq.ZMQError:  # not connected (yet: a new queue's workers reconnect)
                    idle[worker] = None
                    tried += 1
                    continue
                busy[worker] = mark + waiting.pop(0)[0]
                tried = 0
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
