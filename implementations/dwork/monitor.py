"""The dwork monitor: notices a worker that died or froze and tells the scheduler (Exit).

    python -m implementations.dwork.monitor --bind tcp://127.0.0.1:5556 \\
        --scheduler tcp://127.0.0.1:5555 --timeout-ms 1500

dwork has no failure detector: the seed's Exit notification is sent "by whoever
notices". This role plays the operator's watchdog. Workers send heartbeats to its ROUTER
(their routing id is their location) and get an acknowledgement (a worker waits for
the first before it steals). A worker silent for ``--timeout-ms`` is reported
with Exit, which puts its assigned tasks back in the ready pool. A worker heard again
after that is simply watched again (its next Steal makes it active at the scheduler).
An Exit that gets no reply is sent again on the next check.
"""

from __future__ import annotations

import argparse
import time

import zmq

from implementations.dwork import messages as m
from implementations.dwork.client import ApiClient, Timeout
from implementations.runtime import announce_ready, start_role


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="endpoint for the workers' heartbeats")
    parser.add_argument("--scheduler", required=True, help="the scheduler's endpoint")
    parser.add_argument("--timeout-ms", type=int, default=1500, help="silence after which a worker is down")
    parser.add_argument("--name", default="monitor")
    args = parser.parse_args(argv)
    log, history = start_role(args.name)
    context = zmq.Context()
    beats = context.socket(zmq.ROUTER)
    beats.linger = 0
    beats.bind(args.bind)
    api = ApiClient(context, args.scheduler, timeout_ms=2000)
    last_seen: dict[str, float] = {}
    down: set[str] = set()
    timeout = args.timeout_ms / 1000
    announce_ready(log, f"dwork monitor on {args.bind}")
    try:
        while True:
            if beats.poll(100):
                while True:
                    try:
                        frames = beats.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    try:
                        worker = frames[0].decode()
                    except UnicodeDecodeError:
                        history.emit(
                            "malformed", detail=f"heartbeat from a non-text identity {frames[0][:40]!r}"
                        )
                        continue
                    if worker not in last_seen or worker in down:
                        log.info("watching %s", worker)
                    beats.send_multipart([frames[0], b"WATCHING"], zmq.NOBLOCK)
                    last_seen[worker] = time.monotonic()
                    down.discard(worker)
            now = time.monotonic()
            for worker, seen in last_seen.items():
                if worker in down or now - seen < timeout:
                    continue
                try:
                    reply = api.call(m.query(m.T.Exit, location=worker))
                except (Timeout, m.IllFormed) as exc:
                    log.warning("Exit for %s not acknowledged: %s", worker, exc)
                    break
                down.add(worker)
                log.info("%s silent for %.1f s: Exit sent (%s)", worker, now - seen, m.type_name(reply.type))
                history.emit(
                    "worker_expired",
                    worker=worker,
                    reason=f"silent {now - seen:.1f} s",
                    detail=m.type_name(reply.type),
                )
    finally:
        api.close()
        context.destroy(linger=0)
        history.close()
        log.info("stopped")


if __name__ == "__main__":
    main()
