"""A planted-bug subject for ``zchaos explore``: a Freelance server (10/FLP, the guide's
model 3) with a guard against clients that ping too often.

A ROUTER socket whose identity is the endpoint its clients connect to answers ``PING``
with ``PONG`` and echoes every request (the client's control frame, then the body). 10/FLP
has a client ping only a server that has been silent for its ping interval (half a second
for zchaos's clients), so a client whose pings come in a burst breaks the protocol; the
guard marks a client that pings ``--burst`` times within 100 ms a flooder: its requests
are dropped from then on, its pings still answered (so that it is not cut off for good
and can calm down).

``--bug ban-for-good``: the mark is never lifted, and the burst is judged by when the
server reads the pings, not when they were sent. A server that stalls for a second and a
half or more (frozen, starved of CPU, behind a link that held its bytes back) while its
clients ping it (they do: it is silent) reads the pings they queued meanwhile in one burst
after it, and marks every one of those clients. From then on each of them finds the
server alive by its PONGs, sends it a request, waits a timeout for nothing, fails over,
pings it again... for the rest of the run. Kills and restarts start a fresh server with no
marks, and a partition drops what it holds, so no stock Freelance scenario shows it. With
``--bug none`` there is no guard.
Standalone on purpose: pyzmq only, nothing of zchaos, no history.

    python tests/explore_subject/ping_guard_server.py --bind tcp://127.0.0.1:5555 \
        [--public tcp://127.0.0.1:6000] [--burst 3] [--bug ban-for-good|none]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import defaultdict, deque

import zmq

BUGS = ("none", "ban-for-good")
PING, PONG = b"PING", b"PONG"
#: The guard's window (seconds): this many pings within it are a burst.
WINDOW_S = 0.1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bind", required=True, help="endpoint to bind")
    parser.add_argument("--public", help="the endpoint clients connect to: the identity (default: --bind)")
    parser.add_argument("--burst", type=int, default=3, help="pings within 100 ms that make a flood")
    parser.add_argument("--bug", choices=BUGS, default="ban-for-good")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    socket = ctx.socket(zmq.ROUTER)
    socket.linger = 0
    socket.routing_id = (args.public or args.bind).encode()
    socket.bind(args.bind)
    print(f"ready: {args.bind} as {args.public or args.bind}", flush=True)
    pings: dict[bytes, deque[float]] = defaultdict(deque)  # a client's pings read in the window
    flooders: set[bytes] = set()
    try:
        while True:
            if not socket.poll(250):
                continue
            frames = socket.recv_multipart()
            if len(frames) < 3 and not (len(frames) == 2 and frames[1] == PING):
                print(f"dropped a malformed message of {len(frames)} frame(s)", flush=True)
                continue
            client = frames[0]
            if frames[1:] == [PING]:
                socket.send_multipart([client, PONG])
                if args.bug == "none":
                    continue
                now = time.monotonic()  # the bug: when read, not when sent
                seen = pings[client]
                seen.append(now)
                while seen and seen[0] < now - WINDOW_S:
                    seen.popleft()
                if len(seen) >= args.burst and client not in flooders:
                    flooders.add(client)  # the bug: for good
                    print(f"client {client.hex()} pinged {len(seen)} times in {WINDOW_S * 1000:g} ms: "
                          "dropping its requests", flush=True)  # fmt: skip
                continue
            if client in flooders:
                continue
            socket.send_multipart(frames)
    finally:
        socket.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
