"""The history: the one contract between every part of zchaos.

Every process of a run (load clients, workers, brokers, the nemesis, the runner) appends
events to its own JSON-lines file in ``runs/RUN/history/<source>.jsonl``; the report
pipeline reads them all back with the schema below. This module is the only place that
says which events exist and which fields they carry; writers call ``HistoryWriter.emit``,
which refuses an event or a field that is not declared here.

It is deliberately standard-library only and imports nothing else from zchaos but its time
base (``contract/clock.py``: events are stamped with true time, also under a clock fault), so that the
systems under test (``implementations/``) can record ``exec``/``done`` and protocol events
without depending on the rest of the harness. A process started outside a run (no
``ZCHAOS_HISTORY_DIR`` in its environment) gets a writer that records nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.clock import true_time_ns

#: Environment variables through which the runner tells a process where to record.
ENV_HISTORY_DIR = "ZCHAOS_HISTORY_DIR"
ENV_SOURCE = "ZCHAOS_SRC"

#: Every field that may appear in an event, with its type in the history (the Spark
#: reader builds its explicit schema from this table). ``detail`` carries free-form text
#: or JSON. A fault's parameters are not here: run.json's plan holds them (by ``fault_id``);
#: the ``params`` text older histories carry is left out when they are read.
FIELD_TYPES: dict[str, str] = {
    "ts": "long",  # when it happened: the host's true wall clock (contract/clock.py true_time_ns)
    "src": "string",  # who wrote it: client-7, worker-2, queue, nemesis, runner
    "ev": "string",  # what happened: a key of EVENTS
    # client requests
    "cid": "string",  # client identity
    "seq": "long",  # the client's request counter: 1, 2, 3 ...
    "rid": "string",  # run-unique request id carried inside the request payload
    "attempt": "int",  # 1 for the first send of a request, 2 for its first retry ...
    "ok": "bool",  # the reply is the one expected (echo intact, right request)
    "worker": "string",  # which worker served or executed it, when known
    "latency_us": "long",  # from the first send of the request to its reply
    "lag_us": "long",  # how late the load generator's event loop ran (loadgen_lag)
    "reason": "string",  # why a request was abandoned, a worker expired, ...
    "got_rid": "string",  # the request id found in a reply that was not expected
    # What came back when it was not as expected (a reply with ok false, an unexpected
    # message): its first BODY_SHOWN bytes as text (shown_body) and its whole length in bytes.
    # Recorded only then, so that the history stays small.
    "body": "string",
    "body_len": "long",
    "detail": "string",  # free text or JSON about an unusual event
    "kind": "string",  # the client kind that wrote a client event (the manifest's [[clients]] name)
    # which endpoint a request went to (send), answered it (reply) or sent a reply that was
    # not the one awaited (unexpected): the manifest's name, else the address
    "endpoint": "string",
    # broker protocol events
    "service": "string",  # Majordomo service name
    # nemesis
    "fault": "string",  # kind of fault: kill, restart, freeze, partition ...
    "target": "string",  # what it hit: worker-2, queue, link:worker-1 ...
    "fault_id": "int",  # pairs a fault_stop with its fault_start
    # fault_start: the fault's class, from its kind's card (contract/faults.py reads it back)
    "fault_scope": "string",  # "process" or "link"
    "fault_lossy": "bool",  # the fault loses what is sent
    "fault_harm": "string",  # what it does to the target's service: outage or slowdown
    "fault_stops": "string",  # what of the target's traffic it stops: all, connections, nothing
    "fault_lasting": "bool",  # it has a duration of its own (not a kill or a restart)
    # runner
    "role": "string",  # the role of a process: queue, worker, locust
    "instance": "string",  # the instance name of a process: worker-2
    "pid": "long",
    "code": "int",  # exit code, when it exited; an MMI answer's code
    "signal": "int",  # the signal that ended it, when one did
    "expected": "bool",  # proc_exit: the harness (schedule or teardown) caused it
    "name": "string",  # phase name
    # protocol families (WMP, dwork)
    "job": "string",  # a protocol-level job or task id (WMP job, dwork task)
    "lock": "string",  # WMP: the id of a worker's capacity slot locked for a manager
    "manager": "string",  # WMP: the manager a job or lock belongs to
    "capacity": "int",  # WMP: how many jobs (held or locked) a worker may have at once
    "deps": "string",  # dwork: the names of the tasks a task waits for, comma-separated
    "uuid": "string",  # Titanic: the ticket (32 hex) titanic.request answered for a stored request
    "probe": "string",  # Titanic: why a client asked about a UUID on purpose (forged, closed)
    # Binary Star
    "state": "string",  # a server's state after a change: primary, backup, active, passive
}


@dataclass(frozen=True)
class EventKind:
    """One kind of event: who writes it, which fields it must and may carry."""

    writer: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    doc: str = ""

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional)


#: The events any run may hold: the load clients', the workers' and brokers' common ones,
#: the nemesis's and the runner's.
CORE_EVENTS: dict[str, EventKind] = {
    # --- load clients -------------------------------------------------------------
    "send": EventKind(
        "client",
        ("cid", "seq", "rid", "attempt"),
        ("kind", "endpoint"),
        "a request (or a resend) left (endpoint: to which server, for a client of several)",
    ),
    "reply": EventKind(
        "client",
        ("cid", "seq", "rid", "ok", "latency_us"),
        ("worker", "detail", "kind", "endpoint", "got_rid", "body", "body_len"),
        "the reply to a request arrived and was checked; when not as expected (ok false): the body "
        "received (body, body_len) and the request id found in it (got_rid)",
    ),
    "retry": EventKind(
        "client",
        ("cid", "seq", "attempt"),
        ("rid", "reason", "kind"),
        "a request timed out and will be sent again on a fresh socket",
    ),
    "abandon": EventKind(
        "client", ("cid", "seq", "rid", "reason"), ("kind",), "the client gave up on a request"
    ),
    "lost": EventKind(
        "client",
        ("cid", "seq", "rid", "reason"),
        ("kind", "endpoint"),
        "a client that never resends gave the request up (its reply_deadline_s ran out, or its program "
        "said lost): no reply, counted lost; endpoint: the one it waited on, where its program says it",
    ),
    "unexpected": EventKind(
        "client",
        ("cid", "seq"),
        ("rid", "got_rid", "detail", "kind", "endpoint", "body", "body_len"),
        "something arrived that is not the reply to the request in flight (endpoint: from which "
        "server; body, body_len: what arrived; got_rid: the request id found in it)",
    ),
    "client_error": EventKind(
        "client",
        ("cid", "reason", "detail"),
        ("kind", "code", "rid", "seq"),
        "an external client program broke the JSON-lines protocol (reason: malformed, protocol), "
        "reported an error (error), would not start (init), fell silent (timeout) or exited early "
        "(exit, with its code)",
    ),
    "loadgen_lag": EventKind(
        "client",
        ("lag_us",),
        (),
        "the load generator's own event loop ran late by lag_us, up to ts (a probe's short sleep "
        "overslept: the machine's CPUs were busy, or the generator was): a reply it read meanwhile "
        "was timed late by up to that, which was not the system's",
    ),
    # --- workers ------------------------------------------------------------------
    "exec": EventKind("worker", ("rid", "worker"), ("service",), "a worker started a job"),
    "done": EventKind("worker", ("rid", "worker"), ("service",), "a worker finished a job"),
    # --- brokers ------------------------------------------------------------------
    "worker_ready": EventKind("broker", ("worker",), ("service", "detail"), "the broker registered a worker"),
    "worker_expired": EventKind(
        "broker",
        ("worker",),
        ("service", "reason", "detail"),
        "the broker gave up on a silent worker",
    ),
    "dispatch": EventKind(
        "broker", ("worker",), ("rid", "service", "detail"), "the broker sent a job to a worker"
    ),
    "malformed": EventKind(
        "any", ("detail",), ("worker",), "a process received a message it could not parse"
    ),
    "request_expired": EventKind(
        "broker",
        (),
        ("service", "rid", "reason"),
        "a broker dropped a request: it waited too long for a worker, or no send of it was answered in time",
    ),
    "discard": EventKind(
        "broker",
        ("worker",),
        ("rid", "reason"),
        "the broker dropped a worker's reply (from a disabled or forgotten worker, or an answered job)",
    ),
    # --- nemesis ------------------------------------------------------------------
    "fault_start": EventKind(
        "nemesis",
        ("fault", "target", "fault_id"),
        ("pid", "detail", "fault_scope", "fault_lossy", "fault_harm", "fault_stops", "fault_lasting"),
        "a fault began",
    ),
    "fault_stop": EventKind("nemesis", ("fault", "target", "fault_id"), ("pid", "detail"), "a fault healed"),
    "fault_error": EventKind(
        "nemesis",
        ("fault", "target", "fault_id", "detail"),
        (),
        "a planned fault failed when it fired (detail: the error): the run did not carry out its plan",
    ),
    "malformed_batch": EventKind(
        "nemesis",
        ("fault", "target", "fault_id", "detail"),
        (),
        "the malformed fault sent a batch of junk; detail: JSON {endpoint, side, family, sent: {case: n}}",
    ),
    # --- runner -------------------------------------------------------------------
    "proc_start": EventKind("runner", ("role", "instance", "pid"), (), "a process started"),
    "proc_exit": EventKind(
        "runner",
        ("role", "instance", "pid", "expected"),
        ("code", "signal", "detail"),
        "a process ended (exit code or signal; expected if the harness ended it)",
    ),
    "phase": EventKind("runner", ("name",), ("detail",), "the run entered a phase"),
    "phase_done": EventKind(
        "runner",
        ("name",),
        ("detail",),
        "the run finished a phase (load, drain, teardown): a run whose drain is not done was cut short",
    ),
}

#: The events only one protocol family writes, by family name (the ``name`` of its card,
#: implementations/<family>/card.py). They are declared here, with the rest, so that every
#: process, whatever it imported, validates against one complete schema and the history
#: reader builds its schema from it; tests/test_families.py checks that each group belongs
#: to a family with a card.
FAMILY_EVENTS: dict[str, dict[str, EventKind]] = {
    "majordomo": {
        "mmi_answer": EventKind(
            "client",
            ("cid", "service", "code"),
            ("latency_us", "detail"),
            "a load client's mmi.service query about service was answered with code (200/404/...); "
            "latency_us: since it was asked, so the broker answered within [ts - latency_us, ts]",
        ),
        "mmi_reply": EventKind(
            "broker",
            ("service", "code"),
            ("detail",),
            "the broker answered an MMI query about service with code (200/404/501); detail: the mmi.* asked",
        ),
        "requeue": EventKind(
            "broker",
            ("service",),
            ("rid", "worker", "reason"),
            "a request a lost worker held went back to the head of its queue (at-least-once)",
        ),
    },
    "titanic": {
        "ticket": EventKind(
            "client",
            ("cid", "seq", "rid", "uuid"),
            ("kind", "latency_us"),
            "Titanic: titanic.request answered 200 with uuid: the request is stored (acknowledged)",
        ),
        "ticket_answer": EventKind(
            "client",
            ("cid", "uuid", "service", "code"),
            ("seq", "rid", "kind", "probe", "latency_us", "detail"),
            "Titanic: an answer of titanic.reply or titanic.close (service) about uuid with its status "
            "code (200 ok, 300 pending, 400 unknown, 500 error); probe: the client asked on purpose "
            "about a UUID never issued (forged) or closed earlier (closed)",
        ),
    },
    "pingpong": {
        "ping": EventKind("worker", ("worker",), (), "a worker sent a PING to its broker"),
        "pong": EventKind("worker", ("worker",), (), "a worker received a PONG from its broker"),
        "reconnect": EventKind(
            "worker",
            ("worker",),
            ("reason", "detail"),
            "a worker gave up on its broker connection and opened a new one (worker: the new identity)",
        ),
    },
    "reliable-sketch": {
        "replay": EventKind(
            "worker", ("rid", "worker"), (), "a worker answered a repeated request from its cache (no exec)"
        ),
    },
    "wmp": {
        "wmp_lock": EventKind(
            "worker",
            ("worker", "manager", "lock", "pid", "capacity"),
            ("detail",),
            "a worker locked a slot for a manager and sent GIVE",
        ),
        "wmp_unlock": EventKind(
            "worker",
            ("worker", "manager", "lock", "pid", "reason"),
            ("detail",),
            "a worker released a lock without a job (reason: no, timeout)",
        ),
        "wmp_take": EventKind(
            "any",
            ("worker", "manager", "job"),
            ("lock", "rid", "pid", "detail"),
            "manager: sent TAKE with a job; worker: accepted the job of a TAKE",
        ),
        "wmp_no": EventKind(
            "manager", ("worker", "manager", "lock"), (), "a manager answered a GIVE with NO"
        ),
        "wmp_done": EventKind(
            "worker", ("worker", "manager", "job", "pid"), ("rid",), "a worker sent DONE (its slot is free)"
        ),
        "wmp_result": EventKind(
            "manager", ("worker", "manager", "job"), ("rid", "detail"), "a manager received DONE for a job"
        ),
    },
    "dwork": {
        "task_create": EventKind(
            "scheduler", ("job",), ("deps", "rid", "detail"), "the scheduler added a task (or deps to one)"
        ),
        "task_assign": EventKind(
            "scheduler", ("job", "worker"), (), "the scheduler gave a ready task to a Steal"
        ),
        "task_complete": EventKind(
            "scheduler", ("job", "worker"), (), "the scheduler accepted a task's Complete (once per task)"
        ),
        "task_requeue": EventKind(
            "scheduler",
            ("job", "worker", "reason"),
            (),
            "an assigned task went back to the pool (reason: exit, transfer, lease)",
        ),
        "task_run": EventKind("worker", ("job", "worker"), ("rid",), "a worker started running a task"),
    },
    "binary-star": {
        "bstar_state": EventKind(
            "server",
            ("state",),
            ("reason", "detail"),
            "a Binary Star server entered state (primary, backup, active, passive); reason: the FSM "
            "event that moved it (peer active, client vote, peer expired, dual active ...)",
        ),
    },
}

#: Every event kind: the core ones and every family's.
EVENTS: dict[str, EventKind] = {
    **CORE_EVENTS,
    **{k: v for group in FAMILY_EVENTS.values() for k, v in group.items()},
}

_ALLOWED = {name: kind.allowed for name, kind in EVENTS.items()}
_REQUIRED = {name: frozenset(kind.required) for name, kind in EVENTS.items()}


class HistoryError(ValueError):
    """An event that the schema does not allow."""


#: The share of the load time the load generator may run late (``loadgen_lag``) before the
#: machine counts as busy: latencies timed then are the machine's as much as the system's
#: (steady_state: its latency unknown; a calibration: said in its notes).
LOADGEN_BUSY_SHARE = 0.02


def validate(ev: str, fields: dict[str, Any]) -> None:
    """Raise HistoryError unless ``ev`` with ``fields`` (besides ts/src/ev) is declared."""
    allowed = _ALLOWED.get(ev)
    if allowed is None:
        raise HistoryError(f"unknown history event {ev!r}; declare it in contract/history.py")
    keys = fields.keys()
    if not keys <= allowed:
        raise HistoryError(f"event {ev!r} does not take field(s) {sorted(keys - allowed)}")
    missing = _REQUIRED[ev] - keys
    if missing:
        raise HistoryError(f"event {ev!r} is missing field(s) {sorted(missing)}")


def _encoder() -> Any:
    """JSON text of an event, compact and ASCII as ``json.JSONEncoder(separators=(",", ":"))``
    writes it, by the C encoder called directly: JSONEncoder.encode's set-up on every call was
    half the cost of an event (a load client writes two per request)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    compact = json.JSONEncoder(separators=(",", ":"))
    if make is None:
        return compact.encode
    # (markers, default, string encoder, indent, separators, sort_keys, skipkeys, allow_nan)
    ascii_text = json.encoder.encode_basestring_ascii
    parts = make(None, compact.default, ascii_text, None, ":", ",", False, False, True)
    return lambda obj: "".join(parts(obj, 0))


_to_json = _encoder()
_ascii_text = json.encoder.encode_basestring_ascii


#: How ``_members`` writes a value of each common type (an event's own fields are one to
#: three small values, whose encoding through the C encoder cost more than this formatting).
_FORMAT: dict[type, Any] = {
    int: int.__repr__,
    str: _ascii_text,
    bool: {True: "true", False: "false"}.__getitem__,
}


def _members(fields: dict[str, Any]) -> str:
    """``"name":value,...``: the JSON members of ``fields`` as ``_to_json`` writes them."""
    # Declared names: nothing to escape.
    return ",".join([f'"{name}":{_FORMAT.get(type(v), _to_json)(v)}' for name, v in fields.items()])


class Shared:
    """Fields that several events of one writer carry alike - the client, sequence number, id
    and kind of a request, on its send, retry and reply - encoded once (``HistoryWriter.shared``,
    ``HistoryWriter.request_shared``) and written with each of them by ``HistoryWriter.emit_shared``."""

    __slots__ = ("keys", "src", "text")

    def __init__(self, src: str, keys: frozenset[str], text: str) -> None:
        self.src = src
        self.keys = keys  # the fields' names (without src)
        self.text = text  # "src":...,"cid":...


class _RequestHead:
    """What ``request_shared`` writes alike for every request of one client (and kind)."""

    __slots__ = ("keys", "prefix", "suffix")

    def __init__(self, cid: str, kind: str | None) -> None:
        self.keys = frozenset(("cid", "seq", "rid") if kind is None else ("cid", "seq", "rid", "kind"))
        self.prefix = f'"src":{_ascii_text(cid)},"cid":{_ascii_text(cid)},"seq":'
        self.suffix = "" if kind is None else f',"kind":{_ascii_text(kind)}'


#: (kind, shared keys, own keys) already validated: a load client's events repeat a few shapes.
_VALID_SHAPES: set[tuple[str, frozenset[str], tuple[str, ...]]] = set()


def _validate_shared(ev: str, shared: Shared, fields: dict[str, Any]) -> None:
    shape = (ev, shared.keys, tuple(fields))
    if shape in _VALID_SHAPES:
        return
    twice = shared.keys & fields.keys()
    if twice:
        raise HistoryError(f"event {ev!r} given field(s) {sorted(twice)} twice")
    validate(ev, dict.fromkeys(shared.keys | fields.keys()))
    _VALID_SHAPES.add(shape)


class HistoryWriter:
    """Appends events to one JSON-lines file, one ``write`` per line.

    The file is opened with O_APPEND and each event is a single unbuffered write, so a
    process killed at any moment loses nothing it had recorded and leaves no torn line.

    A writer that cannot write (a full disk above all) stops recording instead of raising
    into the process it records for: a subject of ours must not crash for zchaos's own
    trouble. It takes back the part of a line a short write left, leaves a marker beside
    its file (``mark_stopped``: when, and why) so that the run and a later report know
    the file is not whole, says so once on stderr (``announce``) and records nothing more:
    a line written after a gap would look like a whole history.
    """

    def __init__(self, path: str | os.PathLike[str], src: str, *, announce: bool = True) -> None:
        self.path = Path(path)
        self.src = src
        self.announce = announce  # say on stderr when it stops (the runner says it its own way)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._open_fd: int | None = self._fd  # closed by close() only, also after a stop
        self._heads: dict[tuple[str, str | None], _RequestHead] = {}
        #: Why it stopped recording ("No space left on device"), None while it records.
        self.stopped: str | None = None
        if find_stopped(self.path) is not None:  # a restarted process: its file has a gap already
            self._fd, self.stopped = None, "an earlier writer of this file stopped recording"

    @property
    def enabled(self) -> bool:
        return True

    def emit(self, ev: str, *, src: str | None = None, ts: int | None = None, **fields: Any) -> None:
        """Record one event now (or at ``ts``), from ``src`` (default: this writer's)."""
        validate(ev, fields)
        record = {"ts": true_time_ns() if ts is None else ts, "src": src or self.src, "ev": ev}
        record.update(fields)
        if self._fd is not None:
            self._write(self._fd, (_to_json(record) + "\n").encode())

    def _write(self, fd: int, line: bytes) -> None:
        """One whole line, or none: a short write (the disk filled mid-line) is completed or
        taken back, and a write that fails stops the writer."""
        try:
            done = os.write(fd, line)
        except OSError as exc:
            self._stop(fd, exc, 0)
            return
        while done < len(line):
            try:
                done += os.write(fd, line[done:])
            except OSError as exc:
                self._stop(fd, exc, done)
                return

    def _stop(self, fd: int, exc: OSError, torn: int) -> None:
        # Not closed here: another thread may be about to write to this descriptor, and a
        # number closed and reused would put its line into some other file.
        self._fd = None
        if torn:  # the part of a line written before the disk filled; one writer per file
            with contextlib.suppress(OSError):
                os.ftruncate(fd, max(0, os.fstat(fd).st_size - torn))
        if self.stopped is not None:
            return
        self.stopped = exc.strerror or type(exc).__name__
        mark_stopped(self.path, exc)
        if self.announce:
            with contextlib.suppress(OSError, ValueError):
                print(
                    f"zchaos: {self.path}: recording stopped ({self.stopped}); "
                    "this run's history is not whole",
                    file=sys.stderr,
                    flush=True,
                )

    def shared(self, fields: dict[str, Any], src: str | None = None) -> Shared:
        """``fields`` (and ``src``, default this writer's), for several events to carry alike."""
        src = src or self.src
        return Shared(src, frozenset(fields), _members({"src": src, **fields}))

    def request_shared(self, cid: str, seq: int, rid: str, kind: str | None = None) -> Shared:
        """``shared`` of a client's request: ``cid``, ``seq``, ``rid`` and ``kind`` (when given),
        from ``cid``, for a few string operations per request (a load client makes thousands a
        second)."""
        head = self._heads.get((cid, kind))
        if head is None:
            head = self._heads[(cid, kind)] = _RequestHead(cid, kind)
        return Shared(cid, head.keys, f'{head.prefix}{seq},"rid":{_ascii_text(rid)}{head.suffix}')

    def emit_shared(self, ev: str, shared: Shared, fields: dict[str, Any]) -> None:
        """Record one event now with the ``shared`` fields and its own ``fields``: the same
        event, validated as ``emit`` does, for less work per event."""
        _validate_shared(ev, shared, fields)
        if self._fd is not None:
            own = "," + _members(fields) if fields else ""
            self._write(self._fd, f'{{"ts":{true_time_ns()},{shared.text},"ev":"{ev}"{own}}}\n'.encode())

    def close(self) -> None:
        self._fd = None
        if self._open_fd is not None:
            os.close(self._open_fd)
            self._open_fd = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullWriter(HistoryWriter):
    """A writer for a process that runs outside zchaos: it checks events, records none."""

    def __init__(self, src: str = "") -> None:
        self.src = src
        self.announce = False
        self._fd = None
        self._open_fd = None
        self._heads = {}
        self.stopped = None

    @property
    def enabled(self) -> bool:
        return False

    def emit(self, ev: str, *, src: str | None = None, ts: int | None = None, **fields: Any) -> None:
        validate(ev, fields)


#: The marker a writer of ours leaves beside a file it could not write whole:
#: ``<file>.stopped-<errno name>`` (``worker-1.jsonl.stopped-ENOSPC``), empty, made when it
#: stopped. An empty file needs no data block, so a full disk still takes it; what it says is
#: in its name and its time.
STOPPED_SUFFIX = ".stopped-"


def mark_stopped(path: str | os.PathLike[str], exc: OSError) -> None:
    """Leave the marker of a writer of ``path`` that stopped at this moment for ``exc``."""
    path = Path(path)
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    with contextlib.suppress(OSError):  # no room even for that: the runner's record says it
        os.close(
            os.open(path.with_name(f"{path.name}{STOPPED_SUFFIX}{code}"), os.O_WRONLY | os.O_CREAT, 0o644)
        )


def find_stopped(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stop of a writer of ``path``, if one stopped: ``ts`` (ns, when it marked it) and
    ``error`` (what the system said: "No space left on device"); None if none did."""
    path = Path(path)
    for marker in sorted(path.parent.glob(f"{glob_escape(path.name)}{STOPPED_SUFFIX}*")):
        return read_stopped(marker)
    return None


def read_stopped(marker: Path) -> dict[str, Any]:
    """What a stop marker says: ``ts`` and ``error``."""
    code = marker.name.rpartition(STOPPED_SUFFIX)[2]
    number = getattr(errno, code, None)
    try:
        ts = marker.stat().st_mtime_ns
    except OSError:
        ts = 0
    return {"ts": ts, "error": os.strerror(number) if isinstance(number, int) else code}


def glob_escape(name: str) -> str:
    """``name`` as a glob pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def history_file(history_dir: str | os.PathLike[str], src: str) -> Path:
    """Where the events of source ``src`` go."""
    return Path(history_dir) / f"{src}.jsonl"


def writer_from_env(default_src: str) -> HistoryWriter:
    """The writer a process started by the runner should use (a NullWriter outside a run).

    The source name comes from ``ZCHAOS_SRC`` when the runner set it (``worker-2``), else
    ``default_src``.
    """
    src = os.environ.get(ENV_SOURCE) or default_src
    history_dir = os.environ.get(ENV_HISTORY_DIR)
    if not history_dir:
        return NullWriter(src)
    return HistoryWriter(history_file(history_dir, src), src)


def read_events(
    path: str | os.PathLike[str], *, kinds: Collection[str] = (), pattern: str = "*.jsonl"
) -> Iterator[dict[str, Any]]:
    """Events of one history file, or of every file matching ``pattern`` in a directory,
    file by file; ``kinds``: only events of these kinds (a line that does not name one is
    passed over without being decoded, so looking for a rare kind is quick).

    For tests, small tools and the runner's own questions; the report pipeline reads
    histories with Spark. A line cut short by a crash (only possible for a writer that does
    not use HistoryWriter) is skipped.
    """
    path = Path(path)
    files = sorted(path.glob(pattern)) if path.is_dir() else [path]
    names = [kind.encode() for kind in kinds]
    for file in files:
        with file.open("rb") as fh:
            for line in fh:
                if names and not any(name in line for name in names):
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not kinds or (isinstance(event, dict) and event.get("ev") in kinds):
                    yield event
