"""How many requests per second one Locust process makes with the Lazy Pirate user, with
the history recorded and without, against a C-speed echo (a ROUTER proxied onto itself).

    python bench/loadgen_rate.py [--seconds 15] [--users 50]

Prints requests/s of each variant and the cost of recording as a fraction of the rate.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadtests.config import ENV_LOAD, ClientLoad, LoadConfig  # noqa: E402


def start_echo(ctx: zmq.Context) -> str:
    """A ROUTER proxied onto itself: every request goes straight back to its sender, in C."""
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")

    def serve() -> None:
        try:
            zmq.proxy(router, router)
        except zmq.ContextTerminated:
            router.close(linger=0)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{port}"


def run_locust(endpoint: str, history_dir: str, seconds: int, users: int, work: Path, tag: str) -> float:
    prefix = work / f"stats-{tag}"
    client = ClientLoad(name="lazy_pirate", adapter="lazy_pirate", endpoints=[endpoint])
    config = LoadConfig(clients=[client], history_dir=history_dir, wait_ms=0)
    subprocess.run(
        [
            sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests" / "locustfile.py"), "--headless",
            "--users", str(users), "--spawn-rate", str(users), "--run-time", f"{seconds}s",
            "--csv", str(prefix), "--only-summary", "--loglevel", "ERROR", "--exit-code-on-error", "0",
        ],
        env={**os.environ, ENV_LOAD: config.to_env(), "PYTHONPATH": str(ROOT)},
        check=True, cwd=ROOT, timeout=seconds + 60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    with open(f"{prefix}_stats.csv") as fh:
        total = next(row for row in csv.DictReader(fh) if row["Name"] == "Aggregated")
    return float(total["Requests/s"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=15, help="length of each measurement")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument(
        "--rounds", type=int, default=3, help="off/on pairs, alternated (noise on shared cores)"
    )
    args = parser.parse_args()
    ctx = zmq.Context()
    endpoint = start_echo(ctx)
    off: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in range(args.rounds):
            off.append(run_locust(endpoint, "", args.seconds, args.users, work, f"off{n}"))
            on.append(
                run_locust(endpoint, str(work / f"history{n}"), args.seconds, args.users, work, f"on{n}")
            )
    off_rate, on_rate = statistics.median(off), statistics.median(on)
    print(
        f"loadgen rate, one Locust process, {args.users} users, {args.seconds} s x {args.rounds}, echo in C:"
    )
    print(f"  history off: {off_rate:10.0f} requests/s (median of {', '.join(f'{r:.0f}' for r in off)})")
    print(f"  history on:  {on_rate:10.0f} requests/s (median of {', '.join(f'{r:.0f}' for r in on)})")
    print(f"  recording costs {1 - on_rate / off_rate:.1%} of the rate (aim: at most 20%)")


if __name__ == "__main__":
    main()
