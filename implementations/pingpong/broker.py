"""PING/PONG broker: a ROUTER for REQ clients, a ROUTER for workers, an LRU queue of idle workers.

    python -m implementations.pingpong.broker --frontend tcp://127.0.0.1:5555 --backend tcp://127.0.0.1:5556

It follows ``seeds/pingpong-dialogue.txt``: READY registers a worker; every PING is
answered with a PONG at once and registers a worker the broker does not know; a job goes
to the worker that has been idle longest; a result goes back to the client whose job it
was and puts the worker at the tail of the queue; an idle worker silent for
WORKER_EXPIRE_SECONDS is removed. Choices where the seed leaves a detail open:

- Clients are Lazy Pirate style REQ sockets; the job is the request's single body frame.
  The broker remembers which client each job belongs to by the worker it gave the job to
  (a worker holds one job at a time), since the job frame carries no address.
- A PING from a busy worker refreshes it but does not queue it again (it would be handed a
  second job while it holds one); likewise a READY from a busy worker.
- A result from a worker the broker does not know (it restarted, or it had given up on the
  worker) is forwarded only if it answers a job the broker still waits for, otherwise it is
  dropped and recorded as ``discard``. It does not register the sender: only READY and
  PING do (a stranger sending junk does not become a worker; a live worker PINGs within
  a second anyway).
- The frontend is read only while a worker is idle and no job waits to be resent, so
  clients' requests queue in ZeroMQ, not in the broker.
- A message for a worker whose connection is gone fails at once (ROUTER_MANDATORY): the
  worker is removed (``worker_expired``, reason ``unreachable``) and the job goes to the next.
- Resend (the seed's suggested remedy for a worker that dies while working), off unless
  ``--resend-ms`` > 0: a worker that has not returned its job's result after that long is
  given up (``worker_expired``, reason ``no result``) and the job is sent to the next idle
  worker. Whichever result comes first is forwarded; a later one is discarded.
- Control words and results share one frame (the seed fixes ``["", PING]`` and
  ``["", result]``), so a job or result that equals ``READY``, ``PING`` or ``PONG`` reads as
  a control message: the seed's own ambiguity, which the broker cannot frame away without
  breaking the seed's workers. A client's job that is a control word is refused at the
  frontend (``malformed``): an echo worker would wedge on it, and a flood of them once held
  both workers of a fuzz test for seconds each while real requests waited. A worker whose
  *result* is a control word (not an echo worker; a hostile one) is survived:
  - A result ``PING``: the worker is idle in its own eyes and PINGs every second, while the
    broker holds it busy. The seed says a worker sends no PING while working, so a busy
    worker that still PINGs WORKER_EXPIRE_SECONDS after it was given its job (long past a
    PING that crossed the job on the wire) is wedged: it is expired (``worker_expired``,
    reason ``wedged``), its job given up (or resent), and the PING registers it again.
  - A result ``READY`` reads as a restart: the worker is registered again at once and its
    job is lost (or resent). The client that sent it gets no answer; nobody else notices.
  - With resend on, a job is resent at most ``MAX_RESENDS`` times and then dropped
    (``request_expired``), so such a job cannot bounce between workers forever.

Records ``worker_ready`` (detail: what registered it), ``worker_expired``, ``dispatch``,
``discard``, ``request_expired`` and ``malformed``; logs ``ready`` once bound; exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.pingpong.protocol import (
    PONG,
    Malformed,
    parse_from_client,
    parse_from_worker,
    to_client,
    to_worker,
)
from implementations.runtime import announce_ready, drain, end_role, start_role

MAX_POLL_S = 0.1
#: Messages read from one socket in one loop turn, so neither side starves the other.
BATCH = 500
#: Given-up workers whose job may still come back; the oldest are forgotten beyond this.
MAX_GIVEN_UP = 1000
#: Resends of one job (with --resend-ms) before it is dropped.
MAX_RESENDS = 3


@dataclass
class Job:
    client: bytes
    body: bytes
    rid: str
    answered: bool = False
    dispatched_at: float = 0.0
    resends: int = 0


@dataclass
class WorkerState:
    expiry: float  # monotonic time after which an idle worker is removed
    job: Job | None = None


class Broker:
    def __init__(
        self,
        frontend: zmq.Socket,
        backend: zmq.Socket,
        writer: HistoryWriter,
        log: logging.Logger,
        *,
        worker_expire_s: float = 3.0,
        resend_s: float = 0.0,
    ) -> None:
        self.frontend = frontend
        self.backend = backend
        self.writer = writer
        self.log = log
        self.worker_expire_s = worker_expire_s
        self.resend_s = resend_s
        self.workers: dict[bytes, WorkerState] = {}
        self.idle: OrderedDict[bytes, None] = OrderedDict()  # LRU: first is idle longest
        self.waiting: deque[Job] = deque()  # jobs to resend, before any new request
        self.given_up: OrderedDict[bytes, Job] = OrderedDict()

    # --- events -------------------------------------------------------------------
    def _name(self, worker: bytes) -> str:
        return worker.decode(errors="backslashreplace")

    def _register(self, worker: bytes, how: str, now: float) -> WorkerState:
        state = WorkerState(expiry=now + self.worker_expire_s)
        self.workers[worker] = state
        self.idle[worker] = None
        self.writer.emit("worker_ready", worker=self._name(worker), detail=how)
        self.log.info("worker %s registered (%s)", self._name(worker), how)
        return state

    def _remove(self, worker: bytes, reason: str, detail: str = "") -> None:
        state = self.workers.pop(worker, None)
        self.idle.pop(worker, None)
        job = state.job if state is not None else None
        if self.resend_s and job is not None and not job.answered:
            self.given_up[worker] = job
            while len(self.given_up) > MAX_GIVEN_UP:
                self.given_up.popitem(last=False)
            if job.resends < MAX_RESENDS:
                job.resends += 1
                self.waiting.appendleft(job)
            else:
                self.writer.emit(
                    "request_expired", rid=job.rid, reason=f"dropped after {job.resends} resends"
                )
        self.writer.emit("worker_expired", worker=self._name(worker), reason=reason, detail=detail)
        self.log.info("worker %s removed: %s %s", self._name(worker), reason, detail)

    # --- backend --------------------------------------------------------------------
    def on_backend(self, frames: list[bytes], now: float) -> None:
        try:
            msg = parse_from_worker(frames)
        except Malformed as exc:
            self.log.warning("backend: dropped a malformed message: %s", exc)
            self.writer.emit("malformed", detail=f"backend: {exc}"[:200])
            return
        worker = msg.worker
        state = self.workers.get(worker)
        if state is not None:
            state.expiry = now + self.worker_expire_s
        if msg.kind == "ping":
            if (
                state is not None
                and state.job is not None
                and now - state.job.dispatched_at >= self.worker_expire_s
            ):
                held = now - state.job.dispatched_at
                self._remove(worker, "wedged", f"PINGs while holding job {state.job.rid!r} for {held:.1f} s")
                state = None
            if self._send_backend(worker, PONG) and state is None:
                self._register(worker, "ping", now)
        elif msg.kind == "ready":
            if state is None:
                self._register(worker, "ready", now)
            elif state.job is not None:
                # It lost its job (a new start under the same identity): that job will not come back.
                self.log.warning("busy worker %s sent READY; its job is lost", self._name(worker))
                self._remove(worker, "restarted", "READY while busy")
                self._register(worker, "ready", now)
        else:
            self.on_result(worker, state, msg.body, now)

    def on_result(self, worker: bytes, state: WorkerState | None, result: bytes, now: float) -> None:
        job = state.job if state is not None else self.given_up.pop(worker, None)
        if job is None or job.answered:
            rid = (job.rid if job else rid_of(result)) or ""
            reason = "job already answered" if job else "no job outstanding"
            self.writer.emit("discard", worker=self._name(worker), rid=rid, reason=reason)
            self.log.info("dropped a result from %s: %s", self._name(worker), reason)
        else:
            job.answered = True
            self.frontend.send_multipart(to_client(job.client, result))
        if state is not None:
            state.job = None
            self.idle[worker] = None

    def _send_backend(self, worker: bytes, body: bytes) -> bool:
        """Send to one worker; False (and the worker removed) if its connection is gone."""
        try:
            self.backend.send_multipart(to_worker(worker, body), zmq.NOBLOCK)
            return True
        except zmq.Again:
            why = "send would block"
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            why = "no connection"
        if worker in self.workers:
            self._remove(worker, "unreachable", why)
        return False

    # --- frontend -------------------------------------------------------------------
    def on_frontend(self, frames: list[bytes], now: float) -> None:
        try:
            msg = parse_from_client(frames)
        except Malformed as exc:
            self.log.warning("frontend: dropped a malformed request: %s", exc)
            self.writer.emit("malformed", detail=f"frontend: {exc}"[:200])
            return
        self.waiting.append(Job(msg.client, msg.job, rid_of(msg.job) or ""))
        self.dispatch(now)

    def dispatch(self, now: float) -> None:
        while self.waiting and self.idle:
            job = self.waiting[0]
            if job.answered:
                self.waiting.popleft()
                continue
            worker, _ = self.idle.popitem(last=False)
            if not self._send_backend(worker, job.body):
                continue
            self.waiting.popleft()
            self.workers[worker].job = job
            job.dispatched_at = now
            detail = f"resend {job.resends}" if job.resends else ""
            self.writer.emit("dispatch", worker=self._name(worker), rid=job.rid, detail=detail)

    # --- timers ---------------------------------------------------------------------
    def on_timers(self, now: float) -> None:
        for worker in [w for w in self.idle if self.workers[w].expiry <= now]:
            silent = now - self.workers[worker].expiry + self.worker_expire_s
            self._remove(worker, "silent", f"{silent * 1000:.0f} ms since its last message")
        if self.resend_s:
            late = [
                (w, s.job)
                for w, s in self.workers.items()
                if s.job is not None and now - s.job.dispatched_at >= self.resend_s
            ]
            for worker, job in late:
                self._remove(worker, "no result", f"job {job.rid} outstanding")
        self.dispatch(now)

    def run(self) -> None:
        poll_both = zmq.Poller()
        poll_both.register(self.backend, zmq.POLLIN)
        poll_both.register(self.frontend, zmq.POLLIN)
        poll_backend = zmq.Poller()
        poll_backend.register(self.backend, zmq.POLLIN)
        while True:
            poller = poll_both if self.idle and not self.waiting else poll_backend
            ready = dict(poller.poll(int(MAX_POLL_S * 1000)))
            if self.backend in ready:
                drain(self.backend, self.on_backend, BATCH)
            if self.frontend in ready:
                drain(self.frontend, self.on_frontend, BATCH, lambda: bool(self.idle))
            self.on_timers(time.monotonic())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument(
        "--worker-expire-s", type=float, default=3.0, help="WORKER_EXPIRE_SECONDS (default 3)"
    )
    parser.add_argument(
        "--resend-ms", type=float, default=0, help="resend a job after this long (default 0: never)"
    )
    parser.add_argument("--name", default="broker", help="name in logs and history (default broker)")
    args = parser.parse_args(argv)
    log, history = start_role(args.name)
    context = zmq.Context()
    frontend = context.socket(zmq.ROUTER)
    backend = context.socket(zmq.ROUTER)
    for sock in (frontend, backend):
        sock.linger = 0
    backend.setsockopt(zmq.ROUTER_MANDATORY, 1)
    try:
        frontend.bind(args.frontend)
        backend.bind(args.backend)
        broker = Broker(
            frontend,
            backend,
            history,
            log,
            worker_expire_s=args.worker_expire_s,
            resend_s=args.resend_ms / 1000,
        )
        announce_ready(log, f"frontend {args.frontend} backend {args.backend}")
        broker.run()
    finally:
        end_role(history, context, frontend, backend)


if __name__ == "__main__":
    main()
