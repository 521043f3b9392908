"""WMP worker: connects to every manager (or device), does echo jobs, several at a time.

    python -m implementations.wmp.worker --connect tcp://127.0.0.1:5556 tcp://127.0.0.1:5558 \\
        --identity worker-1 --capacity 2 --work-ms 5

Choices where the seed is open:
- The capacity is a number of slots. A WAKE is answered with GIVE only when a slot is
  free; that slot is then locked for the manager that sent the WAKE (the origin of its
  path) until TAKE, NO or ``--lock-timeout-ms``.
- READY carries the free slot count. It is sent to every uplink at start, right after a
  TAKE (before the job runs, as the seed asks), and whenever a slot frees up; while slots
  are free it is repeated with exponential back-off (``--ready-min-ms`` doubling up to
  ``--ready-max-ms``), in case a manager has forgotten it.
- A TAKE whose lock has already timed out is still accepted if a slot is free (the job is
  better done than lost); with no free slot it is dropped and logged: the client retries.
- Jobs are echo: the DONE payload is the TAKE payload, after ``--work-ms`` of (simulated)
  work. Jobs run concurrently on timers in the one thread.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.runtime import announce_ready, start_role
from implementations.wmp import wire


@dataclass
class Uplink:
    endpoint: str
    sock: zmq.Socket
    next_ready: float = 0.0
    interval: float = 0.0


@dataclass
class Lock:
    manager: str
    uplink: Uplink
    deadline: float


@dataclass
class Running:
    job: str
    manager: str
    uplink: Uplink
    route: tuple[str, ...]
    payload: tuple[bytes, ...]
    rid: str
    finish: float


class Worker:
    def __init__(self, args: argparse.Namespace, log: logging.Logger, history: HistoryWriter) -> None:
        self.me = args.identity
        self.log = log
        self.history = history
        self.pid = os.getpid()
        self.capacity = args.capacity
        self.work = args.work_ms / 1000
        self.lock_timeout = args.lock_timeout_ms / 1000
        self.ready_min = args.ready_min_ms / 1000
        self.ready_max = args.ready_max_ms / 1000
        self.ctx = zmq.Context()
        self.uplinks = [Uplink(e, self._dealer(e)) for e in args.connect]
        self.by_socket = {u.sock: u for u in self.uplinks}
        self.locks: dict[str, Lock] = {}
        self.running: list[Running] = []
        self.lock_counter = 0

    def _dealer(self, endpoint: str) -> zmq.Socket:
        sock = self.ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.setsockopt(zmq.IMMEDIATE, 1)  # nothing queues for a manager that is not there
        sock.setsockopt_string(zmq.ROUTING_ID, self.me)
        sock.connect(endpoint)
        return sock

    @property
    def free(self) -> int:
        return self.capacity - len(self.locks) - len(self.running)

    def send(self, uplink: Uplink, msg: wire.Message) -> bool:
        try:
            uplink.sock.send_multipart(wire.encode(msg), zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False  # not connected (yet): READY is repeated, anything else is the client's to retry

    def announce(self) -> None:
        """Tell every uplink the free slot count now, and restart the READY back-off."""
        now = time.monotonic()
        for u in self.uplinks:
            self.send(u, wire.make("READY", self.me, slots=str(self.free)))
            u.interval = self.ready_min
            u.next_ready = now + u.interval

    def run(self) -> None:
        poller = zmq.Poller()
        for u in self.uplinks:
            poller.register(u.sock, zmq.POLLIN)
        self.announce()
        announce_ready(self.log, f"worker {self.me} capacity {self.capacity}")
        while True:
            timeout = self.next_deadline() - time.monotonic()
            events = dict(poller.poll(max(0, min(200, int(timeout * 1000) + 1))))
            for sock in events:
                for _ in range(100):
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.on_message(self.by_socket[sock], frames)
            self.tick(time.monotonic())

    def next_deadline(self) -> float:
        deadlines = [r.finish for r in self.running] + [lk.deadline for lk in self.locks.values()]
        if self.free > 0:
            deadlines += [u.next_ready for u in self.uplinks]
        return min(deadlines, default=time.monotonic() + 0.2)

    def tick(self, now: float) -> None:
        freed = False
        for lock_id, lock in list(self.locks.items()):
            if now >= lock.deadline:
                del self.locks[lock_id]
                self.history.emit(
                    "wmp_unlock",
                    worker=self.me,
                    manager=lock.manager,
                    lock=lock_id,
                    pid=self.pid,
                    reason="timeout",
                )
                freed = True
        for job in [r for r in self.running if now >= r.finish]:
            self.running.remove(job)
            self.send(
                job.uplink, wire.make("DONE", self.me, route=job.route, payload=job.payload, job=job.job)
            )
            self.history.emit("done", rid=job.rid, worker=self.me)
            self.history.emit(
                "wmp_done", worker=self.me, manager=job.manager, job=job.job, pid=self.pid, rid=job.rid
            )
            freed = True
        if freed:
            self.announce()
        elif self.free > 0:
            for u in self.uplinks:
                if now >= u.next_ready:
                    self.send(u, wire.make("READY", self.me, slots=str(self.free)))
                    u.interval = min(self.ready_max, u.interval * 2)
                    u.next_ready = now + u.interval

    def on_message(self, uplink: Uplink, frames: list[bytes]) -> None:
        try:
            msg = wire.decode(frames)
        except wire.Malformed as exc:
            self.log.warning("malformed message %s: %s", wire.describe(frames), exc)
            self.history.emit("malformed", detail=f"{exc}: {wire.describe(frames)}"[:300], worker=self.me)
            return
        if msg.route:
            self.log.warning("dropped %s with a route %s: a worker is an end node", msg.command, msg.route)
            return
        if msg.command == "WAKE":
            self.on_wake(uplink, msg)
        elif msg.command == "TAKE":
            self.on_take(uplink, msg)
        elif msg.command == "NO":
            lock = self.locks.pop(msg.headers["lock"], None)
            if lock is not None:
                self.history.emit(
                    "wmp_unlock", worker=self.me, manager=lock.manager, lock=msg.headers["lock"],
                    pid=self.pid, reason="no",
                )  # fmt: skip
                self.announce()
        else:
            self.log.warning("dropped %s: it is sent by workers, not to them", msg.command)

    def on_wake(self, uplink: Uplink, msg: wire.Message) -> None:
        if self.free <= 0:
            return
        self.lock_counter += 1
        lock_id = f"{self.pid}.{self.lock_counter}"
        self.locks[lock_id] = Lock(msg.origin, uplink, time.monotonic() + self.lock_timeout)
        self.history.emit(
            "wmp_lock", worker=self.me, manager=msg.origin, lock=lock_id, pid=self.pid, capacity=self.capacity
        )
        self.send(uplink, wire.make("GIVE", self.me, route=wire.reply_route(msg), lock=lock_id))

    def on_take(self, uplink: Uplink, msg: wire.Message) -> None:
        lock_id, job_id = msg.headers["lock"], msg.headers["job"]
        manager = msg.headers["manager"]  # the seed: TAKE names its manager; the path may not
        late = self.locks.pop(lock_id, None) is None
        if late:
            if self.free <= 0:
                self.log.warning(
                    "dropped job %s of %s: its lock timed out and no slot is free", job_id, manager
                )
                return
            self.history.emit(
                "wmp_lock", worker=self.me, manager=manager, lock=lock_id, pid=self.pid,
                capacity=self.capacity, detail="late TAKE",
            )  # fmt: skip
        rid = rid_of(msg.payload[0]) or ""
        self.history.emit(
            "wmp_take", worker=self.me, manager=manager, job=job_id, lock=lock_id, rid=rid, pid=self.pid
        )
        self.history.emit("exec", rid=rid, worker=self.me)
        self.running.append(
            Running(
                job_id, manager, uplink, wire.reply_route(msg), msg.payload, rid, time.monotonic() + self.work
            )
        )
        self.announce()

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", required=True, nargs="+", help="manager or device endpoints")
    parser.add_argument("--identity", default="worker", type=wire.check_name)
    parser.add_argument("--capacity", type=int, default=2)
    parser.add_argument("--work-ms", type=float, default=0.0)
    parser.add_argument("--lock-timeout-ms", type=int, default=1000)
    parser.add_argument("--ready-min-ms", type=int, default=250)
    parser.add_argument("--ready-max-ms", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.capacity < 1:
        parser.error("--capacity must be at least 1")
    log, history = start_role(args.identity)
    worker = Worker(args, log, history)
    try:
        worker.run()
    finally:
        worker.close()
        history.close()
        log.info("stopped")


if __name__ == "__main__":
    main()
