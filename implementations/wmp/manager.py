"""WMP manager: takes echo jobs from clients on its frontend and hands them to workers.

    python -m implementations.wmp.manager --frontend tcp://127.0.0.1:5555 \\
        --backend tcp://127.0.0.1:5556 --identity manager-a

Frontend: a ROUTER for REQ-style clients (Lazy Pirate): ``[client, '', body...]`` in, the
worker's result ``[client, '', result...]`` out. Backend: a ROUTER that workers and devices
connect to, speaking WMP (SPEC.md).

Choices where the seed is open:
- A READY carries the worker's free capacity (``slots``). The manager keeps one entry per
  routing path; a READY from a path it knows replaces that entry (so a repeated READY is
  ignored in effect, and a READY sent after a TAKE updates the count). ``slots=0`` forgets
  the path. An entry not refreshed by a READY within ``--ready-ttl-ms`` is forgotten (the
  workers repeat READY well within that while they have free capacity).
- WAKE goes to every remembered path with free slots ("any worker"): as many WAKEs as the
  path has free slots, up to the number of jobs waiting, counting those still unanswered
  by a GIVE (forgotten after ``--wake-retry-ms``), so that a worker can lock several
  slots at once and a queue of jobs does not make a storm of WAKEs.
- Reliability is the application's: a job whose worker dies is not given again; the client
  retries (Lazy Pirate) and the retry is a new job. Jobs waiting longer than
  ``--job-ttl-ms`` are dropped (their client has given up on them).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.runtime import announce_ready, start_role
from implementations.wmp import wire


@dataclass
class Waiting:
    """A worker (by its routing path) that said it is ready."""

    address: bytes  # routing id of the neighbour the path goes through
    slots: int
    seen: float
    wakes: int = 0  # WAKEs sent that no GIVE has answered yet
    woken: float = 0.0  # when the last of them went


@dataclass
class Job:
    job: str
    client: list[bytes]  # the client's envelope on the frontend
    body: tuple[bytes, ...]
    rid: str
    queued: float
    worker: str = ""


class Manager:
    def __init__(self, args: argparse.Namespace, log: logging.Logger, history: HistoryWriter) -> None:
        self.me = args.identity
        self.log = log
        self.history = history
        self.ready_ttl = args.ready_ttl_ms / 1000
        self.job_ttl = args.job_ttl_ms / 1000
        self.wake_retry = args.wake_retry_ms / 1000
        self.ctx = zmq.Context()
        self.frontend = self._router(args.frontend)
        self.backend = self._router(args.backend)
        self.waiting: dict[tuple[str, ...], Waiting] = {}
        self.queue: deque[Job] = deque()
        self.given: dict[str, Job] = {}
        self.counter = 0
        self.pid = os.getpid()  # job ids stay unique across restarts of the manager
        self.seen_paths: set[tuple[str, ...]] = set()  # for logging a worker's first READY only

    def _router(self, endpoint: str) -> zmq.Socket:
        sock = self.ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a restarted peer takes its identity back
        sock.bind(endpoint)
        return sock

    def send(self, address: bytes, msg: wire.Message) -> None:
        try:
            self.backend.send_multipart([address, *wire.encode(msg)], zmq.NOBLOCK)
        except zmq.Again:
            self.log.warning("backend full, dropped %s to %r", msg.command, address)

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.frontend, zmq.POLLIN)
        poller.register(self.backend, zmq.POLLIN)
        housekeeping = time.monotonic() + 1
        announce_ready(self.log, f"manager {self.me}")
        while True:
            events = dict(poller.poll(200))
            if self.backend in events:
                for _ in range(100):
                    try:
                        frames = self.backend.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.on_backend(frames)
            if self.frontend in events:
                for _ in range(100):
                    try:
                        frames = self.frontend.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.on_client(frames)
            now = time.monotonic()
            if now >= housekeeping:
                self.expire(now)
                housekeeping = now + 1

    def malformed(self, frames: list[bytes], why: str) -> None:
        self.log.warning("malformed message %s: %s", wire.describe(frames), why)
        self.history.emit("malformed", detail=f"{why}: {wire.describe(frames)}"[:300])

    def on_client(self, frames: list[bytes]) -> None:
        try:
            cut = frames.index(b"")
        except ValueError:
            cut = -1
        if cut < 1 or cut == len(frames) - 1:
            self.malformed(frames, "client request without envelope and body")
            return
        self.counter += 1
        body = tuple(frames[cut + 1 :])
        job = Job(f"{self.pid}-{self.counter}", frames[:cut], body, rid_of(body[0]) or "", time.monotonic())
        self.queue.append(job)
        self.wake()

    def wake(self) -> None:
        if not self.queue:
            return
        now = time.monotonic()
        for path, w in self.waiting.items():
            if now - w.woken > self.wake_retry:
                w.wakes = 0  # a worker busy elsewhere ignored them; they may be sent again
            extra = min(w.slots, len(self.queue)) - w.wakes
            for _ in range(extra):
                self.send(w.address, wire.make("WAKE", self.me, route=path[:-1]))
            if extra > 0:
                w.wakes += extra
                w.woken = now

    def on_backend(self, frames: list[bytes]) -> None:
        address, rest = frames[0], frames[1:]
        try:
            msg = wire.decode(rest)
        except wire.Malformed as exc:
            self.malformed(rest, str(exc))
            return
        if msg.route:
            self.malformed(rest, f"a manager is an end node; got a route {msg.route}")
            return
        handler = {"READY": self.on_ready, "GIVE": self.on_give, "DONE": self.on_done}.get(msg.command)
        if handler is None:
            self.malformed(rest, f"{msg.command} is sent by managers, not to them")
            return
        handler(address, msg)

    def on_ready(self, address: bytes, msg: wire.Message) -> None:
        slots = int(msg.headers["slots"])
        if slots == 0:
            self.waiting.pop(msg.path, None)
            return
        if msg.path not in self.seen_paths:
            self.seen_paths.add(msg.path)
            self.log.info("worker %s ready (%d slots) via %s", msg.origin, slots, "/".join(msg.path))
            self.history.emit("worker_ready", worker=msg.origin, detail="/".join(msg.path))
        known = self.waiting.get(msg.path)
        if known is None:
            self.waiting[msg.path] = Waiting(address, slots, time.monotonic())
        else:
            known.address, known.slots, known.seen = address, slots, time.monotonic()
        self.wake()

    def on_give(self, address: bytes, msg: wire.Message) -> None:
        lock = msg.headers["lock"]
        w = self.waiting.get(msg.path)
        if w is not None:
            w.wakes = max(0, w.wakes - 1)
        job = self._next_job()
        route = wire.reply_route(msg)
        if job is None:
            self.send(address, wire.make("NO", self.me, route=route, lock=lock))
            self.history.emit("wmp_no", worker=msg.origin, manager=self.me, lock=lock)
            return
        job.worker = msg.origin
        self.given[job.job] = job
        self.send(
            address,
            wire.make(
                "TAKE", self.me, route=route, payload=job.body, lock=lock, job=job.job, manager=self.me
            ),
        )
        self.history.emit("wmp_take", worker=msg.origin, manager=self.me, job=job.job, lock=lock, rid=job.rid)
        if w is not None:
            w.slots -= 1
        self.wake()

    def _next_job(self) -> Job | None:
        now = time.monotonic()
        while self.queue:
            job = self.queue.popleft()
            if now - job.queued <= self.job_ttl:
                return job
            self.log.info("dropped job %s (%s): waited longer than the job ttl", job.job, job.rid)
        return None

    def on_done(self, address: bytes, msg: wire.Message) -> None:
        job_id = msg.headers["job"]
        job = self.given.pop(job_id, None)
        if job is None:
            self.log.warning("DONE from %s for job %s that this manager did not give", msg.origin, job_id)
            self.history.emit(
                "wmp_result",
                worker=msg.origin,
                manager=self.me,
                job=job_id,
                detail="not given by this manager",
            )
            return
        detail: dict[str, Any] = {}
        if job.worker != msg.origin:
            detail["detail"] = f"given to {job.worker}"
        self.history.emit("wmp_result", worker=msg.origin, manager=self.me, job=job_id, rid=job.rid, **detail)
        try:
            self.frontend.send_multipart([*job.client, b"", *msg.payload], zmq.NOBLOCK)
        except zmq.Again:
            self.log.warning("frontend full, dropped the result of job %s", job_id)

    def expire(self, now: float) -> None:
        for path in [p for p, w in self.waiting.items() if now - w.seen > self.ready_ttl]:
            del self.waiting[path]
        while self.queue and now - self.queue[0].queued > self.job_ttl:
            job = self.queue.popleft()
            self.log.info("dropped job %s (%s): waited longer than the job ttl", job.job, job.rid)
        # A job whose worker died never comes back; its client has retried long since.
        for job_id in [j for j, job in self.given.items() if now - job.queued > 6 * self.job_ttl]:
            del self.given[job_id]
        self.wake()

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers and devices")
    parser.add_argument("--identity", default="manager", type=wire.check_name)
    parser.add_argument("--ready-ttl-ms", type=int, default=5000)
    parser.add_argument("--job-ttl-ms", type=int, default=10000)
    parser.add_argument("--wake-retry-ms", type=int, default=500)
    args = parser.parse_args(argv)
    log, history = start_role(args.identity)
    manager = Manager(args, log, history)
    try:
        manager.run()
    finally:
        manager.close()
        history.close()
        log.info("stopped")


if __name__ == "__main__":
    main()
