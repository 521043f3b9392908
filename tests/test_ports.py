"""Port allocation: a port handed out is reserved against every other zchaos process on
the machine until released or until its holder dies (the abstract-socket reservation,
Linux), and ``listening_pids`` names who listens on a port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from contract import ports
from contract.ports import PortAllocator, listening_pids
from tests.procs import ROOT

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reservations are Linux's"),
]

HOLD = (
    "import time\n"
    "from contract.ports import PortAllocator\n"
    "allocator = PortAllocator()\n"
    "print(allocator.allocate(), flush=True)\n"
    "time.sleep(3600)\n"
)


def test_a_held_port_is_skipped_by_another_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    with PortAllocator() as first:
        held = first.allocate()
        assert ports._reserve(held) is False
        # The OS offers the held port first (what happened to two concurrent runs): the
        # second allocator must pass it by and take the next one.
        offers, os_choice = iter([held, held]), ports._unused_port
        monkeypatch.setattr(ports, "_unused_port", lambda: next(offers, None) or os_choice())
        with PortAllocator() as second:
            assert second.allocate() != held
            assert next(offers, None) is None  # it was offered the held port twice first
    hold = ports._reserve(held)  # released with the first allocator
    assert isinstance(hold, socket.socket)
    hold.close()


def test_a_reservation_ends_with_the_process_that_held_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD], cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        assert ports._reserve(port) is False
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    hold = ports._reserve(port)
    assert isinstance(hold, socket.socket), "a killed run's reservation outlived it"
    hold.close()


def test_listening_pids_names_the_listener() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert listening_pids(port) == {os.getpid()}
    assert listening_pids(port) == set()
