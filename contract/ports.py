"""Free TCP ports on 127.0.0.1, allocated at run time (never hard-coded), and who listens.

A port the OS calls free is free only until someone binds it, and the subject binds it a
second or more later. Two zchaos runs on one machine (parallel tests, two CI jobs) could
each be handed the same port in that gap: one broker then fails to bind while the other
run's broker answers its clients, and both verdicts are wrong. So each port handed out is
also reserved, machine-wide, for as long as its allocator holds it: an abstract Unix
socket named after it (Linux; the kernel drops it when the holder exits, so a killed run
leaves nothing). Another zchaos process skips a reserved port. A program that is not
zchaos can still take a port in the gap; ``listens`` lets readiness checks see that the
listener is not the process they started.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
from collections.abc import Collection

import psutil

#: the abstract socket name that reserves a port (Linux only)
RESERVATION = "\0zchaos-port-{port}"


def _unused_port() -> int:
    """A port nothing is bound to right now, chosen by the OS."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reserve(port: int) -> socket.socket | bool:
    """Hold ``port`` for this process: the holding socket, False if another zchaos process
    holds it, True where reservations do not exist (not Linux, or Unix sockets refused:
    nothing to hold)."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        hold = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by children
    except OSError:
        return True  # a sandbox without Unix sockets: allocate as before, unreserved
    try:
        hold.bind(RESERVATION.format(port=port))
    except OSError as exc:
        hold.close()
        return exc.errno != errno.EADDRINUSE  # held by another zchaos process, or cannot tell
    return hold


class PortAllocator:
    """Hands out ports the OS says are free, never the same one twice in a run and never
    one another live allocator on this machine holds. The reservations last as long as
    the allocator: ``release``, its garbage collection or the process's end gives them
    back."""

    def __init__(self) -> None:
        self._given: set[int] = set()
        self._holds: list[socket.socket] = []

    def allocate(self) -> int:
        for _ in range(100):
            port = _unused_port()
            if port in self._given:
                continue
            hold = _reserve(port)
            if hold is False:
                continue  # handed out to another zchaos run that has not bound it yet
            self._given.add(port)
            if isinstance(hold, socket.socket):
                self._holds.append(hold)
            return port
        raise RuntimeError("no free TCP port on 127.0.0.1")

    def release(self) -> None:
        """Give up the reservations (the ports themselves are whoever binds them)."""
        for hold in self._holds:
            hold.close()
        self._holds.clear()

    def __enter__(self) -> PortAllocator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """True once something listens on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def listening_pids(port: int) -> set[int] | None:
    """The processes (that we may inspect) holding a socket that listens on TCP ``port``;
    None where the system does not say."""
    try:
        found = psutil.net_connections("tcp")
    except (psutil.Error, NotImplementedError):
        return None
    # pid None: a listener we may not inspect (another user's)
    return {
        c.pid
        for c in found
        if c.pid is not None and c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    }


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def listens(port: int, leader: int, foreign: set[int] | None = None, *, also: Collection[int] = ()) -> bool:
    """Whether what process ``leader`` started listens on ``port``: itself, its process
    group, a descendant that left the group, or one of ``also`` (processes known to be the
    leader's although they left its tree: a daemon it started) or their descendants (True
    where the system cannot say). A port that accepts is not enough: another program may
    have taken it between its allocation and the subject's bind, and the subject's clients
    would then talk to that program. The others found listening go into ``foreign``."""
    pids = listening_pids(port)
    if not pids:
        return True  # cannot tell: no /proc, or a listener we may not inspect
    ours = {leader, *also}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if _group(pid) == leader or ours & {pid, *(p.pid for p in psutil.Process(pid).parents())}:
                return True
    if foreign is not None:
        foreign.update(pids)
    return False


def describe_pid(pid: int) -> str:
    """``pid`` and its command line, for a message."""
    try:
        return f"pid {pid}: {' '.join(psutil.Process(pid).cmdline())[:200]}"
    except psutil.Error:
        return f"pid {pid}"
