"""dwork with real processes on loopback: the scheduler's API answered request by request,
workers running graphs in dependency order, a killed worker's tasks put back by the
monitor's Exit, a stopped worker handing its tasks back with Transfer, a stranger's Steal
holding a task only for its lease, and the leases starting again when the scheduler itself
was frozen."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter, read_events
from harness.manifest import load_manifest
from implementations.dwork import messages as m
from implementations.dwork.client import ApiClient
from loadtests.adapters.base import Abandoned, RequestLog
from loadtests.adapters.dwork import DworkClient, graph
from tests.procs import Procs, wait_for

T = m.T


class Dwork:
    """A scheduler (and, when asked, a monitor and workers) recording to one history."""

    def __init__(
        self, procs: Procs, zctx: zmq.Context, tmp: Path, *scheduler_args: str, api_ep: str | None = None
    ) -> None:
        self.procs = procs
        self.history = tmp / "history"
        self.api_ep = api_ep or procs.endpoint()
        self.monitor_ep = procs.endpoint()
        self.start("scheduler", "implementations.dwork.scheduler", "--bind", self.api_ep, *scheduler_args)
        self.api = ApiClient(zctx, self.api_ep, timeout_ms=5000)

    def start(self, name: str, module: str, *args: str):
        proc = self.procs.python(
            name, module, *args, env={"ZCHAOS_HISTORY_DIR": str(self.history), "ZCHAOS_SRC": name}
        )
        proc.wait_log("ready")
        return proc

    def worker(self, name: str, *args: str):
        return self.start(
            name, "implementations.dwork.worker", "--connect", self.api_ep, "--identity", name,
            "--monitor", self.monitor_ep, "--heartbeat-ms", "100", *args,
        )  # fmt: skip

    def monitor(self):
        return self.start(
            "monitor", "implementations.dwork.monitor", "--bind", self.monitor_ep,
            "--scheduler", self.api_ep, "--timeout-ms", "800",
        )  # fmt: skip

    def call(self, t: int, **fields) -> m.QueryMsg:
        return self.api.call(m.query(t, **fields))

    def state(self, name: str) -> str:
        reply = self.call(T.Lookup, name=name)
        return reply.name if reply.type == T.OK else m.type_name(reply.type)

    def events(self, ev: str) -> list[dict]:
        return [e for e in read_events(self.history) if e["ev"] == ev] if self.history.exists() else []


@pytest.fixture
def dwork(procs: Procs, zctx: zmq.Context, tmp_path: Path) -> Dwork:
    return Dwork(procs, zctx, tmp_path)


def names(reply: m.QueryMsg) -> list[str]:
    return [t.name for t in reply.task]


def test_the_api_request_by_request(dwork: Dwork) -> None:
    tasks, _ = graph("g", "chain", 3, b"g|x", "test")
    assert dwork.call(T.Create, task=tasks).type == T.OK
    status = dwork.call(T.OK)
    assert status.type == T.OK and status.n == 1 and "1 ready" in status.name
    assert dwork.state("g/1") == "waiting"
    stolen = dwork.call(T.Steal, location="w1", n=5)
    assert stolen.type == T.Transfer and names(stolen) == ["g/0"]  # only the root is ready
    assert dwork.call(T.Steal, location="w2").type == T.NotFound
    # Transfer: all or nothing, only from the location that holds the task.
    assert dwork.call(T.Transfer, task=[m.TaskMsg(name="g/0")], location="w2").type == T.NotFound
    assert dwork.call(T.Transfer, task=[m.TaskMsg(name="g/0")], location="w1").type == T.OK
    assert dwork.state("g/0") == "ready"
    stolen = dwork.call(T.Steal, location="w2")
    assert names(stolen) == ["g/0"]
    # Complete: NotFound lists the tasks not assigned to that location; the others complete.
    done = [m.TaskMsg(name="g/0", body=b"g|x"), m.TaskMsg(name="g/9")]
    reply = dwork.call(T.Complete, task=done, location="w2")
    assert reply.type == T.NotFound and names(reply) == ["g/9"]
    lookup = dwork.call(T.Lookup, name="g/0")
    assert lookup.name == "done" and lookup.location == "w2" and lookup.task[0].body == b"g|x"
    assert names(dwork.call(T.Steal, location="w3")) == ["g/1"]
    # Exit puts the worker's tasks back; a second Exit is an FYI NotFound.
    assert dwork.call(T.Exit, location="w3").type == T.OK
    assert dwork.state("g/1") == "ready"
    assert dwork.call(T.Exit, location="w3").type == T.NotFound
    assert dwork.call(T.Lookup, name="nope").type == T.NotFound
    requeues = [(e["job"], e["worker"], e["reason"]) for e in dwork.events("task_requeue")]
    assert requeues == [("g/0", "w1", "transfer"), ("g/1", "w3", "exit")]


def test_a_worker_whose_steal_died_with_the_scheduler_steals_again_after_its_timeout(
    procs: Procs, zctx: zmq.Context, tmp_path: Path
) -> None:
    """The scheduler takes a worker's Steal with it as it dies (here: the test's socket reads
    it and goes away) and a new one starts on the same endpoint: the worker gives up on the
    reply after --timeout-ms, and the new scheduler's tasks run."""
    endpoint = procs.endpoint()
    dying = zctx.socket(zmq.ROUTER)
    dying.linger = 0
    dying.bind(endpoint)
    env = {"ZCHAOS_HISTORY_DIR": str(tmp_path / "history"), "ZCHAOS_SRC": "worker-1"}
    worker = procs.python(
        "worker-1", "implementations.dwork.worker", "--connect", endpoint, "--identity", "worker-1",
        "--timeout-ms", "800", env=env,
    )  # fmt: skip
    for kind in (T.Exit, T.Steal):  # its start's Exit, unanswered; then a Steal, never answered
        assert dying.poll(15000), f"the worker's {m.type_name(kind)}"
        assert m.QueryMsg.FromString(dying.recv_multipart()[-1]).type == kind
    dying.close()
    dwork = Dwork(procs, zctx, tmp_path, api_ep=endpoint)
    tasks, _ = graph("a", "chain", 2, b"a|x", "test")
    dwork.call(T.Create, task=tasks)
    wait_for(lambda: dwork.state("a/1") == "done", 10, "the graph to run on the worker")
    assert "no reply to Steal in 800 ms" in worker.text()


def test_a_client_abandons_a_graph_a_restarted_scheduler_forgot(
    procs: Procs, zctx: zmq.Context, tmp_path: Path
) -> None:
    """explore (dwork, seed 1, run 7): the scheduler killed at 3.4 s and restarted 4.3 s later
    kept none of the graphs; each client polled Lookup on its lost graph (NotFound) until its
    graph_timeout (30 s), past the run's end, and no client sent again: 'no ok reply after the
    fault' for every fault. A graph the scheduler answers NotFound for is abandoned at once."""
    dwork = Dwork(procs, zctx, tmp_path)  # no worker: the graph waits
    client = DworkClient(dwork.api_ep, {"graph_timeout_ms": 20000, "timeout_ms": 300}, "client-1", zctx)
    outcome: list[BaseException | None] = []

    def request() -> None:
        with HistoryWriter(tmp_path / "client.jsonl", "client-1") as writer:
            try:
                client.request([b"client-1:1|x"], RequestLog(writer, "client-1", 1, "client-1:1"))
                outcome.append(None)
            except Abandoned as exc:
                outcome.append(exc)

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    wait_for(lambda: dwork.events("task_create"), 10, "the client's Create")
    (scheduler,) = (p for p in procs.started if p.name == "scheduler")
    scheduler.signal(signal.SIGKILL)  # a crash: it keeps nothing
    scheduler.popen.wait(10)
    restarted = time.monotonic()
    procs.python("scheduler-2", "implementations.dwork.scheduler", "--bind", dwork.api_ep).wait_log("ready")
    thread.join(15)
    client.close()
    assert outcome and isinstance(outcome[0], Abandoned), outcome
    assert "graph forgotten" in str(outcome[0]) and time.monotonic() - restarted < 10, outcome


def test_the_manifests_workers_give_up_on_a_lost_reply_well_within_the_recovery_bound() -> None:
    """explore (dwork, seed 1, run 7): the scheduler killed and restarted 3 s later took the
    workers' Steals with it; waiting the worker's default 30 s for their replies, no task ran
    for the rest of the run (dwork_all_complete violated: 8 tasks never completed)."""
    manifest = load_manifest("dwork")
    command = list(manifest.roles["worker"].command)
    assert "--timeout-ms" in command, "the workers wait their default 30 s for a reply"
    value = command[command.index("--timeout-ms") + 1]
    timeout_s = float(manifest.options[value.removeprefix("{opt.").removesuffix("}")]) / 1000
    assert timeout_s <= manifest.promises.recovery_bound_s / 2


def test_ill_formed_requests_get_error_and_garbage_is_dropped(dwork: Dwork, zctx: zmq.Context) -> None:
    raw = zctx.socket(zmq.DEALER)
    raw.linger = 0
    raw.connect(dwork.api_ep)
    raw.send_multipart([b"no envelope"])
    raw.send_multipart([b"", b"a", b"b"])
    for data in (b"\xff\xff", m.query(T.Steal, location="w", name="x").SerializeToString(), b""):
        raw.send_multipart([b"", data])
        assert raw.poll(5000)
        _, body = raw.recv_multipart()
        assert m.parse_reply(body).type == T.Error
    assert dwork.call(T.OK).type == T.OK  # still serving
    assert len(dwork.events("malformed")) == 5


@pytest.mark.slow
def test_workers_run_graphs_in_dependency_order(dwork: Dwork) -> None:
    for w in ("worker-1", "worker-2"):
        dwork.worker(w, "--work-ms", "5", "--n", "2")
    leaves = []
    for i, shape in enumerate(("chain", "fanout", "fanin") * 3):
        tasks, graph_leaves = graph(f"g{i}", shape, 5, f"g{i}|x".encode(), "test")
        assert dwork.call(T.Create, task=tasks).type == T.OK
        leaves += graph_leaves
    wait_for(lambda: all(dwork.state(n) == "done" for n in leaves), 30, "every graph to complete")
    complete = {e["job"]: e["ts"] for e in dwork.events("task_complete")}
    assert len(complete) == 45
    deps = {e["job"]: [d for d in e.get("deps", "").split(",") if d] for e in dwork.events("task_create")}
    runs = dwork.events("task_run")
    assert len(runs) == 45
    for run in runs:
        assert all(complete[d] < run["ts"] for d in deps[run["job"]]), run
    assert {e["worker"] for e in runs} == {"worker-1", "worker-2"}


def test_killed_worker_is_noticed_and_its_tasks_run_elsewhere(dwork: Dwork) -> None:
    dwork.monitor()
    slow = dwork.worker("worker-1", "--work-ms", "60000", "--n", "2")
    tasks, _ = graph("k", "fanin", 3, b"k|x", "test")  # k/0 and k/1 ready at once
    dwork.call(T.Create, task=tasks)
    wait_for(lambda: len(dwork.events("task_run")) >= 1, 15, "worker-1 to start a task")
    slow.signal(signal.SIGKILL)
    wait_for(lambda: dwork.events("worker_expired"), 15, "the monitor to mark worker-1 down")
    dwork.worker("worker-2", "--work-ms", "5")
    wait_for(lambda: dwork.state("k/2") == "done", 20, "the graph to complete on worker-2")
    assert sorted(e["job"] for e in dwork.events("task_requeue")) == ["k/0", "k/1"]
    assert {e["worker"] for e in dwork.events("task_complete")} == {"worker-2"}
    assert len(dwork.events("task_complete")) == 3


@pytest.mark.slow
def test_stopped_worker_hands_back_what_it_had_not_run(dwork: Dwork) -> None:
    slow = dwork.worker("worker-1", "--work-ms", "60000", "--n", "3")
    tasks, _ = graph("s", "fanin", 4, b"s|x", "test")
    dwork.call(T.Create, task=tasks)
    wait_for(lambda: dwork.events("task_run"), 15, "worker-1 to start a task")
    assert slow.stop() == 0
    assert sorted(e["job"] for e in dwork.events("task_requeue")) == ["s/0", "s/1", "s/2"]
    assert {e["reason"] for e in dwork.events("task_requeue")} == {"transfer"}
    assert dwork.call(T.OK).n == 3


def test_a_strangers_steal_holds_a_task_only_for_its_lease(
    procs: Procs, zctx: zmq.Context, tmp_path: Path
) -> None:
    """A peer that is no worker (the monitor never heard of it) sends one Steal, gets the
    graph's root and goes silent. Before the lease the graph waited for it for ever (issue
    34 part 7: 1 fuzz run in 20); now the root goes back to the pool when its lease runs out
    and a real worker completes the graph."""
    lease_ms = 800
    dwork = Dwork(procs, zctx, tmp_path, "--lease-ms", str(lease_ms))
    tasks, _ = graph("h", "chain", 2, b"h|x", "test")
    dwork.call(T.Create, task=tasks)
    stranger = zctx.socket(zmq.DEALER)
    stranger.linger = 0
    stranger.setsockopt(zmq.ROUTING_ID, b"junk-5eed")
    stranger.connect(dwork.api_ep)
    stranger.send_multipart([b"", m.query(T.Steal, location="junk-5eed").SerializeToString()])
    assert stranger.poll(5000)
    stolen_at = time.monotonic()
    taken = m.parse_reply(stranger.recv_multipart()[-1])
    assert taken.type == T.Transfer and names(taken) == ["h/0"]
    dwork.monitor()
    dwork.worker("worker-1", "--work-ms", "5")
    wait_for(lambda: dwork.state("h/1") == "done", lease_ms / 1000 + 10, "worker-1 to complete the graph")
    took = time.monotonic() - stolen_at
    requeues = [(e["job"], e["worker"], e["reason"]) for e in dwork.events("task_requeue")]
    assert requeues == [("h/0", "junk-5eed", "lease")]
    assert {(e["job"], e["worker"]) for e in dwork.events("task_complete")} == {
        ("h/0", "worker-1"),
        ("h/1", "worker-1"),
    }
    assert took >= lease_ms / 1000  # not before the lease ran out
    # The stranger's Complete, should it ever come, no longer counts.
    late = dwork.call(T.Complete, task=[m.TaskMsg(name="h/0", body=b"junk")], location="junk-5eed")
    assert late.type == T.NotFound
    assert dwork.call(T.Lookup, name="h/0").location == "worker-1"


@pytest.mark.parametrize("lease_s", [None, 2.0])
def test_the_lease_runs_from_each_steal(tmp_path: Path, lease_s: float | None) -> None:
    """The scheduler alone, its clock given: without a lease (the seed's scheduler) a Steal
    holds its task however long; with one, the task is back at the lease's end, not before,
    and a lease of an earlier assignment never takes a task from its new holder."""
    import logging

    from contract.history import HistoryWriter
    from implementations.dwork.scheduler import Scheduler

    writer = HistoryWriter(tmp_path / "scheduler.jsonl", "scheduler")
    sched = Scheduler(logging.getLogger("test"), writer, lease_s)
    tasks, _ = graph("u", "chain", 2, b"u|x", "test")
    sched.create(m.query(T.Create, task=tasks))
    assert names(sched.steal(m.query(T.Steal, location="stranger"), now=100.0)) == ["u/0"]
    assert sched.expire(now=101.9) == []
    if lease_s is None:
        assert sched.next_expiry() is None and sched.expire(now=1e9) == []
        assert sched.tasks["u/0"].location == "stranger"
        return
    assert sched.expire(now=102.0) == ["u/0"] and sched.tasks["u/0"].state == "ready"
    assert names(sched.steal(m.query(T.Steal, location="w1"), now=102.5)) == ["u/0"]
    assert sched.expire(now=104.0) == []  # w1's lease runs to 104.5
    done = sched.complete(m.query(T.Complete, task=[m.TaskMsg(name="u/0")], location="w1"))
    assert done.type == T.OK
    assert sched.expire(now=1e9) == []  # completed: its lease no longer matters
    writer.close()


def test_a_lease_starts_again_after_the_scheduler_itself_was_stopped(tmp_path: Path) -> None:
    import logging

    from contract.history import HistoryWriter
    from implementations.dwork.scheduler import Scheduler

    writer = HistoryWriter(tmp_path / "scheduler.jsonl", "scheduler")
    sched = Scheduler(logging.getLogger("test"), writer, 2.0)
    tasks, _ = graph("r", "fanout", 3, b"r|x", "test")
    sched.create(m.query(T.Create, task=tasks))
    assert names(sched.steal(m.query(T.Steal, location="w1"), now=100.0)) == ["r/0"]
    assert sched.renew(now=110.0) == 1  # woke at 110: the holder gets 2 s from then
    assert sched.expire(now=111.9) == [] and sched.expire(now=112.0) == ["r/0"]
    assert sched.renew(now=120.0) == 0  # nothing held
    writer.close()


def test_completes_that_waited_for_a_frozen_scheduler_still_count(
    procs: Procs, zctx: zmq.Context, tmp_path: Path
) -> None:
    """The scheduler frozen (SIGSTOP) for longer than the lease while two workers' Completes
    wait to be read: woken, it reads them as Completes, rather than putting the tasks back
    because their leases ran out while it could hear nobody."""
    lease_ms = 400
    dwork = Dwork(procs, zctx, tmp_path, "--lease-ms", str(lease_ms))
    tasks, _ = graph("z", "fanout", 3, b"z|x", "test")  # z/1 and z/2 ready once z/0 is done
    dwork.call(T.Create, task=tasks)
    assert names(dwork.call(T.Steal, location="w0")) == ["z/0"]
    assert dwork.call(T.Complete, task=[m.TaskMsg(name="z/0", body=b"z|x")], location="w0").type == T.OK
    peers = {}
    for w in ("w1", "w2"):
        peer = zctx.socket(zmq.DEALER)
        peer.linger = 0
        peer.connect(dwork.api_ep)
        peer.send_multipart([b"", m.query(T.Steal, location=w).SerializeToString()])
        assert peer.poll(5000)
        peers[w] = (peer, names(m.parse_reply(peer.recv_multipart()[-1])))
    assert sorted(n for _, got in peers.values() for n in got) == ["z/1", "z/2"]
    scheduler = dwork.procs.started[0]
    scheduler.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        for w, (peer, got) in peers.items():
            done = m.query(T.Complete, task=[m.TaskMsg(name=n, body=b"z|x") for n in got], location=w)
            peer.send_multipart([b"", done.SerializeToString()])
        # Time passing is the point here, not a synchronisation: three leases' worth frozen.
        wait_for(lambda: time.monotonic() - frozen_at > 3 * lease_ms / 1000, 10, "three leases to pass")
    finally:
        scheduler.signal(signal.SIGCONT)
    for peer, _ in peers.values():
        assert peer.poll(5000)
        assert m.parse_reply(peer.recv_multipart()[-1]).type == T.OK
    assert dwork.events("task_requeue") == []
    # Which of z/1, z/2 each worker stole is the scheduler's choice: each completes its own.
    stolen = {n: w for w, (_, got) in peers.items() for n in got}
    assert {e["job"]: e["worker"] for e in dwork.events("task_complete")} == {"z/0": "w0", **stolen}
    assert "tasks held get a full lease again" in scheduler.text()
