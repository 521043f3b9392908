"""A planted-bug subject for ``zchaos explore``: a Lazy Pirate echo server (a REP socket,
the guide's chapter 4) that paces its replies by the wall clock.

Clients are Lazy Pirate REQ sockets: they resend on a new socket after a timeout and give
up after a few tries. The server answers each request with the request itself, and keeps
to at most ``--max-rate`` replies a second: each reply is due ``1 / max-rate`` after the
one before, and the server sleeps until it is due. The cap is far above any load it is
given, so it never waits in a run whose clock behaves.

``--bug wall-clock-pacing``: the due time is kept in wall-clock time (``time.time()``) and
the wait computed from it once, then slept on. A wall clock stepped back (or stepped
forward and then back to true time, as an NTP correction does) puts the next reply's due
time that far in the future: the server sleeps the whole step (minutes) and serves nobody
in the meantime. Only a clock fault on the server (a step, a strobe, a clock that ran fast
and is put right) of more than a few seconds shows it, while requests arrive; kills,
freezes and link faults do not. No stock Lazy Pirate scenario touches its clock. With
``--bug none`` it paces by the monotonic clock. Standalone on purpose: pyzmq only, nothing
of zchaos, no history.

    python tests/explore_subject/paced_server.py --frontend tcp://127.0.0.1:5555
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import zmq

BUGS = ("none", "wall-clock-pacing")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients")
    parser.add_argument("--max-rate", type=float, default=5000.0, help="replies a second, at most")
    parser.add_argument("--bug", choices=BUGS, default="wall-clock-pacing")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    clock = time.time if args.bug != "none" else time.monotonic  # the bug: the wall clock
    gap = 1 / args.max_rate
    ctx = zmq.Context()
    socket = ctx.socket(zmq.REP)
    socket.linger = 0
    socket.bind(args.frontend)
    print(f"ready: {args.frontend}", flush=True)
    due = clock()
    try:
        while True:
            if not socket.poll(250):
                continue
            frames = socket.recv_multipart()
            now = clock()
            due = max(due + gap, now)
            if due > now:
                time.sleep(due - now)  # computed once: a clock stepped back waits the step out
            socket.send_multipart(frames)
    finally:
        socket.close()
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
