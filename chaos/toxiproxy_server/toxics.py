"""The toxic types and what each does to one direction of one connection.

A toxic is a coroutine that takes chunks from its stage's input and puts them on its
output, as Toxiproxy's ``Pipe`` functions do with Go channels. A chunk a toxic holds
while it waits (latency, bandwidth) is kept in ``stage.held``, so that interrupting the
stage (toxic added after it, updated or removed) passes it on instead of losing it,
exactly like the ``case <-stub.Interrupt: stub.Output <- c`` branches of the Go code.
``None`` on a pipe is end of stream (Go's closed channel).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.toxiproxy_server import gojson

if TYPE_CHECKING:
    from chaos.toxiproxy_server.link import Stage


class Chunk:
    """Bytes read from a socket, with the loop time they were read (delays count from it)."""

    __slots__ = ("data", "ts")

    def __init__(self, data: bytes, ts: float) -> None:
        self.data = data
        self.ts = ts


async def noop(stage: Stage) -> None:
    inp, out = stage.input, stage
    while True:
        c = await inp.get()
        if c is None:
            out.close()
            return
        out.send(c)


async def latency(stage: Stage) -> None:
    loop = asyncio.get_running_loop()
    attrs = stage.toxic.attributes
    while True:
        c = await stage.input.get()
        if c is None:
            stage.close()
            return
        delay = attrs["latency"]
        jitter = attrs["jitter"]
        if jitter > 0:
            delay += random.randrange(jitter * 2) - jitter
        # Measured from the read, not from the previous chunk: delays pipeline (Go does the same).
        sleep = delay / 1000 - (loop.time() - c.ts)
        if sleep > 0:
            stage.held = c
            await asyncio.sleep(sleep)
            stage.held = None
            c.ts += sleep
        stage.send(c)


async def bandwidth(stage: Stage) -> None:
    loop = asyncio.get_running_loop()
    rate = stage.toxic.attributes["rate"]
    sleep = 0.0
    while True:
        c = await stage.input.get()
        if c is None:
            stage.close()
            return
        if rate <= 0:
            # Go loops forever sending empty slices: nothing gets through until interrupted.
            stage.held = c
            await asyncio.Future()
        sleep += len(c.data) / rate / 1000
        step = rate * 100
        stage.held = c
        while len(c.data) > step:
            await asyncio.sleep(0.1)
            stage.send(Chunk(c.data[:step], c.ts))
            c.data = c.data[step:]
            sleep -= 0.1
        start = loop.time()
        if sleep > 0:
            await asyncio.sleep(sleep)
        sleep -= loop.time() - start
        stage.held = None
        stage.send(c)


async def slow_close(stage: Stage) -> None:
    while True:
        c = await stage.input.get()
        if c is None:
            await asyncio.sleep(stage.toxic.attributes["delay"] / 1000)
            stage.close()
            return
        stage.send(c)


async def timeout(stage: Stage) -> None:
    ms = stage.toxic.attributes["timeout"]
    while True:
        got = await stage.input.wait(ms / 1000 if ms > 0 else None)
        if not got:
            stage.close()
            return
        c = stage.input.pop()
        if c is None:
            stage.close()
            return
        stage.dropped(c)


async def reset_peer(stage: Stage) -> None:
    c = await stage.input.get()
    if c is not None:
        stage.dropped(c)
    # Go's wait here ignores interrupts (a bare time.After).
    stage.uninterruptible = True
    await asyncio.sleep(stage.toxic.attributes["timeout"] / 1000)
    stage.close()


def _slices(size: int, average: int, variation: int, start: int = 0) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    todo = [(start, start + size)]
    while todo:
        a, b = todo.pop()
        if (b - a) - average <= variation or b - a <= 1:
            out.append((a, b))
            continue
        mid = a + (b - a) // 2
        if variation > 0:
            mid += random.randrange(variation * 2) - variation
        mid = min(max(mid, a + 1), b - 1)
        todo.append((mid, b))
        todo.append((a, mid))
    return out


async def slicer(stage: Stage) -> None:
    attrs = stage.toxic.attributes
    while True:
        c = await stage.input.get()
        if c is None:
            stage.close()
            return
        pieces = _slices(len(c.data), max(attrs["average_size"], 0), max(attrs["size_variation"], 0))
        data = c.data
        for a, b in pieces:
            stage.send(Chunk(data[a:b], c.ts))
            if b < len(data):
                stage.held = Chunk(data[b:], c.ts)
            await asyncio.sleep(attrs["delay"] / 1e6)
            stage.held = None


async def limit_data(stage: Stage) -> None:
    limit = stage.toxic.attributes["bytes"]
    state = stage.state
    while True:
        c = await stage.input.get()
        if c is None:
            stage.close()
            return
        remaining = max(limit - state["sent"], 0)
        if remaining < len(c.data):
            stage.dropped(Chunk(c.data[remaining:], c.ts))
            c = Chunk(c.data[:remaining], c.ts)
        if c.data:
            stage.send(c)
            state["sent"] += len(c.data)
        if state["sent"] >= limit:
            stage.close()
            return


@dataclass(frozen=True)
class ToxicType:
    name: str
    go_struct: str
    attributes: tuple[tuple[str, str], ...]  # (json name, Go type), in the Go struct's order
    pipe: Callable[[Stage], Coroutine[Any, Any, None]]
    closes_on_removal: bool = False  # Go's CleanupToxic: only timeout


TYPES: dict[str, ToxicType] = {
    t.name: t
    for t in (
        ToxicType("noop", "NoopToxic", (), noop),
        ToxicType("latency", "LatencyToxic", (("latency", "int64"), ("jitter", "int64")), latency),
        ToxicType("bandwidth", "BandwidthToxic", (("rate", "int64"),), bandwidth),
        ToxicType("slow_close", "SlowCloserToxic", (("delay", "int64"),), slow_close),
        ToxicType("timeout", "TimeoutToxic", (("timeout", "int64"),), timeout, closes_on_removal=True),
        ToxicType("reset_peer", "ResetToxic", (("timeout", "int64"),), reset_peer),
        ToxicType(
            "slicer",
            "SlicerToxic",
            (("average_size", "int"), ("size_variation", "int"), ("delay", "int")),
            slicer,
        ),
        ToxicType("limit_data", "LimitDataToxic", (("bytes", "int64"),), limit_data),
    )
}


@dataclass
class Toxic:
    """One toxic of a proxy, as the API shows it."""

    type: ToxicType
    name: str
    stream: str  # as sent by the client (echoed back verbatim)
    upstream: bool
    toxicity: float
    attributes: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type.name,
            "stream": self.stream,
            "toxicity": gojson.F32(self.toxicity),
        }


def merge_attributes(ttype: ToxicType, current: dict[str, int], given: Any) -> dict[str, int]:
    """``current`` updated with the known keys of ``given``; Go's decoding rules and errors."""
    result = dict(current)
    if given is None:
        return result
    if not isinstance(given, dict):
        raise gojson.DecodeError(
            f"json: cannot unmarshal {gojson.kind_of(given)} into Go struct field .attributes"
            f" of type toxics.{ttype.go_struct}"
        )
    gotypes = dict(ttype.attributes)
    for key, value in given.items():  # in the body's order: Go reports the first bad one
        name = gojson.field_of(key, gotypes)
        if name is not None and value is not None:
            result[name] = gojson.as_int(value, ttype.go_struct, f"attributes.{name}", gotypes[name])
    return result
