"""A Majordomo 0.1 (7/MDP + 8/MMI) broker written as a user would: pyzmq only, nothing of
zchaos, no history. zchaos judges it from the outside, with its probe workers behind it.

    python tests/blackbox/mdp_broker.py --frontend tcp://127.0.0.1:5555 \\
        --backend tcp://127.0.0.1:5556 [--heartbeat-ms 1000] [--liveness 3] [--bug BUG]

Clients on the frontend ROUTER, workers on the backend ROUTER. Workers are heartbeated
and expired after ``liveness`` silent heartbeats (busy ones too: a dead busy worker's
request goes back to the head of its queue). Requests for a service nobody serves wait.
``mmi.service`` answers 200 while a worker of the service is registered, 404 otherwise;
other ``mmi.*`` answer 501. Malformed messages are dropped.

The bugs on offer (one at a time): ``--bug mmi-always-200`` answers 200 to every
``mmi.service``, also when no worker is alive; ``--bug drop-dead-workers-request`` drops
the request a dead (expired or disconnected) worker held instead of handing it to the
next worker, which only clients that never resend can see; ``--bug
misroute-racing-reply`` sends the reply to a re-queued request (one a dead worker held)
to the wrong client when another client's request races it (waits on the frontend at
the moment the reply comes in): a racy bug, seen on some seeds and not on others;
``--bug idle-disconnect-stays-listed`` (a planted bug of zchaos explore) forgets a worker
that says DISCONNECT while idle (a worker stopped cleanly, SIGTERM) but leaves its address
on its service's idle list, so the next request goes to an address nobody has and is lost:
only a worker restarted or stopped while idle shows it, to clients that never resend (no
stock scenario restarts a Majordomo worker; a killed one says nothing and is expired).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field

import zmq

MDPC01, MDPW01 = b"MDPC01", b"MDPW01"
READY, REQUEST, REPLY, HEARTBEAT, DISCONNECT = b"\x01", b"\x02", b"\x03", b"\x04", b"\x05"


@dataclass
class Worker:
    address: bytes
    service: bytes
    expiry: float
    job: list[bytes] | None = None  # the client message it holds
    requeued: bool = False  # the job is one a dead worker held


@dataclass
class Service:
    requests: deque = field(default_factory=deque)  # [client, body...] waiting
    idle: deque = field(default_factory=deque)  # worker addresses


class Broker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.interval = args.heartbeat_ms / 1000
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.back = self.ctx.socket(zmq.ROUTER)
        for sock, endpoint in ((self.front, args.frontend), (self.back, args.backend)):
            sock.linger = 0
            sock.bind(endpoint)
        self.workers: dict[bytes, Worker] = {}
        self.services: dict[bytes, Service] = {}
        self.requeued: set[int] = set()  # id() of the re-queued jobs waiting for a worker

    def service(self, name: bytes) -> Service:
        return self.services.setdefault(name, Service())

    def expiry(self) -> float:
        return time.monotonic() + self.interval * self.args.liveness

    def send_worker(self, address: bytes, command: bytes, *rest: bytes) -> None:
        self.back.send_multipart([address, b"", MDPW01, command, *rest])

    def on_client(self, frames: list[bytes]) -> None:
        if len(frames) < 5 or frames[1] != b"" or frames[2] != MDPC01:
            return
        client, name, body = frames[0], frames[3], frames[4:]
        if name.startswith(b"mmi."):
            if name == b"mmi.service":
                alive = any(w.service == body[0] for w in self.workers.values())
                code = b"200" if alive or self.args.bug == "mmi-always-200" else b"404"
            else:
                code = b"501"
            self.front.send_multipart([client, b"", MDPC01, name, *body[:-1], code])
            return
        self.service(name).requests.append([client, *body])
        self.dispatch(name)

    def dispatch(self, name: bytes) -> None:
        svc = self.service(name)
        while svc.requests and svc.idle:
            address = svc.idle.popleft()
            job = svc.requests.popleft()
            if address not in self.workers:  # only with idle-disconnect-stays-listed
                self.send_worker(address, REQUEST, job[0], b"", *job[1:])  # to nobody: lost
                continue
            worker = self.workers[address]
            worker.job = job
            worker.requeued = id(job) in self.requeued
            self.requeued.discard(id(job))
            self.send_worker(worker.address, REQUEST, job[0], b"", *job[1:])

    def on_worker(self, frames: list[bytes]) -> None:
        if len(frames) < 4 or frames[1] != b"" or frames[2] != MDPW01:
            return
        address, command, rest = frames[0], frames[3], frames[4:]
        worker = self.workers.get(address)
        if command == READY:
            if worker is not None or not rest or rest[0].startswith(b"mmi."):
                self.delete(address, disconnect=True)
                return
            self.workers[address] = Worker(address, rest[0], self.expiry())
            self.service(rest[0]).idle.append(address)
            self.dispatch(rest[0])
        elif worker is None:
            if command != DISCONNECT:
                self.send_worker(address, DISCONNECT)  # a worker we do not know: let it re-register
        elif command == REPLY:
            if len(rest) < 3 or rest[1] != b"":
                return
            worker.expiry = self.expiry()
            client, racer = rest[0], None
            if worker.requeued and self.args.bug == "misroute-racing-reply" and self.front.poll(0):
                # the bug: a fast path that reads the racing request first and answers the
                # client it came from
                racer = self.front.recv_multipart()
                client = racer[0]
            self.front.send_multipart([client, b"", MDPC01, worker.service, *rest[2:]])
            worker.job, worker.requeued = None, False
            if racer is not None:
                self.on_client(racer)
            self.service(worker.service).idle.append(address)
            self.dispatch(worker.service)
        elif command == HEARTBEAT:
            worker.expiry = self.expiry()
        elif command == DISCONNECT:
            self.delete(address, disconnect=False, keep_idle=self.args.bug == "idle-disconnect-stays-listed")

    def delete(self, address: bytes, *, disconnect: bool, keep_idle: bool = False) -> None:
        if disconnect:
            self.send_worker(address, DISCONNECT)
        worker = self.workers.pop(address, None)
        if worker is None:
            return
        svc = self.service(worker.service)
        if address in svc.idle and not keep_idle:  # keep_idle: the bug
            svc.idle.remove(address)
        if worker.job is not None and self.args.bug == "drop-dead-workers-request":
            return  # the bug: the request is gone; only a client's resend would bring it back
        if worker.job is not None:  # at-least-once: its request goes first to the next worker
            self.requeued.add(id(worker.job))
            svc.requests.appendleft(worker.job)
            self.dispatch(worker.service)

    def heartbeat(self) -> None:
        now = time.monotonic()
        for address, worker in list(self.workers.items()):
            if worker.expiry < now:
                self.delete(address, disconnect=False)
            else:
                self.send_worker(address, HEARTBEAT)

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        beat_at = time.monotonic() + self.interval
        print("ready", flush=True)
        while True:
            ready = dict(poller.poll(max(0, int((beat_at - time.monotonic()) * 1000))))
            if self.back in ready:
                self.on_worker(self.back.recv_multipart())
            if self.front in ready:
                self.on_client(self.front.recv_multipart())
            if time.monotonic() >= beat_at:
                self.heartbeat()
                beat_at = time.monotonic() + self.interval

    def close(self) -> None:
        self.front.close(0)
        self.back.close(0)
        self.ctx.term()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=3)
    parser.add_argument(
        "--bug",
        choices=(
            "none",
            "mmi-always-200",
            "drop-dead-workers-request",
            "misroute-racing-reply",
            "idle-disconnect-stays-listed",
        ),
        default="none",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    broker = Broker(args)
    try:
        broker.run()
    except KeyboardInterrupt:
        pass
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
