"""Majordomo 0.1 (7/MDP) broker with the MMI extension (8/MMI).

    python -m implementations.majordomo.broker --frontend tcp://127.0.0.1:5555 \
        [--backend tcp://127.0.0.1:5556] [--heartbeat-ms 2500] [--liveness 3] \
        [--request-expiry-ms 10000]

One ROUTER serves clients and workers, as the spec says; it binds every endpoint given
(``--frontend`` and optionally ``--backend``) so a harness can put clients and workers
behind separate fault proxies while both still reach the same socket. Logs ``ready:``
once bound. Records ``worker_ready``/``worker_expired`` (with the service), ``dispatch``,
``requeue``, ``request_expired``, ``mmi_reply`` and ``malformed`` in the history.

Protocol choices (where 7/MDP leaves room, or where we differ from the guide's mdbroker):

- One request queue and one FIFO idle-worker list per service, created on first use.
- Heartbeats go to every registered worker every ``heartbeat-ms``, busy or idle, and every
  worker, busy or idle, expires after ``heartbeat-ms x liveness`` of silence (checked on
  every heartbeat tick, and before any dispatch to it). (The guide's
  broker never expires a busy worker, so a worker that dies holding a request would keep
  it forever.) Any command but DISCONNECT counts as a sign of life.
- A worker that expires, disconnects or breaks the protocol while holding a request gives
  it back: the request goes to the head of its service queue and another worker executes
  it (at-least-once execution; the spec assumes idempotent workers).
- A request waits in its service queue at most ``request-expiry-ms``, then it is dropped
  (its client retries or gives up). This covers services nobody serves.
- A valid but unexpected worker command (a second READY, HEARTBEAT or REPLY from an
  unknown worker, REQUEST from a worker, READY for an ``mmi.*`` service) is answered
  with DISCONNECT and the worker is forgotten; invalid messages are logged and dropped.
- ``mmi.service`` answers ``200`` while at least one live worker serves the service named
  in the last body frame, ``404`` otherwise; any other ``mmi.*`` answers ``501``. As in
  the guide, the code replaces the last body frame of the request.
- On SIGTERM/SIGINT the broker sends DISCONNECT to every worker, so they re-register at
  once with the next broker instead of waiting for their liveness to run out.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.majordomo import mdp
from implementations.runtime import announce_ready, end_role, start_role

log = logging.getLogger("broker")


@dataclass
class Pending:
    """A client request the broker holds (queued, or in a worker's hands)."""

    client: bytes
    service: str
    body: list[bytes]
    rid: str | None
    deadline: float  # monotonic time after which a queued request is dropped


@dataclass
class Worker:
    identity: bytes
    name: str
    service: str
    expiry: float
    request: Pending | None = None


@dataclass
class Service:
    name: str
    requests: deque[Pending] = field(default_factory=deque)
    waiting: dict[bytes, Worker] = field(default_factory=dict)  # idle workers, FIFO by insertion


def identity_name(identity: bytes) -> str:
    """A worker's identity as text for logs and history (ours are ASCII: ``worker-2-1a2b``)."""
    return identity.decode("utf-8", "backslashreplace")


class Broker:
    """The broker's state machine; ``handle`` one message, ``tick`` timers. Sends on ``socket``."""

    def __init__(
        self,
        socket: zmq.Socket,
        writer: HistoryWriter,
        *,
        heartbeat_ms: int = 2500,
        liveness: int = 3,
        request_expiry_ms: int = 10000,
    ) -> None:
        self.socket = socket
        self.writer = writer
        self.heartbeat_s = heartbeat_ms / 1000
        self.expiry_s = heartbeat_ms * liveness / 1000
        self.request_expiry_s = request_expiry_ms / 1000
        self.services: dict[str, Service] = {}
        self.workers: dict[bytes, Worker] = {}

    # --- inbound ----------------------------------------------------------------------

    def handle(self, frames: list[bytes]) -> None:
        try:
            msg = mdp.parse_broker_inbound(frames)
        except mdp.ProtocolError as exc:
            self._malformed(frames, str(exc))
            return
        if isinstance(msg, mdp.ClientRequest):
            self._client_request(msg)
        else:
            self._worker_command(msg)

    def _malformed(self, frames: list[bytes], why: str) -> None:
        detail = f"{why}: {mdp.describe(frames)}"
        log.warning("malformed message dropped: %s", detail)
        self.writer.emit("malformed", detail=detail[:500])

    def _client_request(self, msg: mdp.ClientRequest) -> None:
        if msg.service.startswith(mdp.MMI_PREFIX):
            self._mmi(msg)
            return
        pending = Pending(
            msg.sender, msg.service, msg.body, rid_of(msg.body[0]), time.monotonic() + self.request_expiry_s
        )
        service = self._service(msg.service)
        service.requests.append(pending)
        self._dispatch(service)

    def _mmi(self, msg: mdp.ClientRequest) -> None:
        asked = ""
        if msg.service == mdp.MMI_SERVICE:
            asked = msg.body[-1].decode("utf-8", "backslashreplace")
            # Every worker in the table is registered and not expired, waiting or busy.
            alive = any(w.service == asked for w in self.workers.values())
            code = mdp.MMI_FOUND if alive else mdp.MMI_NOT_FOUND
        else:
            code = mdp.MMI_NOT_IMPLEMENTED
        self.socket.send_multipart(mdp.client_reply(msg.sender, msg.service, [*msg.body[:-1], code]))
        self.writer.emit("mmi_reply", service=asked or msg.service, code=int(code), detail=msg.service)

    def _worker_command(self, cmd: mdp.WorkerCommand) -> None:
        worker = self.workers.get(cmd.sender)
        if cmd.command == mdp.DISCONNECT:
            if worker is not None:
                self._delete(worker, "disconnected", notify=False)
            return
        if cmd.command == mdp.READY:
            if worker is not None:
                self._delete(worker, "second READY", notify=True)
            elif cmd.service.startswith(mdp.MMI_PREFIX):
                log.warning("worker %s asked to serve %s: refused", identity_name(cmd.sender), cmd.service)
                self.socket.send_multipart(mdp.to_worker(cmd.sender, mdp.DISCONNECT))
            else:
                self._register(cmd.sender, cmd.service)
            return
        if worker is None or cmd.command == mdp.REQUEST:
            # An unknown worker (e.g. one that outlived the previous broker) must start over.
            if worker is not None:
                self._delete(worker, f"{cmd.name} from a worker", notify=True)
            else:
                log.info("%s from unknown worker %s: DISCONNECT", cmd.name, identity_name(cmd.sender))
                self.socket.send_multipart(mdp.to_worker(cmd.sender, mdp.DISCONNECT))
            return
        worker.expiry = time.monotonic() + self.expiry_s
        if cmd.command == mdp.REPLY:
            worker.request = None
            self.socket.send_multipart(mdp.client_reply(cmd.client, worker.service, list(cmd.body)))
            service = self.services[worker.service]
            service.waiting[worker.identity] = worker
            self._dispatch(service)

    def _register(self, identity: bytes, service_name: str) -> None:
        worker = Worker(identity, identity_name(identity), service_name, time.monotonic() + self.expiry_s)
        self.workers[identity] = worker
        service = self._service(service_name)
        service.waiting[identity] = worker
        log.info("worker %s registered for %s", worker.name, service_name)
        self.writer.emit("worker_ready", worker=worker.name, service=service_name)
        self._dispatch(service)

    def _service(self, name: str) -> Service:
        service = self.services.get(name)
        if service is None:
            service = self.services[name] = Service(name)
        return service

    # --- outbound ---------------------------------------------------------------------

    def _dispatch(self, service: Service) -> None:
        now = time.monotonic()
        while service.waiting and service.requests:
            identity = next(iter(service.waiting))
            worker = service.waiting.pop(identity)
            if worker.expiry < now:
                # Silent past its liveness but not purged yet (the broker itself was stalled,
                # or the timer has not fired): never hand it work.
                self._delete(worker, "silent", notify=False)
                continue
            pending = service.requests.popleft()
            worker.request = pending
            self.socket.send_multipart(mdp.worker_request(identity, pending.client, pending.body))
            fields: dict[str, Any] = {"service": service.name}
            if pending.rid is not None:
                fields["rid"] = pending.rid
            self.writer.emit("dispatch", worker=worker.name, **fields)

    def _delete(self, worker: Worker, reason: str, *, notify: bool) -> None:
        """Forget ``worker``; give back the request it held; tell it when ``notify``."""
        if notify:
            self.socket.send_multipart(mdp.to_worker(worker.identity, mdp.DISCONNECT))
        del self.workers[worker.identity]
        service = self.services[worker.service]
        service.waiting.pop(worker.identity, None)
        log.info("worker %s gone (%s)", worker.name, reason)
        self.writer.emit("worker_expired", worker=worker.name, service=worker.service, reason=reason)
        if worker.request is not None:
            pending, worker.request = worker.request, None
            # Head of the queue: it has waited longest, and its client is still retrying.
            service.requests.appendleft(pending)
            fields: dict[str, Any] = {"worker": worker.name, "reason": reason}
            if pending.rid is not None:
                fields["rid"] = pending.rid
            self.writer.emit("requeue", service=service.name, **fields)
            self._dispatch(service)

    # --- timers -----------------------------------------------------------------------

    def tick(self) -> None:
        """Expire silent workers and stale requests, heartbeat the rest."""
        now = time.monotonic()
        for worker in [w for w in self.workers.values() if w.expiry < now]:
            # Deleting a busy worker requeues its request, whose dispatch may already have
            # deleted another worker of this list (silent too): delete each once.
            if self.workers.get(worker.identity) is worker:
                self._delete(worker, "silent", notify=False)
        for service in self.services.values():
            if service.requests and any(p.deadline < now for p in service.requests):
                self._expire_requests(service, now)
        for identity in self.workers:
            self.socket.send_multipart(mdp.to_worker(identity, mdp.HEARTBEAT))

    def _expire_requests(self, service: Service, now: float) -> None:
        keep: deque[Pending] = deque()
        for pending in service.requests:
            if pending.deadline >= now:
                keep.append(pending)
                continue
            fields: dict[str, Any] = {"reason": "no worker in time"}
            if pending.rid is not None:
                fields["rid"] = pending.rid
            self.writer.emit("request_expired", service=service.name, **fields)
        log.info("service %s: %d request(s) expired", service.name, len(service.requests) - len(keep))
        service.requests = keep

    def disconnect_all(self) -> None:
        for identity in self.workers:
            self.socket.send_multipart(mdp.to_worker(identity, mdp.DISCONNECT))

    def run(self) -> None:
        """Serve until SIGTERM/SIGINT (SystemExit, see implementations.runtime)."""
        next_tick = time.monotonic() + self.heartbeat_s
        socket = self.socket
        while True:
            timeout_ms = max(0, int((next_tick - time.monotonic()) * 1000))
            if socket.poll(timeout_ms):
                # Drain what is there before looking at the clock again: fewer syscalls under load.
                for _ in range(1000):
                    try:
                        frames = socket.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.handle(frames)
            if time.monotonic() >= next_tick:
                self.tick()
                next_tick = time.monotonic() + self.heartbeat_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind (clients, and workers)")
    parser.add_argument("--backend", help="a second endpoint the same socket binds (workers)")
    parser.add_argument("--heartbeat-ms", type=int, default=2500, help="heartbeat interval (default 2500)")
    parser.add_argument("--liveness", type=int, default=3, help="silent intervals before expiry (default 3)")
    parser.add_argument("--request-expiry-ms", type=int, default=10000,
                        help="longest wait of a request in its service queue (default 10000)")  # fmt: skip
    parser.add_argument("--name", default="broker", help="name in logs and history (default broker)")
    args = parser.parse_args(argv)
    _, writer = start_role(args.name)
    endpoints = [e for e in (args.frontend, args.backend) if e]

    ctx = zmq.Context()
    socket = ctx.socket(zmq.ROUTER)
    socket.linger = 500  # lets the DISCONNECTs of a clean stop leave
    broker = Broker(
        socket,
        writer,
        heartbeat_ms=args.heartbeat_ms,
        liveness=args.liveness,
        request_expiry_ms=args.request_expiry_ms,
    )
    try:
        for endpoint in endpoints:
            try:
                socket.bind(endpoint)
            except zmq.ZMQError as exc:
                log.error("cannot bind %s: %s", endpoint, exc)
                return 2
        log.info("heartbeat %d ms x %d, request expiry %d ms", args.heartbeat_ms, args.liveness,
                 args.request_expiry_ms)  # fmt: skip
        announce_ready(log, " ".join(endpoints))
        broker.run()
    finally:
        log.info("stopping: DISCONNECT to %d worker(s)", len(broker.workers))
        broker.disconnect_all()
        end_role(writer, ctx, socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
