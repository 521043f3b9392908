"""Freelance server of the guide's model 3 (10/FLP): a ROUTER socket whose identity is
the endpoint its clients connect to, answering PING with PONG and echoing requests.

    python -m implementations.freelance.server --bind tcp://127.0.0.1:5555 \
        [--public tcp://127.0.0.1:6000] [--name server1] [--work-ms 0]

Clients (ROUTER too) address a server by the endpoint string they connected to, so the
server must carry exactly that as its identity: ``--public`` (default: the bind
address) is what the clients reach it at, a fault proxy's address when one sits between
(the manifest's ``{public.E}``).

Wire, as the server's application sees it (its ROUTER adds the client's identity first):
``[client, "PING"]`` -> ``[client, "PONG"]``; a request ``[client, control, body...]``
(control: the client's control frame, its sequence number) -> ``[client, control,
body...]``. The guide's server answers "OK"; this one echoes the body, so a reply shows
which request it answers (the harness's payloads start with the request id) and a
client that takes a stale reply is caught by the echo check. It records ``exec``/``done``
(``worker`` = ``--name``) for each request whose body carries a request id (CLIENT:SEQ). A message
with no control frame, or a control frame but no body (other than PING), breaks the
protocol: it is logged, recorded as ``malformed`` and dropped, and the server goes on.
Logs ``ready:`` once bound; exits cleanly on SIGTERM/SIGINT (implementations.runtime).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time

import zmq

from contract.payload import rid_of
from implementations.runtime import announce_ready, describe, end_role, start_role

log = logging.getLogger("server")

PING, PONG = b"PING", b"PONG"
#: The harness's request ids are CLIENT:SEQ: a stranger's junk that happens to hold a '|'
#: is echoed like any request but not recorded as the execution of a request.
REQUEST_ID = re.compile(r"[\w.-]+:\d+")
#: Blocking waits are cut into slices this long: a SIGTERM delivered to one of libzmq's
#: threads only runs its Python handler when the main thread is back in the interpreter.
WAIT_SLICE_MS = 250


def answer(frames: list[bytes]) -> tuple[list[bytes] | None, str | None]:
    """The reply to a message as the ROUTER delivered it, or (None, why it is malformed)."""
    if len(frames) < 2:
        return None, "no control frame after the client's identity"
    client, control, body = frames[0], frames[1], frames[2:]
    if control == PING and not body:
        return [client, PONG], None
    if not body:
        return None, "a control frame without a body (and not PING)"
    return [client, control, *body], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bind", required=True, help="endpoint to bind")
    parser.add_argument("--public", help="the endpoint clients connect to: the identity (default: --bind)")
    parser.add_argument("--name", default="server", help="name in the history (worker field)")
    parser.add_argument("--work-ms", type=int, default=0, help="simulated work per request")
    args = parser.parse_args(argv)
    _, writer = start_role(args.name)
    ctx = zmq.Context()
    socket = ctx.socket(zmq.ROUTER)
    socket.linger = 0
    socket.routing_id = (args.public or args.bind).encode()
    work_s = args.work_ms / 1000
    try:
        try:
            socket.bind(args.bind)
        except zmq.ZMQError as exc:
            log.error("cannot bind %s: %s", args.bind, exc)
            return 2
        announce_ready(log, f"{args.bind} as {args.public or args.bind}")
        while True:
            if not socket.poll(WAIT_SLICE_MS):
                continue
            frames = socket.recv_multipart()
            reply, problem = answer(frames)
            if reply is None:
                log.warning("dropped a malformed message %s: %s", describe(frames), problem)
                writer.emit("malformed", detail=f"{problem}: {describe(frames)}", worker=args.name)
                continue
            rid = next((r for r in map(rid_of, reply[2:]) if r and REQUEST_ID.fullmatch(r)), None)
            if rid is not None:
                writer.emit("exec", rid=rid, worker=args.name)
            if work_s:
                time.sleep(work_s)
            socket.send_multipart(reply)
            if rid is not None:
                writer.emit("done", rid=rid, worker=args.name)
    finally:
        log.info("stopping")
        end_role(writer, ctx, socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
