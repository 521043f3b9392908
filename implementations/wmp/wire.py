"""The WMP wire encoding (see SPEC.md): fixed version and command frames, a header frame
that carries the routing path, then the payload frames.

``decode`` never raises anything but ``Malformed``, whatever bytes it is given, so a peer
can log and drop a bad message and keep serving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from implementations.runtime import describe  # noqa: F401 - part of this module's API

VERSION = b"WMP\x01"

READY, WAKE, GIVE, TAKE, NO, DONE = (bytes([c]) for c in range(1, 7))
COMMANDS = {READY: "READY", WAKE: "WAKE", GIVE: "GIVE", TAKE: "TAKE", NO: "NO", DONE: "DONE"}
BY_NAME = {name: code for code, name in COMMANDS.items()}

#: Headers each command must carry (besides ``path``), and which may have a payload.
REQUIRED_HEADERS = {
    "READY": ("slots",),
    "WAKE": (),
    "GIVE": ("lock",),
    "TAKE": ("lock", "job", "manager"),
    "NO": ("lock",),
    "DONE": ("job",),
}
WITH_PAYLOAD = ("TAKE", "DONE")
KNOWN_HEADERS = frozenset(("path", "route", "slots", "lock", "job", "manager"))
LIST_HEADERS = frozenset(("path", "route"))

NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
MAX_HOPS = 16
MAX_HEADER_BYTES = 4096


class Malformed(ValueError):
    """A message that is not WMP, or not well-formed WMP."""


@dataclass(frozen=True)
class Message:
    """One WMP message, as the application sees it (ZeroMQ envelopes removed)."""

    command: str  # READY, WAKE, GIVE, TAKE, NO or DONE
    path: tuple[str, ...]  # hops it went through, origin first; each sender appends itself
    route: tuple[str, ...] = ()  # hops still to go; the next hop is the last one
    headers: dict[str, str] = field(default_factory=dict)  # slots, lock, job, manager
    payload: tuple[bytes, ...] = ()

    @property
    def origin(self) -> str:
        return self.path[0]

    def via(self, hop: str) -> Message:
        """This message as forwarded by ``hop`` (which appends itself to the path)."""
        return replace(self, path=(*self.path, hop))

    def next_hop(self) -> tuple[str, Message]:
        """Pop the next hop off the route (the caller checked the route is not empty)."""
        return self.route[-1], replace(self, route=self.route[:-1])


def check_name(name: str) -> str:
    """``name`` if it can be a hop or an identity, else ValueError."""
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid WMP name (1-64 of A-Z a-z 0-9 _ . : @ -)")
    return name


def make(command: str, sender: str, *, route: tuple[str, ...] = (), payload: tuple[bytes, ...] = (),
         **headers: str) -> Message:  # fmt: skip
    """A new message from ``sender`` (its path starts there)."""
    return Message(command, (sender,), tuple(route), {k: str(v) for k, v in headers.items()}, tuple(payload))


def reply_route(received: Message) -> tuple[str, ...]:
    """The route back to the origin of ``received``, sent on the socket it arrived on."""
    return received.path[:-1]


def encode(msg: Message) -> list[bytes]:
    lines = [f"path={' '.join(msg.path)}"]
    if msg.route:
        lines.append(f"route={' '.join(msg.route)}")
    lines += [f"{k}={v}" for k, v in sorted(msg.headers.items())]
    return [VERSION, BY_NAME[msg.command], "\n".join(lines).encode(), *msg.payload]


def decode(frames: list[bytes]) -> Message:
    """The message in ``frames``; Malformed (with the reason) if they are not well-formed WMP."""
    if len(frames) < 3:
        raise Malformed(f"{len(frames)} frame(s); a WMP message has at least 3")
    if frames[0] != VERSION:
        raise Malformed(f"version frame {frames[0][:8]!r} is not {VERSION!r}")
    command = COMMANDS.get(frames[1])
    if command is None:
        raise Malformed(f"unknown command frame {frames[1][:8]!r}")
    if len(frames[2]) > MAX_HEADER_BYTES:
        raise Malformed(f"header frame of {len(frames[2])} bytes (limit {MAX_HEADER_BYTES})")
    try:
        text = frames[2].decode("ascii")
    except UnicodeDecodeError:
        raise Malformed("header frame is not ASCII") from None
    headers: dict[str, str] = {}
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if not sep:
            raise Malformed(f"header line {line[:40]!r} has no '='")
        if key not in KNOWN_HEADERS:
            raise Malformed(f"unknown header {key[:40]!r}")
        if key in headers:
            raise Malformed(f"header {key!r} given twice")
        headers[key] = value
    lists = {}
    for key in LIST_HEADERS:
        hops = tuple(headers.pop(key, "").split())
        if len(hops) > MAX_HOPS:
            raise Malformed(f"{key} of {len(hops)} hops (limit {MAX_HOPS})")
        bad = [h for h in hops if not NAME.fullmatch(h)]
        if bad:
            raise Malformed(f"bad hop name {bad[0][:40]!r} in {key}")
        lists[key] = hops
    if not lists["path"]:
        raise Malformed("empty path: the sender must name itself")
    missing = [h for h in REQUIRED_HEADERS[command] if not headers.get(h)]
    if missing:
        raise Malformed(f"{command} without header(s) {missing}")
    extra = set(headers) - set(REQUIRED_HEADERS[command])
    if extra:
        raise Malformed(f"{command} does not take header(s) {sorted(extra)}")
    if "slots" in headers and not (headers["slots"].isdigit() and len(headers["slots"]) <= 6):
        raise Malformed(f"slots={headers['slots'][:20]!r} is not a count")
    for key in ("lock", "job", "manager"):
        if key in headers and not NAME.fullmatch(headers[key]):
            raise Malformed(f"{key}={headers[key][:40]!r} is not a valid name")
    payload = tuple(frames[3:])
    if payload and command not in WITH_PAYLOAD:
        raise Malformed(f"{command} carries no payload, got {len(payload)} frame(s)")
    if not payload and command in WITH_PAYLOAD:
        raise Malformed(f"{command} without a payload")
    return Message(command, lists["path"], lists["route"], headers, payload)
