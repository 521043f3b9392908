"""What a request carries on the wire, which every part agrees on: its request id first
(``cid:seq``), then filler, so that a worker finds the id of the job it runs without knowing
the client protocol; and how a body that came back is shown in the history."""

from __future__ import annotations

import re


def request_id(cid: str, seq: int) -> str:
    """The run-unique id of request ``seq`` of client ``cid`` (carried in its payload)."""
    return f"{cid}:{seq}"


#: A request payload starts with its request id and this byte, then filler: workers find
#: the id of the job they run (for ``exec``/``done``) without knowing the client protocol.
RID_SEPARATOR = b"|"


def payload_for(rid: str, size: int, filler: bytes) -> bytes:
    """A request body of ``size`` bytes (at least the id) that starts with the request id."""
    head = rid.encode() + RID_SEPARATOR
    if len(head) >= size:
        return head
    need = size - len(head)
    return head + (filler * (need // max(1, len(filler)) + 1))[:need]


#: How a request id names its request: ``cid:seq`` (the client's id may itself hold colons).
RID_PATTERN = r"^(.*):([^:]*)$"


def owner_of(rid: str | None) -> tuple[str, int] | None:
    """The (client id, seq) of the request whose id is ``rid`` (request_id's inverse), or None
    when ``rid`` is not a request id."""
    match = re.match(RID_PATTERN, rid or "")
    if match is None or not match.group(2).isdigit():
        return None
    return match.group(1), int(match.group(2))


#: How much of a body that was not as expected the history keeps (``body``).
BODY_SHOWN = 200
#: Between two frames of a multi-frame body in ``body`` (U+241F, the symbol for a unit separator).
FRAME_SEPARATOR = "\u241f"


def shown_body(frames: list[bytes]) -> tuple[str, int]:
    """A body for the history: its first BODY_SHOWN bytes as text (printable ASCII kept,
    other bytes and the backslash escaped as in Python, frames separated by FRAME_SEPARATOR)
    and its whole length in bytes (all frames)."""
    parts, left = [], BODY_SHOWN
    for frame in frames:
        if left <= 0:
            break
        parts.append(_escaped(frame[:left]))
        left -= len(frame)
    return FRAME_SEPARATOR.join(parts), sum(map(len, frames))


def _escaped(data: bytes) -> str:
    # Escaped so that the text says exactly which bytes came (a NUL, a stray UTF-8 byte).
    return "".join("\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}" for b in data)


def rid_of(frame: bytes) -> str | None:
    """The request id a payload frame carries, or None if it carries none."""
    head, sep, _ = frame.partition(RID_SEPARATOR)
    if not sep:
        return None
    try:
        return head.decode()
    except UnicodeDecodeError:
        return None


def rid_in(frames: list[bytes]) -> str | None:
    """The first request id a frame of a message carries (whose request it is), or None."""
    return next((rid for rid in map(rid_of, frames) if rid), None)
