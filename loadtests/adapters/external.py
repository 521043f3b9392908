"""The external client: a program of the user's, in any language, as the load.

zchaos starts the manifest's client ``command`` once per Locust user and speaks JSON
lines with it (``PROTOCOL`` below, also printed by ``zchaos list`` and in the README).
The program speaks its own protocol to the system under test; zchaos records ``send``,
``retry``, ``reply``, ``abandon`` and ``lost`` in the history from what the program says, checks
each reply's body (echo) and fires Locust's request event, so the user's client needs no
zchaos code.

In self-driven mode (option ``self_driven = true``) the program makes its own requests, as a
client program of the user's that has its own request stream does: it says each one as it
sends it (``send``) and then its reply, retries, abandon or loss, and zchaos records and
judges them as it does the requests it makes itself (it numbers them per client in the
order of their ``send`` lines; a request id is ``<client_id>:`` and anything, new for each
request, so that ids are unique in the run).

Faults of the program are recorded, never raised into Locust: a line that is not JSON
or not in the protocol is a ``client_error`` (reason ``malformed`` or ``protocol``) naming
the client and the line; an ``error`` line from the program is one too (reason ``error``);
a program that exits early is one (reason ``exit``, with its exit code), its requests in
flight are abandoned and it is started again for the next request. One that says nothing
about a request for ``request_timeout_ms`` is killed (its requests abandoned) and started
again; one not ready within ``init_timeout_ms`` likewise (reason ``init``). Starts after a
failure back off (BACKOFF_S doubling to BACKOFF_MAX_S until a reply). At the end a program
that ignores ``stop`` is killed after STOP_GRACE_S (the Locust user waits for requests in
flight for the drain at most), and one that completed no request and failed is recorded
(reason ``no_request``) for the runner to make the run bad input. Its stderr goes to
``logs/<client>.log`` of the run.

The protocol is declared once, here: ``PROTOCOL`` is its text (``zchaos list``; the
README's list follows it, which tests/test_external_client.py keeps true) and ``MESSAGES``
what zchaos accepts from the program, each type with its required fields and its handler.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import zmq

from contract.history import HistoryWriter, NullWriter
from loadtests.adapters.base import Abandoned, AsyncClientAdapter, Lost, Reply, RequestLog

PROTOCOL = """\
external client protocol (adapter = "external"): one JSON object per line on the program's
stdin (from zchaos) and stdout (to zchaos); its stderr goes to the run's logs/<client>.log.
  zchaos -> client:
    {"type": "init", "client_id": "client-3", "endpoints": ["tcp://127.0.0.1:PORT", ...], "options": {...}}
        once, first (endpoints in the manifest's order, through the fault proxy when there is one)
    {"type": "request", "rid": "client-3:17", "body": "client-3:17|qwertyqw..."}
        send it with your protocol; up to options.window requests are outstanding (default 1)
    {"type": "stop"}   finish or abandon what is in flight, then exit 0
  self-driven mode (options.self_driven = true): no request lines come; the program makes its
  own requests and, for each, says first (then reply/retry/abandon/lost as below):
    {"type": "send", "rid": "client-3:anything", "body": "client-3:anything|...", "endpoint": "tcp://..."}
        as it sends it: rid is the init line's client_id, ':', then anything new for each
        request; body is the request as sent (a correct system echoes it; a worker reads the
        request id as the body up to its first '|'); endpoint (optional): where it went
  client -> zchaos:
    {"type": "init_ok"}                                   once, when ready for requests
    {"type": "reply", "rid": "...", "body": "...", "endpoint": "tcp://..."}
        the body as the server returned it (zchaos checks it: an echo of the request body; one
        that is not is kept as evidence: its first 200 bytes and whose request id it carries);
        endpoint (optional): which of the endpoints answered
    {"type": "retry", "rid": "...", "attempt": 2, "reason": "timeout"}   when it resends
    {"type": "abandon", "rid": "...", "reason": "..."}                 when it gives up
    {"type": "lost", "rid": "...", "reason": "...", "endpoint": "tcp://..."}
        when a client that never resends gave the request up: it counts as lost (no_lost; inside
        a fault only where the manifest promises requeue), an abandon does not; endpoint
        (optional, for a client of several): the one it waited on (a request sent to a passive
        server of a failover pair, which drops it, is then no loss of the pair's)
    {"type": "error", "text": "..."}                                  anything worth a line in the report
  Request bodies are ASCII text: the request id, '|', then filler letters (payload_bytes long);
  a correct system echoes the body. A bad line, an error line or an early exit is recorded
  as a client_error in the history and the report; the program is started again if it exited.
  Nothing else may print to stdout: a library that does corrupts the protocol. Keep the
  protocol on a copy of stdout and point stdout at stderr first (dup(1), then dup2(2, 1))."""

#: finished requests remembered, to tell a second reply to a request from a made-up id
REMEMBER = 1000
STOP_GRACE_S = 3.0
EXIT_GRACE_S = 1.0
#: How long to read a stopped program's output to its end (it is gone: only the pipe is left).
LAST_WORDS_S = 1.0
#: A program that fails again and again (exits, is not ready) is started again after a
#: back-off doubling from BACKOFF_S to BACKOFF_MAX_S, reset by a reply: a client crashing at
#: start was once started 178 times in 8 s.
BACKOFF_S = 0.1
BACKOFF_MAX_S = 5.0
LINE_SHOWN = 200
#: a self-driven program's requests in flight at once, at most (each held until its outcome)
MAX_SELF_IN_FLIGHT = 10000
STDOUT_HINT = (
    " (does something in the program print to stdout? keep the protocol on a descriptor of its "
    "own: README, 'Your own client program')"
)
#: The client_error reason of a program that completed no request (no reply, no abandon of
#: its own) and failed: bad input for the runner, which reads it from the history.
NO_REQUEST = "no_request"


@dataclass
class _InFlight:
    log: RequestLog
    deadline: float


class ExternalClient(AsyncClientAdapter):
    DEFAULTS: dict[str, Any] = {
        "window": 1,
        "init_timeout_ms": 10000,
        "request_timeout_ms": 60000,
        "self_driven": False,
    }
    MAX_ENDPOINTS = None
    OPEN_OPTIONS = True
    RUNS_PROGRAM = True
    SUMMARY = "a program of yours speaking JSON lines on stdin/stdout (protocol below)"

    def __init__(
        self,
        endpoints: str | Sequence[str],
        options: dict[str, Any],
        cid: str,
        context: zmq.Context,
        *,
        command: Sequence[str] = (),
        log_path: str | None = None,
        writer: HistoryWriter | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        if not command:
            raise ValueError("external: no client command")
        self.command = list(command)
        self.log_path = log_path
        self.writer = writer or NullWriter(cid)
        self.kind = kind
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.pending: dict[str, _InFlight] = {}
        self.finished: OrderedDict[str, RequestLog] = OrderedDict()
        self.starts = 0
        self.failures = 0  # in a row, since the last reply
        self.completed = 0  # requests it answered or gave up itself
        self.errors = 0  # client_error events recorded
        self.next_start = 0.0  # time.monotonic() before which it is not started again
        #: it makes its own requests (send lines); make_log numbers and records each
        self.self_driven = bool(self.options["self_driven"])
        self.make_log: Callable[[str, str], RequestLog] | None = None
        self.stop_asked = False
        # Started with the Locust user, so that its start-up is not charged to a request.
        self._start()

    # -- the program ---------------------------------------------------------------------

    def _error(self, reason: str, detail: str, **fields: Any) -> None:
        self.errors += 1
        if self.kind is not None:
            fields["kind"] = self.kind
        self.writer.emit(
            "client_error", src=self.cid, cid=self.cid, reason=reason, detail=detail[:500], **fields
        )

    def _start(self) -> bool:
        """Start the program and wait for its init_ok; False (recorded) if it is not ready."""
        self.starts += 1
        self.lines = queue.Queue()
        stderr: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path:
            stderr = open(self.log_path, "ab")  # noqa: SIM115 (handed to the child, closed below)
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
            )
        except OSError as exc:
            self._error("init", f"cannot start {self.command[0]!r}: {exc}")
            self.proc = None
            return False
        finally:
            if not isinstance(stderr, int):
                stderr.close()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        init = {"type": "init", "client_id": self.cid, "endpoints": self.endpoints, "options": self.options}
        if not self._write(init):
            return self._not_ready("it closed its stdin before the init line")
        deadline = time.monotonic() + self.options["init_timeout_ms"] / 1000
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return self._not_ready(f"no init_ok within {self.options['init_timeout_ms']} ms")
            if line is None:
                return self._not_ready("it exited before init_ok", EXIT_GRACE_S)
            message = self._parse(line)
            if message is None:
                continue
            if message["type"] == "init_ok":
                return True
            if message["type"] == "error":
                self._error("error", str(message.get("text", "")))
            else:
                self._error("protocol", f"expected init_ok first, got: {_shown(line)}")

    def _failed(self) -> None:
        self.failures += 1
        self.next_start = time.monotonic() + min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (self.failures - 1))

    def _not_ready(self, why: str, grace_s: float = 0.0) -> bool:
        self._failed()
        code = self._kill(grace_s)
        fields = {"code": code} if code is not None else {}
        self._error("init", f"client program {' '.join(self.command)!r} not ready: {why}", **fields)
        return False

    @staticmethod
    def _read(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
        """The program's output, line by line, until its end; then the stream is closed here.
        Nothing else closes it: under gevent (Locust) a close while this read waits raises
        "reentrant call" in the closer, which once cut the record of a hung program."""
        with contextlib.suppress(OSError, ValueError):
            for line in stream:
                lines.put(line)
        with contextlib.suppress(OSError, ValueError):
            stream.close()
        lines.put(None)  # end of its output: it exited (or closed stdout)

    def _write(self, message: dict[str, Any]) -> bool:
        if self.proc is None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def _kill(self, grace_s: float = 0.0) -> int | None:
        """Stop the program (after ``grace_s`` to exit by itself); its exit code (None if killed)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        try:
            code = proc.wait(grace_s) if grace_s else proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        return code  # its stdout ends, and is closed, in _read

    # -- the lines -----------------------------------------------------------------------

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        """A protocol message, or None after recording why the line is not one."""
        try:
            message = json.loads(line)
        except ValueError:
            self._error("malformed", f"not a JSON line: {_shown(line)}{STDOUT_HINT}")
            return None
        if not isinstance(message, dict) or message.get("type") not in MESSAGES:
            self._error("protocol", f"not a message of the protocol: {_shown(line)}")
            return None
        need = MESSAGES[message["type"]][0]
        if any(not isinstance(message.get(key), str) for key in need):
            self._error("protocol", f"{message['type']} needs {', '.join(need)} (text): {_shown(line)}")
            return None
        return message

    def _on_line(self, line: bytes, done: list[tuple[RequestLog, Reply | Abandoned | Lost]]) -> None:
        message = self._parse(line)
        if message is not None:
            MESSAGES[message["type"]][1](self, message, line, done)

    def _on_reply(self, message: dict[str, Any], line: bytes, done: list) -> None:
        rid = message["rid"]
        flight = self.pending.pop(rid, None)
        if flight is not None:
            self._finish(flight.log)
            self.failures = 0
            self.completed += 1
            endpoint = message.get("endpoint")
            done.append((flight.log, Reply([message["body"].encode()], endpoint=endpoint)))
        elif rid in self.finished:
            self.finished[rid].unexpected([message["body"].encode()], "a second reply to a finished request")
        else:
            self._error("protocol", f"reply to a request that was never sent: {_shown(line)}", rid=rid)

    def _on_send(self, message: dict[str, Any], line: bytes, done: list) -> None:
        rid = message["rid"]
        why = ""
        if not self.self_driven or self.make_log is None:
            why = "send is for a self-driven client program (options.self_driven = true)"
        elif not rid.startswith(self.cid + ":") or rid == self.cid + ":":
            why = f"a request id is {self.cid}: then anything (the init line's client_id)"
        elif rid in self.pending or rid in self.finished:
            why = "a second send of a request id (a resend is a retry line; a new request, a new id)"
        elif len(self.pending) >= MAX_SELF_IN_FLIGHT:
            why = f"more than {MAX_SELF_IN_FLIGHT} requests in flight"
        if why or self.make_log is None:
            self._error("protocol", f"{why}: {_shown(line)}", rid=rid)
            return
        log = self.make_log(rid, message["body"])
        self.pending[rid] = _InFlight(log, time.monotonic() + self.options["request_timeout_ms"] / 1000)
        endpoint = message.get("endpoint")
        log.sent(endpoint if isinstance(endpoint, str) else None)

    def _on_retry(self, message: dict[str, Any], line: bytes, done: list) -> None:
        flight = self.pending.get(message["rid"])
        if flight is None:
            self._error("protocol", f"retry of a request not in flight: {_shown(line)}", rid=message["rid"])
            return
        flight.log.retried(str(message.get("reason", "")))
        flight.log.sent()
        flight.deadline = time.monotonic() + self.options["request_timeout_ms"] / 1000

    def _on_abandon(self, message: dict[str, Any], line: bytes, done: list) -> None:
        self._give_up(message, line, done, Abandoned)

    def _on_lost(self, message: dict[str, Any], line: bytes, done: list) -> None:
        self._give_up(message, line, done, Lost)

    def _give_up(self, message: dict[str, Any], line: bytes, done: list, how: type[Abandoned | Lost]) -> None:
        flight = self.pending.pop(message["rid"], None)
        if flight is None:
            what = message["type"]
            self._error("protocol", f"{what} of a request not in flight: {_shown(line)}", rid=message["rid"])
            return
        self._finish(flight.log)
        self.completed += 1
        reason = str(message.get("reason", "the client program gave up"))
        endpoint = message.get("endpoint")
        if how is Lost and isinstance(endpoint, str):
            done.append((flight.log, Lost(reason, endpoint)))
        else:
            done.append((flight.log, how(reason)))

    def _on_error(self, message: dict[str, Any], line: bytes, done: list) -> None:
        self._error("error", str(message.get("text", "")))

    def _on_init_ok(self, message: dict[str, Any], line: bytes, done: list) -> None:
        self._error("protocol", f"init_ok when it was already running: {_shown(line)}")

    def _finish(self, log: RequestLog) -> None:
        self.finished[log.rid] = log
        if len(self.finished) > REMEMBER:
            self.finished.popitem(last=False)

    def _abandon_all(self, reason: str, done: list) -> None:
        for flight in self.pending.values():
            self._finish(flight.log)
            done.append((flight.log, Abandoned(reason)))
        self.pending.clear()

    def _exited(self, done: list) -> None:
        if self.stop_asked:
            # Asked to stop (self-driven, at the end of the load): it ends. What it left in
            # flight unreported stays as sent, with no outcome: indeterminate, as any
            # request in flight at the end; not abandoned in its name.
            code = self._kill(STOP_GRACE_S)
            if code != 0:
                self._error(
                    "exit",
                    f"client program exited with code {code} after stop",
                    code=-1 if code is None else code,
                )
            self.pending.clear()
            return
        code = self._kill(EXIT_GRACE_S)  # its output ended: it is exiting
        self._failed()
        self._error("exit", f"client program exited early (code {code}); started again for the next request",
                    code=code if code is not None else -1)  # fmt: skip
        self._abandon_all(f"client program exited (code {code})", done)

    # -- the adapter ---------------------------------------------------------------------

    def submit(self, body: list[bytes], log: RequestLog) -> None:
        self.pending[log.rid] = _InFlight(log, time.monotonic() + self.options["request_timeout_ms"] / 1000)
        if self.proc is None:
            wait = self.next_start - time.monotonic()
            if wait > 0:  # backing off (a cooperative sleep: Locust patches time.sleep)
                time.sleep(wait)
            if not self._start():
                return  # poll abandons it: the program is not there
        log.sent()
        if not self._write({"type": "request", "rid": log.rid, "body": body[0].decode("ascii", "replace")}):
            self.pending[log.rid].deadline = time.monotonic()  # its stdin is gone: poll sees the exit

    def in_flight(self) -> int:
        return len(self.pending)

    def stopped(self) -> bool:
        """After ``begin_stop``: whether the program's output has ended (it exited and
        everything it said was read)."""
        return self.proc is None

    def begin_stop(self) -> None:
        """Ask a self-driven program to stop (once): it finishes or abandons what it has in
        flight, says so, and exits; ``poll`` reads that until its output ends."""
        if self.stop_asked:
            return
        self.stop_asked = True
        self._write({"type": "stop"})
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()

    def poll(self, timeout_s: float) -> list[tuple[RequestLog, Reply | Abandoned | Lost]]:
        done: list[tuple[RequestLog, Reply | Abandoned | Lost]] = []
        if self.proc is None and self.self_driven and not self.stop_asked:
            # nothing asks for its next request: start it again here, after the back-off
            wait = self.next_start - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, timeout_s))  # cooperative under Locust
                return done
            self._start()
        if self.proc is None:
            if not self.stop_asked:
                self._abandon_all("the client program did not start (see the client errors)", done)
            return done
        deadline = time.monotonic() + timeout_s
        while not done:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                self._exited(done)
                return done
            self._on_line(line, done)
        while True:  # whatever else is already there
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self._exited(done)
                return done
            self._on_line(line, done)
        now = time.monotonic()
        if any(f.deadline <= now for f in self.pending.values()):
            code = self._kill()
            limit = self.options["request_timeout_ms"]
            self._error("timeout", f"client program said nothing about a request for {limit} ms; restarted",
                        **({"code": code} if code is not None else {}))  # fmt: skip
            self._abandon_all(f"no answer from the client program in {limit} ms", done)
        return done

    def close(self) -> None:
        """Stop the program; then, if it completed no request and failed (client errors),
        record that (reason ``no_request``): the runner makes it bad input, with the
        program's log, instead of judging the system on a load that never ran."""
        try:
            if self._stop_program():
                self._read_last_words()
        finally:
            if self.completed == 0 and self.errors:
                self._error(
                    NO_REQUEST,
                    f"client program {' '.join(self.command)!r} completed no request "
                    f"({self.starts} starts, {self.errors} client errors)",
                )

    def _read_last_words(self) -> None:
        """Record what the stopped program said and nobody read (the load's end cut the wait
        short): a ``send`` left unread would leave its request's execution, which a worker
        logs, without a request, and the run VIOLATED for "an execution of an unsent
        request". Outcomes read here reach no Locust user: their requests stay in flight,
        indeterminate, as any at the end of a run."""
        deadline = time.monotonic() + LAST_WORDS_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return
            if line is None:
                return
            self._on_line(line, [])

    def _stop_program(self) -> bool:
        """Ask the program to stop, give it STOP_GRACE_S to exit, then kill it. When Locust
        cuts the wait short (its stop timeout ran out and it kills the user mid-wait), the
        program is killed and its failure to stop recorded all the same: the kill once took
        the record with it, and a hung program went unreported in about one run of twenty."""
        proc = self.proc
        if proc is None:
            return False
        code = None
        asked = time.monotonic()
        try:
            self._write({"type": "stop"})
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(STOP_GRACE_S)
        finally:
            ran_s = time.monotonic() - asked
            if code != 0:  # recorded before the kill, which waits for the program again
                how = f"still ran {ran_s:.1f} s after stop" if code is None else f"exited with code {code}"
                left = len(self.pending)
                unanswered = f" ({left} requests in flight it never answered)" if left else ""
                self._error(
                    "exit",
                    f"client program {how} at the end of the load{unanswered}",
                    code=code if code is not None else -1,
                )
            self._kill()
        return True


def _shown(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip("\n")
    return text if len(text) <= LINE_SHOWN else text[:LINE_SHOWN] + "..."


#: What the program may say: each type, the fields it must carry (text), its handler.
MESSAGES: dict[str, tuple[tuple[str, ...], Callable[..., None]]] = {
    "init_ok": ((), ExternalClient._on_init_ok),
    "send": (("rid", "body"), ExternalClient._on_send),
    "reply": (("rid", "body"), ExternalClient._on_reply),
    "retry": (("rid",), ExternalClient._on_retry),
    "abandon": (("rid",), ExternalClient._on_abandon),
    "lost": (("rid",), ExternalClient._on_lost),
    "error": ((), ExternalClient._on_error),
}

ADAPTER = ExternalClient
