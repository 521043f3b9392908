"""What every role process of the built-in implementations shares: logging to stderr,
a clean exit on SIGTERM/SIGINT, the readiness line, the history writer, and the watch on a
connecting socket that tells a role its peer's connection came back.

The harness waits for a role's readiness line in its log (``ready`` by default, see the
manifests) and stops roles with SIGTERM; a role turns that signal into SystemExit so its
``finally`` blocks close sockets (linger 0) and it exits with code 0.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

import zmq
from zmq.utils.monitor import recv_monitor_message

from contract.history import HistoryWriter, writer_from_env


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def start_role(name: str) -> tuple[logging.Logger, HistoryWriter]:
    """Set up a role process called ``name``: logging, signals, and its history writer."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"%(asctime)s.%(msecs)03d {name} %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    return logging.getLogger(name), writer_from_env(name)


def announce_ready(log: logging.Logger, what: str) -> None:
    """The line the manifests' ``ready = "log:ready"`` waits for."""
    log.info("ready: %s", what)
    for handler in logging.getLogger().handlers:
        handler.flush()


def end_role(
    writer: HistoryWriter, context: zmq.Context, *sockets: zmq.Socket | None, linger: int | None = None
) -> None:
    """A role's teardown, in its ``finally``: its sockets closed (with their own linger, or
    ``linger``), its context ended, its history closed. A socket not made yet is None."""
    for socket in sockets:
        if socket is not None:
            socket.close(linger=linger)
    context.term()
    writer.close()


def describe(frames: list[bytes], limit: int = 4) -> str:
    """A short printable rendering of a message for logs and ``malformed`` events."""
    shown = [repr(f[:24]) for f in frames[:limit]]
    more = f" +{len(frames) - limit} more" if len(frames) > limit else ""
    return f"[{', '.join(shown)}{more}]"


def drain(
    socket: zmq.Socket,
    handle: Callable[[list[bytes], float], None],
    batch: int,
    more: Callable[[], bool] = lambda: True,
) -> None:
    """Hand up to ``batch`` waiting messages to ``handle(frames, now)`` without blocking,
    while ``more()`` holds (e.g. while a worker is idle to take a request)."""
    for _ in range(batch):
        if not more():
            return
        try:
            frames = socket.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        handle(frames, time.monotonic())


class LinkWatch:
    """Whether a connecting socket's connection came back after it went down (its monitor's
    events). ZeroMQ reconnects by itself and says nothing to the application, so a role that
    registers once (READY) cannot tell that its peer restarted, or that a link reset lost what
    was in flight, and waits for work that never comes. Register ``monitor`` with the role's
    poller and call ``came_back()`` when it is readable."""

    EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED

    def __init__(self, socket: zmq.Socket) -> None:
        self.socket = socket
        self.monitor = socket.get_monitor_socket(self.EVENTS)
        self.lost = False  # the connection went down since the watch began

    def came_back(self) -> bool:
        """Read the events so far: True when the connection is up again after going down."""
        back = False
        while self.monitor.poll(0, zmq.POLLIN):
            event = recv_monitor_message(self.monitor)["event"]
            if event == zmq.EVENT_DISCONNECTED:
                self.lost = True
            elif event == zmq.EVENT_CONNECTED and self.lost:
                back = True
        return back

    def close(self) -> None:
        """Stop watching (before the socket closes)."""
        self.socket.disable_monitor()
        self.monitor.close(linger=0)
