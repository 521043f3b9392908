"""A planted-bug subject for ``zchaos explore``: a PING/PONG broker (the PING/PONG dialogue
seed) that finds a result's client by a job number the worker echoes back.

A ROUTER for REQ clients, a ROUTER for workers. READY registers a worker; every PING is
answered with a PONG at once and registers a worker the broker does not know; a job goes
to the worker idle longest; an idle worker silent for ``--worker-expire-s`` is removed; a
busy one is never expired (the seed: no PING while working). The job frame carries no
address, so the broker appends a job number to it, the echo worker returns it with the
result, and the broker looks the client up by that number (a result from a worker that
holds no job is dropped). The frontend is read only while a worker is idle.

``--bug ring-of-256``: the job number is one byte, and the clients are kept in a ring of
256 slots that the numbers go round, each slot taken over by the next job with its
number. A worker holds one job at a time, so the numbers seemed to outlive any job by
far; but a worker that holds its job while 256 others are dispatched (frozen, starved,
behind a slow link, under a load heavy enough) and then returns it (a worker that gave up
on the broker meanwhile reconnects and drops it) returns a number that now names another
client's slot: that client gets the stale result as the answer to its own request. Stock
PING/PONG scenarios freeze or cut workers under a light load (a few jobs pass meanwhile)
or kill them (their results never come back), so none shows it. With ``--bug none`` the
number is eight bytes and each client is forgotten when its result came. Standalone on
purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/tag_ring_broker.py --frontend tcp://127.0.0.1:5555 \
        --backend tcp://127.0.0.1:5556 [--worker-expire-s 3] [--bug ring-of-256|none]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import OrderedDict, deque

import zmq

BUGS = ("none", "ring-of-256")
READY, PING, PONG = b"READY", b"PING", b"PONG"
RING = 256


class Broker:
    def __init__(self, frontend: zmq.Socket, backend: zmq.Socket, expire_s: float, bug: str) -> None:
        self.frontend, self.backend = frontend, backend
        self.expire_s = expire_s
        self.width = 1 if bug == "ring-of-256" else 8  # bytes of the job number
        self.expiry: dict[bytes, float] = {}  # worker -> when it expires if idle
        self.busy: set[bytes] = set()
        self.idle: OrderedDict[bytes, None] = OrderedDict()  # first: idle longest
        self.clients: dict[int, bytes] = {}  # job number -> client
        self.numbers = 0
        self.waiting: deque[tuple[bytes, bytes]] = deque()  # (client, job) with no worker yet

    def send_worker(self, worker: bytes, body: bytes) -> bool:
        try:
            self.backend.send_multipart([worker, b"", body], zmq.NOBLOCK)
            return True
        except zmq.ZMQError as exc:
            if exc.errno not in (zmq.EHOSTUNREACH, zmq.EAGAIN):
                raise
        self.expiry.pop(worker, None)  # its connection is gone
        self.idle.pop(worker, None)
        self.busy.discard(worker)
        return False

    def register(self, worker: bytes, now: float) -> None:
        self.expiry[worker] = now + self.expire_s
        self.busy.discard(worker)
        self.idle[worker] = None

    def on_backend(self, frames: list[bytes], now: float) -> None:
        if len(frames) != 3 or frames[1] != b"" or not frames[0]:
            print(f"backend: dropped a malformed message of {len(frames)} frame(s)", flush=True)
            return
        worker, _, body = frames
        known = worker in self.expiry
        if known:
            self.expiry[worker] = now + self.expire_s
        if body == PING:
            if self.send_worker(worker, PONG) and not known:
                self.register(worker, now)
        elif body == READY:
            if not known or worker in self.busy:  # new, or started again under its name: its job is lost
                self.register(worker, now)
        elif worker in self.busy and len(body) >= self.width:
            number = int.from_bytes(body[-self.width :], "big")
            # the bug (width 1): the slot is not this job's any more after 256 others
            client = self.clients.get(number) if self.width == 1 else self.clients.pop(number, None)
            if client is not None:
                self.frontend.send_multipart([client, b"", body[: -self.width]])
            self.busy.discard(worker)
            self.idle[worker] = None
        else:
            print("backend: dropped a result from a worker holding no job", flush=True)

    def on_frontend(self, frames: list[bytes]) -> None:
        if len(frames) != 3 or frames[1] != b"" or not frames[0]:
            print(f"frontend: dropped a malformed request of {len(frames)} frame(s)", flush=True)
            return
        self.waiting.append((frames[0], frames[2]))

    def dispatch(self) -> None:
        while self.waiting and self.idle:
            client, job = self.waiting[0]
            worker, _ = self.idle.popitem(last=False)
            number = self.numbers % (1 << (8 * self.width))
            if not self.send_worker(worker, job + number.to_bytes(self.width, "big")):
                continue
            self.waiting.popleft()
            self.numbers += 1
            self.clients[number] = client
            self.busy.add(worker)

    def expire(self, now: float) -> None:
        for worker in [w for w in self.idle if self.expiry[w] <= now]:
            del self.idle[worker], self.expiry[worker]

    def run(self) -> None:
        while True:
            poller = zmq.Poller()
            poller.register(self.backend, zmq.POLLIN)
            if self.idle and not self.waiting:
                poller.register(self.frontend, zmq.POLLIN)
            ready = dict(poller.poll(100))
            now = time.monotonic()
            while self.backend in ready:
                try:
                    self.on_backend(self.backend.recv_multipart(zmq.NOBLOCK), now)
                except zmq.Again:
                    break
            self.expire(now)
            if self.frontend in ready:
                while self.idle and len(self.waiting) < len(self.idle):
                    try:
                        self.on_frontend(self.frontend.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break
            self.dispatch()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--worker-expire-s", type=float, default=3.0, help="WORKER_EXPIRE_SECONDS")
    parser.add_argument("--bug", choices=BUGS, default="ring-of-256")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    frontend, backend = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    for sock in (frontend, backend):
        sock.linger = 0
    backend.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a job for a worker that is gone fails at once
    frontend.bind(args.frontend)
    backend.bind(args.backend)
    print(f"ready: frontend {args.frontend} backend {args.backend}", flush=True)
    try:
        Broker(frontend, backend, args.worker_expire_s, args.bug).run()
    finally:
        frontend.close()
        backend.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
