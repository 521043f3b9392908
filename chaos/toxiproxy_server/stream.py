"""The stream plumbing under a link: ``Pipe``, a FIFO of chunks between two toxic stages (as
Toxiproxy's stream package joins its stubs with channels), and ``Side``, one socket of a
connection (asyncio's protocol), which feeds the link it is the source of and is written by
the link it is the destination of."""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.toxiproxy_server.link import Link
    from chaos.toxiproxy_server.proxy import Connection
    from chaos.toxiproxy_server.toxics import Chunk


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
