"""Free TCP ports on 127.0.0.1, allocated at run time (never hard-coded)."""

from __future__ import annotations

import socket


class PortAllocator:
    """Hands out ports the OS says are free, never the same one twice in a run."""

    def __init__(self) -> None:
        self._given: set[int] = set()

    def allocate(self) -> int:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if port not in self._given:
                self._given.add(port)
                return port
        raise RuntimeError("no free TCP port on 127.0.0.1")


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """True once something listens on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
