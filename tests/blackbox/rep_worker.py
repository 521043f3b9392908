"""A user's own echo worker: a REP socket that connects to a DEALER backend and sends every
request back. pyzmq only, no history: run with it, a broker's execution checks cannot be
decided (zchaos's ``rep`` probe worker is the instrumented twin).

    python tests/blackbox/rep_worker.py --connect tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import signal
import sys

import zmq


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", required=True, help="the backend to connect to")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.linger = 0
    sock.connect(args.connect)
    print("ready", flush=True)
    try:
        while True:
            if sock.poll(250):
                sock.send_multipart(sock.recv_multipart())
    finally:
        sock.close(0)
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
