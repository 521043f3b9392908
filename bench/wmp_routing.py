"""What a WMP device costs: echo jobs through a manager to a worker connected directly,
against the same through a device in between, measured in the same run.

    python bench/wmp_routing.py [--seconds 8] [--inflight 1 8]

For each number of jobs in flight (one DEALER client keeping that many requests out),
prints jobs/s direct and via the device, and the ratio. Work per job is zero, so the
figures are the protocol's own cost (READY/WAKE/GIVE/TAKE/DONE, four to seven hops).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parent.parent


def free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def start(role: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ZCHAOS_HISTORY_DIR", None)  # measure the protocol, not the history writer
    return subprocess.Popen(
        [sys.executable, "-m", f"implementations.wmp.{role}", *args],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def wait_ready(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if b"ready:" in line:
            return
        if not line and proc.poll() is not None:
            break
    raise SystemExit(f"a role did not start: {proc.args}")


def measure(ctx: zmq.Context, frontend: str, inflight: int, seconds: float) -> float:
    """Jobs per second of one DEALER client keeping ``inflight`` echo requests out."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(frontend)
    n = 0
    for i in range(inflight):
        sock.send_multipart([b"", f"b:{i}|x".encode()])
    # Warm up for a second (READYs, first WAKEs), then count.
    start = time.monotonic()
    counted_from, done_at_start = start + 1.0, None
    while True:
        if not sock.poll(5000):
            raise SystemExit("no reply in 5 s: the topology is not serving")
        sock.recv_multipart()
        n += 1
        now = time.monotonic()
        if done_at_start is None and now >= counted_from:
            done_at_start, counted_from = n, now
        if done_at_start is not None and now - counted_from >= seconds:
            sock.close(linger=0)
            return (n - done_at_start) / (now - counted_from)
        sock.send_multipart([b"", f"b:{inflight + n}|x".encode()])


def topology(via_device: bool) -> tuple[list[subprocess.Popen], str]:
    frontend, backend, device = free_endpoint(), free_endpoint(), free_endpoint()
    procs = [start("manager", "--frontend", frontend, "--backend", backend, "--identity", "m")]
    wait_ready(procs[-1])
    if via_device:
        procs.append(start("device", "--backend", device, "--connect", backend, "--identity", "d"))
        wait_ready(procs[-1])
    upstream = device if via_device else backend
    procs.append(
        start("worker", "--connect", upstream, "--identity", "w1", "--capacity", "4", "--work-ms", "0")
    )
    wait_ready(procs[-1])
    return procs, frontend


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for proc in procs:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--inflight", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    ctx = zmq.Context()
    try:
        for inflight in args.inflight:
            rates = {}
            for via_device in (False, True):
                procs, frontend = topology(via_device)
                try:
                    rates[via_device] = measure(ctx, frontend, inflight, args.seconds)
                finally:
                    stop(procs)
            print(
                f"WMP echo, {inflight:>3} in flight: direct {rates[False]:8.0f} jobs/s, "
                f"via device {rates[True]:8.0f} jobs/s, ratio {rates[True] / rates[False]:.2f}"
            )
    finally:
        ctx.destroy(linger=0)


if __name__ == "__main__":
    main()
