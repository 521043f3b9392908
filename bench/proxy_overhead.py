"""What the fault proxy costs: ZeroMQ round trips over loopback, direct and through a
Toxiproxy proxy (no toxics), measured in the same run, the direct path being the anchor.

1. One synchronous REQ client, 64-byte and 64 KiB messages: the added latency per round trip
   (µs, p50 and p90) and the round trips per second proxy/direct, over interleaved blocks.
2. ``--connections`` REQ clients at once (threads, each its own TCP connection, 64 bytes) to
   an echo in C: requests per second direct and through the proxy, and their ratio - what a
   run's many clients get through one proxy.

The whole of it is repeated ``--repeats`` times (single runs minutes apart gave 25-77 µs added
at 64 B on this shared machine); each figure is printed as the median and the spread (lowest -
highest) of the repeats. Uses the server at ``TOXIPROXY_URL`` when set, else starts zchaos's
own; ``--loops`` measures zchaos's server once per event loop (``uvloop``, ``asyncio``).

    python bench/proxy_overhead.py [--rounds 3000] [--repeats 5] [--connections 16] [--loops]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.toxiproxy_client import toxiproxy_server
from contract.ports import PortAllocator

SIZES = (64, 64 * 1024)
BLOCKS = 10

ECHO = """
import sys, zmq
ctx = zmq.Context()
rep = ctx.socket(zmq.REP)
rep.bind(sys.argv[1])
router = ctx.socket(zmq.ROUTER)  # the echo in C, for many clients at once
router.bind(sys.argv[2])
import threading
threading.Thread(target=zmq.proxy, args=(router, router), daemon=True).start()
print("ready", flush=True)
while True:
    rep.send(rep.recv(copy=False), copy=False)
"""
#: Seconds of each concurrent-connections measurement.
CONCURRENT_S = 3.0


def measure(endpoint: str, size: int, rounds: int) -> list[float]:
    """Round-trip times (s) of ``rounds`` synchronous requests of ``size`` bytes."""
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(endpoint)
    payload = b"x" * size
    try:
        for _ in range(50):  # warm-up: connection, buffers
            req.send(payload)
            req.recv()
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            req.send(payload)
            req.recv()
            times.append(time.perf_counter() - t0)
        return times
    finally:
        req.close()


def concurrent_rate(endpoint: str, connections: int, seconds: float) -> float:
    """Round trips per second of ``connections`` synchronous REQ clients at once (64 bytes)."""
    ctx = zmq.Context.instance()
    counts = [0] * connections
    start = threading.Barrier(connections + 1)
    stop = threading.Event()

    def client(i: int) -> None:
        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(endpoint)
        try:
            for _ in range(20):  # warm-up: the connection
                req.send(b"x" * 64)
                req.recv()
            start.wait()
            while not stop.is_set():
                req.send(b"x" * 64)
                req.recv()
                counts[i] += 1
        finally:
            req.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)  # the measurement's length, not a synchronisation
    stop.set()
    took = time.perf_counter() - began
    for t in threads:
        t.join()
    return sum(counts) / took


def one_repeat(ports: tuple[int, int], proxies: tuple[int, int], rounds: int, connections: int) -> dict:
    """Every figure once: per size (added p50, p90 µs, throughput ratio), and the concurrent rates."""
    (rep_port, router_port), (rep_proxy, router_proxy) = ports, proxies
    figures: dict = {}
    for size in SIZES:
        n = rounds if size <= 1024 else max(rounds // 4, 200)
        direct, proxied, ratios = [], [], []
        for _ in range(BLOCKS):  # interleaved blocks: both paths see the same machine load
            d = measure(f"tcp://127.0.0.1:{rep_port}", size, n // BLOCKS)
            p = measure(f"tcp://127.0.0.1:{rep_proxy}", size, n // BLOCKS)
            direct += d
            proxied += p
            ratios.append(sum(d) / sum(p))  # round trips per second, proxy / direct
        d50, p50 = statistics.median(direct), statistics.median(proxied)
        d90, p90 = (statistics.quantiles(x, n=10)[-1] for x in (direct, proxied))
        figures[size] = ((p50 - d50) * 1e6, (p90 - d90) * 1e6, statistics.median(ratios))
    direct = concurrent_rate(f"tcp://127.0.0.1:{router_port}", connections, CONCURRENT_S)
    proxied = concurrent_rate(f"tcp://127.0.0.1:{router_proxy}", connections, CONCURRENT_S)
    figures["concurrent"] = (direct, proxied, proxied / direct)
    return figures


def spread(values: list[float], fmt: str) -> str:
    """``median (lowest-highest)`` of ``values``."""
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def run(url_kind: str, client, ports: tuple[int, int], args: argparse.Namespace) -> None:
    names = [f"bench-{os.getpid()}-{i}" for i in range(2)]
    made = [client.create(name, f"127.0.0.1:{port}") for name, port in zip(names, ports, strict=True)]
    try:
        proxies = tuple(int(proxy.listen.rsplit(":", 1)[1]) for proxy in made)
        repeats = [one_repeat(ports, proxies, args.rounds, args.connections) for _ in range(args.repeats)]
        print(f"server: {url_kind}; median (lowest-highest) of {args.repeats} repeats, "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'size':>8} {'added p50 µs':>22} {'added p90 µs':>22} {'thr proxy/direct':>20}")
        for size in SIZES:
            added50, added90, ratio = ([r[size][i] for r in repeats] for i in range(3))
            cells = (spread(added50, ".1f"), spread(added90, ".1f"), spread(ratio, ".2f"))
            print(f"{size:>8} {cells[0]:>22} {cells[1]:>22} {cells[2]:>20}")
        direct, proxied, ratio = ([r["concurrent"][i] for r in repeats] for i in range(3))
        print(f"{args.connections} connections at once, 64 B, echo in C, {CONCURRENT_S:g} s each:")
        print(f"  direct  {spread(direct, '.0f')} round trips/s (the anchor)")
        print(f"  proxied {spread(proxied, '.0f')} round trips/s, x{spread(ratio, '.2f')} direct")
    finally:
        for name in names:
            client.destroy(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3000, help="round trips per size and path (64 B)")
    ap.add_argument("--repeats", type=int, default=5, help="times the whole measurement is repeated")
    ap.add_argument("--connections", type=int, default=16, help="clients at once in the throughput figure")
    ap.add_argument("--loops", action="store_true", help="compare zchaos's server on uvloop and on asyncio")
    args = ap.parse_args()

    ports = PortAllocator()  # the port stays reserved while this object lives
    echo_ports = (ports.allocate(), ports.allocate())  # the REP echo, the C echo
    echo = subprocess.Popen(
        [sys.executable, "-c", ECHO, *(f"tcp://127.0.0.1:{port}" for port in echo_ports)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == b"ready"
        if args.loops and not os.environ.get("TOXIPROXY_URL"):
            for loop in ("uvloop", "asyncio"):
                os.environ["ZCHAOS_PROXY_LOOP"] = loop
                with toxiproxy_server(use_path=False) as info:
                    run(f"{info.kind} ({loop})", info.client, echo_ports, args)
        else:
            with toxiproxy_server(use_path=False) as info:
                run(f"{info.kind} {info.url}", info.client, echo_ports, args)
    finally:
        os.killpg(echo.pid, signal.SIGTERM)
        echo.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
