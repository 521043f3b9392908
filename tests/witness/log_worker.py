"""A user's Simple Pirate worker that writes no history: it prints ``exec <rid>`` for each
request it runs, with a plain print, and nothing of zchaos is imported.

    python log_worker.py --connect tcp://127.0.0.1:5556 --name worker-1 [--twice-every N]

A REQ socket says READY (one frame 0x01) and then echoes every ``[client, '', body]``. The
request id is the body's text up to its first ``|``. ``--twice-every N`` (the faulty twin)
runs every Nth request twice, printing ``exec`` for each run, and answers once.
"""

from __future__ import annotations

import argparse
import signal
import sys

import zmq


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connect", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--twice-every", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    sock.connect(args.connect)
    sock.send(b"\x01")
    print(f"{args.name} ready", flush=True)
    served = 0
    while True:
        if not sock.poll(250):
            continue
        frames = sock.recv_multipart()
        if len(frames) < 3:
            sock.send_multipart([b"", b"", b""])
            continue
        rid = frames[2].split(b"|", 1)[0].decode(errors="replace")
        served += 1
        runs = 2 if args.twice_every and served % args.twice_every == 0 else 1
        for _ in range(runs):
            print(f"job started: exec {rid} (run by {args.name})")
        sock.send_multipart(frames)


if __name__ == "__main__":
    main()
