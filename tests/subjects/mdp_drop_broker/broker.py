"""A black-box test subject: a Majordomo 0.1 (7/MDP) broker with one bug.

It serves clients and workers on one ROUTER, heartbeats its workers and expires the
silent ones, answers ``mmi.service``, and writes no history. Its bug: a request held by
a worker that dies (expires or disconnects) is dropped instead of being handed to
another worker. Clients that resend hide this; clients that never resend lose the
request, which is what zchaos must report (``no_lost``, with ``requeue = true`` promised
in this subject's manifest). Standalone on purpose: pyzmq only, nothing of zchaos.

    python broker.py --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import deque

import zmq

CLIENT = b"MDPC01"
WORKER = b"MDPW01"
READY, REQUEST, REPLY, HEARTBEAT, DISCONNECT = b"\x01", b"\x02", b"\x03", b"\x04", b"\x05"


class Worker:
    def __init__(self, identity: bytes, service: bytes, expiry: float) -> None:
        self.identity = identity
        self.service = service
        self.expiry = expiry
        self.holding: list[bytes] | None = None  # [client, body...] of the request in hand


class Broker:
    def __init__(self, socket: zmq.Socket, heartbeat_s: float, liveness: int) -> None:
        self.socket = socket
        self.heartbeat_s = heartbeat_s
        self.silence_s = heartbeat_s * liveness
        self.workers: dict[bytes, Worker] = {}
        self.idle: dict[bytes, deque[bytes]] = {}  # service -> idle worker identities
        self.queued: dict[bytes, deque[list[bytes]]] = {}  # service -> [client, body...]

    def to_worker(self, identity: bytes, command: bytes, *rest: bytes) -> None:
        self.socket.send_multipart([identity, b"", WORKER, command, *rest])

    def on_message(self, frames: list[bytes]) -> None:
        if len(frames) < 4 or frames[1] != b"":
            return  # not MDP: dropped
        sender, header = frames[0], frames[2]
        if header == CLIENT and len(frames) >= 5:
            self.on_client(sender, frames[3], frames[4:])
        elif header == WORKER:
            self.on_worker(sender, frames[3], frames[4:])

    def on_client(self, client: bytes, service: bytes, body: list[bytes]) -> None:
        if service == b"mmi.service":
            alive = any(w.service == body[-1] for w in self.workers.values())
            code = b"200" if alive else b"404"
            self.socket.send_multipart([client, b"", CLIENT, service, *body[:-1], code])
            return
        self.queued.setdefault(service, deque()).append([client, *body])
        self.dispatch(service)

    def on_worker(self, identity: bytes, command: bytes, rest: list[bytes]) -> None:
        worker = self.workers.get(identity)
        if command == READY and worker is None and rest:
            worker = Worker(identity, rest[0], time.monotonic() + self.silence_s)
            self.workers[identity] = worker
            self.idle.setdefault(worker.service, deque()).append(identity)
            self.dispatch(worker.service)
            return
        if command == DISCONNECT:
            if worker is not None:
                self.forget(worker)
            return
        if worker is None or command == READY:
            if worker is not None:
                self.forget(worker)
            self.to_worker(identity, DISCONNECT)  # a stranger, or a second READY: start over
            return
        worker.expiry = time.monotonic() + self.silence_s
        if command == REPLY and len(rest) >= 3 and rest[1] == b"":
            worker.holding = None
            self.socket.send_multipart([rest[0], b"", CLIENT, worker.service, *rest[2:]])
            self.idle[worker.service].append(identity)
            self.dispatch(worker.service)

    def forget(self, worker: Worker) -> None:
        del self.workers[worker.identity]
        idle = self.idle.get(worker.service, deque())
        if worker.identity in idle:
            idle.remove(worker.identity)
        # THE BUG: the request in the dead worker's hands is simply dropped. A correct
        # broker puts it back at the head of self.queued[worker.service] and dispatches.
        worker.holding = None

    def dispatch(self, service: bytes) -> None:
        idle, queued = self.idle.get(service), self.queued.get(service)
        while idle and queued:
            worker = self.workers[idle.popleft()]
            if worker.expiry < time.monotonic():
                self.forget(worker)
                continue
            request = queued.popleft()
            worker.holding = request
            self.to_worker(worker.identity, REQUEST, request[0], b"", *request[1:])

    def tick(self) -> None:
        now = time.monotonic()
        for worker in [w for w in self.workers.values() if w.expiry < now]:
            self.forget(worker)
        for identity in self.workers:
            self.to_worker(identity, HEARTBEAT)

    def run(self) -> None:
        next_tick = time.monotonic() + self.heartbeat_s
        while True:
            if self.socket.poll(max(0, int((next_tick - time.monotonic()) * 1000))):
                self.on_message(self.socket.recv_multipart())
            if time.monotonic() >= next_tick:
                self.tick()
                next_tick = time.monotonic() + self.heartbeat_s


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind (clients)")
    parser.add_argument("--backend", required=True, help="endpoint the same socket binds (workers)")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    socket = ctx.socket(zmq.ROUTER)
    socket.linger = 0
    socket.bind(args.frontend)
    socket.bind(args.backend)
    print(f"ready: {args.frontend} {args.backend}", flush=True)
    try:
        Broker(socket, args.heartbeat_ms / 1000, args.liveness).run()
    finally:
        socket.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
