"""The toxiproxy-python client, through chaos.toxiproxy_client, driving a real server.

Runs against zchaos's server (or ``TOXIPROXY_URL``), over real sockets to an echo upstream.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from chaos.toxiproxy_client import (
    InvalidToxic,
    NotFound,
    ProxyExists,
    ServerInfo,
    ToxiproxyClient,
    ToxiproxyError,
    toxiproxy_server,
)
from contract import ports
from contract.ports import listening_pids, port_accepts
from tests.procs import ROOT, wait_for
from tests.test_toxiproxy_conformance import Echo, connect, echo, round_trip, wait_eof  # noqa: F401

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def info() -> Iterator[ServerInfo]:
    with toxiproxy_server(use_path=False) as i:
        yield i


@pytest.fixture
def name(info: ServerInfo) -> Iterator[str]:
    n = f"cli-{uuid.uuid4().hex[:8]}"
    yield n
    with contextlib.suppress(NotFound):
        info.client.destroy(n)


def test_selection_reports_the_kind_and_a_live_url(info: ServerInfo) -> None:
    assert info.kind == ("external" if os.environ.get("TOXIPROXY_URL") else "zchaos")
    assert info.client.version()
    if info.kind == "zchaos":
        assert info.pid is not None


def test_create_toxics_disable_enable_destroy(info: ServerInfo, echo: Echo, name: str) -> None:  # noqa: F811
    c = info.client
    p = c.create(name, f"127.0.0.1:{echo.port}")
    assert p.enabled is True and p.listen.startswith("127.0.0.1:") and not p.listen.endswith(":0")
    assert c.get_proxy(name).listen == p.listen
    with pytest.raises(ProxyExists):
        c.create(name, f"127.0.0.1:{echo.port}")

    target = {"listen": p.listen}
    with connect(target) as s:
        round_trip(s)
        assert c.add_toxic(name, "latency", attributes={"latency": 250}) == "latency_downstream"
        assert round_trip(s) >= 0.245  # the toxic's delay is a lower bound whatever the load
        assert c.update_toxic(name, "latency_downstream", attributes={"latency": 0})["attributes"] == {
            "latency": 0,
            "jitter": 0,
        }
        assert round_trip(s) < 0.2
        assert set(c.toxics(name)) == {"latency_downstream"}
        assert c.remove_toxic(name, "latency_downstream") is True
        with pytest.raises(NotFound):
            c.remove_toxic(name, "latency_downstream")
        with pytest.raises(InvalidToxic):
            c.add_toxic(name, "no_such_type")

        c.set_enabled(name, False)
        assert wait_eof(s) < 10
    assert c.get_proxy(name).enabled is False
    c.set_enabled(name, True)
    with connect({"listen": c.get_proxy(name).listen}) as s:
        round_trip(s)
    assert c.destroy(name) is True
    assert c.get_proxy(name) is None


def test_reset_enables_proxies_and_clears_toxics(info: ServerInfo, echo: Echo, name: str) -> None:  # noqa: F811
    c = info.client
    c.create(name, f"127.0.0.1:{echo.port}")
    c.add_toxic(name, "timeout", stream="upstream", attributes={"timeout": 0})
    c.set_enabled(name, False)
    assert c.reset() is True
    assert c.get_proxy(name).enabled is True and c.toxics(name) == {}


def test_two_servers_in_one_process(info: ServerInfo, echo: Echo, name: str) -> None:  # noqa: F811
    if info.kind == "external":
        pytest.skip("needs a second server of our own")
    with toxiproxy_server(use_path=False) as other:
        other.client.create(name, f"127.0.0.1:{echo.port}")
        assert name in other.client.proxies()
        assert name not in info.client.proxies()


def test_errors_are_messages_not_hangs() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        client = ToxiproxyClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        with pytest.raises(ToxiproxyError, match=r"127\.0\.0\.1"):
            client.proxies()
    with pytest.raises(ToxiproxyError, match="unsupported"):
        ToxiproxyClient("https://example.invalid")


def test_server_error_is_raised(info: ServerInfo, echo: Echo, name: str) -> None:  # noqa: F811
    c = info.client
    p = c.create(name, f"127.0.0.1:{echo.port}")
    with pytest.raises(ToxiproxyError, match="500"):
        c.create("clash-" + name, f"127.0.0.1:{echo.port}", listen=p.listen)


def test_a_server_that_took_our_port_first_is_not_ours(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    # Another program's server already listens on the first port offered (it took the
    # port between the allocation and our server's bind): our server fails to bind, and
    # the next port is used, not the other server that answers /version there.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        taken = s.getsockname()[1]
    log = (tmp_path / "other.log").open("wb")
    other = subprocess.Popen(
        [sys.executable, "-m", "chaos.toxiproxy_server", "-host", "127.0.0.1", "-port", str(taken)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: port_accepts(taken), 20, "the other server to listen")
        offers = iter([taken])
        real = ports._unused_port
        monkeypatch.setattr(ports, "_unused_port", lambda: next(offers, None) or real())
        with toxiproxy_server(use_path=False) as info:
            assert info.url != f"http://127.0.0.1:{taken}"
            listeners = listening_pids(int(info.url.rsplit(":", 1)[1]))
            assert info.pid is not None and listeners and {os.getpgid(pid) for pid in listeners} == {info.pid}
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait(10)
        log.close()
