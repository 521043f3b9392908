"""WMP intermediate device: a manager to its workers, a worker to its managers.

    python -m implementations.wmp.device --backend tcp://127.0.0.1:5560 \\
        --connect tcp://127.0.0.1:5556 tcp://127.0.0.1:5558 --identity device

Rules (the seed's): a READY from a worker goes to every manager; every other message is
routed by its ``route`` header to the next hop, in either direction. The device appends
its own name to the path of everything it forwards, so replies find their way back.

Choices where the seed is open:
- The device learns which uplink socket leads to which manager from the last hop of the
  messages that arrive on it (a manager's WAKE always comes before the GIVE that answers
  it). A message for a hop it does not know is dropped and logged.
- It keeps no state about jobs, locks or workers: a restarted device loses nothing but
  the messages in flight through it, which the protocol leaves to the application.
- A message from a worker whose path does not end with the worker's routing id is
  malformed (the worker must name itself) and dropped.
"""

from __future__ import annotations

import argparse
import logging

import zmq

from contract.history import HistoryWriter
from implementations.runtime import announce_ready, start_role
from implementations.wmp import wire


class Device:
    def __init__(self, args: argparse.Namespace, log: logging.Logger, history: HistoryWriter) -> None:
        self.me = args.identity
        self.log = log
        self.history = history
        self.ctx = zmq.Context()
        self.backend = self.ctx.socket(zmq.ROUTER)
        self.backend.linger = 0
        self.backend.setsockopt(zmq.ROUTER_HANDOVER, 1)
        self.backend.bind(args.backend)
        self.uplinks: list[zmq.Socket] = []
        for endpoint in args.connect:
            sock = self.ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.setsockopt_string(zmq.ROUTING_ID, self.me)
            sock.connect(endpoint)
            self.uplinks.append(sock)
        self.by_name: dict[str, zmq.Socket] = {}

    def malformed(self, frames: list[bytes], why: str) -> None:
        self.log.warning("malformed message %s: %s", wire.describe(frames), why)
        self.history.emit("malformed", detail=f"{why}: {wire.describe(frames)}"[:300])

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.backend, zmq.POLLIN)
        for sock in self.uplinks:
            poller.register(sock, zmq.POLLIN)
        announce_ready(self.log, f"device {self.me} for {len(self.uplinks)} manager(s)")
        while True:
            for sock in dict(poller.poll(1000)):
                for _ in range(100):
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if sock is self.backend:
                        self.from_worker(frames)
                    else:
                        self.from_manager(sock, frames)

    def _send(self, sock: zmq.Socket, frames: list[bytes]) -> None:
        try:
            sock.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            self.log.warning("dropped %s: peer not connected or full", wire.describe(frames, 2))

    def from_worker(self, frames: list[bytes]) -> None:
        address, rest = frames[0], frames[1:]
        try:
            msg = wire.decode(rest)
        except wire.Malformed as exc:
            self.malformed(rest, str(exc))
            return
        if msg.path[-1].encode() != address:
            self.malformed(rest, f"last hop {msg.path[-1]!r} is not the sender {address[:40]!r}")
            return
        if msg.command == "READY" and not msg.route:
            out = wire.encode(msg.via(self.me))
            for uplink in self.uplinks:
                self._send(uplink, out)
            return
        if not msg.route:
            self.malformed(rest, f"{msg.command} without a route: a device has no jobs of its own")
            return
        hop, msg = msg.next_hop()
        sock = self.by_name.get(hop)
        if sock is None:
            self.log.warning("dropped %s for unknown manager %r", msg.command, hop)
            return
        self._send(sock, wire.encode(msg.via(self.me)))

    def from_manager(self, sock: zmq.Socket, frames: list[bytes]) -> None:
        try:
            msg = wire.decode(frames)
        except wire.Malformed as exc:
            self.malformed(frames, str(exc))
            return
        self.by_name[msg.path[-1]] = sock
        if not msg.route:
            self.malformed(frames, f"{msg.command} from a manager without a route to a worker")
            return
        hop, msg = msg.next_hop()
        self._send(self.backend, [hop.encode(), *wire.encode(msg.via(self.me))])

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True, help="endpoint to bind for workers")
    parser.add_argument("--connect", required=True, nargs="+", help="manager (or device) endpoints")
    parser.add_argument("--identity", default="device", type=wire.check_name)
    args = parser.parse_args(argv)
    log, history = start_role(args.identity)
    device = Device(args, log, history)
    try:
        device.run()
    finally:
        device.close()
        history.close()
        log.info("stopped")


if __name__ == "__main__":
    main()
