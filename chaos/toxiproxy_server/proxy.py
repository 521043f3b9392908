"""Proxies: a listener, its connections, and the two toxic chains of each connection.

Each accepted client gets an upstream connection and two links, ``upstream`` (client to
server) and ``downstream`` (server to client). A link with no toxics forwards in the
socket's read callback (``transport.write`` straight from ``data_received``), which is
what makes the proxy cheap when no fault is active; a link with toxics runs one task per
toxic, joined by ``Pipe``s, as Toxiproxy's stubs are joined by channels.

Changes to a proxy's toxics are applied to every open link at once, the way Toxiproxy's
``ToxicLink`` does it: adding interrupts the last stage and appends one, updating
restarts the stage (toxicity is rolled again), removing interrupts the stage and the one
before it, passes on what it held, and splices it out; removing a ``timeout`` closes its
output instead.
"""

from __future__ import annotations

import asyncio
import collections
import random
import socket
import struct
from typing import TYPE_CHECKING, Any

from chaos.toxiproxy_server.log import log
from chaos.toxiproxy_server.toxics import Chunk, Toxic, noop

if TYPE_CHECKING:
    from chaos.toxiproxy_server.metrics import Metrics

# Reading from the source stops while this many bytes sit in a link's toxics (latency,
# bandwidth) and starts again below LOW, so a slow toxic pushes back on the sender
# through TCP instead of filling memory.
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18
LINGER_0 = struct.pack("ii", 1, 0)


class ProxyError(Exception):
    """An error whose text is shown to the API client (Go's raw error string), status 500."""


class Pipe:
    """A FIFO of chunks between two stages; ``None`` marks end of stream."""

    __slots__ = ("items", "waiter")

    def __init__(self) -> None:
        self.items: collections.deque[Chunk | None] = collections.deque()
        self.waiter: asyncio.Future[bool] | None = None

    def put(self, chunk: Chunk | None) -> None:
        self.items.append(chunk)
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(True)

    async def wait(self, timeout: float | None = None) -> bool:
        """True once an item is there; False after ``timeout`` seconds without one.

        The item is not taken here: a task cancelled between wake-up and running must not
        lose it (``pop`` happens in the task's own step).
        """
        if self.items:
            return True
        loop = asyncio.get_running_loop()
        fut = self.waiter = loop.create_future()
        handle = loop.call_later(timeout, _resolve, fut) if timeout is not None else None
        try:
            return await fut
        finally:
            if handle is not None:
                handle.cancel()
            self.waiter = None

    def pop(self) -> Chunk | None:
        return self.items.popleft()

    async def get(self) -> Chunk | None:
        while not self.items:
            await self.wait()
        return self.items.popleft()


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


class Stage:
    """One toxic running on one link."""

    __slots__ = (
        "active",
        "closed",
        "held",
        "input",
        "link",
        "output",
        "state",
        "task",
        "toxic",
        "uninterruptible",
    )

    def __init__(self, link: Link, toxic: Toxic, output: Pipe | Link) -> None:
        self.link = link
        self.toxic = toxic
        self.input = Pipe()
        self.output = output
        self.held: Chunk | None = None
        self.state: dict[str, Any] = {"sent": 0}
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.uninterruptible = False

    def start(self) -> None:
        # Toxicity is rolled per connection, per direction, whenever the stage (re)starts.
        fn = self.toxic.type.pipe if random.random() < self.toxic.toxicity else noop
        self.task = asyncio.get_running_loop().create_task(fn(self))

    def interrupt(self) -> bool:
        """Stop the toxic now, passing on what it held; False if it has closed (or cannot stop)."""
        if self.closed or self.uninterruptible:
            return False
        if self.task is not None:
            self.task.cancel()
            self.task = None
        if self.held is not None:
            held, self.held = self.held, None
            self.output.put(held)
        return True

    def send(self, chunk: Chunk) -> None:
        self.output.put(chunk)

    def close(self) -> None:
        self.closed = True
        self.output.put(None)

    def dropped(self, chunk: Chunk) -> None:
        self.link.release(len(chunk.data))

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


class Side(asyncio.Protocol):
    """One socket of a connection: the source of one link and the destination of the other."""

    __slots__ = ("conn", "early", "early_eof", "feeds", "transport", "writes_for")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.feeds: Link | None = None  # the link this socket's reads go into
        self.writes_for: Link | None = None  # the link that writes to this socket
        # What arrives before the upstream is dialled (uvloop may deliver a read that was
        # already under way when reading was paused).
        self.early: list[bytes] = []
        self.early_eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.feeds is None:
            transport.pause_reading()  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if self.feeds is None:
            self.early.append(data)
            return
        self.feeds.feed(data)

    def eof_received(self) -> bool:
        if self.feeds is not None:
            self.feeds.feed_eof()
        else:
            self.early_eof = True
        return True  # keep writing until the other direction is done too

    def connection_lost(self, exc: Exception | None) -> None:
        if self.feeds is not None:
            self.feeds.feed_eof()
        else:
            self.early_eof = True
        if self.writes_for is not None:
            self.writes_for.dest_lost()

    def flush_early(self) -> None:
        early, self.early = self.early, []
        for data in early:
            self.feeds.feed(data)  # type: ignore[union-attr]
        if self.early_eof:
            self.feeds.feed_eof()  # type: ignore[union-attr]
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def pause_writing(self) -> None:
        if self.writes_for is not None:
            self.writes_for.pause("dest")

    def resume_writing(self) -> None:
        if self.writes_for is not None:
            self.writes_for.resume("dest")


class Link:
    """One direction of one connection: source socket, toxic stages, destination socket."""

    __slots__ = (
        "buffered",
        "conn",
        "dest",
        "ended",
        "eof",
        "head",
        "metric",
        "paused",
        "source",
        "stages",
    )

    def __init__(self, conn: Connection, source: Side, dest: Side, metric: Any) -> None:
        self.conn = conn
        self.source = source
        self.dest = dest
        self.stages: list[Stage] = []
        self.head: Pipe | Link = self
        self.buffered = 0
        self.paused: set[str] = set()
        self.eof = False
        self.ended = False
        self.metric = metric
        source.feeds = self
        dest.writes_for = self

    def start(self, toxics: list[Toxic]) -> None:
        for toxic in toxics:
            self.add(toxic)

    # -- data path -------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.metric is not None:
            self.metric[0] += len(data)
        head = self.head
        if head is self:
            if not self.ended:
                self.dest.transport.write(data)  # type: ignore[union-attr]
                if self.metric is not None:
                    self.metric[1] += len(data)
            return
        self.buffered += len(data)
        head.put(Chunk(data, asyncio.get_running_loop().time()))
        if self.buffered > HIGH_WATER:
            self.pause("buffer")

    def feed_eof(self) -> None:
        if self.eof:
            return
        self.eof = True
        self.head.put(None)

    def put(self, chunk: Chunk | None) -> None:
        """The end of the chain: write to the destination, or close it."""
        if chunk is None:
            self.end()
            return
        if self.ended:
            return
        n = len(chunk.data)
        self.dest.transport.write(chunk.data)  # type: ignore[union-attr]
        if self.metric is not None:
            self.metric[1] += n
        self.release(n)

    def release(self, n: int) -> None:
        self.buffered -= n
        if self.buffered < LOW_WATER and "buffer" in self.paused:
            self.resume("buffer")

    def pause(self, why: str) -> None:
        if not self.paused:
            t = self.source.transport
            if t is not None and not t.is_closing():
                t.pause_reading()
        self.paused.add(why)

    def resume(self, why: str) -> None:
        self.paused.discard(why)
        if not self.paused and not self.eof:
            t = self.source.transport
            if t is not None and not t.is_closing():
                t.resume_reading()

    def end(self) -> None:
        """The link's output ended: close the destination fully (Go closes the socket), which
        ends the other direction's reading as well."""
        if self.ended:
            return
        self.ended = True
        for st in self.stages:
            st.stop()
        t = self.dest.transport
        if t is not None:
            t.close()
        other = self.conn.other(self)
        other.feed_eof()
        self.conn.link_ended()

    def dest_lost(self) -> None:
        if not self.ended:
            self.end()

    # -- live toxic changes ----------------------------------------------------------
    def add(self, toxic: Toxic) -> None:
        stage = Stage(self, toxic, self)
        if self.stages:
            last = self.stages[-1]
            running = last.interrupt()
            last.output = stage.input
            if running:
                last.start()
        else:
            self.head = stage.input
        self.stages.append(stage)
        if not self.ended:
            stage.start()

    def update(self, toxic: Toxic) -> None:
        for st in self.stages:
            if st.toxic is toxic and st.interrupt() and not self.ended:
                st.start()

    def remove(self, toxic: Toxic) -> None:
        i = next((n for n, st in enumerate(self.stages) if st.toxic is toxic), None)
        if i is None:
            return
        st = self.stages[i]
        prev = self.stages[i - 1] if i > 0 else None
        if not st.interrupt():
            return  # it closed the link already (limit_data, reset_peer): nothing to undo
        prev_running = prev.interrupt() if prev is not None else False
        del self.stages[i]
        if toxic.type.closes_on_removal:
            st.close()
        else:
            while st.input.items:
                st.output.put(st.input.items.popleft())
        if prev is not None:
            prev.output = st.output
            if prev_running and not self.ended:
                prev.start()
        else:
            self.head = st.output
        if self.head is self and self.buffered:
            self.buffered = 0
            self.resume("buffer")

    def stop(self) -> None:
        self.ended = True
        for st in self.stages:
            st.stop()


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


# -- addresses, with Go's error texts --------------------------------------------------


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
        text_host = infos[0][4][0]
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
