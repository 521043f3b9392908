"""A front server that promises exactly-once execution, written as a user would: pyzmq only,
nothing of zchaos, no history. zchaos judges it from the outside: REP probe workers behind
it record every execution.

    python tests/blackbox/front_server.py --frontend tcp://127.0.0.1:5555 \\
        --backend tcp://127.0.0.1:5556 [--bug resend-executes-again]

Clients (REQ, Lazy Pirate: a resend is the same request, byte for byte, from a new
socket) talk to the frontend ROUTER; workers (REP) connect to the backend DEALER, which
deals requests round-robin. Like the reliable request-reply sketch's servers, it
de-duplicates: a request it is already working on is not handed out again (its reply goes
to whoever asked last), and a request it has answered is answered again from a cache of
the last ``--cache`` replies, without running it again.

The one bug on offer: ``--bug resend-executes-again`` forwards every resend to a worker as
a new request, so a slow request that its client resent runs twice.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
from collections import OrderedDict

import zmq


class FrontServer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.dedup = args.bug != "resend-executes-again"
        self.cache_size = args.cache
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.back = self.ctx.socket(zmq.DEALER)
        for sock, endpoint in ((self.front, args.frontend), (self.back, args.backend)):
            sock.linger = 0
            sock.bind(endpoint)
        self.tickets = itertools.count(1)
        self.working: dict[bytes, tuple[tuple[bytes, ...], bytes]] = {}  # ticket -> (request, asker)
        self.asked_by: dict[tuple[bytes, ...], bytes] = {}  # request -> ticket, while working on it
        self.answered: OrderedDict[tuple[bytes, ...], list[bytes]] = OrderedDict()

    def on_client(self, frames: list[bytes]) -> None:
        if len(frames) < 3 or frames[1] != b"":
            return  # not from a REQ: drop it
        asker, request = frames[0], tuple(frames[2:])
        if self.dedup:
            if request in self.answered:
                self.front.send_multipart([asker, b"", *self.answered[request]])
                return
            ticket = self.asked_by.get(request)
            if ticket is not None:  # a resend of work in hand: answer the new socket when done
                self.working[ticket] = (request, asker)
                return
        ticket = str(next(self.tickets)).encode()
        self.working[ticket] = (request, asker)
        self.asked_by[request] = ticket
        self.back.send_multipart([ticket, b"", *request])

    def on_worker(self, frames: list[bytes]) -> None:
        if len(frames) < 3 or frames[1] != b"" or frames[0] not in self.working:
            return
        request, asker = self.working.pop(frames[0])
        if self.asked_by.get(request) == frames[0]:
            del self.asked_by[request]
        reply = frames[2:]
        self.answered[request] = reply
        while len(self.answered) > self.cache_size:
            self.answered.popitem(last=False)
        self.front.send_multipart([asker, b"", *reply])

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        print("ready", flush=True)
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
    parser.add_argument("--cache", type=int, default=10000, help="answered requests remembered")
    parser.add_argument("--bug", choices=("none", "resend-executes-again"), default="none")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = FrontServer(args)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
