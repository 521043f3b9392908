"""The Locust users of zchaos: one protocol client per user, every request in the history.

There is one Locust user class per client kind of the manifest (its ``weight`` or fixed
``users`` count given to Locust), and every client event carries the kind. Each user is
one client with its own identity (``client-7``). It numbers its requests
(``seq`` 1, 2, 3 ...), gives each a run-unique id carried at the head of the payload,
lets its adapter speak the protocol, checks the reply against the request, records the
outcome (``reply``, ``abandon``, or ``lost`` for a client that never resends; the adapter
records ``send``, ``retry`` and ``unexpected``) and fires Locust's ``request`` event, so
Locust's statistics, CSV files and web UI stay true. The load's configuration comes from
the runner as JSON in ``ZCHAOS_LOAD`` (``LoadConfig``); the same seed gives every client the same payloads.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import gevent
import zmq.green as zmq
from locust import User, task

from contract.history import HistoryWriter, NullWriter, history_file
from contract.payload import payload_for, request_id
from loadtests.adapters import adapter_class
from loadtests.adapters.base import (
    Abandoned,
    AsyncClientAdapter,
    ClientAdapter,
    Lost,
    Reply,
    RequestLog,
    received,
)
from loadtests.config import ClientLoad, LoadConfig, wait_time_for


class WrongReply(Exception):
    """The reply was not the one the request asked for (Locust counts it as a failure)."""


_context: zmq.Context | None = None
_writer: HistoryWriter | None = None
_numbers = itertools.count(1)
#: A random byte to a lowercase letter: the payload's filler from one draw of the user's
#: seeded generator (eight draws of randrange cost about as much as recording the request).
LETTERS = bytes(97 + b % 26 for b in range(256))
#: The lag probe's sleep, and the lateness it records (``loadgen_lag``). A reply the
#: generator reads late is timed late: on a machine busy with other work, explore's correct
#: majordomo-mixed showed a p99 of 332 ms against its 250 ms bound, 103 ms when run again
#: with the machine quieter (steady_state takes the lag back out, reports/checkers/core/steady.py).
LAG_PROBE_S = 0.05
LAG_RECORDED_S = 0.02


def probe_lag(writer: HistoryWriter) -> None:
    """Forever (a greenlet of the Locust process): sleep LAG_PROBE_S and record
    ``loadgen_lag`` whenever the sleep overslept by LAG_RECORDED_S or more: the event loop
    that reads every reply was that late."""
    while True:
        asleep = time.perf_counter()
        gevent.sleep(LAG_PROBE_S)
        late = time.perf_counter() - asleep - LAG_PROBE_S
        if late >= LAG_RECORDED_S:
            writer.emit("loadgen_lag", lag_us=int(late * 1e6))


def _process_index(user: User) -> int:
    return getattr(user.environment.runner, "worker_index", 0) or 0


class ZchaosUser(User):
    """Base class; ``make_user_classes`` binds it to a LoadConfig and one client kind."""

    abstract = True
    config: LoadConfig
    client: ClientLoad

    def on_start(self) -> None:
        global _context, _writer
        index = _process_index(self)
        n = next(_numbers)
        self.cid = f"client-{n}" if index == 0 else f"client-{index}.{n}"
        if _context is None:
            _context = zmq.Context()
        if _writer is None:
            # No history folder: a benchmark measuring what recording costs.
            _writer = (
                HistoryWriter(history_file(self.config.history_dir, f"locust-{index}"), "locust")
                if self.config.history_dir
                else NullWriter("locust")
            )
            gevent.spawn(probe_lag, _writer)
        self.writer = _writer
        self.seq = 0
        self.rng = random.Random(f"{self.config.seed}:{self.cid}")
        cls = adapter_class(self.client.adapter)
        extra: dict[str, Any] = {}
        if cls.RUNS_PROGRAM:
            log = f"{self.config.log_dir}/{self.cid}.log" if self.config.log_dir else None
            extra = {
                "command": self.client.command,
                "log_path": log,
                "writer": self.writer,
                "kind": self.client.name,
            }
        self.adapter: ClientAdapter = cls(
            self.client.endpoints, self.client.options, self.cid, _context, **extra
        )
        self.starts: dict[str, tuple[list[bytes], float]] = {}
        # Looked up once: a request's own path is what the load generator's rate is made of
        # (bench/loadgen_rate.py).
        self.is_async = isinstance(self.adapter, AsyncClientAdapter)
        self.fire = self.environment.events.request.fire
        self.draw = self.rng.getrandbits
        self.names = self.client.endpoint_name
        self.endpoint_names: dict[str, str] = {}
        # A self-driven client program makes its own requests: each one it says it sent is
        # numbered and recorded here, as this user's own would be (external adapter).
        self.self_driven = bool(getattr(self.adapter, "self_driven", False))
        if self.self_driven:
            self.adapter.make_log = self._log_for  # type: ignore[attr-defined]

    def on_stop(self) -> None:
        # An asynchronous client collects what it has in flight before it goes, for the
        # drain at most (Locust's --stop-timeout). The adapter's own deadline is no bound:
        # Locust waits without a limit for a user it stopped between two tasks, and a hung
        # external program is given up only after its request_timeout_ms (a minute), so
        # the run once ended with "Locust did not stop" and no verdict.
        deadline = time.monotonic() + (self.environment.stop_timeout or 0.0)
        try:
            if self.self_driven:
                # Read the program's output to its end, not until nothing is in flight: what
                # it sent last may still be on its way, and a send left unread made the
                # worker's execution of it one of "an unsent request" (VIOLATED).
                self.adapter.begin_stop()  # type: ignore[attr-defined]
                while not self.adapter.stopped() and time.monotonic() < deadline:  # type: ignore[attr-defined]
                    self._collect()
            elif isinstance(self.adapter, AsyncClientAdapter):
                while self.adapter.in_flight() and time.monotonic() < deadline:
                    self._collect()
        finally:
            self.adapter.close()

    def _new_request(self) -> tuple[list[bytes], RequestLog]:
        self.seq = seq = self.seq + 1
        rid = request_id(self.cid, seq)
        filler = self.draw(64).to_bytes(8, "little").translate(LETTERS)
        body = [payload_for(rid, self.config.payload_bytes, filler)]
        return body, RequestLog(self.writer, self.cid, seq, rid, self.client.name, self.names)

    def _log_for(self, rid: str, body: str) -> RequestLog:
        """The record of a request a self-driven program sent: the next seq of this client."""
        self.seq = seq = self.seq + 1
        self.starts[rid] = ([body.encode("utf-8", "replace")], time.perf_counter())
        return RequestLog(self.writer, self.cid, seq, rid, self.client.name, self.names)

    def _finish(self, body: list[bytes], log: RequestLog, outcome: Any, started: float) -> None:
        elapsed = time.perf_counter() - started
        exception: Exception | None = None
        if isinstance(outcome, Reply):
            frames = outcome.frames
            ok = frames == self.adapter.expected_reply(body)
            fields: dict[str, Any] = {"ok": ok, "latency_us": int(elapsed * 1e6)}
            if outcome.worker:
                fields["worker"] = outcome.worker
            if outcome.endpoint:
                fields["endpoint"] = self._endpoint_name(outcome.endpoint)
            if not ok:  # the evidence: what came back, and whose request it carries
                fields.update(received(frames))
                exception = WrongReply(f"reply to {log.rid} differs from the request")
            self.writer.emit_shared("reply", log.shared, fields)
            length = sum(map(len, frames))
        else:
            said: dict[str, Any] = {"reason": outcome.reason}
            if isinstance(outcome, Lost) and outcome.endpoint:
                # Where it waited: a driven client program's send has no endpoint (zchaos hands
                # it the request, the program picks where it goes), and no_lost's rule for a
                # request stranded at a passive server needs one (toolkit/shared.py stranded).
                said["endpoint"] = self._endpoint_name(outcome.endpoint)
            log.emit("lost" if isinstance(outcome, Lost) else "abandon", **said)
            exception = outcome
            length = 0
        self.fire(
            request_type=self.client.name,
            name=self.config.name,
            response_time=elapsed * 1000,
            response_length=length,
            exception=exception,
            context={"cid": self.cid, "seq": log.seq},
        )

    def _endpoint_name(self, address: str) -> str:
        """The manifest's name of an endpoint address (looked up once per address)."""
        name = self.endpoint_names.get(address)
        if name is None:
            name = self.endpoint_names[address] = self.names(address) or address
        return name

    @task
    def one_request(self) -> None:
        if self.is_async:
            self._async_round()
            return
        body, log = self._new_request()
        started = time.perf_counter()
        try:
            outcome: Any = self.adapter.request(body, log)
        except (Abandoned, Lost) as exc:
            outcome = exc
        self._finish(body, log, outcome, started)

    def _async_round(self) -> None:
        """Top the window up, then collect what finished (one Locust task per round)."""
        adapter: AsyncClientAdapter = self.adapter  # type: ignore[assignment]
        while not self.self_driven and adapter.in_flight() < adapter.options["window"]:
            body, log = self._new_request()
            self.starts[log.rid] = (body, time.perf_counter())
            adapter.submit(body, log)
        self._collect()

    def _collect(self) -> None:
        adapter: AsyncClientAdapter = self.adapter  # type: ignore[assignment]
        for log, outcome in adapter.poll(0.05):
            body, started = self.starts.pop(log.rid)
            self._finish(body, log, outcome, started)


def make_user_classes(config: LoadConfig) -> dict[str, type[ZchaosUser]]:
    """A concrete Locust user class per client kind of this load, by class name."""
    wait = wait_time_for(config)
    classes = {}
    for client in config.clients:
        name = "Zchaos_" + "".join(c if c.isalnum() else "_" for c in client.name)
        attrs = {
            "config": config,
            "client": client,
            "wait_time": wait,
            "abstract": False,
            "weight": client.weight,
        }
        if client.users:
            attrs["fixed_count"] = client.users
        classes[name] = type(name, (ZchaosUser,), attrs)
    return classes
