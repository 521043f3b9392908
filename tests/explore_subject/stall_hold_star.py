"""A planted-bug subject for ``zchaos explore``: one server of a Binary Star pair (the
guide's chapter 4) that holds its clients' requests after a stall of its own.

Each server binds a ROUTER for REQ clients (it echoes their requests) and a PUB on which
it publishes its state every ``--heartbeat-ms`` (one ASCII frame: 1 primary, 2 backup, 3
active, 4 passive), and subscribes to its peer's. The guide's state machine: primary +
peer backup -> active; primary or backup + peer active -> passive; passive + peer primary
or backup (it restarted) -> active; passive + a client's request -> active and serve, if
the peer has been silent for ``--peer-timeout-ms`` (the client's vote), else dropped; a
backup drops requests, a primary serves one once its peer is silent. Two active servers
both step down, and two passive ones are settled by the primary going active (the guide
exits instead; it would leave the clients with no server).

An active server that finds its own loop stalled for more than 1.5 heartbeats (it was
frozen or starved) holds its clients' requests (drops them: they are stale, their clients
have moved on) until it hears its peer: the peer may have taken over meanwhile. Peer
active: it steps down. Peer passive: nobody took over, it serves again.

``--bug hold-for-good``: the second case is missing, so after a stall too short for a
failover (between 1.5 s and the 3 s its clients take to vote at the peer) the server holds
for good, while it goes on publishing "active": the peer refuses every vote, and nobody
serves again. A stall long enough for the peer to take over is handled (the stock
scenario that freezes the active primary for 6 s passes), kills and restarts start a
fresh server, so no stock Binary Star scenario shows it. With ``--bug none`` it serves
again. Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/stall_hold_star.py --primary|--backup --frontend EP \
        --state-pub EP --peer EP [--heartbeat-ms 1000] [--peer-timeout-ms 2000] [--bug ...]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import zmq

BUGS = ("none", "hold-for-good")
PRIMARY, BACKUP, ACTIVE, PASSIVE = 1, 2, 3, 4
#: A loop turn this many heartbeats after the one before is a stall of our own.
STALL_HEARTBEATS = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--primary", action="store_true")
    which.add_argument("--backup", action="store_true")
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--state-pub", required=True, help="endpoint to bind the state publisher on")
    parser.add_argument("--peer", required=True, help="the peer's state publisher, to connect to")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--peer-timeout-ms", type=int, default=2000)
    parser.add_argument("--bug", choices=BUGS, default="hold-for-good")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    heartbeat, peer_timeout = args.heartbeat_ms / 1000, args.peer_timeout_ms / 1000
    ctx = zmq.Context()
    frontend, pub, sub = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    for s in (frontend, pub, sub):
        s.linger = 0
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    frontend.bind(args.frontend)
    pub.bind(args.state_pub)
    sub.connect(args.peer)
    state = PRIMARY if args.primary else BACKUP
    now = time.monotonic()
    peer_expiry, next_publish, last_turn = now + peer_timeout, now, now
    holding = False  # stalled while active: serve nothing until the peer is heard
    heard = True  # the peer was heard since the stall (until then, publish nothing either)
    announced = False
    poller = zmq.Poller()
    poller.register(frontend, zmq.POLLIN)
    poller.register(sub, zmq.POLLIN)
    try:
        while True:
            changed = False
            ready = dict(poller.poll(max(0, min(250, int((next_publish - time.monotonic()) * 1000)))))
            now = time.monotonic()
            if now - last_turn > STALL_HEARTBEATS * heartbeat and state == ACTIVE:
                print(f"stalled {now - last_turn:.1f} s: holding requests till the peer is heard", flush=True)
                holding, heard = True, False
                peer_expiry = now + peer_timeout  # what was queued meanwhile is read below
            last_turn = now
            while sub in ready:  # peer states first: they say whether the peer took over
                try:
                    msg = sub.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if msg not in (b"1", b"2", b"3", b"4"):
                    continue
                peer, before, heard = int(msg), state, True
                peer_expiry = time.monotonic() + peer_timeout
                if state in (PRIMARY, BACKUP) and peer == ACTIVE:
                    state = PASSIVE
                elif state == PRIMARY and peer == BACKUP:
                    state = ACTIVE
                elif state == ACTIVE and peer == ACTIVE:
                    state = PASSIVE  # both step down; the primary goes active again below
                elif state == PASSIVE and (peer in (PRIMARY, BACKUP) or (peer == PASSIVE and args.primary)):
                    state = ACTIVE
                if holding and (state != ACTIVE or args.bug == "none"):
                    holding = False  # the bug: a passive peer (nobody took over) is not enough
                changed |= state != before
            if holding and time.monotonic() >= peer_expiry:
                holding = False  # the peer is gone: nobody can have taken over
            while frontend in ready:
                try:
                    frames = frontend.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                now = time.monotonic()
                if state in (PASSIVE, PRIMARY) and now >= peer_expiry:
                    state, changed = ACTIVE, True  # the client's vote: the peer is silent
                if state == ACTIVE and not holding:
                    frontend.send_multipart(frames)
            now = time.monotonic()
            if (changed or now >= next_publish) and heard:
                pub.send(str(state).encode())
                next_publish = now + heartbeat
            if not announced and state in (ACTIVE, PASSIVE):
                print(f"ready: {'primary' if args.primary else 'backup'} {state}", flush=True)
                announced = True
    finally:
        for s in (frontend, pub, sub):
            s.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
