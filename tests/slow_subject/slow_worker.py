"""A user's own slow echo worker: every request takes ``--work-ms`` (1 s by default).

The test subject of "a system ten times slower than ours": pyzmq only, nothing of zchaos,
no history. It speaks one of three protocols:

- ``ppp``: a Paranoid Pirate worker (6/PPP): a DEALER that says READY (0x01), heartbeats
  (0x02) the queue every ``--heartbeat-ms`` and reconnects after ``--liveness`` silent
  intervals;
- ``simple``: a Simple Pirate worker: a REQ that says READY and then answers each request;
- ``mdp``: a Majordomo worker (7/MDP) of service ``--service``: READY, heartbeats,
  REQUEST -> REPLY, DISCONNECT -> registers again.

While it works it keeps heartbeating (``ppp``, ``mdp``), as a worker whose heartbeat runs
beside its job does: a slow worker is busy, not dead.

    python tests/slow_subject/slow_worker.py --protocol ppp --connect tcp://127.0.0.1:5556
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import zmq

READY, HEARTBEAT = b"\x01", b"\x02"
MDPW01 = b"MDPW01"
MDP_READY, MDP_REQUEST, MDP_REPLY, MDP_HEARTBEAT, MDP_DISCONNECT = (bytes([i]) for i in range(1, 6))


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.interval = args.heartbeat_ms / 1000
        self.ctx = zmq.Context()
        self.sock: zmq.Socket | None = None
        self.heartbeat_at = 0.0
        self.liveness = args.liveness

    def connect(self) -> zmq.Socket:
        if self.sock is not None:
            self.sock.close(linger=0)
        kind = zmq.REQ if self.args.protocol == "simple" else zmq.DEALER
        sock = self.sock = self.ctx.socket(kind)
        sock.linger = 0
        sock.identity = f"{self.args.identity}-{os.urandom(2).hex()}".encode()
        sock.connect(self.args.connect)
        if self.args.protocol == "mdp":
            sock.send_multipart([b"", MDPW01, MDP_READY, self.args.service.encode()])
        else:
            sock.send(READY)
        self.heartbeat_at = time.monotonic() + self.interval
        self.liveness = self.args.liveness
        return sock

    def heartbeat(self) -> None:
        """Send a heartbeat when one is due (not for ``simple``, which has none)."""
        if self.args.protocol == "simple" or time.monotonic() < self.heartbeat_at:
            return
        self.heartbeat_at = time.monotonic() + self.interval
        assert self.sock is not None
        if self.args.protocol == "mdp":
            self.sock.send_multipart([b"", MDPW01, MDP_HEARTBEAT])
        else:
            self.sock.send(HEARTBEAT)

    def work(self) -> None:
        """The job: ``--work-ms`` of it, heartbeating on the way."""
        end = time.monotonic() + self.args.work_ms / 1000
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, self.interval / 4))
            self.heartbeat()

    def run(self) -> None:
        sock = self.connect()
        print(f"ready: {sock.identity.decode()}", flush=True)
        if self.args.protocol == "simple":
            while True:
                request = sock.recv_multipart()  # [client, '', body...]
                self.work()
                sock.send_multipart(request)
        while True:
            wait_ms = max(0, int((self.heartbeat_at - time.monotonic()) * 1000))
            if sock.poll(wait_ms, zmq.POLLIN):
                frames = sock.recv_multipart()
                self.liveness = self.args.liveness
                reply = self.reply_to(frames)
                if reply is not None:
                    self.work()
                    sock.send_multipart(reply)
                elif frames[-1:] == [MDP_DISCONNECT] and self.args.protocol == "mdp":
                    sock = self.connect()
            elif time.monotonic() >= self.heartbeat_at:
                self.liveness -= 1
                if self.liveness <= 0:  # the other side went silent: a new socket, READY again
                    time.sleep(self.interval)
                    sock = self.connect()
                    continue
            self.heartbeat()

    def reply_to(self, frames: list[bytes]) -> list[bytes] | None:
        """The reply to a request (None for a heartbeat or a command)."""
        if self.args.protocol == "mdp":
            if len(frames) >= 6 and frames[1] == MDPW01 and frames[2] == MDP_REQUEST:
                return [b"", MDPW01, MDP_REPLY, *frames[3:]]
            return None
        if len(frames) >= 3:  # [client, '', body...]
            return frames
        return None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--protocol", choices=("ppp", "simple", "mdp"), required=True)
    parser.add_argument("--connect", required=True, help="the queue's or broker's backend")
    parser.add_argument("--identity", default=f"worker-{os.getpid()}")
    parser.add_argument(
        "--work-ms", type=float, default=1000.0, help="time each request takes (default 1000)"
    )
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--liveness", type=int, default=3)
    parser.add_argument("--service", default="echo", help="(mdp) the service it serves")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker = Worker(args)
    try:
        worker.run()
    finally:
        if worker.sock is not None:
            worker.sock.close(linger=0)
        worker.ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
