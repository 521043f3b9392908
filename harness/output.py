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
read and dropped: a program blocked on a terminal nobody reads would hang the run.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import termios
import threading
import time
from pathlib import Path

from contract.history import mark_stopped
from contract.logstamp import stamp

_CHUNK = 65536


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

    def __init__(self, fd: int, log: Path, tty: bool) -> None:
        self.fd = fd
        self.log = log
        self.tty = tty  # a pseudo-terminal (the program's stdio flushes lines), not a pipe
        self.file = log.open("ab", buffering=0)  # unbuffered: a readiness wait reads the file
        self.at_line_start = True
        self.bytes = 0  # what the program wrote, stamps not counted
        self.closed = threading.Event()
        #: Why its log stopped being written ("No space left on device"), None while it is.
        self.stopped: str | None = None

    def write(self, data: bytes, ts_ns: int) -> None:
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

    def add(self, fd: int, log: Path, tty: bool) -> Captured:
        """Read ``fd`` (the read end of ``output_pair``) into ``log`` until its writers close it."""
        captured = Captured(fd, log, tty)
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
