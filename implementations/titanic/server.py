"""Titanic (9/TSP): disconnected, durable request-reply on top of Majordomo.

    python -m implementations.titanic.server --backend tcp://127.0.0.1:5556 \
        --frontend tcp://127.0.0.1:5555 --storage ./.titanic [--identity titanic] \
        [--heartbeat-ms 2500] [--liveness 3] [--window 4] [--dispatch-timeout-ms 5000]

An MDP worker for three services and an MDP client of the same broker:

- ``titanic.request`` [service, body...] -> ``200`` + uuid once the request is stored;
- ``titanic.reply`` [uuid] -> ``200`` + the stored reply, ``300`` while pending, ``400``
  for a uuid it does not hold (never issued, or closed);
- ``titanic.close`` [uuid] -> ``200`` (also for an unknown uuid);
- a dispatcher sends each stored, unreplied request to its service and stores the reply.

Logs ``titanic server ready`` once its three service workers and the dispatcher run.
Each service is one ``implementations.majordomo.worker.MdpWorker`` (heartbeats, liveness,
reconnect, DISCONNECT handling) in a thread of its own; the store (``store.py``) is shared.

Where it differs from the guide's titanic.py, and why:

- **Durable before the answer.** The request is written to a temporary file, fsynced,
  renamed and the directory fsynced before ``titanic.request`` answers 200 (the guide
  pickles it without fsync, so a crash of the machine may lose an acknowledged request).
  ``titanic.close`` unlinks and fsyncs before it answers, so a closed uuid stays closed
  across a restart. A reply is stored the same way before the request counts as done.
- **No queue file, no scanning.** The guide appends every uuid to a queue file and walks
  the whole file on every dispatcher pass (once a second or per new request, reading one
  new uuid per pass), so dispatch cost grows with every request ever made. Here the
  waiting requests are an in-memory FIFO, rebuilt on start from the store (requests
  without a reply): a restart resumes dispatching exactly what is stored and unreplied.
- **Several dispatches in flight.** The guide sends one request at a time with a 1 s
  timeout and one attempt, so one slow service stalls every other. Here ``window`` MDP
  client sockets each carry one request; a reply is matched to the request of its socket
  (MDP 0.1 has no correlation id). A socket that waits past ``dispatch-timeout-ms`` is
  closed (a late reply must not be taken for the next request) and its request waits
  again at the back of the queue: a request is dispatched until a reply is stored.
- **A silent service holds one slot, not all.** A service whose last dispatch went
  unanswered gets one request in flight at a time until it answers again, so requests for
  a service nobody serves (a typo, or a hostile client) cannot occupy every slot and
  starve the services that work; in the guide every request waits its turn behind them.
- **No mmi.service before each dispatch.** Our broker queues requests for a service that
  has no worker yet and expires them after its own ``request-expiry-ms``; asking MMI first
  only adds a round trip and is racy (the worker may go between answer and request).
- **Execution is at-least-once per uuid.** A crash between the service's reply and the
  stored reply, a dispatch timeout or the broker re-queueing a dead worker's request
  runs it again; the manifest promises at-least-once and the checks count executions.
- A malformed request (no service frame, a service name that is not UTF-8 or is a
  ``titanic.*`` service) gets ``400`` with the reason; a failure to store gets ``500``
  (retry later). A malformed message from the broker is logged and dropped by the
  MDP worker code.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import zmq

from contract.history import HistoryWriter
from implementations.majordomo import mdp
from implementations.majordomo.worker import MdpWorker
from implementations.runtime import start_role
from implementations.titanic.store import Store

log = logging.getLogger("titanic")

SERVICES = ("titanic.request", "titanic.reply", "titanic.close")
Handler = Callable[[list[bytes]], list[bytes]]


class ServiceWorker(MdpWorker):
    """An MDP worker whose replies come from ``handler(body)`` instead of an echo."""

    def __init__(self, *args: object, handler: Handler, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.handler = handler

    def serve(self, client: bytes, body: list[bytes]) -> None:
        assert self.socket is not None
        self.socket.send_multipart(mdp.worker_reply(client, self.handler(body)))


class Titanic:
    """The three services' answers, over one store."""

    def __init__(self, store: Store, wake: threading.Event) -> None:
        self.store = store
        self.wake = wake  # tells the dispatcher a new request is stored

    def request(self, body: list[bytes]) -> list[bytes]:
        if len(body) < 2:
            return [b"400 titanic.request needs a service frame and a body"]
        try:
            service = body[0].decode()
        except UnicodeDecodeError:
            return [b"400 service name is not UTF-8"]
        if not service or service.startswith("titanic."):
            return [f"400 cannot queue for service {service!r}".encode()]
        try:
            uuid = self.store.put_request(service, body[1:])
        except OSError as exc:
            log.error("could not store a request: %s", exc)
            return [b"500 could not store the request"]
        self.wake.set()
        return [b"200", uuid.encode()]

    def reply(self, body: list[bytes]) -> list[bytes]:
        if len(body) != 1:
            return [b"400 titanic.reply takes one uuid frame"]
        status, frames = self.store.reply(body[0].decode(errors="replace"))
        return [status.encode(), *frames]

    def close(self, body: list[bytes]) -> list[bytes]:
        if len(body) != 1:
            return [b"400 titanic.close takes one uuid frame"]
        try:
            self.store.close(body[0].decode(errors="replace"))
        except OSError as exc:
            log.error("could not close a request: %s", exc)
            return [b"500 could not close"]
        return [b"200"]


@dataclass
class Slot:
    """One dispatch socket and the request it carries (None: idle)."""

    socket: zmq.Socket
    uuid: str | None = None
    service: str = ""
    deadline: float = 0.0


class Dispatcher:
    """Sends stored, unreplied requests to their services and stores the replies."""

    def __init__(
        self,
        ctx: zmq.Context,
        endpoint: str,
        store: Store,
        wake: threading.Event,
        window: int,
        timeout_ms: int,
    ) -> None:
        self.ctx = ctx
        self.endpoint = endpoint
        self.store = store
        self.wake = wake
        self.timeout_s = timeout_ms / 1000
        self.slots = [Slot(self._socket()) for _ in range(window)]
        self.silent: set[str] = set()  # services whose last dispatch went unanswered

    def _socket(self) -> zmq.Socket:
        socket = self.ctx.socket(zmq.DEALER)
        socket.linger = 0
        socket.connect(self.endpoint)
        return socket

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self._fill()
                self._wait()
                self._expire()
        finally:
            for slot in self.slots:
                slot.socket.close(linger=0)

    def _fill(self) -> None:
        self.wake.clear()
        for slot in self.slots:
            if slot.uuid is not None:
                continue
            probing = {s.service for s in self.slots if s.uuid is not None and s.service in self.silent}
            job = self.store.next_pending(skip=probing)
            if job is None:
                return
            slot.uuid, slot.service, body = job
            slot.deadline = time.monotonic() + self.timeout_s
            slot.socket.send_multipart(mdp.client_request(slot.service, body))

    def _wait(self) -> None:
        busy = [s for s in self.slots if s.uuid is not None]
        if len(busy) < len(self.slots) and self.wake.is_set():
            return  # a new request and an idle slot: dispatch it at once
        poller = zmq.Poller()
        for slot in busy:
            poller.register(slot.socket, zmq.POLLIN)
        # Short turns: an idle slot must see a new request soon (the wake event is not pollable).
        timeout_ms = 20 if len(busy) < len(self.slots) else 100
        if not busy:
            self.wake.wait(timeout_ms / 1000)
            return
        for socket, _ in poller.poll(timeout_ms):
            slot = next(s for s in busy if s.socket is socket)
            self._on_reply(slot, socket.recv_multipart())

    def _on_reply(self, slot: Slot, frames: list[bytes]) -> None:
        assert slot.uuid is not None
        try:
            body = mdp.parse_client_reply(frames, slot.service)
        except mdp.ProtocolError as exc:
            log.warning("malformed reply for %s dropped: %s %s", slot.uuid, exc, mdp.describe(frames))
            return
        try:
            stored = self.store.put_reply(slot.uuid, body)
        except OSError as exc:
            log.error("could not store the reply of %s (%s): dispatching it again", slot.uuid, exc)
            self.store.requeue(slot.uuid, slot.service)
            stored = True
        self.silent.discard(slot.service)
        if not stored:
            log.info("reply of %s dropped: closed before it came", slot.uuid)
        slot.uuid = None

    def _expire(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.uuid is not None and now >= slot.deadline:
                log.info("no reply for %s from %s in %.1f s: dispatching it again",
                         slot.uuid, slot.service, self.timeout_s)  # fmt: skip
                self.store.requeue(slot.uuid, slot.service)
                self.silent.add(slot.service)
                slot.socket.close(linger=0)  # a late reply must not be taken for the next request
                slot.socket = self._socket()
                slot.uuid = None


def main(argv: list[str] | None = None, store_class: type[Store] = Store) -> None:
    """Run the server (``store_class``: the store to keep requests in; tests pass a faulty one)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", required=True, help="broker endpoint for its service workers")
    parser.add_argument("--frontend", required=True, help="broker endpoint for its dispatcher")
    parser.add_argument("--storage", required=True, help="directory of the stored requests and replies")
    parser.add_argument("--identity", default="titanic", help="instance name (worker identity prefix)")
    parser.add_argument("--heartbeat-ms", type=int, default=2500)
    parser.add_argument("--liveness", type=int, default=3)
    parser.add_argument("--window", type=int, default=4, help="requests dispatched at once")
    parser.add_argument("--dispatch-timeout-ms", type=int, default=5000)
    args = parser.parse_args(argv)
    if args.window < 1 or args.dispatch_timeout_ms < 1:
        parser.error("--window and --dispatch-timeout-ms must be positive")
    _, writer = start_role(args.identity)
    serve(args, writer, store_class(args.storage))


def serve(args: argparse.Namespace, writer: HistoryWriter, store: Store) -> None:
    ctx = zmq.Context()
    wake = threading.Event()
    stop = threading.Event()
    titanic = Titanic(store, wake)
    handlers = dict(zip(SERVICES, (titanic.request, titanic.reply, titanic.close), strict=True))
    workers = [
        ServiceWorker(
            ctx, args.backend, f"{args.identity}.{service.split('.')[1]}", service, writer,
            heartbeat_ms=args.heartbeat_ms, liveness=args.liveness, reconnect_ms=args.heartbeat_ms,
            handler=handlers[service],
        )
        for service in SERVICES
    ]  # fmt: skip
    dispatcher = Dispatcher(ctx, args.frontend, store, wake, args.window, args.dispatch_timeout_ms)
    threads = [threading.Thread(target=w.run, args=(stop,), name=w.service, daemon=True) for w in workers]
    threads.append(threading.Thread(target=dispatcher.run, args=(stop,), name="dispatcher", daemon=True))
    stored = len(store.pending)  # before the dispatcher takes any
    for thread in threads:
        thread.start()
    log.info("titanic server ready: %d stored request(s) to dispatch", stored)
    for handler in logging.getLogger().handlers:
        handler.flush()
    try:
        while all(t.is_alive() for t in threads):
            stop.wait(0.5)
        log.error("a thread of the server died: stopping")
        raise SystemExit(1)
    finally:
        log.info("stopping")
        stop.set()
        for thread in threads:
            thread.join(timeout=max(3.0, args.heartbeat_ms / 1000 + 1))
        for worker in workers:
            worker.close()
        ctx.destroy(linger=0)
        writer.close()


if __name__ == "__main__":
    main()
