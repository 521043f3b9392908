"""The Lazy Pirate echo server as a real process: echo, history, clean exit, bad bind."""

from __future__ import annotations

import subprocess
import sys

import zmq

from tests.pirate_support import Pirates, pirates_fixture  # noqa: F401 - a fixture
from tests.procs import ROOT, wait_for


def test_server_echoes_records_and_exits_cleanly(pirates: Pirates) -> None:
    endpoint = pirates.endpoint()
    server = pirates.start("implementations.lazy_pirate.server", ["--frontend", endpoint], "server")
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.REQ)
        sock.linger = 0
        sock.connect(endpoint)
        for i in range(1, 6):
            body = [f"client-1:{i}|x".encode(), b"more"]
            sock.send_multipart(body)
            assert sock.poll(5000)
            assert sock.recv_multipart() == body
        sock.send_multipart([b"no request id"])  # opaque: echoed, not recorded
        assert sock.poll(5000) and sock.recv_multipart() == [b"no request id"]
    finally:
        ctx.destroy(linger=0)
    done = wait_for(lambda: len(pirates.events("done")) == 5 and pirates.events("done"), 5, "5 done")
    assert [e["rid"] for e in done] == [f"client-1:{i}" for i in range(1, 6)]
    assert {e["worker"] for e in pirates.events("exec")} == {"server"}
    assert server.stop() == 0
    assert "stopping" in server.text()


def test_server_reports_a_port_in_use() -> None:
    ctx = zmq.Context()
    try:
        taken = ctx.socket(zmq.REP)
        taken.linger = 0
        port = taken.bind_to_random_port("tcp://127.0.0.1")
        result = subprocess.run(
            [sys.executable, "-m", "implementations.lazy_pirate.server", "--frontend", f"tcp://127.0.0.1:{port}"],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    finally:
        ctx.destroy(linger=0)
    assert result.returncode == 2
    assert "cannot bind" in result.stderr and "Traceback" not in result.stderr
