"""A deliberately faulty Binary Star server (pyzmq only, writes no history), with one of two
bugs (``--bug``): both servers end up active after a freeze, or the backup never takes over.

It speaks the guide's protocol (ROUTER frontend echoing requests, its state published
every heartbeat as one ASCII frame, 1 primary .. 4 passive, a passive server taking over on
a client's request once its peer has been silent past the timeout), with one bug.

``split-brain`` (the default): an active server never gives the role up. Told that its peer
is active too, it carries on, and a thawed active does not ask itself whether its peer took
over while it was frozen. Freeze the active primary past the peer timeout: the backup takes
over on the clients' votes, and after the thaw both answer whoever asks. The split-brain
check must name it. ``no-takeover``: a passive server never takes over on a client's vote,
so service comes back only with the primary; a primary that stays dead takes it for good,
which ``bstar_failover_time`` must name (scenarios/binary-star-primary-stays-dead.toml).

    python server.py --primary|--backup --frontend EP --state-pub EP --peer EP [--heartbeat-ms 1000]
        [--bug split-brain|no-takeover]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import zmq

PRIMARY, BACKUP, ACTIVE, PASSIVE = 1, 2, 3, 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--primary", action="store_true")
    which.add_argument("--backup", action="store_true")
    parser.add_argument("--frontend", required=True)
    parser.add_argument("--state-pub", required=True)
    parser.add_argument("--peer", required=True)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--bug", choices=("split-brain", "no-takeover"), default="split-brain")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    heartbeat = args.heartbeat_ms / 1000
    ctx = zmq.Context()
    frontend, pub, sub = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    for s in (frontend, pub, sub):
        s.linger = 0
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    frontend.bind(args.frontend)
    pub.bind(args.state_pub)
    sub.connect(args.peer)
    state = PRIMARY if args.primary else BACKUP
    peer_expiry = time.monotonic() + 2 * heartbeat
    next_publish = time.monotonic()
    announced = False
    poller = zmq.Poller()
    poller.register(frontend, zmq.POLLIN)
    poller.register(sub, zmq.POLLIN)
    try:
        while True:
            ready = dict(poller.poll(100))
            now = time.monotonic()
            if sub in ready:
                msg = sub.recv()
                peer = int(msg) if msg in (b"1", b"2", b"3", b"4") else 0
                peer_expiry = now + 2 * heartbeat
                if state in (PRIMARY, BACKUP) and peer == ACTIVE:
                    state = PASSIVE
                elif (state, peer) in ((PRIMARY, BACKUP), (PASSIVE, PRIMARY), (PASSIVE, BACKUP)):
                    state = ACTIVE
                # the bug: ACTIVE + peer ACTIVE is ignored
            if frontend in ready:
                frames = frontend.recv_multipart()
                if state == PASSIVE and now >= peer_expiry and args.bug != "no-takeover":
                    state = ACTIVE
                if state == ACTIVE:
                    frontend.send_multipart(frames)
            if now >= next_publish:
                pub.send(str(state).encode())
                next_publish = now + heartbeat
            if not announced and state in (ACTIVE, PASSIVE):
                print("ready", flush=True)
                announced = True
    finally:
        for s in (frontend, pub, sub):
            s.close()
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
