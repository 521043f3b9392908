"""The dwork scheduler: a task graph served over ZeroMQ with QueryMsg (the seed's API).

    python -m implementations.dwork.scheduler --bind tcp://127.0.0.1:5555 [--lease-ms 5000]

One ROUTER socket; every request ``[peer, '', QueryMsg]`` gets one reply in the same
envelope (REQ clients, or DEALERs that add the empty frame). A request that does not
parse, or carries a component the seed does not list for its type, is answered with
Error; anything without an envelope is dropped. On SIGTERM the scheduler answers the
requests already waiting with Exit ("server is exiting") and stops.

Choices where the seed is open (see also ``messages.py``):
- A dependency on a task not (yet) created waits for it to be created and completed.
  Cycles are not detected: tasks in one wait forever (``dwork_all_complete`` shows them).
- Create of a task that exists adds the listed dependencies that are not complete; a task
  already assigned or complete cannot wait any more and keeps its state (the deps are
  ignored and logged). Completed tasks are remembered for dependencies and Lookup.
- Steal marks its location active; Exit marks it down and puts its assigned tasks back in
  the ready pool (NotFound, as an FYI, when it was not active; its tasks move anyway).
- A Steal assigns its tasks for a lease (``--lease-ms``, default 5 s): a task neither
  completed nor transferred by then goes back to the ready pool (``task_requeue`` with
  reason ``lease``), and a later Complete or Transfer of it from that location is NotFound.
  The seed has no lease, so any peer that sent one Steal and went away (a stranger that is
  no worker, a worker the monitor never watched, a Steal whose reply was lost) held its
  tasks, and the graphs waiting on them, for ever; the monitor's Exit only reaches the
  workers that send it heartbeats. The lease is longer than the monitor's timeout, so a
  watched worker that dies is still put down by Exit first. A lease counts the time the
  scheduler could hear its holder: when the scheduler itself was stopped (frozen, starved:
  it woke ``STALL_S`` later than it asked), every task held gets a full lease again, so the
  Completes that waited for it still count.
- Complete accepts the tasks assigned to the location; those that are not (unknown,
  assigned elsewhere, already complete) come back in a NotFound reply and stay as they are.
- Transfer is all or nothing: if any task is not assigned to the location, NotFound and no
  change; otherwise each task goes back to the pool with its listed deps added.
- Ready tasks are handed out first come, first served.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import zmq

from contract.history import HistoryWriter
from contract.payload import rid_of
from implementations.dwork import messages as m
from implementations.runtime import announce_ready, start_role

WAITING, READY, ASSIGNED, DONE = "waiting", "ready", "assigned", "done"


@dataclass
class Task:
    name: str
    origin: str
    body: bytes
    deps: set[str] = field(default_factory=set)  # not yet complete
    succ: set[str] = field(default_factory=set)  # tasks waiting for this one
    state: str = WAITING
    location: str = ""
    result: bytes = b""
    lease: int = 0  # the assignment it is held under (Scheduler.leases); 0 when not assigned


#: How long a Steal holds its tasks by default (--lease-ms): beyond the monitor's timeout
#: (manifest.toml down_after_ms), far beyond the work of one task.
LEASE_MS = 5000
#: The scheduler woke this much later than it asked: it was stopped itself (Scheduler.renew).
STALL_S = 0.25


class Scheduler:
    def __init__(
        self, log: logging.Logger, history: HistoryWriter, lease_s: float | None = LEASE_MS / 1000
    ) -> None:
        self.log = log
        self.history = history
        self.lease_s = lease_s  # None: no lease, as the seed (a task stays with its stealer)
        # (deadline, assignment, task): a task is due back when its deadline passed and it is
        # still held under that assignment; entries of tasks completed or moved since are skipped.
        self.leases: list[tuple[float, int, str]] = []
        self.assignments = 0
        self.tasks: dict[str, Task] = {}
        self.waiters: dict[str, set[str]] = {}  # name of a task not created yet -> tasks waiting for it
        self.ready: deque[str] = deque()
        self.assigned: dict[str, set[str]] = {}  # location -> names
        self.active: set[str] = set()

    # -- the API -------------------------------------------------------------------

    def handle(self, req: m.QueryMsg) -> m.QueryMsg:
        return {
            m.T.Create: self.create,
            m.T.Steal: self.steal,
            m.T.Complete: self.complete,
            m.T.Transfer: self.transfer,
            m.T.Lookup: self.lookup,
            m.T.Exit: self.exit,
            m.T.OK: self.status,
        }[req.type](req)

    def create(self, req: m.QueryMsg) -> m.QueryMsg:
        for tm in req.task:
            task = self.tasks.get(tm.name)
            if task is None:
                task = Task(tm.name, tm.origin, tm.body)
                self.tasks[tm.name] = task
                for name in self.waiters.pop(tm.name, ()):
                    task.succ.add(name)
                self.history.emit(
                    "task_create", job=tm.name, deps=",".join(tm.deps), rid=rid_of(tm.body) or "",
                )  # fmt: skip
            elif task.state in (ASSIGNED, DONE):
                if tm.deps:
                    self.log.info(
                        "create: %s is already %s; deps %s ignored", tm.name, task.state, list(tm.deps)
                    )
                continue
            else:
                self.history.emit("task_create", job=tm.name, deps=",".join(tm.deps), detail="more deps")
            self._add_deps(task, tm.deps)
            self._settle(task)
        return m.query(m.T.OK)

    def steal(self, req: m.QueryMsg, now: float | None = None) -> m.QueryMsg:
        where = req.location
        self.active.add(where)
        given: list[m.TaskMsg] = []
        now = time.monotonic() if now is None else now
        while self.ready and len(given) < (req.n if req.HasField("n") else 1):
            task = self.tasks[self.ready.popleft()]
            task.state, task.location = ASSIGNED, where
            self.assignments += 1
            task.lease = self.assignments
            if self.lease_s is not None:
                heapq.heappush(self.leases, (now + self.lease_s, task.lease, task.name))
            self.assigned.setdefault(where, set()).add(task.name)
            self.history.emit("task_assign", job=task.name, worker=where)
            given.append(m.TaskMsg(name=task.name, origin=task.origin, body=task.body))
        if not given:
            return m.query(m.T.NotFound)
        return m.query(m.T.Transfer, task=given)

    def complete(self, req: m.QueryMsg) -> m.QueryMsg:
        where = req.location
        missing = []
        for tm in req.task:
            task = self.tasks.get(tm.name)
            if task is None or task.state != ASSIGNED or task.location != where:
                missing.append(m.TaskMsg(name=tm.name))
                continue
            self.assigned[where].discard(task.name)
            task.state, task.result = DONE, tm.body
            self.history.emit("task_complete", job=task.name, worker=where)
            for name in task.succ:
                succ = self.tasks[name]
                succ.deps.discard(task.name)
                self._settle(succ)
        if missing:
            return m.query(m.T.NotFound, task=missing)
        return m.query(m.T.OK)

    def transfer(self, req: m.QueryMsg) -> m.QueryMsg:
        where = req.location
        mine = self.assigned.get(where, set())
        if any(tm.name not in mine for tm in req.task):
            return m.query(m.T.NotFound)
        for tm in req.task:
            self._requeue(self.tasks[tm.name], "transfer", tm.deps)
        return m.query(m.T.OK)

    def lookup(self, req: m.QueryMsg) -> m.QueryMsg:
        task = self.tasks.get(req.name)
        if task is None:
            return m.query(m.T.NotFound)
        reply = m.query(m.T.OK, name=task.state)
        if task.location:
            reply.location = task.location
        if task.state == DONE:
            reply.task.append(m.TaskMsg(name=task.name, origin=task.origin, body=task.result))
        return reply

    def exit(self, req: m.QueryMsg) -> m.QueryMsg:
        where = req.location
        was_active = where in self.active
        self.active.discard(where)
        for name in sorted(self.assigned.pop(where, set())):
            self._requeue(self.tasks[name], "exit", ())
        if was_active:
            self.log.info("worker %s marked down", where)
        return m.query(m.T.OK if was_active else m.T.NotFound)

    def status(self, req: m.QueryMsg) -> m.QueryMsg:
        counts = {s: 0 for s in (WAITING, READY, ASSIGNED, DONE)}
        for task in self.tasks.values():
            counts[task.state] += 1
        text = ", ".join(f"{n} {s}" for s, n in counts.items()) + f"; {len(self.active)} active workers"
        return m.query(m.T.OK, name=text, n=len(self.ready))

    # -- leases --------------------------------------------------------------------

    def next_expiry(self) -> float | None:
        """When the earliest lease runs out (time.monotonic), None when no task is leased."""
        return self.leases[0][0] if self.leases else None

    def renew(self, now: float | None = None) -> int:
        """Give every task held a full lease from ``now``: the scheduler itself was stopped, so
        its holders could not be heard (their Completes may be waiting to be read). How many."""
        if self.lease_s is None:
            return 0
        now = time.monotonic() if now is None else now
        self.leases = [
            (now + self.lease_s, self.tasks[name].lease, name)
            for names in self.assigned.values()
            for name in names
            if self.tasks[name].state == ASSIGNED
        ]
        heapq.heapify(self.leases)
        return len(self.leases)

    def expire(self, now: float | None = None) -> list[str]:
        """Put back in the pool every task whose lease ran out while its stealer held it; their names."""
        now = time.monotonic() if now is None else now
        back = []
        while self.leases and self.leases[0][0] <= now:
            _, lease, name = heapq.heappop(self.leases)
            task = self.tasks[name]
            if task.state != ASSIGNED or task.lease != lease:
                continue  # completed, transferred or put back since that Steal
            self.log.info(
                "%s held by %s for %.1f s without a Complete: back to the pool", name, task.location,
                self.lease_s or 0,
            )  # fmt: skip
            self._requeue(task, "lease", ())
            back.append(name)
        return back

    # -- the graph -----------------------------------------------------------------

    def _add_deps(self, task: Task, deps: Iterable[str]) -> None:
        for dep in deps:
            if dep == task.name:
                continue
            other = self.tasks.get(dep)
            if other is None:
                self.waiters.setdefault(dep, set()).add(task.name)
                task.deps.add(dep)
            elif other.state != DONE:
                other.succ.add(task.name)
                task.deps.add(dep)

    def _settle(self, task: Task) -> None:
        """Make a waiting task ready once nothing holds it (and a ready one wait if something does)."""
        if task.state == WAITING and not task.deps:
            task.state = READY
            self.ready.append(task.name)
        elif task.state == READY and task.deps:
            task.state = WAITING
            self.ready.remove(task.name)

    def _requeue(self, task: Task, reason: str, deps: Iterable[str]) -> None:
        self.assigned.get(task.location, set()).discard(task.name)
        self.history.emit("task_requeue", job=task.name, worker=task.location, reason=reason)
        task.state, task.location, task.lease = WAITING, "", 0
        self._add_deps(task, deps)
        self._settle(task)


def serve(sock: zmq.Socket, scheduler: Scheduler, log: logging.Logger, history: HistoryWriter) -> None:
    while True:
        # Wake for the next lease to run out even when no request comes (a held task's
        # stealer may be the only peer left).
        due = scheduler.next_expiry()
        asked = time.monotonic()
        wait = -1 if due is None else max(0, int((due - asked) * 1000) + 1)
        if not sock.poll(wait):
            expire(scheduler, log, asked, wait)
            continue
        frames = sock.recv_multipart()
        try:
            cut = frames.index(b"")
        except ValueError:
            cut = -1
        if cut < 1 or cut != len(frames) - 2:
            log.warning("dropped a message without an envelope and one body frame (%d frames)", len(frames))
            history.emit("malformed", detail=f"{len(frames)} frames, no envelope and one body")
            expire(scheduler, log, asked, wait)
            continue
        try:
            req = m.parse_request(frames[-1])
        except m.IllFormed as exc:
            log.warning("ill-formed request: %s", exc)
            history.emit("malformed", detail=str(exc)[:300])
            reply = m.query(m.T.Error, name=str(exc)[:200])
        else:
            reply = scheduler.handle(req)
        sock.send_multipart([*frames[:-1], reply.SerializeToString()])
        expire(scheduler, log, asked, wait)


def expire(scheduler: Scheduler, log: logging.Logger, asked: float, wait_ms: int) -> None:
    """The leases run out, unless the scheduler woke ``STALL_S`` later than the ``wait_ms`` it
    asked at ``asked`` (and handled what woke it): then it was stopped itself, and they start
    again instead (Scheduler.renew)."""
    late = time.monotonic() - asked - wait_ms / 1000
    if wait_ms >= 0 and late > STALL_S:
        held = scheduler.renew()
        log.info("woke %.1f s late (stopped itself): the %d tasks held get a full lease again", late, held)
    scheduler.expire()


def say_exit(sock: zmq.Socket, grace_s: float = 0.2) -> None:
    """Answer what is already waiting with Exit ("server is exiting")."""
    deadline = time.monotonic() + grace_s
    exiting = m.query(m.T.Exit).SerializeToString()
    while time.monotonic() < deadline and sock.poll(20):
        frames = sock.recv_multipart()
        if b"" in frames[1:]:
            sock.send_multipart([*frames[: frames.index(b"") + 1], exiting])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="endpoint to bind (clients and workers)")
    parser.add_argument("--name", default="scheduler", help="name in logs and the history")
    parser.add_argument(
        "--lease-ms", type=int, default=LEASE_MS,
        help="a stolen task not completed in this long goes back to the pool (0: held until Exit)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.lease_ms < 0:
        parser.error("--lease-ms must be 0 or more")
    log, history = start_role(args.name)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind(args.bind)
    announce_ready(log, f"dwork scheduler on {args.bind}")
    try:
        lease_s = args.lease_ms / 1000 if args.lease_ms else None
        serve(sock, Scheduler(log, history, lease_s), log, history)
    finally:
        try:
            say_exit(sock)
        finally:
            ctx.destroy(linger=0)
            history.close()
            log.info("stopped")


if __name__ == "__main__":
    main()
