"""Binary Star echo server (ZeroMQ guide, chapter 4): one of a primary/backup pair that
fails over from one to the other when the active server dies.

    python -m implementations.binary_star.server --primary --frontend tcp://127.0.0.1:5001 \
        --state-pub tcp://127.0.0.1:5003 --peer tcp://127.0.0.1:5004 [--identity primary] \
        [--heartbeat-ms 1000] [--peer-timeout-ms 2000] [--work-ms 0]
    python -m implementations.binary_star.server --backup --frontend ... --state-pub ... --peer ...

Clients talk to ``--frontend`` (a ROUTER: REQ clients, echoed frame for frame). The pair
tells each other its state over PUB/SUB: each server binds ``--state-pub`` and connects a
SUB to its peer's (``--peer``), and publishes its state every ``--heartbeat-ms`` as one
ASCII frame (1 primary, 2 backup, 3 active, 4 passive). Hearing the peer sets its expiry
to now + ``--peer-timeout-ms``. The guide's finite-state machine:

- primary + peer backup -> active; primary or backup + peer active -> passive;
- passive + peer primary or backup (the peer restarted) -> active;
- passive + a client request -> active and serve, only if the peer has expired (the
  client's vote: it could not reach the active one and the active one is silent);
  otherwise the request is dropped and the client times out and tries the other server;
- a backup drops client requests; a primary serves one only once its peer has expired
  (the guide's reactor rule: a primary restarted while the backup is active waits to
  hear it instead of going active at once).

Where this server departs from the guide, and why:

- The guide calls active + peer active and passive + peer passive fatal and exits. Here an
  active server that hears its peer is active too steps down to passive at once and
  serves nothing more (a dual active is the split brain the pair exists to prevent, and an
  exit would leave clients with no server once the other steps down too); two passive
  servers resolve it by the primary going active. The step-down is recorded with reason
  ``dual active``.
- An active server notices its own stall (a freeze: its loop did not run for longer than
  the peer timeout) and then neither serves nor publishes its state until it has heard
  its peer again or the peer has expired: during the stall the peer may rightly have taken
  over, the requests queued for the thawed server must not be answered before it learns
  so, and announcing "active" first would make the new active step down (dual active)
  and hand the clients back for nothing. Peer state messages are always handled before
  client requests for the same reason.
- An active server ignores the first "active" it hears from a peer that had been silent
  past its expiry (the peer it took over from): that is most likely the peer's last word
  before its stall, left in its socket and sent as it thawed, not what it is now (a thawed
  active stays silent, above). Stepping down for it handed the clients back to the thawed
  server for nothing (both stepped down, then the primary won the both-passive tie). A
  peer that is active still says so a heartbeat later, and the server steps down then.
- Each server publishes its state at once when it changes, not only on the next
  heartbeat, so the pair settles (and fails back) a heartbeat sooner.

Every state change is a ``bstar_state`` event in the history (with the FSM event that
caused it); REQ requests whose body's first frame carries a request id (``cid:seq``)
are recorded as ``exec``/``done`` (anything else a stranger sends is echoed unrecorded).
A malformed state message (not one of 1-4) is recorded as ``malformed`` and ignored. Logs
``ready:`` once the pair has settled (this server is active or passive), so a harness that
starts the primary first and waits for the backup sees the pair in service.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import owner_of, rid_of
from implementations.runtime import announce_ready, describe, end_role, start_role

log = logging.getLogger("bstar")

PRIMARY, BACKUP, ACTIVE, PASSIVE = 1, 2, 3, 4
NAMES = {PRIMARY: "primary", BACKUP: "backup", ACTIVE: "active", PASSIVE: "passive"}
#: Blocking waits are cut into slices this long: a SIGTERM delivered to one of libzmq's
#: threads only runs its Python handler when the main thread is back in the interpreter.
WAIT_SLICE_MS = 250


class BinaryStar:
    """The finite-state machine of one server of the pair (no sockets: ``now`` is given)."""

    def __init__(self, primary: bool, peer_timeout_s: float, writer: HistoryWriter, now: float) -> None:
        self.primary = primary
        self.state = PRIMARY if primary else BACKUP
        self.peer_timeout_s = peer_timeout_s
        self.peer_expiry = now + peer_timeout_s
        self.writer = writer
        self.awaiting_peer = False  # after a stall of our own: serve nothing until the peer is heard
        self.changed = True  # publish at once
        writer.emit("bstar_state", state=NAMES[self.state], reason="start")

    def _become(self, state: int, reason: str) -> None:
        if state == self.state:
            return
        log.info("%s -> %s (%s)", NAMES[self.state], NAMES[state], reason)
        self.state = state
        self.changed = True
        self.writer.emit("bstar_state", state=NAMES[state], reason=reason)

    def stalled(self, now: float) -> None:
        """Our own loop did not run for longer than the peer timeout (we were frozen)."""
        self.peer_expiry = now + self.peer_timeout_s
        if self.state == ACTIVE and not self.awaiting_peer:
            log.warning("stalled past the peer timeout: serving nothing until the peer is heard")
            self.awaiting_peer = True
            self.writer.emit("bstar_state", state=NAMES[ACTIVE], reason="stalled", detail="holding requests")

    def tick(self, now: float) -> None:
        """Time passed: a peer still silent past its expiry after our stall is gone, not active."""
        if self.awaiting_peer and now >= self.peer_expiry:
            self.awaiting_peer = False

    @property
    def silent(self) -> bool:
        """Publish nothing: we stalled while active and have not heard the peer since."""
        return self.awaiting_peer

    def peer(self, peer: int, now: float) -> None:
        """The peer published ``peer``."""
        # A peer silent past its expiry, while we were not stalled ourselves (a stalled server
        # heard nothing either, and defers to whatever its peer says).
        back_from_silence = now >= self.peer_expiry and not self.awaiting_peer
        self.peer_expiry = now + self.peer_timeout_s
        self.awaiting_peer = False
        if self.state == PRIMARY:
            if peer == BACKUP:
                self._become(ACTIVE, "peer backup")
            elif peer == ACTIVE:
                self._become(PASSIVE, "peer active")
        elif self.state == BACKUP:
            if peer == ACTIVE:
                self._become(PASSIVE, "peer active")
        elif self.state == ACTIVE:
            if peer == ACTIVE and back_from_silence:
                log.warning("the peer, silent past its expiry, said active: likely stale, heard once")
            elif peer == ACTIVE:
                self._become(PASSIVE, "dual active")
        elif self.state == PASSIVE:
            if peer in (PRIMARY, BACKUP):
                self._become(ACTIVE, "peer restarted")
            elif peer == PASSIVE and self.primary:
                self._become(ACTIVE, "both passive")

    def client_request(self, now: float) -> bool:
        """A client asked: whether to serve it (it may make us active)."""
        if self.state == ACTIVE:
            self.tick(now)
            return not self.awaiting_peer
        if self.state in (PASSIVE, PRIMARY) and now >= self.peer_expiry:
            self._become(ACTIVE, "client vote, peer silent")
            return True
        return False


def request_id_in(frames: list[bytes]) -> str | None:
    """The request id of a REQ client's request ([identity, b"", body...]: the id in the
    body's first frame, of the harness's ``cid:seq`` shape), or None for anything else. A
    stranger's junk (the ``malformed`` fault) is echoed like a request, but recorded as the
    execution of a request only where it has a request's shape: random bytes that hold a
    '|' ("8y|...") or a body with no REQ delimiter ("x:0|..." alone) were recorded as
    executions of requests nobody sent (explore, binary-star seed 1, run 15: 33 of them)."""
    if len(frames) < 3 or frames[1] != b"":
        return None
    rid = rid_of(frames[2])
    return rid if owner_of(rid) is not None else None


def _parse_state(frames: list[bytes]) -> int | None:
    if len(frames) != 1:
        return None
    try:
        value = int(frames[0].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if value in NAMES else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--primary", action="store_true", help="start as the primary")
    which.add_argument("--backup", action="store_true", help="start as the backup")
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--state-pub", required=True, help="endpoint to bind the state publisher on")
    parser.add_argument("--peer", required=True, help="the peer's state publisher, to connect to")
    parser.add_argument("--identity", default=None, help="name in the history (default: primary/backup)")
    parser.add_argument("--heartbeat-ms", type=int, default=1000, help="state publishing interval")
    parser.add_argument(
        "--peer-timeout-ms", type=int, default=0, help="peer silent this long is dead (default 2 heartbeats)"
    )
    parser.add_argument("--work-ms", type=int, default=0, help="simulated work per request")
    args = parser.parse_args(argv)
    identity = args.identity or ("primary" if args.primary else "backup")
    _, writer = start_role(identity)
    heartbeat_s = args.heartbeat_ms / 1000
    peer_timeout_s = (args.peer_timeout_ms or 2 * args.heartbeat_ms) / 1000
    ctx = zmq.Context()
    frontend = ctx.socket(zmq.ROUTER)
    statepub = ctx.socket(zmq.PUB)
    statesub = ctx.socket(zmq.SUB)
    for s in (frontend, statepub, statesub):
        s.linger = 0
    statesub.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        try:
            frontend.bind(args.frontend)
            statepub.bind(args.state_pub)
            statesub.connect(args.peer)
        except zmq.ZMQError as exc:
            log.error("cannot bind or connect: %s", exc)
            return 2
        return serve(args, identity, writer, frontend, statepub, statesub, heartbeat_s, peer_timeout_s)
    finally:
        log.info("stopping")
        end_role(writer, ctx, frontend, statepub, statesub)


def serve(
    args: argparse.Namespace,
    identity: str,
    writer: HistoryWriter,
    frontend: zmq.Socket,
    statepub: zmq.Socket,
    statesub: zmq.Socket,
    heartbeat_s: float,
    peer_timeout_s: float,
) -> int:
    """The server's loop: peer states first, then client requests, publishing on time."""
    now = time.monotonic()
    fsm = BinaryStar(args.primary, peer_timeout_s, writer, now)
    poller = zmq.Poller()
    poller.register(frontend, zmq.POLLIN)
    poller.register(statesub, zmq.POLLIN)
    next_publish = now
    last_tick = now
    announced = False
    work_s = args.work_ms / 1000
    while True:
        wait_ms = max(0, min(WAIT_SLICE_MS, int((next_publish - time.monotonic()) * 1000)))
        ready = dict(poller.poll(wait_ms))
        now = time.monotonic()
        if now - last_tick > peer_timeout_s:
            fsm.stalled(now)
        fsm.tick(now)
        last_tick = now
        if statesub in ready:
            while True:
                try:
                    frames = statesub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                peer = _parse_state(frames)
                if peer is None:
                    writer.emit("malformed", detail=f"state message {describe(frames)}")
                    continue
                fsm.peer(peer, time.monotonic())
        if frontend in ready:
            while True:
                try:
                    frames = frontend.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if not fsm.client_request(time.monotonic()):
                    continue  # dropped: the client times out and asks the other server
                rid = request_id_in(frames)
                if rid is not None:
                    writer.emit("exec", rid=rid, worker=identity)
                if work_s:
                    time.sleep(work_s)
                frontend.send_multipart(frames)
                if rid is not None:
                    writer.emit("done", rid=rid, worker=identity)
                if fsm.changed:
                    break  # publish a new state before serving more
        now = time.monotonic()
        if (fsm.changed or now >= next_publish) and not fsm.silent:
            statepub.send(str(fsm.state).encode())
            fsm.changed = False
            next_publish = now + heartbeat_s
        if not announced and fsm.state in (ACTIVE, PASSIVE):
            announce_ready(log, f"{identity} {NAMES[fsm.state]} on {args.frontend}")
            announced = True


if __name__ == "__main__":
    sys.exit(main())
