"""Paranoid Pirate queue: clients on a ROUTER frontend, workers on a ROUTER backend.

Requests go to the least recently used idle worker. Workers heartbeat the queue and the
queue heartbeats idle workers every interval; a worker silent for ``liveness × interval``
(idle, or busy with a request) is expired and gets no more work.

Only READY registers a worker, as 6/PPP says (a worker must speak first with READY; one
that loses its queue starts over with READY). A HEARTBEAT, a reply or junk from a peer the
queue does not know registers nobody: the guide's queue listed any sender, so a stranger's
``[x, '', y]`` took requests it would never answer. A reply from an unknown peer (a worker
expired while busy) still goes to the client its envelope names; that worker comes back
once it notices the queue's silence and sends READY.

A client's identity goes to the worker behind a random mark of this queue's and the
request's number, and a reply is forwarded only with that mark, once per request
(``discard`` otherwise). libzmq numbers a ROUTER's peers from ``rand()`` never seeded, so a
queue started again hands its clients the very identities its predecessor did: a reply a
worker held across a restart of the queue (a worker frozen with a predecessor's request)
would otherwise reach whichever client now has that identity (explore, paranoid-pirate
seed 1: client-1's reply at client-6). And a request handed on from an expired worker may
be answered twice, by the next worker and by the expired one once it thaws: the first
answer goes to the client, the second is dropped (explore, paranoid-pirate seed 1 again:
client-5's first request delivered twice, worker-2 frozen while it held it).

A request handed to a worker that dies is not lost with it, as it is in the guide's queue
(which forgets what it handed out, so only the client's resend brings it back): the queue
remembers the request each worker holds and gives it to the next idle worker, ahead of new
requests, when that worker expires or says READY again (restarted, it lost what it held).
A client that never resends is then answered too (``requeue = true``, README). Run alone:

    python -m implementations.paranoid_pirate.queue --frontend tcp://127.0.0.1:5555 \
        --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections import OrderedDict, deque

import zmq

from contract.payload import rid_of
from implementations.paranoid_pirate.protocol import HEARTBEAT, Malformed, describe, parse_from_worker
from implementations.runtime import announce_ready, end_role, start_role

#: Random bytes a queue puts before each client identity it sends a worker, then the
#: request's number.
MARK_BYTES = 8
NUMBER_BYTES = 8
TAG_BYTES = MARK_BYTES + NUMBER_BYTES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--heartbeat-ms", type=int, default=1000, help="heartbeat interval (default 1000)")
    parser.add_argument("--liveness", type=int, default=3, help="missed heartbeats before expiry (default 3)")
    parser.add_argument("--name", default="queue", help="name in logs and history (default queue)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    log, history = start_role(args.name)
    interval = args.heartbeat_ms / 1000
    expiry_after = interval * args.liveness

    ctx = zmq.Context()
    frontend = ctx.socket(zmq.ROUTER)
    backend = ctx.socket(zmq.ROUTER)
    for sock in (frontend, backend):
        sock.linger = 0
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    both = zmq.Poller()
    both.register(backend, zmq.POLLIN)
    both.register(frontend, zmq.POLLIN)
    workers_only = zmq.Poller()
    workers_only.register(backend, zmq.POLLIN)

    idle: OrderedDict[bytes, None] = OrderedDict()  # idle workers, least recently used first
    # Every live worker, idle or busy, and when it expires. Busy ones expire too (the
    # guide's queue forgets them): a worker cut off with a request in hand is as dead
    # as an idle one; it registers again with READY.
    known: dict[bytes, float] = {}
    held: dict[bytes, list[bytes]] = {}  # worker -> the request it is working on
    waiting: deque[list[bytes]] = deque()  # to dispatch: dead workers' requests first
    mark = os.urandom(MARK_BYTES)  # this queue's, before each client identity it hands out
    numbers = itertools.count(1)  # each request's, after the mark
    unanswered: set[int] = set()  # the numbers of the requests no reply has gone out for
    heartbeat_at = time.monotonic() + interval
    announce_ready(log, f"frontend {args.frontend} backend {args.backend}")
    try:
        while True:
            poller = both if idle and not waiting else workers_only
            timeout_ms = max(0.0, heartbeat_at - time.monotonic()) * 1000
            events = dict(poller.poll(timeout_ms))

            if backend in events:
                frames = backend.recv_multipart()
                worker, rest = frames[0], frames[1:]
                name = worker.decode(errors="replace")
                try:
                    command, message = parse_from_worker(rest)
                except Malformed as exc:
                    log.warning("malformed message from %s: %s %s", name, exc, describe(rest))
                    history.emit("malformed", worker=name, detail=f"{exc}: {describe(rest)}")
                    # Junk proves a known worker alive, but makes no stranger a worker.
                    command, message = "MALFORMED", None
                if message is not None or (command == "READY" and worker in held):
                    # Its reply, or READY from a worker restarted with its request lost.
                    request = held.pop(worker, None)
                    if request is not None and message is None:
                        log.info("worker %s restarted holding a request: handed on", name)
                        waiting.appendleft(request)
                if command == "READY" or worker in known:
                    if worker not in known:
                        log.info("worker %s registered (%s)", name, command)
                        history.emit("worker_ready", worker=name, detail=command)
                    # Any message is a sign of life; a worker that holds no request is idle
                    # again (a heartbeat that crossed its request does not make it idle).
                    known[worker] = time.monotonic() + expiry_after
                    idle.pop(worker, None)
                    if worker not in held:
                        idle[worker] = None
                if message is not None:
                    tag = message.envelope[0]
                    number = int.from_bytes(tag[len(mark) : TAG_BYTES]) if tag.startswith(mark) else 0
                    if number in unanswered:
                        unanswered.discard(number)
                        frontend.send_multipart([tag[TAG_BYTES:], *message.frames()[1:]])
                    else:
                        # A predecessor's request (its client resent it, another may have its
                        # identity), or one answered already by the worker it was handed on to.
                        why = "answered already" if number else "a reply to another queue's request"
                        log.info("reply from %s dropped: %s", name, why)
                        history.emit("discard", worker=name, rid=rid_of(message.body[0]), reason=why)

            if frontend in events:
                frames = frontend.recv_multipart()
                if len(frames) < 3 or frames[1] != b"":
                    log.warning("malformed request from a client: %s", describe(frames))
                    history.emit("malformed", detail=f"client request: {describe(frames)}")
                else:
                    number = next(numbers)
                    unanswered.add(number)
                    waiting.append([mark + number.to_bytes(NUMBER_BYTES) + frames[0], *frames[1:]])

            while idle and waiting:
                frames = waiting.popleft()
                worker, _ = idle.popitem(last=False)
                backend.send_multipart([worker, *frames])
                held[worker] = frames
                rid = rid_of(frames[2])
                if rid is not None and history.enabled:
                    history.emit("dispatch", worker=worker.decode(errors="replace"), rid=rid)

            now = time.monotonic()
            if now >= heartbeat_at:
                heartbeat_at = now + interval
                for worker in [w for w, expiry in known.items() if expiry <= now]:
                    del known[worker]
                    busy = worker not in idle
                    idle.pop(worker, None)
                    request = held.pop(worker, None)
                    if request is not None:
                        waiting.appendleft(request)
                    name = worker.decode(errors="replace")
                    log.info(
                        "worker %s expired (silent for %.1f s%s)",
                        name,
                        expiry_after,
                        ", busy" if busy else "",
                    )
                    history.emit(
                        "worker_expired",
                        worker=name,
                        reason=f"silent for {expiry_after:.1f} s" + (", busy" if busy else ""),
                    )
                for worker in idle:
                    backend.send_multipart([worker, HEARTBEAT])
    finally:
        end_role(history, ctx, frontend, backend)


if __name__ == "__main__":
    main()
