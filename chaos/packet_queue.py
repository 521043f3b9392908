"""The userspace packet queue of the packet faults where the kernel has no netem (issue 37):
one process per fault and host, run inside the host's network namespace, that takes the
packets an iptables ``NFQUEUE`` rule hands it (chaos/packets.py puts the rules), holds each
for its delay and then lets it go, so delay, jitter (and the reordering that jitter makes),
a rate limit and corruption act on real packets.

It speaks nfnetlink_queue itself (netlink, ``NETLINK_NETFILTER``: bind a queue, copy whole
packets, answer each with a verdict by its id), so it needs nothing but the standard
library and root, and runs by its file path (``python packet_queue.py ...``), not as a
module of the project: no import of zchaos's own. Not a C helper against libnetfilter_queue:
that would need its Debian -dev package and a build on every machine, and Python keeps up
with what a ZeroMQ test sends (measured: 20,000 datagrams through a 1 ms delay in 1.2 s,
about 16,000 packets a second, load average 5.5 on 2 cores).

What each parameter does, as netem does it (tc-netem(8)):
- ``--delay-ms D --jitter-ms J``: each packet is held D ± J ms, uniform, never below 0;
  ``--correlation-pct C`` makes each packet's random draw C % the last one's (netem's
  ``get_crandom``). Packets whose delays differ pass each other: the reordering of jitter.
- ``--reorder-pct R``: R % of the packets go at once, ahead of the delayed rest.
- ``--rate-kbit K``: each packet leaves after the one before it has, plus its own time on a
  K kbit/s line (netem's rate: a queue, not a drop); with ``--per-flow``, each TCP or UDP
  flow has a line of its own, as each connection through a Toxiproxy ``bandwidth`` toxic has.
- ``--corrupt-pct X``: X % of the packets get one bit of their transport segment flipped
  after their checksum was made right (a locally sent packet carries only the pseudo-header
  part of it, the rest left to the device): the receiver's checksum check drops them, as a
  real bit error's would be, and counts it (``InCsumErrors``). A bit of the IP header is
  never flipped: a packet taken at INPUT has had its header checked already and would be
  delivered damaged.

Loss and duplication are iptables rules of their own (``statistic`` with ``DROP`` or
``TEE``): the kernel does them without a trip to this process.

It prints ``ready`` once the queue is bound, and on SIGTERM (or its parent's death:
PR_SET_PDEATHSIG, and the parent's pid checked) lets every packet it holds go, prints one
JSON line of counts and exits. A packet it cannot take (the queue full) is dropped by the
kernel: a loss, as at a full router queue.
"""

from __future__ import annotations

import argparse
import ctypes
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD = 1, 2, 10
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NF_DROP, NF_ACCEPT = 0, 1
PR_SET_PDEATHSIG = 1
#: Packets the kernel holds for this queue at most (its default is 1024: 100 ms of a busy link).
QUEUE_MAXLEN = 20_000
RCVBUF = 16 << 20
HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
NFGEN = struct.Struct("!BBH")  # nfgenmsg: family, version, res_id (the queue number)
ATTR = struct.Struct("=HH")  # nlattr: len, type


def _attr(kind: int, data: bytes) -> bytes:
    pad = (-len(data)) % 4
    return ATTR.pack(ATTR.size + len(data), kind) + data + b"\0" * pad


def _message(kind: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = NFGEN.pack(socket.AF_UNSPEC, 0, queue) + attrs
    return HDR.pack(HDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def verdict(queue: int, packet_id: int, what: int, payload: bytes | None = None) -> bytes:
    attrs = _attr(NFQA_VERDICT_HDR, struct.pack("!II", what, packet_id))
    if payload is not None:
        attrs += _attr(NFQA_PAYLOAD, payload)
    return _message(NFQNL_MSG_VERDICT, queue, attrs)


def parse(buf: memoryview, size: int) -> list[tuple[int, int, bytes]]:
    """The messages in ``buf[:size]``: (kind, packet id or error, payload) for each packet
    and each error or acknowledgement (kind NLMSG_ERROR, the errno as a positive number)."""
    found = []
    at = 0
    while at + HDR.size <= size:
        length, kind, _flags, _seq, _pid = HDR.unpack_from(buf, at)
        if length < HDR.size:
            break
        if kind == NLMSG_ERROR:
            found.append((NLMSG_ERROR, -struct.unpack_from("=i", buf, at + HDR.size)[0], b""))
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            pos, end = at + HDR.size + NFGEN.size, at + length
            packet_id, payload = -1, b""
            while pos + ATTR.size <= end:
                alen, atype = ATTR.unpack_from(buf, pos)
                if alen < ATTR.size:
                    break
                atype &= 0x3FFF
                if atype == NFQA_PACKET_HDR:
                    packet_id = struct.unpack_from("!I", buf, pos + ATTR.size)[0]
                elif atype == NFQA_PAYLOAD:
                    payload = bytes(buf[pos + ATTR.size : pos + alen])
                pos += (alen + 3) & ~3
            found.append((NFQNL_MSG_PACKET, packet_id, payload))
        at += (length + 3) & ~3
    return found


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def corrupt(packet: bytes, rng: random.Random) -> bytes | None:
    """``packet`` (IPv4) with its TCP or UDP checksum made right and then one bit of its
    transport segment flipped; None for what it leaves alone (not TCP or UDP, a fragment)."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    ihl = (packet[0] & 0x0F) * 4
    proto = packet[9]
    total = struct.unpack_from("!H", packet, 2)[0]
    fragment = struct.unpack_from("!H", packet, 6)[0] & 0x3FFF
    where = {6: 16, 17: 6}.get(proto)  # the checksum's offset in the TCP or UDP header
    if where is None or fragment or total != len(packet) or len(packet) < ihl + where + 2:
        return None
    segment = bytearray(packet[ihl:])
    segment[where : where + 2] = b"\0\0"
    pseudo = packet[12:20] + struct.pack("!BBH", 0, proto, len(segment))
    good = checksum(pseudo + bytes(segment))
    if proto == 17 and good == 0:
        good = 0xFFFF  # UDP's 0 means "none"
    struct.pack_into("!H", segment, where, good)
    bit = rng.randrange(len(segment) * 8)
    segment[bit // 8] ^= 1 << (bit % 8)
    return packet[:ihl] + bytes(segment)


class Shaper:
    """When each packet leaves (netem's rules, in seconds of ``time.monotonic``) and what
    becomes of it."""

    def __init__(self, args: argparse.Namespace, rng: random.Random) -> None:
        self.delay = args.delay_ms / 1000
        self.jitter = args.jitter_ms / 1000
        self.rho = args.correlation_pct / 100
        self.reorder = args.reorder_pct / 100
        self.corrupt = args.corrupt_pct / 100
        self.rate = args.rate_kbit * 1000 / 8  # bytes a second
        self.rng = rng
        self.last_draw = rng.random()
        self.per_flow = args.per_flow
        self.line_free: dict[bytes, float] = {}  # when the rate's line (of a flow) is free again

    def departure(self, now: float, packet: bytes) -> float:
        at = now
        if self.reorder and self.rng.random() < self.reorder:
            pass  # at once, ahead of the delayed rest
        elif self.delay or self.jitter:
            draw = self.rng.random()
            if self.rho:
                draw = (1 - self.rho) * draw + self.rho * self.last_draw
            self.last_draw = draw
            at = now + max(0.0, self.delay + self.jitter * (2 * draw - 1))
        if self.rate:
            line = flow(packet) if self.per_flow else b""
            at = max(at, self.line_free.get(line, 0.0)) + len(packet) / self.rate
            self.line_free[line] = at
        return at


def flow(packet: bytes) -> bytes:
    """An IPv4 packet's flow: its addresses, protocol and (TCP, UDP) ports."""
    ihl = (packet[0] & 0x0F) * 4 if packet else 0
    return packet[9:10] + packet[12:20] + packet[ihl : ihl + 4]


def bind(sock: socket.socket, queue: int) -> None:
    """Bind ``queue`` to ``sock`` and ask for whole packets; an OSError naming the step."""
    steps = [
        ("bind", _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0))),
        ("copy mode", _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET))),
        ("queue length", _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))),
    ]
    buf = memoryview(bytearray(65536))
    for seq, (what, attrs) in enumerate(steps, start=1):
        sock.send(_message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, seq))
        size = sock.recv_into(buf)
        for kind, code, _ in parse(buf, size):
            if kind == NLMSG_ERROR and code:
                raise OSError(code, f"nfnetlink_queue {what} of queue {queue}: {os.strerror(code)}")


def send_all(sock: socket.socket, messages: list[bytes]) -> None:
    """Send verdicts, a few hundred to a datagram (within the socket's send buffer)."""
    for at in range(0, len(messages), 128):
        sock.send(b"".join(messages[at : at + 128]))


def serve(args: argparse.Namespace) -> dict[str, int]:
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if args.parent and os.getppid() != args.parent:
        return {}  # the parent died before the death signal was asked for
    rng = random.Random(args.seed)
    shaper = Shaper(args, rng)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE: root may pass rmem_max
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.bind((0, 0))
    bind(sock, args.queue)
    print("ready", flush=True)
    counts = {"packets": 0, "delayed": 0, "corrupted": 0, "max_held": 0}
    held: list[tuple[float, int, int, bytes | None]] = []  # (departure, order, id, new payload)
    order = 0
    buf = memoryview(bytearray(1 << 20))
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    while not stopping:
        if args.parent and os.getppid() != args.parent:
            break
        now = time.monotonic()
        out = []
        while held and held[0][0] <= now:
            _, _, packet_id, payload = heapq.heappop(held)
            out.append(verdict(args.queue, packet_id, NF_ACCEPT, payload))
        send_all(sock, out)
        wait_ms = 200 if not held else max(0, min(200, (held[0][0] - time.monotonic()) * 1000))
        try:
            if not poller.poll(wait_ms):
                continue
            size = sock.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except (InterruptedError, BlockingIOError):
            continue
        now = time.monotonic()
        for kind, packet_id, payload in parse(buf, size):
            if kind != NFQNL_MSG_PACKET or packet_id < 0:
                continue
            counts["packets"] += 1
            changed = None
            if shaper.corrupt and rng.random() < shaper.corrupt:
                changed = corrupt(payload, rng)
                counts["corrupted"] += changed is not None
            at = shaper.departure(now, payload)
            if at > now:
                counts["delayed"] += 1
            order += 1
            heapq.heappush(held, (at, order, packet_id, changed))
        counts["max_held"] = max(counts["max_held"], len(held))
    # let what is held go, and what the kernel has queued for it since (its rules are gone
    # by now; the queue's packets would be dropped when it closes): the fault is over, and
    # a packet kept would be a loss it did not make
    out = [verdict(args.queue, pid, NF_ACCEPT, p) for _, _, pid, p in sorted(held)]
    while True:
        try:
            size = sock.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except (InterruptedError, BlockingIOError):
            break
        out += [verdict(args.queue, i, NF_ACCEPT) for k, i, _ in parse(buf, size) if k == NFQNL_MSG_PACKET]
    send_all(sock, out)
    sock.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queue", type=int, required=True, help="the NFQUEUE number the rules send to")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--correlation-pct", type=float, default=0.0)
    parser.add_argument("--reorder-pct", type=float, default=0.0)
    parser.add_argument("--corrupt-pct", type=float, default=0.0)
    parser.add_argument("--rate-kbit", type=float, default=0.0)
    parser.add_argument("--per-flow", action="store_true", help="a rate line for each flow")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--parent", type=int, default=0, help="exit when this process is no longer the parent"
    )
    args = parser.parse_args(argv)
    try:
        counts = serve(args)
    except OSError as exc:
        print(f"packet queue: {exc}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
