"""Proxies: a listener and its connections, each an upstream connection and two links,
``upstream`` (client to server) and ``downstream`` (server to client), each with the proxy's
toxic chain for its direction (link.py); as Toxiproxy's proxy.go.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import TYPE_CHECKING, Any

from chaos.toxiproxy_server.link import Link
from chaos.toxiproxy_server.log import log
from chaos.toxiproxy_server.stream import Side
from chaos.toxiproxy_server.toxics import Toxic

if TYPE_CHECKING:
    from chaos.toxiproxy_server.metrics import Metrics

#: SO_LINGER on, 0 s: a close is an RST.
LINGER_0 = struct.pack("ii", 1, 0)


class ProxyError(Exception):
    """An error whose text is shown to the API client (Go's raw error string), status 500."""


class Connection:
    """One client of a proxy and its upstream connection."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.client = Side(self)
        self.server = Side(self)
        self.up: Link | None = None
        self.down: Link | None = None
        self.closed = False

    def other(self, link: Link) -> Link:
        return self.down if link is self.up else self.up  # type: ignore[return-value]

    async def run(self) -> None:
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        host, port = proxy.upstream_host_port()
        try:
            if host is None:
                raise OSError("bad upstream address")
            await loop.create_connection(lambda: self.server, host, port)
        except (OSError, asyncio.CancelledError) as exc:
            log(
                "error",
                "Unable to open connection to upstream",
                proxy=proxy.name,
                upstream=proxy.upstream,
                err=str(exc),
            )
            self.closed = True
            if self.client.transport is not None:
                self.client.transport.close()
            proxy.conns.discard(self)
            return
        if self.closed:  # the proxy stopped while we were dialling
            self.server.transport.close()  # type: ignore[union-attr]
            return
        try:
            self._link_up()
        except Exception as exc:  # a bug must cost this connection only, not leave it hanging
            log("error", "Failed to set up connection", proxy=proxy.name, err=repr(exc))
            self.close()
            proxy.conns.discard(self)

    def _link_up(self) -> None:
        proxy = self.proxy
        metrics = proxy.metrics
        self.up = Link(
            self, self.client, self.server, metrics.counter(proxy, "upstream") if metrics else None
        )
        self.down = Link(
            self, self.server, self.client, metrics.counter(proxy, "downstream") if metrics else None
        )
        up_toxics, down_toxics = proxy.chain(True), proxy.chain(False)
        if any(t.type.name == "reset_peer" for t in up_toxics + down_toxics):
            # Toxiproxy sets SO_LINGER 0 on both sockets when a reset_peer toxic is present at
            # link start, so its close is an RST; a reset_peer added later closes with FIN.
            for side in (self.client, self.server):
                sock = side.transport.get_extra_info("socket")  # type: ignore[union-attr]
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_0)
        self.up.start(up_toxics)
        self.down.start(down_toxics)
        self.client.flush_early()
        self.server.flush_early()

    def link_ended(self) -> None:
        if self.up is not None and self.up.ended and self.down is not None and self.down.ended:
            self.closed = True
            self.proxy.conns.discard(self)

    def close(self) -> None:
        """Close both sockets (a clean FIN), as Toxiproxy does when a proxy stops."""
        self.closed = True
        for link in (self.up, self.down):
            if link is not None:
                link.stop()
        for side in (self.client, self.server):
            if side.transport is not None:
                side.transport.close()


class Proxy:
    """A named proxy: listen address, upstream address, toxics, open connections."""

    def __init__(self, name: str, listen: str, upstream: str, metrics: Metrics | None = None) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics: list[Toxic] = []  # in the order added; chain() splits by direction
        self.conns: set[Connection] = set()
        self.server: asyncio.AbstractServer | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.metrics = metrics

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "Logger": {},
            "toxics": [t.to_json() for t in self.toxic_list()],
        }

    def chain(self, upstream: bool) -> list[Toxic]:
        return [t for t in self.toxics if t.upstream == upstream]

    def toxic_list(self) -> list[Toxic]:
        return self.chain(True) + self.chain(False)

    def find_toxic(self, name: str) -> Toxic | None:
        return next((t for t in self.toxics if t.name == name), None)

    def upstream_host_port(self) -> tuple[str | None, int]:
        host, port = split_host_port(self.upstream)
        if host is None or port is None:
            return None, 0
        return host or "localhost", port

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        if self.enabled:
            return
        sock, bound = bind_listener(self.listen)
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(self._accept, sock=sock, backlog=socket.SOMAXCONN)
        self.listen = bound
        self.enabled = True
        log("info", "Started proxy", name=self.name, proxy=self.listen, upstream=self.upstream)

    def _accept(self) -> Side:
        conn = Connection(self)
        self.conns.add(conn)
        task = asyncio.get_running_loop().create_task(conn.run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return conn.client

    def stop(self) -> None:
        if not self.enabled:
            return
        self.enabled = False
        if self.server is not None:
            self.server.close()
            self.server = None
        for task in list(self.tasks):
            task.cancel()
        for conn in list(self.conns):
            conn.close()
        self.conns.clear()
        log("info", "Terminated proxy", name=self.name, proxy=self.listen, upstream=self.upstream)

    def links(self, upstream: bool) -> list[Link]:
        out = []
        for conn in self.conns:
            link = conn.up if upstream else conn.down
            if link is not None and not link.ended:
                out.append(link)
        return out

    # -- toxics ----------------------------------------------------------------------
    def add_toxic(self, toxic: Toxic) -> None:
        self.toxics.append(toxic)
        for link in self.links(toxic.upstream):
            link.add(toxic)

    def update_toxic(self, toxic: Toxic) -> None:
        for link in self.links(toxic.upstream):
            link.update(toxic)

    def remove_toxic(self, toxic: Toxic) -> None:
        self.toxics.remove(toxic)
        for link in self.links(toxic.upstream):
            link.remove(toxic)

    def remove_all_toxics(self) -> None:
        for toxic in self.toxic_list():
            self.remove_toxic(toxic)


def split_host_port(addr: str) -> tuple[str | None, int | None]:
    """Go's ``net.SplitHostPort`` plus port parsing; (None, None) when malformed."""
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0 or addr[end + 1 : end + 2] != ":":
            return None, None
        host, port = addr[1:end], addr[end + 2 :]
    else:
        host, sep, port = addr.rpartition(":")
        if not sep or ":" in host:
            return None, None
    if port.isdigit() and int(port) < 65536:
        return host, int(port)
    if port == "":
        return host, 0
    return host, None


def resolve_listen(addr: str) -> tuple[str, int, str]:
    """(host to bind, port, Go's resolved text) or ProxyError with Go's message."""
    if addr == "":
        return "", 0, ":0"
    if addr.startswith("[") or addr.count(":") <= 1:
        host, port = split_host_port(addr)
    else:
        raise ProxyError(f"address {addr}: too many colons in address")
    if host is None:
        if ":" not in addr:
            raise ProxyError(f"address {addr}: missing port in address")
        raise ProxyError(f"address {addr}: missing ']' in address")
    if port is None:
        raise ProxyError(f"address {addr.rpartition(':')[2]}: invalid port")
    if host in ("", "0.0.0.0", "::"):
        text_host = host
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            raise ProxyError(f"lookup {host}: no such host") from None
        infos.sort(key=lambda i: i[0] != socket.AF_INET)  # Go prefers IPv4 for listening
        text_host = str(infos[0][4][0])  # an IPv4 or IPv6 address: typed str | int for other families
    text = f"[{text_host}]:{port}" if ":" in text_host else f"{text_host}:{port}"
    return text_host, port, text


def bind_listener(addr: str) -> tuple[socket.socket, str]:
    """A listening socket for ``addr`` and the address text Toxiproxy would report."""
    try:
        host, port, _ = resolve_listen(addr)
    except ProxyError as exc:
        raise ProxyError(f"listen tcp: {exc}") from None
    family = socket.AF_INET6 if (host == "" or ":" in host) and socket.has_ipv6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host in ("", "::"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise ProxyError(f"listen tcp {shown}: bind: {(exc.strerror or str(exc)).lower()}") from None
    sock.setblocking(False)
    real_port = sock.getsockname()[1]
    if host in ("", "::", "0.0.0.0"):
        return sock, f"[::]:{real_port}"
    return sock, (f"[{host}]:{real_port}" if ":" in host else f"{host}:{real_port}")
