"""The WMP wire encoding: round trips, and malformed input refused with Malformed only."""

from __future__ import annotations

import contextlib
import random

import pytest

from implementations.wmp import wire


def test_every_command_round_trips() -> None:
    cases = [
        wire.make("READY", "worker-1", slots="3"),
        wire.make("WAKE", "m", route=("worker-1",)),
        wire.make("GIVE", "worker-1", route=("m",), lock="99.1"),
        wire.make(
            "TAKE",
            "m",
            route=("worker-1", "device"),
            payload=(b"c:1|x", b""),
            lock="9.1",
            job="5-1",
            manager="m",
        ),
        wire.make("NO", "m", lock="9.2"),
        wire.make("DONE", "worker-1", route=("m",), payload=(b"c:1|x",), job="5-1"),
    ]
    for msg in cases:
        frames = wire.encode(msg)
        assert frames[0] == b"WMP\x01"
        assert len(frames[1]) == 1
        assert wire.decode(frames) == msg


def test_routing_through_a_device() -> None:
    ready = wire.make("READY", "w1", slots="2").via("d")
    assert ready.path == ("w1", "d") and ready.origin == "w1"
    wake = wire.make("WAKE", "m", route=wire.reply_route(ready))
    hop, at_device = wake.next_hop()
    assert hop == "w1" and at_device.route == ()
    delivered = at_device.via("d")
    assert delivered.origin == "m"
    give = wire.make("GIVE", "w1", route=wire.reply_route(delivered), lock="1.1")
    hop, _ = give.next_hop()
    assert hop == "m"


@pytest.mark.parametrize(
    ("frames", "why"),
    [
        ([], "frame"),
        ([b"WMP\x02", b"\x01", b"path=w slots=1"], "version"),
        ([b"WMP\x01", b"\x09", b"path=w"], "unknown command"),
        ([b"WMP\x01", b"\x01", b"path=w"], "without header"),
        ([b"WMP\x01", b"\x01", b"path=\nslots=1"], "empty path"),
        ([b"WMP\x01", b"\x01", b"path=w\nslots=x"], "not a count"),
        ([b"WMP\x01", b"\x01", b"path=w\nslots=1\nslots=2"], "twice"),
        ([b"WMP\x01", b"\x01", b"path=w\nslots=1\ncolour=red"], "unknown header"),
        ([b"WMP\x01", b"\x02", b"path=m\nlock=1"], "does not take"),
        ([b"WMP\x01", b"\x02", b"path=m", b"payload"], "no payload"),
        ([b"WMP\x01", b"\x04", b"path=m\nlock=1\njob=2\nmanager=m"], "without a payload"),
        ([b"WMP\x01", b"\x01", b"path=w b\xffd\nslots=1"], "ASCII"),
        ([b"WMP\x01", b"\x01", b"path=w/x\nslots=1"], "bad hop"),
        ([b"WMP\x01", b"\x01", b"nonsense"], "no '='"),
        ([b"WMP\x01", b"\x01", b"path=" + b"a " * 20 + b"\nslots=1"], "hops"),
    ],
)
def test_malformed_messages_are_refused_with_a_reason(frames: list[bytes], why: str) -> None:
    with pytest.raises(wire.Malformed, match=why):
        wire.decode(frames)


def test_random_garbage_only_ever_raises_malformed() -> None:
    rng = random.Random(14)
    good = wire.encode(wire.make("TAKE", "m", payload=(b"x",), lock="1.1", job="1-1", manager="m"))
    for _ in range(3000):
        frames = [bytearray(f) for f in good]
        for _ in range(rng.randint(1, 4)):
            f = rng.randrange(len(frames))
            if frames[f] and rng.random() < 0.7:
                frames[f][rng.randrange(len(frames[f]))] = rng.randrange(256)
            else:
                frames[f] += bytes([rng.randrange(256)])
        if rng.random() < 0.2:
            frames = frames[: rng.randrange(len(frames) + 1)]
        with contextlib.suppress(wire.Malformed):
            wire.decode([bytes(f) for f in frames])


def test_names_are_checked() -> None:
    assert wire.check_name("worker-2") == "worker-2"
    with pytest.raises(ValueError):
        wire.check_name("two words")
