"""Free TCP ports on 127.0.0.1, allocated at run time (never hard-coded), and who listens.

A port the OS calls free is free only until someone binds it, and the subject binds it a
second or more later. Two zchaos runs on one machine (parallel tests, two CI jobs) could
each be handed the same port in that gap: one broker then fails to bind while the other
run's broker answers its clients, and both verdicts are wrong. So each port handed out is
also reserved, machine-wide, for as long as its allocator holds it: an abstract Unix
socket named after it (Linux; the kernel drops it when the holder exits, so a killed run
leaves nothing). Another zchaos process skips a reserved port. A program that is not
zchaos can still take a port in the gap; ``listening_pids`` lets readiness checks see that
the listener is not the process they started.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path

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


def _listening_inodes(port: int) -> set[str] | None:
    """The socket inodes listening on TCP ``port`` (any address), None without /proc."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            # sl local_address rem_address st ... inode: the port is hex, 0A is LISTEN
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes if readable else None


def listening_pids(port: int, group: int | None = None) -> set[int] | None:
    """The processes (that we may inspect; only process group ``group``'s if given) holding
    a socket that listens on TCP ``port``; None where the system does not say (no /proc)."""
    inodes = _listening_inodes(port)
    if inodes is None:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    if not wanted:
        return pids
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            if group is not None and os.getpgid(pid) != group:
                continue
            fds = os.scandir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or not ours to look at
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) in wanted:
                        pids.add(pid)
                        break
                except OSError:
                    continue
    return pids


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is ``pid`` or one of its parents (False once either is gone)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        if pid == ancestor:
            return True
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: the parent
    return False


def describe_pid(pid: int) -> str:
    """``pid`` and its command line, for a message."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return f"pid {pid}: {' '.join(a.decode(errors='replace') for a in argv if a)[:200]}"
    except OSError:
        return f"pid {pid}"
