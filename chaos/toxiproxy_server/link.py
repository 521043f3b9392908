"""A link: one direction of one connection, from its source socket through its toxic stages
to its destination socket.

A link with no toxics forwards in the socket's read callback (``transport.write`` straight
from ``data_received``), which is what makes the proxy cheap when no fault is active; a link
with toxics runs one task per toxic (``Stage``), joined by ``Pipe``s.

Changes to a proxy's toxics are applied to every open link at once, the way Toxiproxy's
``ToxicLink`` does it: adding interrupts the last stage and appends one, updating restarts
the stage (toxicity is rolled again), removing interrupts the stage and the one before it,
passes on what it held, and splices it out; removing a ``timeout`` closes its output
instead.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any

from chaos.toxiproxy_server.stream import Pipe
from chaos.toxiproxy_server.toxics import Chunk, Toxic, noop

if TYPE_CHECKING:
    from chaos.toxiproxy_server.proxy import Connection
    from chaos.toxiproxy_server.stream import Side

# Reading from the source stops while this many bytes sit in a link's toxics (latency,
# bandwidth) and starts again below LOW, so a slow toxic pushes back on the sender
# through TCP instead of filling memory.
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18


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
