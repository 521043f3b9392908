"""zchaos's own Toxiproxy server as a process: flags, -config, metrics, clean stop on signals.

(What any Toxiproxy must do is in test_toxiproxy_conformance.py; this is about ours.)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests

from chaos.toxiproxy_server.gojson import float32_text, struct_f32
from contract.ports import PortAllocator
from tests.test_toxiproxy_conformance import Echo, echo, recv_exactly, round_trip  # noqa: F401

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[1]


def server_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "chaos.toxiproxy_server", *args]


class Server:
    def __init__(self, *args: str, tmp: Path) -> None:
        self.ports = PortAllocator()
        self.port = self.ports.allocate()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"server-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                server_cmd("-host", "127.0.0.1", "-port", str(self.port), *args),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 15
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                requests.get(self.url + "/version", timeout=0.5)
                break
            except requests.RequestException:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.ports.release()


@pytest.fixture
def start(tmp_path: Path) -> Iterator:
    started: list[Server] = []

    def _start(*args: str) -> Server:
        started.append(Server(*args, tmp=tmp_path))
        return started[-1]

    yield _start
    for s in started:
        s.stop()


def test_version_and_bad_flags() -> None:
    out = subprocess.run(server_cmd("-version"), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stdout) == (0, "toxiproxy-server version 2.12.0\n")
    out = subprocess.run(server_cmd("-nonsense"), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "flag provided but not defined: -nonsense" in out.stderr
    assert "Traceback" not in out.stderr


def test_config_file_is_loaded_and_its_errors_only_logged(start, tmp_path: Path, echo: Echo) -> None:  # noqa: F811
    good = tmp_path / "good.json"
    spec = [{"name": "cfg", "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}"}]
    good.write_text(json.dumps(spec))
    srv = start("-config", str(good), "-seed", "42")
    p = requests.get(srv.url + "/proxies/cfg", timeout=5).json()
    with socket.create_connection(("127.0.0.1", int(p["listen"].rsplit(":", 1)[1])), timeout=10) as s:
        round_trip(s)
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    srv2 = start("-config", str(bad))
    assert requests.get(srv2.url + "/proxies", timeout=5).json() == {}
    assert "populate" in srv2.log.read_text().lower()
    # A file that cannot be read: logged with its name, and the server serves without proxies.
    missing = tmp_path / "missing.json"
    for unreadable, message, err in (
        (missing, "Error reading config file", f"open {missing}: no such file or directory"),
        (tmp_path, "Failed to populate proxies from file", f"read {tmp_path}: is a directory"),
    ):
        srv3 = start("-config", str(unreadable))
        assert requests.get(srv3.url + "/proxies", timeout=5).json() == {}
        logged = [json.loads(line) for line in srv3.log.read_text().splitlines()]
        errors = [(e["message"], e["config"], e["err"]) for e in logged if e["level"] == "error"]
        assert errors == [(message, str(unreadable), err)]


def test_metrics_only_when_asked(start, echo: Echo) -> None:  # noqa: F811
    plain = start()
    assert requests.get(plain.url + "/metrics", timeout=5).status_code == 404
    srv = start("-proxy-metrics")
    p = requests.post(
        srv.url + "/proxies",
        json={"name": "m", "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}"},
        timeout=5,
    ).json()
    with socket.create_connection(("127.0.0.1", int(p["listen"].rsplit(":", 1)[1])), timeout=10) as s:
        round_trip(s, b"x" * 100)
    text = requests.get(srv.url + "/metrics", timeout=5).text
    assert 'toxiproxy_proxy_received_bytes_total{direction="upstream"' in text
    assert any(
        line.startswith("toxiproxy_proxy_sent_bytes_total") and line.endswith(" 100")
        for line in text.split("\n")
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_closing_listeners_and_connections(start, echo: Echo, sig: int) -> None:  # noqa: F811
    srv = start()
    p = requests.post(
        srv.url + "/proxies",
        json={"name": "s", "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}"},
        timeout=5,
    ).json()
    port = int(p["listen"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        round_trip(s)
        srv.proc.send_signal(sig)
        assert srv.proc.wait(10) == 0
        assert s.recv(10) == b""
    for dead in (port, srv.port):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", dead), timeout=5).close()
    assert "Traceback" not in srv.log.read_text()


@pytest.mark.parametrize(
    ("value", "text"), [(1.0, "1"), (0.5, "0.5"), (0.1, "0.1"), (0.3, "0.3"), (1e-7, "1e-7"), (1e22, "1e+22")]
)
def test_toxicity_is_written_as_go_writes_a_float32(value: float, text: str) -> None:
    assert float32_text(struct_f32(value)) == text


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_server_started_by_zchaos_stops_when_its_starter_dies() -> None:
    code = (
        "import os\n"
        "from chaos.toxiproxy_client import toxiproxy_server\n"
        "cm = toxiproxy_server(use_path=False)\n"
        "info = cm.__enter__()\n"
        "print(info.pid, flush=True)\n"
        "os._exit(0)  # as if SIGKILLed: no clean-up runs\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TOXIPROXY_URL"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30, env=env
    )
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + 10
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the server outlived the process that started it")
        time.sleep(0.05)
