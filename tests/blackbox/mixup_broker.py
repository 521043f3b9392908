"""A load-balancing broker that can send a reply to the wrong client, written as a user
would: pyzmq only, nothing of zchaos, no history.

    python tests/blackbox/mixup_broker.py --frontend tcp://127.0.0.1:5555 \\
        --backend tcp://127.0.0.1:5556 [--bug misroute --every 15]

Clients (REQ) talk to the frontend ROUTER; REP workers connect to the backend DEALER,
which deals requests round-robin, each under a ticket that says whose it is. With
``--bug misroute`` every ``--every``-th reply goes to another client that is waiting for
one, when there is such a client (the one that asked most recently): the one that gets it
sees another client's request come back, the one it was for times out and resends. Each
misrouted reply is logged with its time, as a user's broker would log what it does.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
import time

import zmq


def log(text: str) -> None:
    now = time.time()
    print(
        f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now % 1 * 1000):03d} broker {text}",
        flush=True,
    )


class MixupBroker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.every = args.every if args.bug == "misroute" else 0
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.back = self.ctx.socket(zmq.DEALER)
        for sock, endpoint in ((self.front, args.frontend), (self.back, args.backend)):
            sock.linger = 0
            sock.bind(endpoint)
        self.tickets = itertools.count(1)
        self.replies = itertools.count(1)
        self.waiting: dict[bytes, bytes] = {}  # ticket -> the client that asked, in asking order

    def on_client(self, frames: list[bytes]) -> None:
        if len(frames) < 3 or frames[1] != b"":
            return  # not from a REQ: drop it
        ticket = str(next(self.tickets)).encode()
        self.waiting[ticket] = frames[0]
        self.back.send_multipart([ticket, b"", *frames[2:]])

    def on_worker(self, frames: list[bytes]) -> None:
        if len(frames) < 3 or frames[1] != b"" or frames[0] not in self.waiting:
            return
        asker = self.waiting.pop(frames[0])
        if self.every and next(self.replies) % self.every == 0:
            others = [client for client in self.waiting.values() if client != asker]
            if others:
                log(f"INFO reply of ticket {frames[0].decode()} for {asker.hex()} sent to {others[-1].hex()}")
                asker = others[-1]
        self.front.send_multipart([asker, b"", *frames[2:]])

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        log("INFO ready")
        while True:
            ready = dict(poller.poll(250))
            if self.back in ready:
                self.on_worker(self.back.recv_multipart())
            if self.front in ready:
                self.on_client(self.front.recv_multipart())

    def close(self) -> None:
        self.front.close(0)
        self.back.close(0)
        self.ctx.term()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frontend", required=True, help="endpoint to bind for clients (ROUTER)")
    parser.add_argument("--backend", required=True, help="endpoint to bind for REP workers (DEALER)")
    parser.add_argument("--bug", choices=("none", "misroute"), default="none")
    parser.add_argument("--every", type=int, default=15, help="with --bug misroute: every N-th reply")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    broker = MixupBroker(args)
    try:
        broker.run()
    except KeyboardInterrupt:
        pass
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
