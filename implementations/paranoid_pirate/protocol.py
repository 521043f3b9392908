"""Paranoid Pirate wire format (6/PPP): the two control frames and request/reply envelopes."""

from __future__ import annotations

from dataclasses import dataclass

from implementations.runtime import describe  # noqa: F401 - part of this module's API

READY = b"\x01"
HEARTBEAT = b"\x02"
CONTROL = {READY: "READY", HEARTBEAT: "HEARTBEAT"}


class Malformed(ValueError):
    """A message that is neither a control frame nor an enveloped request/reply."""


@dataclass(frozen=True)
class Enveloped:
    """A request or reply: the address stack (up to the empty delimiter) and the body."""

    envelope: list[bytes]  # address frames, without the empty delimiter
    body: list[bytes]

    def frames(self) -> list[bytes]:
        return [*self.envelope, b"", *self.body]


def split_envelope(frames: list[bytes]) -> Enveloped:
    """``[addr..., '', body...]`` -> Enveloped; Malformed without a delimiter or a body."""
    try:
        cut = frames.index(b"")
    except ValueError:
        raise Malformed(f"no empty delimiter frame in {len(frames)} frame(s)") from None
    if cut == 0:
        raise Malformed("empty address before the delimiter")
    if cut == len(frames) - 1:
        raise Malformed("no body after the delimiter")
    return Enveloped(frames[:cut], frames[cut + 1 :])


def parse_from_worker(frames: list[bytes]) -> tuple[str, Enveloped | None]:
    """What a worker sent to the queue (identity already removed): READY, HEARTBEAT or REPLY."""
    if len(frames) == 1:
        command = CONTROL.get(frames[0])
        if command is None:
            raise Malformed(f"unknown one-frame command {frames[0][:16]!r}")
        return command, None
    return "REPLY", split_envelope(frames)


def parse_to_worker(frames: list[bytes]) -> tuple[str, Enveloped | None]:
    """What the queue sent to a worker: HEARTBEAT or REQUEST (READY is never sent there)."""
    if len(frames) == 1:
        if frames[0] == HEARTBEAT:
            return "HEARTBEAT", None
        raise Malformed(f"unknown one-frame command {frames[0][:16]!r}")
    return "REQUEST", split_envelope(frames)
