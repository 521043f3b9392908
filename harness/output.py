"""Capturing a role process's output: line-buffered without the user's help, each line stamped.

A program's C stdio buffers its output fully when stdout is a file or a pipe, so the line a
``log:`` readiness waits for sits in the program's buffer (and a killed program loses it).
On a terminal it flushes every line. So a role process gets a pseudo-terminal as stdout and
stderr (both merged, as the log always had them), which the supervisor reads: every libc
(static or dynamic, glibc or musl), Rust's and Python's standard output flush lines there, where
``stdbuf``/``LD_PRELOAD`` of libstdbuf reaches only dynamically linked glibc programs and
would collide with a clock fault's preload. The terminal's output translation is off (a
``\\n`` stays a ``\\n``); the subject sees ``isatty(1)`` true. Where no pseudo-terminal can be
had, a pipe is read instead (stamped all the same; a C program then needs to flush).

One thread reads every captured process's output and writes it to its log as it comes,
each line preceded by its arrival stamp (``contract/logstamp.py``). A log that cannot be
written (a full disk) stops, with a marker beside it, and its program's output goes on being
read and dropped: a program blocked on a terminal nobody reads would hang the run. A role
that declares log patterns (``[roles.X.events]``) has each of its whole lines matched as it
comes too (``LineEvents``): a match is a history event of the instance, at the line's arrival, in
``history/<instance>.lines.jsonl``. Written here, as the line arrives, rather than converted
from the log at teardown: a run whose runner dies still has them, and the history follower
reads them like any other writer's.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from contract.history import EVENTS, HistoryWriter, mark_stopped
from contract.logstamp import stamp

_CHUNK = 65536
#: A line longer than this is not matched (its start is dropped as it grows): a program that
#: prints megabytes without a newline must not grow the supervisor's memory.
MAX_MATCHED_LINE = 65536


class LineEvents:
    """A role's log patterns over one process's output: each whole line matched as it comes.

    Only a line ended by a newline is matched: the last line of a killed program, cut short,
    could name another request (``exec client-3:1`` of ``client-3:17``). A line that grows past
    MAX_MATCHED_LINE is skipped to its end. Nothing here raises into the output thread: an
    event the history refuses (a pattern's optional group left a required field empty) is
    dropped, so is a write that fails."""

    def __init__(
        self, patterns: Sequence[tuple[str, re.Pattern[str]]], writer: HistoryWriter, instance: str
    ) -> None:
        self.patterns = patterns
        self.writer = writer
        self.instance = instance
        self._line = bytearray()
        self._line_ts = 0
        self._overlong = False
        self.made = 0  # events written
        self.dropped = 0  # matches the history refused

    def feed(self, data: bytes, ts_ns: int) -> None:
        start = 0
        while start < len(data):
            if not self._line and not self._overlong:
                self._line_ts = ts_ns  # the line's first byte arrived now
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if not self._overlong:
                self._line += piece
                if len(self._line) > MAX_MATCHED_LINE:
                    self._line.clear()
                    self._overlong = True
            if end < 0:
                return
            if not self._overlong:
                self._match(self._line.decode(errors="replace").rstrip("\r"))
            self._line.clear()
            self._overlong = False
            start = end + 1

    def _match(self, line: str) -> None:
        for kind, pattern in self.patterns:
            m = pattern.search(line)
            if m is None:
                continue
            fields = {k: v for k, v in m.groupdict().items() if v is not None}
            if "worker" in EVENTS[kind].required:
                fields.setdefault("worker", self.instance)
            try:
                self.writer.emit(kind, ts=self._line_ts, src=self.instance, **fields)
                self.made += 1
            except (ValueError, OSError):
                self.dropped += 1

    def close(self) -> None:
        self.writer.close()


def output_pair() -> tuple[int, int, bool]:
    """(read end, write end, is a terminal): a pseudo-terminal with output translation off,
    else a pipe. Both ends are close-on-exec; the child gets the write end by ``dup2``."""
    try:
        reader, writer = os.openpty()
    except OSError:
        reader, writer = os.pipe()
        return reader, writer, False
    attrs = termios.tcgetattr(writer)
    attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n"
    termios.tcsetattr(writer, termios.TCSANOW, attrs)
    return reader, writer, True


class Captured:
    """One process's output on its way to its log."""

    def __init__(self, fd: int, log: Path, tty: bool, events: LineEvents | None = None) -> None:
        self.fd = fd
        self.log = log
        self.events = events
        self.tty = tty  # a pseudo-terminal (the program's stdio flushes lines), not a pipe
        self.file = log.open("ab", buffering=0)  # unbuffered: a readiness wait reads the file
        self.at_line_start = True
        self.bytes = 0  # what the program wrote, stamps not counted
        self.closed = threading.Event()
        #: Why its log stopped being written ("No space left on device"), None while it is.
        self.stopped: str | None = None

    def write(self, data: bytes, ts_ns: int) -> None:
        if self.events is not None:
            # first: whoever sees a line in the log (a readiness wait) finds its event written
            self.events.feed(data, ts_ns)
        mark = stamp(ts_ns)
        out = bytearray()
        for piece in data.splitlines(keepends=True):
            if self.at_line_start:
                out += mark
            out += piece
            self.at_line_start = piece.endswith(b"\n")
        self.bytes += len(data)
        if self.stopped is not None:
            return  # read and dropped: a program blocked on a full terminal would stall
        try:
            view = memoryview(out)
            while view:  # an unbuffered file may take part of it (a disk filling up)
                view = view[self.file.write(view) or 0 :]
        except OSError as exc:
            self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        """The log cannot be written (a full disk): it stops, with its marker beside it
        (contract/history.py ``mark_stopped``) and a last line when one still fits; the
        program's output goes on being read, so the program never waits on it."""
        self.stopped = exc.strerror or type(exc).__name__
        mark_stopped(self.log, exc)
        with contextlib.suppress(OSError):
            self.file.write(f"\nzchaos: this log stops here: {self.stopped}\n".encode())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            self.file.close()
        if self.events is not None:
            with contextlib.suppress(OSError):
                self.events.close()
        self.closed.set()


class OutputReader:
    """The thread that reads every captured process's output into its log."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # so the thread waits with no timeout and wakes to stop
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="zchaos-output", daemon=True)
        self._thread.start()

    def add(self, fd: int, log: Path, tty: bool, events: LineEvents | None = None) -> Captured:
        """Read ``fd`` (the read end of ``output_pair``) into ``log`` until its writers close it
        (its lines matched by ``events`` too, when given)."""
        captured = Captured(fd, log, tty, events)
        with self._lock:
            self._selector.register(fd, selectors.EVENT_READ, captured)
        return captured

    def _run(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._selector.select():
                captured: Captured | None = key.data
                if captured is None:
                    continue  # woken to stop
                try:
                    data = os.read(captured.fd, _CHUNK)
                except OSError:  # EIO: a terminal whose last writer closed it
                    data = b""
                if data:
                    captured.write(data, time.time_ns())
                else:
                    with self._lock:
                        self._selector.unregister(captured.fd)
                    captured.close()

    def close(self, timeout: float = 2.0) -> None:
        """Read what is left (until ``timeout``), then stop and close every log (once: a
        second call does nothing)."""
        if self._stopping.is_set():
            return
        deadline = time.monotonic() + timeout
        with self._lock:
            left = [key.data for key in self._selector.get_map().values() if key.data is not None]
        for captured in left:
            captured.closed.wait(max(0.0, deadline - time.monotonic()))
        self._stopping.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=2)
        with self._lock:
            for key in list(self._selector.get_map().values()):
                self._selector.unregister(key.fd)
                if key.data is not None:
                    key.data.close()
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
