"""What the fault proxy costs: ZeroMQ REQ/REP round trips over loopback, direct and through
a Toxiproxy proxy (no toxics), 64-byte and 64 KiB messages, measured in the same run.

Prints the median (and p90) added latency per round trip (µs) and the throughput ratio
proxy/direct (the median over interleaved blocks, which resists other load on the
machine). Uses the server at ``TOXIPROXY_URL`` when set, else starts zchaos's own;
``--loops`` measures zchaos's server once per event loop (``uvloop``, ``asyncio``).

    python bench/proxy_overhead.py [--rounds 3000] [--loops]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
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
print("ready", flush=True)
while True:
    rep.send(rep.recv(copy=False), copy=False)
"""


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


def run(url_kind: str, client, upstream_port: int, rounds: int) -> None:
    name = f"bench-{os.getpid()}"
    proxy = client.create(name, f"127.0.0.1:{upstream_port}")
    try:
        proxy_port = int(proxy.listen.rsplit(":", 1)[1])
        print(f"server: {url_kind}")
        print(
            f"{'size':>8} {'direct p50 µs':>14} {'proxy p50 µs':>13} {'added p50 µs':>13}"
            f" {'added p90 µs':>13} {'thr proxy/direct':>17}"
        )
        for size in SIZES:
            n = rounds if size <= 1024 else max(rounds // 4, 200)
            direct, proxied, ratios = [], [], []
            for _ in range(BLOCKS):  # interleaved blocks: both paths see the same machine load
                d = measure(f"tcp://127.0.0.1:{upstream_port}", size, n // BLOCKS)
                p = measure(f"tcp://127.0.0.1:{proxy_port}", size, n // BLOCKS)
                direct += d
                proxied += p
                ratios.append(sum(d) / sum(p))  # round trips per second, proxy / direct
            d50, p50 = statistics.median(direct), statistics.median(proxied)
            d90, p90 = (statistics.quantiles(x, n=10)[-1] for x in (direct, proxied))
            print(
                f"{size:>8} {d50 * 1e6:>14.1f} {p50 * 1e6:>13.1f} {(p50 - d50) * 1e6:>13.1f}"
                f" {(p90 - d90) * 1e6:>13.1f} {statistics.median(ratios):>17.2f}"
            )
    finally:
        client.destroy(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3000, help="round trips per size and path (64 B)")
    ap.add_argument("--loops", action="store_true", help="compare zchaos's server on uvloop and on asyncio")
    args = ap.parse_args()

    ports = PortAllocator()  # the port stays reserved while this object lives
    port = ports.allocate()
    echo = subprocess.Popen(
        [sys.executable, "-c", ECHO, f"tcp://127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == b"ready"
        if args.loops and not os.environ.get("TOXIPROXY_URL"):
            for loop in ("uvloop", "asyncio"):
                os.environ["ZCHAOS_PROXY_LOOP"] = loop
                with toxiproxy_server(use_path=False) as info:
                    run(f"{info.kind} ({loop})", info.client, port, args.rounds)
        else:
            with toxiproxy_server(use_path=False) as info:
                run(f"{info.kind} {info.url}", info.client, port, args.rounds)
    finally:
        os.killpg(echo.pid, signal.SIGTERM)
        echo.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
