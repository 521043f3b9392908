"""Driving a Toxiproxy server: the ``toxiproxy-python`` client, made safe for a harness, and
the choice of which server to use.

``toxiproxy-python`` 0.1.1 does the talking (create, toxics, enable/disable, destroy,
reset), but as published it cannot be used as is by a runner:

- the server address is a class attribute of ``APIConsumer``, one per process;
- there is no request timeout, so a hung server hangs the run;
- a 500 is returned as if it had succeeded (a failed listen becomes a KeyError later);
- there is no toxic update (PATCH).

So each call of the library runs inside ``_bound``: a process-wide lock, the class
attributes pointed at this client's server, and the module's ``requests`` swapped for a
session with a timeout that raises ``ToxiproxyError`` on 5xx and on connection failures.
The toxic update is the one request made here directly. We depend on the library with its
``future`` dependency: ``future`` 1.0 ships a py3 wheel and works on 3.11, and a package
installed "without its dependencies" cannot be expressed in ``pyproject.toml``.

``toxiproxy_server()`` picks the server: ``TOXIPROXY_URL`` if set, else a
``toxiproxy-server`` on PATH, else zchaos's own (``python -m chaos.toxiproxy_server``),
started in its own process group on a free port and stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import requests
import toxiproxy.api
from toxiproxy import Proxy, Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
from toxiproxy.toxic import Toxic

from chaos.toxiproxy_server import ENV_PARENT
from contract.ports import PortAllocator, listens

__all__ = [
    "InvalidToxic",
    "NotFound",
    "ProxyExists",
    "ServerInfo",
    "ToxiproxyClient",
    "ToxiproxyError",
    "toxiproxy_server",
]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
_LIBRARY_LOCK = threading.RLock()


class ToxiproxyError(Exception):
    """The server failed a request (5xx), did not answer in time, or could not be reached."""


class _Requests:
    """Stands in for the ``requests`` module inside toxiproxy-python during one bound call."""

    def __init__(self, session: requests.Session, timeout: float) -> None:
        self.session = session
        self.timeout = timeout

    def _call(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout)
        try:
            resp = self.session.request(method, url, **kwargs)
        except requests.RequestException as exc:
            raise ToxiproxyError(f"toxiproxy at {url}: {exc}") from None
        if resp.status_code >= 500:
            raise ToxiproxyError(f"toxiproxy {method} {url}: {resp.status_code} {resp.text.strip()}")
        return resp

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("POST", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("DELETE", url, **kwargs)


class ToxiproxyClient:
    """One Toxiproxy server at ``url`` (``http://host:port``); every request has ``timeout`` s."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ToxiproxyError(f"unsupported toxiproxy URL {url!r} (expected http://host:port)")
        self.url = f"http://{parts.netloc}"
        self.host = parts.hostname
        self.port = parts.port or 8474
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "zchaos-toxiproxy-client"
        self._server = Toxiproxy()

    @contextlib.contextmanager
    def _bound(self) -> Iterator[Toxiproxy]:
        with _LIBRARY_LOCK:
            saved = (APIConsumer.host, APIConsumer.port, toxiproxy.api.requests)
            APIConsumer.host, APIConsumer.port = self.host, self.port
            toxiproxy.api.requests = _Requests(self.session, self.timeout)
            try:
                yield self._server
            finally:
                APIConsumer.host, APIConsumer.port, toxiproxy.api.requests = saved

    def close(self) -> None:
        self.session.close()

    # -- through the library -----------------------------------------------------------
    def version(self) -> str:
        with self._bound() as server:
            raw = server.version()
        if raw is None:
            raise ToxiproxyError(f"toxiproxy at {self.url} is not running")
        return raw.decode(errors="replace").strip()

    def proxies(self) -> dict[str, Proxy]:
        with self._bound() as server:
            return server.proxies()

    def get_proxy(self, name: str) -> Proxy | None:
        with self._bound() as server:
            return server.get_proxy(name)

    def create(self, name: str, upstream: str, listen: str = "127.0.0.1:0", enabled: bool = True) -> Proxy:
        with self._bound() as server:
            return server.create(upstream=upstream, name=name, listen=listen, enabled=enabled)

    def destroy(self, name: str) -> bool:
        with self._bound():
            return Proxy(name=name, upstream="", enabled=False, listen="").destroy()

    def set_enabled(self, name: str, enabled: bool) -> None:
        with self._bound():
            proxy = Proxy(name=name, upstream="", enabled=not enabled, listen="")
            if enabled:
                proxy.enable()
            else:
                proxy.disable()

    def add_toxic(
        self,
        proxy: str,
        type: str,
        *,
        stream: str = "downstream",
        name: str | None = None,
        toxicity: float = 1.0,
        attributes: dict[str, int] | None = None,
    ) -> str:
        """Add a toxic; its name (default ``<type>_<stream>``)."""
        name = name or f"{type}_{stream}"
        with self._bound():
            Proxy(name=proxy, upstream="", enabled=True, listen="").add_toxic(
                type=type, stream=stream, name=name, toxicity=toxicity, attributes=attributes or {}
            )
        return name

    def toxics(self, proxy: str) -> dict[str, Toxic]:
        with self._bound():
            return Proxy(name=proxy, upstream="", enabled=True, listen="").toxics()

    def remove_toxic(self, proxy: str, name: str) -> bool:
        with self._bound():
            return Proxy(name=proxy, upstream="", enabled=True, listen="").destroy_toxic(name)

    def reset(self) -> bool:
        with self._bound() as server:
            return server.reset()

    def destroy_all(self) -> None:
        with self._bound() as server:
            server.destroy_all()

    # -- what the library lacks --------------------------------------------------------
    def update_toxic(
        self,
        proxy: str,
        name: str,
        *,
        attributes: dict[str, int] | None = None,
        toxicity: float | None = None,
    ) -> dict[str, Any]:
        """PATCH a toxic: only the attributes given change; the toxic's JSON."""
        body: dict[str, Any] = {}
        if attributes is not None:
            body["attributes"] = attributes
        if toxicity is not None:
            body["toxicity"] = toxicity
        with _LIBRARY_LOCK:  # the session is shared with the library's calls
            resp = _Requests(self.session, self.timeout)._call(
                "PATCH", f"{self.url}/proxies/{proxy}/toxics/{name}", json=body
            )
            toxiproxy.api.validate_response(resp)
            return resp.json()


# -- which server ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerInfo:
    """The server in use: its URL, which kind served ("external", "toxiproxy-server",
    "zchaos"), a client bound to it, and the pid of the process we started (if any)."""

    url: str
    kind: str
    client: ToxiproxyClient
    pid: int | None = None


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(grace_s)


def _wait_ready(client: ToxiproxyClient, proc: subprocess.Popen[bytes] | None, deadline_s: float) -> bool:
    """Whether the server answers ``/version`` within the deadline; the one started as
    ``proc``, not another program that took its port first (``proc`` then fails to bind)."""
    port = urlsplit(client.url).port
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            client.session.get(f"{client.url}/version", timeout=0.5).raise_for_status()
            if proc is None or port is None or listens(port, proc.pid):
                return True
        except requests.RequestException:
            pass
        time.sleep(0.05)  # polling a port that is not open yet; bounded by the deadline
    return False


def server_command(host: str, port: int, use_path: bool = True) -> tuple[list[str], str]:
    """The command that starts a server here, and its kind (a real one on PATH wins)."""
    real = shutil.which("toxiproxy-server") if use_path else None
    if real:
        return [real, "-host", host, "-port", str(port)], "toxiproxy-server"
    return [sys.executable, "-m", "chaos.toxiproxy_server", "-host", host, "-port", str(port)], "zchaos"


@contextlib.contextmanager
def toxiproxy_server(
    log: IO[bytes] | None = None,
    *,
    host: str = "127.0.0.1",
    start_timeout_s: float = 15.0,
    use_path: bool = True,
    request_timeout_s: float = 5.0,
) -> Iterator[ServerInfo]:
    """The Toxiproxy server to use for the duration of the block.

    ``TOXIPROXY_URL`` (external, left running), else ``toxiproxy-server`` from PATH, else
    zchaos's own; a started server runs in its own process group, writes its log to
    ``log`` (discarded if None) and is stopped (SIGTERM, then SIGKILL) on leaving, also on
    an exception or Ctrl-C. ``use_path=False`` skips PATH (zchaos's own server, unless
    ``TOXIPROXY_URL`` is set).
    """
    url = os.environ.get("TOXIPROXY_URL")
    if url:
        client = ToxiproxyClient(url, timeout=request_timeout_s)
        if not _wait_ready(client, None, min(start_timeout_s, 5.0)):
            client.close()
            raise ToxiproxyError(f"TOXIPROXY_URL={url} does not answer GET /version")
        try:
            yield ServerInfo(client.url, "external", client)
        finally:
            client.close()
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env[ENV_PARENT] = str(os.getpid())  # our server stops by itself if we are killed
    # The port stays reserved against other zchaos processes while the server lives.
    with PortAllocator() as ports:
        for _attempt in range(3):  # a free port can be taken between asking and binding
            port = ports.allocate()
            cmd, kind = server_command(host, port, use_path)
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log if log is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
                cwd=PROJECT_ROOT,
                env=env,
                start_new_session=True,
            )
            client = ToxiproxyClient(f"http://{host}:{port}", timeout=request_timeout_s)
            try:
                if _wait_ready(client, proc, start_timeout_s):
                    yield ServerInfo(client.url, kind, client, proc.pid)
                    return
            finally:
                client.close()
                _stop_group(proc)
    raise ToxiproxyError(
        f"could not start {' '.join(cmd)} (no answer on /version within {start_timeout_s} s)"
    )
