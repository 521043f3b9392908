"""Majordomo 0.1 (7/MDP) and MMI (8/MMI) wire format: parsing and building, no sockets.

Frames are as the broker's ROUTER sees them (sender identity first). Parsing never
raises anything but ``ProtocolError``, whose message says what was wrong, so a broker can
log a malformed message and drop it. Protocol choices:

- A client REQUEST must carry at least one body frame (the spec's "4+ frames"); a
  request with no body is malformed and dropped.
- Worker REQUEST and REPLY carry exactly one client-address frame followed by an empty
  frame, then one or more body frames.
- A READY carries exactly one service-name frame; HEARTBEAT and DISCONNECT nothing more.
- Service names are decoded as UTF-8; one that is not valid UTF-8 makes the message
  malformed (the history records service names as text).
"""

from __future__ import annotations

from dataclasses import dataclass

from implementations.runtime import describe  # noqa: F401 - part of this module's API

C_CLIENT = b"MDPC01"
W_WORKER = b"MDPW01"

READY = b"\x01"
REQUEST = b"\x02"
REPLY = b"\x03"
HEARTBEAT = b"\x04"
DISCONNECT = b"\x05"

COMMAND_NAMES = {READY: "READY", REQUEST: "REQUEST", REPLY: "REPLY", HEARTBEAT: "HEARTBEAT",
                 DISCONNECT: "DISCONNECT"}  # fmt: skip

MMI_PREFIX = "mmi."
MMI_SERVICE = "mmi.service"
MMI_FOUND, MMI_NOT_FOUND, MMI_NOT_IMPLEMENTED = b"200", b"404", b"501"


class ProtocolError(ValueError):
    """A message that does not follow 7/MDP (the text says how)."""


@dataclass(frozen=True)
class ClientRequest:
    sender: bytes
    service: str
    body: list[bytes]


@dataclass(frozen=True)
class WorkerCommand:
    sender: bytes
    command: bytes  # one of READY ... DISCONNECT
    service: str = ""  # READY
    client: bytes = b""  # REQUEST, REPLY
    body: tuple[bytes, ...] = ()  # REQUEST, REPLY

    @property
    def name(self) -> str:
        return COMMAND_NAMES[self.command]


def _service(frame: bytes) -> str:
    try:
        name = frame.decode()
    except UnicodeDecodeError:
        raise ProtocolError("service name is not UTF-8") from None
    if not name:
        raise ProtocolError("empty service name")
    return name


def parse_broker_inbound(frames: list[bytes]) -> ClientRequest | WorkerCommand:
    """A message the broker's ROUTER received: a client REQUEST or a worker command."""
    if len(frames) < 3:
        raise ProtocolError(f"{len(frames)} frame(s), need at least 3")
    sender, empty, header = frames[0], frames[1], frames[2]
    if empty != b"":
        raise ProtocolError("second frame is not the empty delimiter")
    if header == C_CLIENT:
        if len(frames) < 5:
            raise ProtocolError("client REQUEST needs a service frame and at least one body frame")
        return ClientRequest(sender, _service(frames[3]), list(frames[4:]))
    if header == W_WORKER:
        return _parse_worker_command(sender, frames[3:])
    raise ProtocolError(f"unknown protocol header {header[:16]!r}")


def _parse_worker_command(sender: bytes, rest: list[bytes]) -> WorkerCommand:
    if not rest:
        raise ProtocolError("worker message without a command frame")
    command, args = rest[0], rest[1:]
    if command == READY:
        if len(args) != 1:
            raise ProtocolError(f"READY needs exactly one service frame, got {len(args)}")
        return WorkerCommand(sender, READY, service=_service(args[0]))
    if command in (REQUEST, REPLY):
        client, body = parse_envelope(args, COMMAND_NAMES[command])
        return WorkerCommand(sender, command, client=client, body=tuple(body))
    if command in (HEARTBEAT, DISCONNECT):
        if args:
            raise ProtocolError(f"{COMMAND_NAMES[command]} takes no frames, got {len(args)}")
        return WorkerCommand(sender, command)
    raise ProtocolError(f"unknown worker command {command[:8]!r}")


def parse_envelope(args: list[bytes], what: str) -> tuple[bytes, list[bytes]]:
    """``client, '', body...`` of a REQUEST or REPLY -> (client, body)."""
    if len(args) < 3:
        raise ProtocolError(f"{what} needs client address, empty frame and body, got {len(args)} frame(s)")
    if not args[0]:
        raise ProtocolError(f"{what} has an empty client address")
    if args[1] != b"":
        raise ProtocolError(f"{what} client address is not followed by an empty frame")
    return args[0], list(args[2:])


def parse_worker_inbound(frames: list[bytes]) -> WorkerCommand:
    """A message a worker's DEALER received from the broker (no sender frame)."""
    if len(frames) < 3 or frames[0] != b"":
        raise ProtocolError("expected '', MDPW01, command")
    if frames[1] != W_WORKER:
        raise ProtocolError(f"unknown protocol header {frames[1][:16]!r}")
    command, args = frames[2], frames[3:]
    if command == REQUEST:
        client, body = parse_envelope(args, "REQUEST")
        return WorkerCommand(b"", REQUEST, client=client, body=tuple(body))
    if command in (HEARTBEAT, DISCONNECT):
        return WorkerCommand(b"", command)
    raise ProtocolError(f"unexpected command {command[:8]!r} from the broker")


# --- building ---------------------------------------------------------------------------------


def client_reply(client: bytes, service: str, body: list[bytes]) -> list[bytes]:
    """A REPLY as the broker's ROUTER sends it to ``client``."""
    return [client, b"", C_CLIENT, service.encode(), *body]


def to_worker(worker: bytes, command: bytes, *args: bytes) -> list[bytes]:
    """A command from the broker's ROUTER to ``worker``."""
    return [worker, b"", W_WORKER, command, *args]


def worker_request(worker: bytes, client: bytes, body: list[bytes]) -> list[bytes]:
    return to_worker(worker, REQUEST, client, b"", *body)


def from_worker(command: bytes, *args: bytes) -> list[bytes]:
    """A command as a worker's DEALER sends it."""
    return [b"", W_WORKER, command, *args]


def worker_reply(client: bytes, body: list[bytes]) -> list[bytes]:
    return from_worker(REPLY, client, b"", *body)


def client_request(service: str, body: list[bytes]) -> list[bytes]:
    """A REQUEST as a client's DEALER sends it (with the empty delimiter a REQ would add)."""
    return [b"", C_CLIENT, service.encode(), *body]


def parse_client_reply(frames: list[bytes], service: str) -> list[bytes]:
    """The body of a REPLY a client's DEALER received for ``service``."""
    if len(frames) < 4 or frames[0] != b"":
        raise ProtocolError(f"expected '', MDPC01, service, body; got {len(frames)} frame(s)")
    if frames[1] != C_CLIENT:
        raise ProtocolError(f"unknown protocol header {frames[1][:16]!r}")
    if frames[2] != service.encode():
        raise ProtocolError(f"reply for service {frames[2][:32]!r}, expected {service!r}")
    return list(frames[3:])
