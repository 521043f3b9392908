"""What hosts mode costs, and what a netem fault really does (issue 37), measured in one run.

1. ZeroMQ round trips (REQ to a REP echo, 64 bytes): both processes on loopback in the root
   namespace (the proxy mode's path without its proxy), then each in a host of its own on
   the run's bridge (``network = "hosts"``, chaos/hosts.py): p50 and p90 of each, and the
   ratio hosts / loopback, over ``--repeats`` interleaved blocks.
2. A ``netem`` fault (chaos/packets.py) with ``--delay-ms`` and ``--loss-pct`` on the
   client host's link, both ways: UDP datagrams echoed between the two hosts, the realised
   added round-trip delay against twice the parameter (it acts on each way) and the realised
   loss of round trips against 1 - (1 - p)^2, as ratios. Where the kernel has no netem (this
   project's CI machine's has not: CONFIG_NET_SCH_NETEM) the fault is what zchaos builds in
   its place (iptables rules and a userspace packet queue, chaos/packets.py ``add_emulated``),
   and it says which it measured.

Needs root (namespaces). Every namespace and link it makes is removed at its end.

    python bench/hosts_latency.py [--rounds 2000] [--repeats 5] [--delay-ms 20] [--loss-pct 10]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chaos.hosts import Hosts, HostsError, in_ns, missing  # noqa: E402
from chaos.packets import add_netem, packet_faults_missing  # noqa: E402


def serve(kind: str, address: str, port: int) -> None:
    """An echo: a ZeroMQ REP (``zmq``) or a UDP socket (``udp``), until killed."""
    if kind == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((address, port))
        print("ready", flush=True)
        while True:
            data, peer = sock.recvfrom(2048)
            sock.sendto(data, peer)
    import zmq

    rep = zmq.Context().socket(zmq.REP)
    rep.bind(f"tcp://{address}:{port}")
    print("ready", flush=True)
    while True:
        rep.send(rep.recv())


def ping_zmq(address: str, port: int, rounds: int) -> None:
    """``rounds`` REQ round trips of 64 bytes; prints each in µs."""
    import zmq

    req = zmq.Context().socket(zmq.REQ)
    req.connect(f"tcp://{address}:{port}")
    body = bytes(64)
    for _ in range(50):  # warm-up: the connection, the caches
        req.send(body)
        req.recv()
    times = []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        req.send(body)
        req.recv()
        times.append((time.perf_counter_ns() - t) / 1000)
    print(" ".join(f"{x:.1f}" for x in times))


def ping_udp(address: str, port: int, rounds: int, gap_s: float) -> None:
    """``rounds`` UDP round trips, one at a time (0.5 s to answer): prints the lost count and
    each answered one's time in ms."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.5)
    lost, times = 0, []
    for i in range(rounds):
        t = time.perf_counter()
        sock.sendto(i.to_bytes(4, "big"), (address, port))
        try:
            while int.from_bytes(sock.recvfrom(64)[0], "big") != i:
                pass  # a late answer to an earlier datagram
            times.append((time.perf_counter() - t) * 1000)
        except TimeoutError:
            lost += 1
        time.sleep(gap_s)
    print(lost, " ".join(f"{x:.3f}" for x in times))


def spawn(argv: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise SystemExit(f"the echo did not start: {' '.join(argv)}")
    return proc


def me(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def run_zmq(client: list[str], server: list[str], address: str, port: int, rounds: int) -> list[float]:
    echo = spawn([*server, *me("--serve", "zmq", address, str(port))])
    try:
        out = subprocess.run(
            [*client, *me("--ping", "zmq", address, str(port), str(rounds))],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return [float(x) for x in out.stdout.split()]
    finally:
        echo.kill()
        echo.wait()


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def measure_latency(hosts: Hosts, rounds: int, repeats: int) -> None:
    loop: list[float] = []
    across: list[float] = []
    server, client = hosts.hosts["server"], hosts.hosts["client"]
    for i in range(repeats):
        loop += run_zmq([], [], "127.0.0.1", 47100 + i, rounds)
        across += run_zmq(in_ns(client.ns, []), in_ns(server.ns, []), server.address, 47100 + i, rounds)
    lp50, lp90, hp50, hp90 = pct(loop, 0.5), pct(loop, 0.9), pct(across, 0.5), pct(across, 0.9)
    print(f"ZeroMQ REQ/REP round trip, 64 B, {repeats} x {rounds}:")
    print(f"  loopback (root namespace)  p50 {lp50:8.1f} µs   p90 {lp90:8.1f} µs")
    print(f"  hosts (bridge, two netns)  p50 {hp50:8.1f} µs   p90 {hp90:8.1f} µs")
    print(f"  hosts / loopback           p50 {hp50 / lp50:8.2f}      p90 {hp90 / lp90:8.2f}")


def udp_round_trips(hosts: Hosts, rounds: int) -> tuple[int, list[float]]:
    server, client = hosts.hosts["server"], hosts.hosts["client"]
    echo = spawn(in_ns(server.ns, me("--serve", "udp", server.address, "47200")))
    try:
        out = subprocess.run(
            in_ns(client.ns, me("--ping", "udp", server.address, "47200", str(rounds))),
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    finally:
        echo.kill()
        echo.wait()
    lost, *times = out.stdout.split()
    return int(lost), [float(x) for x in times]


def measure_netem(hosts: Hosts, delay_ms: float, loss_pct: float, rounds: int) -> None:
    why = packet_faults_missing()
    if why is not None:
        print(f"netem: not measured: {why}")
        return
    _, before = udp_round_trips(hosts, rounds)
    applied, what = add_netem(
        hosts, "client", {"delay_ms": delay_ms, "loss_pct": loss_pct, "direction": "both"}
    )
    try:
        lost, during = udp_round_trips(hosts, rounds)
    finally:
        applied.remove()
    added = statistics.median(during) - statistics.median(before)
    expected_loss = 1 - (1 - loss_pct / 100) ** 2  # each way
    print(f"{what}, {rounds} UDP round trips:")
    realised = lost / rounds
    print(f"  added delay {added:8.2f} ms  expected {2 * delay_ms:g} ms  ratio {added / (2 * delay_ms):.2f}")
    ratio = realised / expected_loss
    print(f"  lost        {realised:8.3f}     expected {expected_loss:.3f}  ratio {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--loss-pct", type=float, default=10.0)
    parser.add_argument("--udp-rounds", type=int, default=1000)
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "ADDRESS", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--ping", nargs=4, metavar=("KIND", "ADDRESS", "PORT", "ROUNDS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], int(args.serve[2]))
        return
    if args.ping:
        kind, address, port, rounds = args.ping
        if kind == "zmq":
            ping_zmq(address, int(port), int(rounds))
        else:
            ping_udp(address, int(port), int(rounds), 0.002)
        return
    why = missing()
    if why is not None:
        raise SystemExit(f"hosts_latency: {why}")
    hosts = Hosts(["server", "client"])
    try:
        hosts.open()
        measure_latency(hosts, args.rounds, args.repeats)
        measure_netem(hosts, args.delay_ms, args.loss_pct, args.udp_rounds)
    except HostsError as exc:
        raise SystemExit(f"hosts_latency: {exc}") from None
    finally:
        for failed in hosts.close():
            print(f"could not remove: {failed}", file=sys.stderr)


if __name__ == "__main__":
    main()
