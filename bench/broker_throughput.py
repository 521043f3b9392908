"""Echo requests per second through each broker, against a C-speed baseline in the same run.

    python bench/broker_throughput.py [--seconds 5] [--window 100] [--workers 1 4] [--profile]

For each broker (Simple Pirate queue, Paranoid Pirate queue, Majordomo broker) and each
worker count, one load process keeps ``window`` requests in flight on a DEALER and counts
the echoes that come back during ``seconds`` (after a warm-up second). The baseline is a
``zmq.proxy`` ROUTER/DEALER queue (libzmq's C loop) with the same number of worker
processes, each a minimal Python REP echo; every broker runs with its own protocol's
workers (the implementations under test). All processes run on loopback in their own
process groups, without history recording. Prints requests/s and the ratio to the
baseline with the same worker count; a second reference line, "zmq.proxy lockstep", keeps
only one request in flight per worker (the pirate brokers' own discipline). ``--profile``
also runs the Majordomo broker under cProfile and prints where its time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq

from contract.ports import PortAllocator

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = b"bench:1|" + b"x" * 24
MDP_REQUEST = [b"", b"MDPC01", b"echo"]


# --- roles run as subprocesses of this script ---------------------------------------------


def role_proxy(frontend: str, backend: str) -> None:
    ctx = zmq.Context()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    front.bind(frontend)
    back.bind(backend)
    print("ready:", flush=True)
    with contextlib.suppress(zmq.ContextTerminated, KeyboardInterrupt):
        zmq.proxy(front, back)


def role_rep_worker(connect: str) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.connect(connect)
    print("ready:", flush=True)
    while True:
        sock.send_multipart(sock.recv_multipart())


def role_load(endpoint: str, mdp: bool, window: int, seconds: float) -> None:
    """Keep ``window`` requests in flight; print the replies per second after a warm-up."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    request = [*MDP_REQUEST, PAYLOAD] if mdp else [b"", PAYLOAD]
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


def me(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def mod(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def measure(kind: str, workers: int, window: int, seconds: float, profile: str | None = None) -> float:
    ports = PortAllocator()  # reserved until this script ends
    fe, be = f"tcp://127.0.0.1:{ports.allocate()}", f"tcp://127.0.0.1:{ports.allocate()}"
    group = Group()
    try:
        if kind == "zmq.proxy":
            group.start(me("--role", "proxy", fe, be))
            for _ in range(workers):
                group.start(me("--role", "rep_worker", be))
        elif kind == "simple-pirate":
            group.start(mod("implementations.simple_pirate.queue", "--frontend", fe, "--backend", be))
            for i in range(workers):
                group.start(
                    mod("implementations.simple_pirate.worker", "--connect", be, "--identity", f"w{i}")
                )
        elif kind == "paranoid-pirate":
            group.start(mod("implementations.paranoid_pirate.queue", "--frontend", fe, "--backend", be))
            for i in range(workers):
                group.start(
                    mod("implementations.paranoid_pirate.worker", "--connect", be, "--identity", f"w{i}")
                )
        elif kind == "majordomo":
            argv = mod("implementations.majordomo.broker", "--frontend", fe, "--backend", be)
            if profile:
                argv = [sys.executable, "-m", "cProfile", "-o", profile, *argv[1:]]
            group.start(argv)
            for i in range(workers):
                group.start(mod("implementations.majordomo.worker", "--connect", be, "--identity", f"w{i}"))
        else:
            raise ValueError(kind)
        # Requests sent before the workers' READY wait in the broker; the warm-up second absorbs them.
        mdp = str(kind == "majordomo")
        load = group.start(me("--role", "load", fe, mdp, str(window), str(seconds)), ready=False)
        load.wait(seconds + 60)
        text = load.out.read_text().strip()  # type: ignore[attr-defined]
        try:
            return float(text.splitlines()[-1])
        except (ValueError, IndexError):
            raise SystemExit(f"load for {kind} failed: {text[-500:]}") from None
    finally:
        group.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--profile", action="store_true", help="profile the Majordomo broker (cProfile)")
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role, *rest = args.role
        if role == "proxy":
            role_proxy(*rest)
        elif role == "rep_worker":
            role_rep_worker(*rest)
        elif role == "load":
            role_load(rest[0], rest[1] == "True", int(rest[2]), float(rest[3]))
        return

    kinds = ["zmq.proxy", "simple-pirate", "paranoid-pirate", "majordomo"]
    if not (ROOT / "implementations" / "paranoid_pirate").exists():
        kinds.remove("paranoid-pirate")
    print(f"echo throughput, {args.window} requests in flight, {args.seconds:g} s per measurement, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'broker':18s} {'workers':>7s} {'req/s':>10s} {'vs zmq.proxy':>13s}")
    for workers in args.workers:
        baseline = measure("zmq.proxy", workers, args.window, args.seconds)
        print(f"{'zmq.proxy':18s} {workers:7d} {baseline:10.0f} {1.0:13.2f}", flush=True)
        # The pirate brokers hand a worker one request at a time (it must answer first), so
        # each request waits a full broker-worker round trip; the same proxy with one request
        # in flight per worker shows what that lockstep alone costs at C speed.
        lockstep = measure("zmq.proxy", workers, workers, args.seconds)
        ratio = lockstep / baseline
        print(f"{'zmq.proxy lockstep':18s} {workers:7d} {lockstep:10.0f} {ratio:13.2f}", flush=True)
        for kind in kinds[1:]:
            rate = measure(kind, workers, args.window, args.seconds)
            print(f"{kind:18s} {workers:7d} {rate:10.0f} {rate / baseline:13.2f}", flush=True)
    if args.profile:
        prof = str(Path(tempfile.mkdtemp(prefix="zchaos-prof-")) / "broker.prof")
        rate = measure("majordomo", 1, args.window, args.seconds, profile=prof)
        print(f"\nMajordomo broker under cProfile, 1 worker: {rate:.0f} req/s; top functions by own time:")
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
