"""Echo requests per second through each broker, as a ratio to a minimal load-balancing
broker with the same workers, measured in the same run.

    python bench/broker_throughput.py [--seconds 4] [--rounds 3] [--window 100] [--workers 1 4]
                                      [--profile]

One load process keeps ``window`` requests in flight on a DEALER and counts the echoes
that come back during ``seconds`` (after a warm-up second). Every line runs the same
worker program (``--role worker`` of this file: one echo code path, speaking just enough
of the worker protocol its broker needs) in its own process:

- ``lb`` (the baseline): the guide's load-balancing broker (ROUTER frontend, ROUTER
  backend, a queue of ready workers, one request per worker; the frontend is read only
  while a worker is ready), written plainly in Python in this file. It runs once per
  worker protocol: ``req`` (a REQ worker that sends READY 0x01), ``ppp`` (6/PPP: a
  DEALER with READY and a heartbeat every second) and ``mdp`` (7/MDP: READY, REQUEST,
  REPLY, a heartbeat every 2.5 s). It ignores heartbeats and tracks no liveness.
- ``simple-pirate``, ``paranoid-pirate``, ``majordomo``: the brokers under test
  (``implementations/``), with the bench worker in ``req``, ``ppp`` and ``mdp`` mode. They
  share the lb's discipline (the client's requests wait in the broker, each worker holds
  one), so each one's ratio to the lb with the same worker protocol and worker count is
  like for like: the broker's own code is the only difference.
- ``zmq.proxy``: a second reference, not like for like: libzmq's ROUTER/DEALER proxy
  loop in C, which pipelines requests into the workers' sockets instead of handing each
  worker one at a time (workers: plain DEALERs, no handshake). Its ratio is to the lb
  with ``req`` workers.

Each round measures every line once (in a rotating order, so that other load on the
machine falls on all lines alike); a ratio is the median of its per-round ratios. All
processes run on loopback, without history recording, each in its own process group, all
stopped after each measurement (and on Ctrl-C). ``--profile`` also runs the Majordomo
broker under cProfile and prints where its time goes.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import zmq

from contract.ports import PortAllocator

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = b"bench:1|" + b"x" * 24
MDP_WORKER = b"MDPW01"


@dataclass(frozen=True)
class WorkerProtocol:
    """What the bench worker sends and expects, as its own socket shows them.

    ``request_head`` comes before ``[client, '', body...]`` in a request, ``reply_head``
    before the same frames in the reply; a REQ socket also adds (and strips) one empty
    delimiter on the wire, which the broker sees (``wire``).
    """

    socket_type: int
    ready: list[bytes]
    heartbeat: list[bytes]
    heartbeat_s: float
    request_head: list[bytes]
    reply_head: list[bytes]

    def wire(self, frames: list[bytes]) -> list[bytes]:
        return [b"", *frames] if self.socket_type == zmq.REQ else frames


PROTOCOLS = {
    "req": WorkerProtocol(zmq.REQ, [b"\x01"], [], 1.0, [], []),
    # Paranoid Pirate queue's defaults: heartbeat 1 s, liveness 3.
    "ppp": WorkerProtocol(zmq.DEALER, [b"\x01"], [b"\x02"], 1.0, [], []),
    # Majordomo broker's defaults: heartbeat 2.5 s, liveness 3.
    "mdp": WorkerProtocol(
        zmq.DEALER,
        [b"", MDP_WORKER, b"\x01", b"echo"],
        [b"", MDP_WORKER, b"\x04"],
        2.5,
        [b"", MDP_WORKER, b"\x02"],
        [b"", MDP_WORKER, b"\x03"],
    ),
    "dealer": WorkerProtocol(zmq.DEALER, [], [], 1.0, [], []),
}


@dataclass(frozen=True)
class Line:
    """One line of the table: a broker, the worker protocol its workers speak, and the
    line it is compared with."""

    name: str
    broker: str
    protocol: str
    anchor: str

    @property
    def mdp_client(self) -> bool:
        return self.broker == "majordomo"


LINES = [
    Line("lb req", "lb", "req", "lb req"),
    Line("lb ppp", "lb", "ppp", "lb ppp"),
    Line("lb mdp", "lb", "mdp", "lb mdp"),
    Line("simple-pirate", "simple-pirate", "req", "lb req"),
    Line("paranoid-pirate", "paranoid-pirate", "ppp", "lb ppp"),
    Line("majordomo", "majordomo", "mdp", "lb mdp"),
    Line("zmq.proxy", "zmq.proxy", "dealer", "lb req"),
]
IMPLEMENTATIONS = {
    "simple-pirate": "implementations.simple_pirate.queue",
    "paranoid-pirate": "implementations.paranoid_pirate.queue",
    "majordomo": "implementations.majordomo.broker",
}


def client_request(mdp: bool) -> list[bytes]:
    """What the load sends on its DEALER (the empty delimiter a REQ would add, first)."""
    return [b"", b"MDPC01", b"echo", PAYLOAD] if mdp else [b"", PAYLOAD]


# --- roles run as subprocesses of this script ---------------------------------------------


def role_proxy(frontend: str, backend: str) -> None:
    ctx = zmq.Context()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    front.bind(frontend)
    back.bind(backend)
    print("ready:", flush=True)
    with contextlib.suppress(zmq.ContextTerminated, KeyboardInterrupt):
        zmq.proxy(front, back)


def role_lb(frontend: str, backend: str, protocol: str) -> None:
    """The load-balancing broker: a worker is ready after READY or a reply, and gets one
    request at a time; client requests wait in the frontend while no worker is ready."""
    proto = PROTOCOLS[protocol]
    ready_msg = proto.wire(proto.ready)
    request_head, reply_head = proto.wire(proto.request_head), proto.wire(proto.reply_head)
    n = len(reply_head)
    ctx = zmq.Context()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER)
    front.bind(frontend)
    back.bind(backend)
    backend_only, both = zmq.Poller(), zmq.Poller()
    backend_only.register(back, zmq.POLLIN)
    both.register(back, zmq.POLLIN)
    both.register(front, zmq.POLLIN)
    idle: collections.deque[bytes] = collections.deque()
    print("ready:", flush=True)
    while True:
        events = dict((both if idle else backend_only).poll())
        if back in events:
            worker, *rest = back.recv_multipart()
            if rest[:n] == reply_head and len(rest) >= n + 3 and rest[n + 1] == b"":
                front.send_multipart(rest[n:])
                idle.append(worker)
            elif rest == ready_msg:
                idle.append(worker)
            # anything else is a heartbeat: this broker tracks no liveness
        if front in events:
            back.send_multipart([idle.popleft(), *request_head, *front.recv_multipart()])


def role_worker(protocol: str, endpoint: str) -> None:
    """The bench worker: READY, then echo every request; heartbeats on the protocol's timer."""
    proto = PROTOCOLS[protocol]
    n = len(proto.request_head)
    ctx = zmq.Context()
    sock = ctx.socket(proto.socket_type)
    sock.linger = 0
    sock.connect(endpoint)
    if proto.ready:
        sock.send_multipart(proto.ready)
    print("ready:", flush=True)
    beat_at = time.monotonic() + proto.heartbeat_s
    while True:
        if sock.poll(max(0.0, beat_at - time.monotonic()) * 1000):
            frames = sock.recv_multipart()
            # [*request_head, client, '', body...] is a request; anything else a heartbeat
            if frames[:n] == proto.request_head and len(frames) >= n + 3:
                sock.send_multipart([*proto.reply_head, *frames[n:]])
        if time.monotonic() >= beat_at:
            if proto.heartbeat:
                sock.send_multipart(proto.heartbeat)
            beat_at = time.monotonic() + proto.heartbeat_s


def role_load(endpoint: str, mdp: bool, window: int, seconds: float) -> None:
    """Keep ``window`` requests in flight; print the replies per second after a warm-up."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    request = client_request(mdp)
    for _ in range(window):
        sock.send_multipart(request)
    warm_until = time.monotonic() + 1.0
    while time.monotonic() < warm_until:
        if sock.poll(100):
            sock.recv_multipart()
            sock.send_multipart(request)
    count, start = 0, time.monotonic()
    end = start + seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if sock.poll(int((end - now) * 1000) + 1):
            sock.recv_multipart()
            count += 1
            sock.send_multipart(request)
    print(f"{count / (time.monotonic() - start):.1f}", flush=True)


# --- the driver ---------------------------------------------------------------------------


class Group:
    """Processes of one measurement, each in its own process group, all ended together."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="zchaos-bench-"))

    def start(self, argv: list[str], ready: bool = True) -> subprocess.Popen:
        out = self.tmp / f"p{len(self.procs)}.out"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("ZCHAOS_HISTORY_DIR", None)
        with out.open("wb") as fh:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
        proc.out = out  # type: ignore[attr-defined]
        self.procs.append(proc)
        if ready:
            deadline = time.monotonic() + 20
            while b"ready:" not in out.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"{' '.join(argv)} did not start: {out.read_text(errors='replace')[-500:]}"
                    )
                time.sleep(0.05)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def me(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def start_line(group: Group, line: Line, workers: int, profile: str | None = None) -> str:
    """Start ``line``'s broker and ``workers`` bench workers in ``group``; the frontend."""
    ports = PortAllocator()  # reserved until this script ends
    fe, be = f"tcp://127.0.0.1:{ports.allocate()}", f"tcp://127.0.0.1:{ports.allocate()}"
    if line.broker == "zmq.proxy":
        group.start(me("--role", "proxy", fe, be))
    elif line.broker == "lb":
        group.start(me("--role", "lb", fe, be, line.protocol))
    else:
        python = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else [])]
        group.start([*python, "-m", IMPLEMENTATIONS[line.broker], "--frontend", fe, "--backend", be])
    for _ in range(workers):
        group.start(me("--role", "worker", line.protocol, be))
    return fe


def measure(line: Line, workers: int, window: int, seconds: float, profile: str | None = None) -> float:
    group = Group()
    try:
        fe = start_line(group, line, workers, profile)
        # Requests sent before the workers' READY wait in the broker; the warm-up second absorbs them.
        argv = me("--role", "load", fe, str(line.mdp_client), str(window), str(seconds))
        load = group.start(argv, ready=False)
        load.wait(seconds + 60)
        text = load.out.read_text().strip()  # type: ignore[attr-defined]
        try:
            rate = float(text.splitlines()[-1])
        except (ValueError, IndexError):
            raise SystemExit(f"load for {line.name} failed: {text[-500:]}") from None
        if rate == 0:
            raise SystemExit(f"no echo came back through {line.name} with {workers} worker(s)")
        return rate
    finally:
        group.stop()


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def run_role(role: str, rest: list[str]) -> None:
    if role == "proxy":
        role_proxy(*rest)
    elif role == "lb":
        role_lb(*rest)
    elif role == "worker":
        role_worker(*rest)
    elif role == "load":
        role_load(rest[0], rest[1] == "True", int(rest[2]), float(rest[3]))
    else:
        raise SystemExit(f"unknown role {role}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measurement (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every line (default 3)")
    parser.add_argument("--window", type=int, default=100, help="requests in flight (default 100)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4], help="worker counts (default 1 4)")
    parser.add_argument("--profile", action="store_true", help="profile the Majordomo broker (cProfile)")
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        run_role(args.role[0], args.role[1:])
        return
    # A SIGTERM (e.g. from a timeout) unwinds like Ctrl-C, so every group is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    print(f"broker throughput: echo requests/s, one load process with {args.window} requests in flight, "
          f"{args.seconds:g} s per measurement after a 1 s warm-up, median of {args.rounds} round(s); "
          f"{os.cpu_count()} CPUs, load average {load_average()}")  # fmt: skip
    print("Like for like: each broker against the lb (this file's load-balancing broker, one request per")
    print("worker) with the same worker program, worker protocol and count. zmq.proxy (C, pipelined) is a")
    print("second reference, not like for like. See --help.")
    print(f"{'line':16s} {'workers':>7s} {'req/s':>9s} {'vs':>7s} {'ratio':>6s}  rounds (req/s)")
    for workers in args.workers:
        rates: dict[str, list[float]] = {line.name: [] for line in LINES}
        for n in range(args.rounds):
            shift = n % len(LINES)
            for line in LINES[shift:] + LINES[:shift]:
                rates[line.name].append(measure(line, workers, args.window, args.seconds))
        for line in LINES:
            got, base = rates[line.name], rates[line.anchor]
            ratio = statistics.median(r / b for r, b in zip(got, base, strict=True))
            anchor = "-" if line.anchor == line.name else line.anchor
            print(f"{line.name:16s} {workers:7d} {statistics.median(got):9.0f} {anchor:>7s} {ratio:6.2f}"
                  f"  {', '.join(f'{r:.0f}' for r in got)}", flush=True)  # fmt: skip
    print(f"load average at the end: {load_average()}")
    if args.profile:
        prof = str(Path(tempfile.mkdtemp(prefix="zchaos-prof-")) / "broker.prof")
        majordomo = next(line for line in LINES if line.broker == "majordomo")
        rate = measure(majordomo, 1, args.window, args.seconds, profile=prof)
        print(f"\nMajordomo broker under cProfile, 1 worker: {rate:.0f} req/s; top functions by own time:")
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        shutil.rmtree(Path(prof).parent, ignore_errors=True)


if __name__ == "__main__":
    main()
