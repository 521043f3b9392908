"""What a client adapter is: one protocol client, owned by one Locust user.

The Locust user (``loadtests/user.py``) makes each request: it numbers it, gives it a
run-unique id, builds the payload, records ``send``'s outcome (``reply`` or ``abandon``)
and fires Locust's request event. The adapter only speaks the protocol: it sends, waits,
retries as its protocol's client rule says, and tells the history what happened on the
way through the ``RequestLog`` it is handed (each attempt sent, each retry, anything
unexpected that arrived).

A synchronous adapter implements ``request``; an asynchronous one ``submit``/``poll``.
Adapters live in ``loadtests/adapters/<name>.py`` and expose ``ADAPTER = TheClass``; a
manifest names them by module name. The class says, in one place, what the manifest may
give it: ``DEFAULTS`` (every option it knows, with its default, whose type the option
must have), ``MAX_ENDPOINTS`` (how many endpoints it can use: 1 for a client of one
server, None for a failover client) and ``check_options`` for rules beyond types. The
harness validates a manifest's and a scenario's client options with these before anything
starts (``harness/manifest.py``); ``zchaos list`` prints them.

Endpoints: the adapter gets an ordered list of addresses (``self.endpoints``; the first is
``self.endpoint``), one per endpoint the manifest's client kind names, each through its own
fault proxy when the run has network faults. A failover adapter tries them in its own
order and says which one answered in ``Reply.endpoint`` (the address), which the history
records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import zmq
from greenlet import getcurrent

from contract.history import HistoryWriter
from contract.payload import payload_for, rid_in, rid_of, shown_body
from contract.promises import AUTO_DEADLINE
from contract.rundir import DEFAULT_CLIENT_BUDGET_S

__all__ = ["payload_for", "received", "rid_of"]


def received(frames: list[bytes]) -> dict[str, Any]:
    """The history's evidence of a message that was not as expected: its body (the first
    bytes, as text), its length and the request id found in it (whose request it is)."""
    body, length = shown_body(frames)
    fields: dict[str, Any] = {"body": body, "body_len": length}
    got = rid_in(frames)
    if got is not None:
        fields["got_rid"] = got
    return fields


#: As ints: zmq's flag enums cost a Python-level operation each time they are combined.
_NOBLOCK = int(zmq.NOBLOCK)
_RCVMORE = int(zmq.RCVMORE)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)


def send_message(socket: zmq.Socket, frames: list[bytes]) -> None:
    """Send ``frames`` as one message; a one-frame message by ``send`` itself, which is what
    ``send_multipart`` does with it less zmq.green's bookkeeping around every multipart call."""
    if len(frames) == 1:
        socket.send(frames[0])
    else:
        socket.send_multipart(frames)


def _is_green(context: zmq.Context) -> bool:
    return type(context).__module__.startswith("zmq.green")


def client_socket(context: zmq.Context, kind: int) -> zmq.Socket:
    """A new socket of ``kind`` for an adapter that waits on it through ``recv_within``: a
    ``GreenSocket`` under Locust (``context`` a zmq.green one), else ``context``'s own."""
    if _is_green(context):
        return context.socket(kind, socket_class=GreenSocket)
    return context.socket(kind)


def recv_within(socket: zmq.Socket, timeout_ms: float) -> list[bytes] | None:
    """The next message on ``socket`` if one comes within ``timeout_ms``, else None.

    A multipart message arrives whole, so only its first frame is waited for.
    """
    if isinstance(socket, GreenSocket):
        ready = socket.wait_for(_POLLIN, timeout_ms / 1000)
    else:
        ready = bool(socket.poll(int(timeout_ms), zmq.POLLIN))  # pyzmq truncates a float alike
    if not ready:
        return None
    frames = [socket.recv(_NOBLOCK)]
    # getsockopt is the plain option read (zmq.green's ``get`` adds its own checks).
    while socket.getsockopt(_RCVMORE):
        frames.append(socket.recv(_NOBLOCK))
    return frames


#: What the hub switches a waiting GreenSocket back with (anything else is a stray switch).
_SIGNALLED, _STRUCK = object(), object()


class GreenSocket(zmq.Socket):
    """A socket for a green (gevent) process such as Locust's, cheaper to wait on than
    zmq.green's, for a load client whose receive is most of its own time.

    zmq.green's socket, after every send and receive, reads the socket's events and sets
    two AsyncResults, and each wait makes an AsyncResult, a timer and a callback round of
    the hub: bench/loadgen_rate.py measured a request of a bare zmq.green REQ user at twice
    the CPU of the same request through this class. Here a wait starts an io watcher on
    the socket's ZMQ_FD (and a timer, when it has a timeout) that switches straight back
    to the waiting greenlet; both are stopped when it returns. libzmq's FD only says that
    the events may have changed, and only after an operation found nothing to do, so the
    events are read before each wait (with no other operation on the socket in between)
    and after each wake-up, and once more when the timeout strikes.

    A send or receive without NOBLOCK waits the same way, so that it never blocks the
    process's other users. One greenlet at a time may use a socket.
    """

    _watcher: Any = None
    _hub: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from gevent import get_hub  # only here: a process without green sockets need not import gevent

        self._hub = get_hub()
        self._watcher = self._hub.loop.io(self.getsockopt(zmq.FD), 1)  # 1: readable

    def wait_for(self, event: int, timeout_s: float | None) -> bool:
        """Whether the socket has ``event`` (POLLIN, POLLOUT) now or gets it within
        ``timeout_s`` (None: without a limit), the greenlet switched out meanwhile."""
        # pyzmq types every option's value int | bytes; EVENTS is an int (no cast: a hot path)
        if self.getsockopt(_EVENTS) & event:  # type: ignore[operator]
            return True
        hub, back = self._hub, getcurrent().switch
        timer = None
        if timeout_s is not None:
            # A new timer per wait: a libev timer restarted after a stop counts on from
            # where it stopped, so timeouts would shrink wait after wait.
            timer = hub.loop.timer(timeout_s)
            timer.start(back, _STRUCK)
        self._watcher.start(back, _SIGNALLED)
        try:
            while True:
                why = hub.switch()
                if why is not _SIGNALLED and why is not _STRUCK:
                    raise RuntimeError(f"a stray switch into a greenlet waiting on a socket: {why!r}")
                if self.getsockopt(_EVENTS) & event:  # type: ignore[operator]
                    return True
                if why is _STRUCK:
                    return False
        finally:
            self._watcher.stop()
            if timer is not None:
                timer.close()

    # One signature for all of pyzmq's overloads of send (on ``copy``): each passes through.
    def send(  # type: ignore[override]
        self, data: Any, flags: int = 0, copy: bool = True, track: bool = False, **kwargs: Any
    ) -> Any:
        if flags & _NOBLOCK:
            return super().send(data, flags, copy, track, **kwargs)
        while True:
            try:
                return super().send(data, flags | _NOBLOCK, copy, track, **kwargs)
            except zmq.Again:
                self.wait_for(_POLLOUT, None)

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        if not flags & _NOBLOCK:
            self.wait_for(_POLLIN, None)
        return super().recv(flags | _NOBLOCK, copy, track)

    def close(self, linger: int | None = None) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        super().close(linger)


class RequestLog:
    """What an adapter records about the request it is working on."""

    __slots__ = ("attempts", "cid", "kind", "names", "rid", "seq", "shared", "writer")

    def __init__(
        self,
        writer: HistoryWriter,
        cid: str,
        seq: int,
        rid: str,
        kind: str | None = None,
        names: Callable[[str | None], str | None] | None = None,
    ) -> None:
        self.writer = writer
        self.cid = cid
        self.seq = seq
        self.rid = rid
        self.kind = kind  # the manifest's client kind, recorded on every event
        self.names = names  # endpoint address -> the manifest's name of it (None: the address)
        self.attempts = 0
        # What every event of this request carries, encoded once for all of them.
        self.shared = writer.request_shared(cid, seq, rid, kind)

    def endpoint_name(self, address: str) -> str:
        """The manifest's name of an endpoint address (the address when it has none)."""
        return (self.names(address) if self.names else None) or address

    def _endpoint(self, fields: dict[str, Any], address: str | None) -> None:
        if address is not None:
            fields["endpoint"] = self.endpoint_name(address)

    def emit(self, ev: str, **fields: Any) -> None:
        """One client event about this request (its client, kind, seq and id filled in)."""
        self.writer.emit_shared(ev, self.shared, fields)

    def sent(self, endpoint: str | None = None) -> None:
        """An attempt left (the first send, or a resend after ``retried``), to ``endpoint``
        (the address) when the client has several to choose from."""
        self.attempts += 1
        fields: dict[str, Any] = {"attempt": self.attempts}
        if endpoint is not None:
            fields["endpoint"] = self.endpoint_name(endpoint)
        self.writer.emit_shared("send", self.shared, fields)

    def retried(self, reason: str) -> None:
        """The current attempt failed (timeout, ...) and the request will be sent again."""
        self.emit("retry", attempt=self.attempts + 1, reason=reason)

    def unexpected(self, frames: list[bytes], detail: str, endpoint: str | None = None) -> None:
        """Something arrived that is not the reply to this request (a stale or foreign reply),
        from ``endpoint`` (the address) when the client knows which."""
        fields: dict[str, Any] = {"detail": detail[:200], **received(frames)}
        self._endpoint(fields, endpoint)
        self.emit("unexpected", **fields)


@dataclass
class Reply:
    frames: list[bytes]  # the reply body as the application sees it (envelopes removed)
    worker: str | None = None  # which worker answered, when the protocol says
    endpoint: str | None = None  # which endpoint (address) answered, for a client of several


class Abandoned(Exception):
    """The client gave up on the request (its retries are spent, or the protocol refused it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Lost(Exception):
    """A client that never resends waited its reply deadline out (recorded as ``lost``), at
    ``endpoint`` (the address) when the client says which."""

    def __init__(self, reason: str, endpoint: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.endpoint = endpoint


def _type_name(value: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _same_type(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def resend_budget_s(options: dict[str, Any]) -> float:
    """Lazy Pirate's rule, which most clients follow: ``timeout_ms`` for each of ``retries`` + 1
    attempts, and ``settle_ms`` (where the client has it) before each resend; or the
    ``reply_deadline_s`` of a client that never resends, where that is set."""
    if options.get("reply_deadline_s"):
        return float(options["reply_deadline_s"])
    retries = options.get("retries", 0)
    return (options["timeout_ms"] * (retries + 1) + options.get("settle_ms", 0) * retries) / 1000


class ClientAdapter(ABC):
    """One client of a protocol, with one identity, used by one user at a time."""

    #: every client option the adapter knows, with its default (the manifest's options
    #: override them; a value must have the default's type)
    DEFAULTS: dict[str, Any] = {}
    #: how many endpoints it can use (None: any number, e.g. a failover client)
    MAX_ENDPOINTS: int | None = 1
    #: options it does not know are passed on rather than refused (the external client)
    OPEN_OPTIONS = False
    #: one line for ``zchaos list``
    SUMMARY = ""
    #: it runs a program of the user's: the Locust user passes it ``command``, ``log_path``,
    #: ``writer`` and ``kind`` as keyword arguments too
    RUNS_PROGRAM = False
    #: ``reply_deadline_s`` > 0 makes it a client that never resends and records ``lost``:
    #: a deadline the system's own timers must fit (``zchaos check`` warns when they do not)
    NO_RESEND_DEADLINE = False

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        """What is wrong with ``options``: (option, message) pairs, empty when nothing is.

        Unknown options and values of the wrong type; subclasses add their own rules.
        """
        problems = []
        for key, value in options.items():
            if key not in cls.DEFAULTS:
                if not cls.OPEN_OPTIONS:
                    problems.append((key, "unknown client option"))
            elif key == "reply_deadline_s" and value == AUTO_DEADLINE:
                continue  # a number by the time a client starts (harness/scenario.py)
            elif not _same_type(value, cls.DEFAULTS[key]):
                want = _type_name(cls.DEFAULTS[key])
                problems.append(
                    (key, f"expected {want} (like the default {cls.DEFAULTS[key]!r}), got {value!r}")
                )
        return problems

    @classmethod
    def budget_s(cls, options: dict[str, Any]) -> float:
        """The longest this client works on one request, from its first send to its reply or
        its abandon, retries included, with ``options`` (checked) over ``DEFAULTS``: the checks
        excuse a request's trouble for this long after a fault (run.json ``client_budget_s``).
        Lazy Pirate's rule (``resend_budget_s``) for an adapter with a ``timeout_ms`` or a
        ``reply_deadline_s``; an adapter whose rule differs says its own."""
        merged = cls.merged(options)
        if "timeout_ms" in merged or merged.get("reply_deadline_s"):
            return resend_budget_s(merged)
        return DEFAULT_CLIENT_BUDGET_S

    @classmethod
    def attempt_s(cls, options: dict[str, Any]) -> float:
        """The longest one attempt of this client waits for its reply before it resends or
        gives up, with ``options`` over ``DEFAULTS``: ``timeout_ms``; a client that never
        resends has one attempt, its ``reply_deadline_s``; without either, its whole budget
        (run.json ``client_attempt_s``: what was in flight as a fault began)."""
        merged = cls.merged(options)
        if merged.get("reply_deadline_s") or "timeout_ms" not in merged:
            return cls.budget_s(options)
        return float(merged["timeout_ms"]) / 1000

    @classmethod
    def merged(cls, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` over the adapter's ``DEFAULTS``: what an instance works with."""
        return {**cls.DEFAULTS, **options}

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        problems = self.check_options(options)
        if problems:
            key, message = problems[0]
            raise ValueError(f"{type(self).__name__}: client option {key!r}: {message}")
        self.endpoints = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not self.endpoints:
            raise ValueError(f"{type(self).__name__}: no endpoint given")
        self.endpoint = self.endpoints[0]
        self.options = self.merged(options)
        self.cid = cid
        self.context = context

    @abstractmethod
    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        """Send ``body``, follow the protocol's client rule, return the reply or raise Abandoned."""

    def expected_reply(self, body: list[bytes]) -> list[bytes]:
        """The reply a correct system gives to ``body`` (echo by default)."""
        return body

    def close(self) -> None:
        """Release sockets (called when the user stops)."""


class AsyncClientAdapter(ClientAdapter):
    """A client that keeps many requests in flight on one socket (Majordomo's async client).

    The Locust user keeps up to ``options["window"]`` requests submitted and collects
    whatever ``poll`` says is finished. Replies are matched to requests by the request id
    carried in the body; the adapter applies its own timeout and retry rule inside ``poll``.
    """

    DEFAULTS: dict[str, Any] = {"window": 10}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        problems = super().check_options(options)
        window = options.get("window", cls.DEFAULTS["window"])
        if isinstance(window, int) and window < 1:
            problems.append(("window", f"must be at least 1, got {window}"))
        return problems

    @abstractmethod
    def submit(self, body: list[bytes], log: RequestLog) -> None:
        """Send the first attempt of a request (calling ``log.sent()``) without waiting."""

    @abstractmethod
    def poll(self, timeout_s: float) -> list[tuple[RequestLog, Reply | Abandoned | Lost]]:
        """Wait up to ``timeout_s`` for progress; return the requests that finished."""

    def in_flight(self) -> int:
        """How many submitted requests have not finished."""
        raise NotImplementedError

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        self.submit(body, log)
        while True:
            for done_log, outcome in self.poll(0.1):
                if done_log is log:
                    if isinstance(outcome, Abandoned | Lost):
                        raise outcome
                    return outcome
