"""A dwork worker: steals ready tasks, runs them (echo), completes them.

    python -m implementations.dwork.worker --connect tcp://127.0.0.1:5555 --identity worker-1 \\
        --n 2 --work-ms 10 --monitor tcp://127.0.0.1:5556

Its identity is its ``location`` (the seed's hostname). It steals only when it holds no
task, asks for up to ``--n``, runs them one after the other and sends a Complete for each
as soon as it is done (the result is the task's body: echo), so a worker killed in the
middle loses only the tasks it had not completed. With ``--monitor`` it sends a
heartbeat there from a thread of its own, so a monitor notices when it dies or freezes;
it starts stealing once the monitor has acknowledged a heartbeat (or after
``--watch-wait-ms``), so that no task is stolen by a worker the monitor does not know.

Choices where the seed is open:
- A Steal whose reply does not come within ``--timeout-ms`` may still have assigned tasks
  to this worker; it then sends Exit for itself (it holds nothing else at that moment), so
  whatever was assigned goes back to the pool, and steals again.
- A Complete whose reply does not come is sent again; NotFound to the resend means the
  first one got through (or the task was given to another worker after an Exit).
- On SIGTERM, the tasks it stole but has not run are handed back with Transfer.
- At start it sends Exit for its own name: a former process under that name (killed and
  restarted before the monitor noticed) may still hold tasks, which go back to the pool.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
import time

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.dwork import messages as m
from implementations.dwork.client import ApiClient, Timeout
from implementations.runtime import announce_ready, start_role


def heartbeat(
    context: zmq.Context,
    endpoint: str,
    identity: str,
    every_s: float,
    stop: threading.Event,
    watched: threading.Event,
) -> None:
    """Send a heartbeat every ``every_s`` until ``stop``; set ``watched`` when the monitor acknowledges."""
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    sock.setsockopt_string(zmq.ROUTING_ID, identity)
    sock.setsockopt(zmq.SNDHWM, 10)
    sock.connect(endpoint)
    try:
        while not stop.is_set():
            # The monitor away (Again): it will notice the silence, which is the point.
            with contextlib.suppress(zmq.Again):
                sock.send(b"HEARTBEAT", zmq.NOBLOCK)
            deadline = time.monotonic() + every_s
            while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
                if sock.poll(int(left * 1000) + 1):
                    sock.recv()
                    watched.set()
    finally:
        sock.close(linger=0)


class Worker:
    def __init__(self, args: argparse.Namespace, log: logging.Logger, history: HistoryWriter) -> None:
        self.me = args.identity
        self.args = args
        self.log = log
        self.history = history
        self.context = zmq.Context()
        self.api = ApiClient(self.context, args.connect, args.timeout_ms)
        self.held: list[m.TaskMsg] = []

    def call(self, req: m.QueryMsg) -> m.QueryMsg | None:
        """The reply, or None after a timeout or a garbled reply (both logged)."""
        try:
            return self.api.call(req)
        except (Timeout, m.IllFormed) as exc:
            self.log.warning("%s", exc)
            return None

    def run(self) -> None:
        idle = self.args.idle_ms / 1000
        # A former process of ours (killed, restarted under the same name) may hold tasks.
        reply = self.call(m.query(m.T.Exit, location=self.me))
        if reply is not None and reply.type == m.T.OK:
            self.log.info("a former %s was still active: its tasks went back to the pool", self.me)
        announce_ready(self.log, f"dwork worker {self.me}")
        while True:
            reply = self.call(m.query(m.T.Steal, location=self.me, n=self.args.n))
            if reply is None:
                # The lost reply may have assigned us tasks: give back whatever we hold.
                self.call(m.query(m.T.Exit, location=self.me))
                continue
            if reply.type != m.T.Transfer:
                if reply.type not in (m.T.NotFound, m.T.Exit):
                    self.log.warning("unexpected reply to Steal: %s", m.type_name(reply.type))
                time.sleep(idle)  # nothing ready: ask again shortly
                continue
            self.held = list(reply.task)
            while self.held:
                self.run_task(self.held[0])
                self.held.pop(0)

    def run_task(self, task: m.TaskMsg) -> None:
        rid = rid_of(task.body) or ""
        self.history.emit("task_run", job=task.name, worker=self.me, rid=rid)
        self.history.emit("exec", rid=rid, worker=self.me)
        if self.args.work_ms:
            time.sleep(self.args.work_ms / 1000)
        self.history.emit("done", rid=rid, worker=self.me)
        done = m.TaskMsg(name=task.name, origin=task.origin, body=task.body)
        for attempt in range(5):
            reply = self.call(m.query(m.T.Complete, task=[done], location=self.me))
            if reply is None:
                continue
            if reply.type == m.T.NotFound and not attempt:
                self.log.info("complete %s: not assigned to us any more (requeued)", task.name)
            return

    def hand_back(self) -> None:
        """Give the tasks not yet run back to the pool (Transfer), briefly."""
        if not self.held:
            return
        names = [t.name for t in self.held]
        try:
            reply = self.api.call(m.query(m.T.Transfer, task=self.held, location=self.me), timeout_ms=1000)
            self.log.info("handed back %s: %s", names, m.type_name(reply.type))
        except (Timeout, m.IllFormed) as exc:
            self.log.warning("could not hand back %s: %s", names, exc)

    def close(self) -> None:
        self.api.close()
        self.context.destroy(linger=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", required=True, help="the scheduler's endpoint")
    parser.add_argument("--identity", required=True, help="this worker's location (hostname)")
    parser.add_argument("--n", type=int, default=2, help="tasks to ask for in one Steal")
    parser.add_argument("--work-ms", type=float, default=5.0)
    parser.add_argument("--idle-ms", type=float, default=20.0, help="pause after a Steal found nothing")
    parser.add_argument("--timeout-ms", type=int, default=30000, help="wait this long for a reply")
    parser.add_argument("--monitor", help="the monitor's endpoint, for heartbeats")
    parser.add_argument("--heartbeat-ms", type=int, default=300)
    parser.add_argument(
        "--watch-wait-ms", type=int, default=5000, help="wait this long for the monitor at start"
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    log, history = start_role(args.identity)
    worker = Worker(args, log, history)
    stop, watched = threading.Event(), threading.Event()
    beats = threading.Thread(
        target=heartbeat,
        args=(worker.context, args.monitor, args.identity, args.heartbeat_ms / 1000, stop, watched),
        daemon=True,
    )
    try:
        if args.monitor:
            beats.start()
            # Steal nothing before the monitor watches us: a worker that died unnoticed would keep its tasks.
            if not watched.wait(args.watch_wait_ms / 1000):
                log.warning(
                    "the monitor has not acknowledged us in %d ms; working anyway", args.watch_wait_ms
                )
        worker.run()
    finally:
        stop.set()
        if beats.is_alive():
            beats.join(1)
        worker.hand_back()
        worker.close()
        history.close()
        log.info("stopped")


if __name__ == "__main__":
    main()
