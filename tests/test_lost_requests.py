"""Loss that retries cannot hide: the no-resend client mode (reply_deadline_s, of the
asynchronous MDP and of the Lazy Pirate client), the ``lost`` event, the ``requeue``
promise and how ``no_lost`` and ``steady_state`` judge them.

Checker tests run on small hand-made histories (real Spark); the adapter test runs
against a ROUTER in the test that never answers.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import zmq

from contract.errors import SetupError
from contract.history import HistoryWriter, read_events
from harness.manifest import load_manifest
from harness.runner import client_budget_s
from harness.scenario import load_scenario
from loadtests.adapters.base import Lost, RequestLog
from loadtests.adapters.lazy_pirate import LazyPirateClient
from loadtests.adapters.mdp_async import MdpAsyncClient
from reports.checkers import VIOLATED, FaultWindow
from tests.procs import ROOT, wait_for
from tests.test_checkers import check, clean_history, make_ctx, request, t

# --- checkers --------------------------------------------------------------------------


def lost(cid: str, seq: int, at: float) -> dict[str, Any]:
    rid = f"{cid}:{seq}"
    return {"ts": t(at), "src": cid, "ev": "lost", "cid": cid, "seq": seq, "rid": rid, "reason": "deadline"}


def with_losses() -> list[dict[str, Any]]:
    """Clean traffic plus two requests a no-resend client gave up on: one sent during a
    worker kill (20-21 s), one in quiet time."""
    events = clean_history()
    events += [*request("client-5", 1, at=20.5, reply=False), lost("client-5", 1, at=25)]
    events += [*request("client-5", 2, at=40, reply=False), lost("client-5", 2, at=48)]
    events += request("client-5", 3, at=50)
    return events


KILL = FaultWindow(1, "kill", "worker-1", t(20), t(21))


def test_no_lost_counts_a_request_past_its_deadline_as_lost_where_requeue_is_promised(spark):
    result = check("no_lost", make_ctx(spark, with_losses(), faults=[KILL], requeue=True))
    assert (result.status, result.violations) == (VIOLATED, 2)
    assert result.figures["lost_past_deadline"] == 2
    assert result.figures["indeterminate"] == 0  # lost is decided, whatever the end of the run
    assert [e["rid"] for e in result.examples] == ["client-5:1", "client-5:2"]
    assert result.examples[0]["problem"] == "lost: deadline"  # the client's reason
    assert "2 past their reply deadline" in result.summary


def test_no_lost_without_requeue_reports_a_loss_during_a_fault_but_counts_only_the_other(spark):
    result = check("no_lost", make_ctx(spark, with_losses(), faults=[KILL]))
    assert (result.status, result.violations) == (VIOLATED, 1)
    assert result.examples[0]["rid"] == "client-5:2"
    assert result.figures["lost_in_faults_unpromised"] == 1
    assert "requeue is not promised" in result.summary


def test_no_lost_without_requeue_reports_a_loss_within_the_expiry_after_a_fault(spark):
    """explore, stall-queue's correct twin (seed 3, 2026-12-04): the queue came back from a
    5.3 s restart as a worker's 5 s of patience ran out; the new queue learnt the identity the
    worker was about to drop from its last heartbeat and handed it a request sent 0.3 s
    after the return. Without requeue only a resend saves that. Past the expiry, or with
    none declared, the loss counts."""
    for stop, promises, violations in (
        (39.7, {"expiry_ms": 5000}, 1),
        (34.0, {"expiry_ms": 5000}, 2),
        (39.7, {}, 2),
        (39.7, {"expiry_ms": 5000, "requeue": True}, 2),
    ):
        restart = FaultWindow(8, "restart", "queue", t(30), t(stop))
        result = check("no_lost", make_ctx(spark, with_losses(), faults=[restart], **promises))
        assert result.violations == violations, (stop, promises, result)
        assert result.figures["lost_in_faults_unpromised"] == 2 - violations


BROKER_KILL = FaultWindow(2, "kill", "broker", t(20), t(21))


def broker_ctx(spark, **promises: Any):
    ctx = make_ctx(spark, with_losses(), faults=[BROKER_KILL], requeue=True, **promises)
    ctx.meta["manifest"]["endpoints"] = {"frontend": "broker", "backend": "broker"}
    ctx.meta["processes"] = {"broker": "broker", "worker-1": "worker"}
    return ctx


def test_no_lost_reports_what_a_dead_broker_held_unless_it_promises_to_survive_it(spark):
    """requeue is about a dead worker's requests: a killed broker takes what it held with
    it. The stock restart scenarios once called a correct broker (7.5 s expiry) VIOLATED."""
    result = check("no_lost", broker_ctx(spark))
    assert (result.status, result.violations) == (VIOLATED, 1)
    assert result.examples[0]["rid"] == "client-5:2"  # the one in quiet time still counts
    assert result.figures["lost_in_broker_outages"] == 1
    assert result.figures["lost_in_faults_unpromised"] == 0
    assert "1 more held by a broker that died, not counted" in result.summary
    # a broker that promises to survive any outage (durable) answers for what it held
    promised = check("no_lost", broker_ctx(spark, survives=["outage"]))
    assert (promised.status, promised.violations) == (VIOLATED, 2)
    assert promised.figures["lost_in_broker_outages"] == 0


def test_no_lost_reports_a_request_a_cut_link_dropped_unless_the_cut_outlasts_the_expiry(spark):
    """requeue is about a dead worker: a request dispatched into a 2 s disconnect of a
    worker's link dies on the wire while the worker lives on (a correct Majordomo was
    VIOLATED by explore's schedules); a cut longer than the expiry (5 s here) expires the
    worker, and then the promise covers what it held. A cut of the clients' own link loses
    what no broker ever saw, however long."""
    brief = FaultWindow(3, "disconnect", "link:worker-1", t(20), t(22))
    result = check("no_lost", make_ctx(spark, with_losses(), faults=[brief], requeue=True))
    assert (result.status, result.violations) == (VIOLATED, 1)
    assert result.examples[0]["rid"] == "client-5:2"  # the one in quiet time still counts
    assert result.figures["lost_in_transit"] == 1
    assert "1 more in flight as a link fault dropped data, not counted" in result.summary
    long_cut = FaultWindow(4, "partition", "link:worker-1", t(20), t(30))
    counted = check("no_lost", make_ctx(spark, with_losses(), faults=[long_cut], requeue=True))
    assert (counted.violations, counted.figures["lost_in_transit"]) == (2, 0)
    clients_cut = FaultWindow(5, "partition", "link:clients", t(20), t(30))
    on_clients = check("no_lost", make_ctx(spark, with_losses(), faults=[clients_cut], requeue=True))
    assert (on_clients.violations, on_clients.figures["lost_in_transit"]) == (1, 1)
    # a slow link loses nothing: no excuse
    slow = FaultWindow(6, "latency", "link:worker-1", t(20), t(22))
    assert check("no_lost", make_ctx(spark, with_losses(), faults=[slow], requeue=True)).violations == 2
    # sent 10 ms after a cut healed (explore, stall-queue seed 1, 2026-12-04): the proxy closed
    # the cut connections then, and the request went with them; a second after, it counts
    for stop, violations in ((39.99, 1), (39.0, 2)):
        healed = FaultWindow(7, "partition", "link:worker-1", t(38), t(stop))
        result = check("no_lost", make_ctx(spark, with_losses(), faults=[healed], requeue=True))
        assert result.violations == violations, (stop, result)


def test_steady_state_counts_a_lost_request_outside_fault_windows(spark):
    result = check("steady_state", make_ctx(spark, with_losses(), faults=[KILL]))
    assert result.status == VIOLATED
    assert result.figures["lost"] == 1  # the one at 48 s; 25 s lies in the kill's grace
    assert [e["ev"] for e in result.examples] == ["lost"]


# --- manifest and scenario --------------------------------------------------------------


def test_the_noresend_flavour_promises_requeue_and_budgets_its_deadline() -> None:
    manifest = load_manifest("majordomo-noresend")
    assert manifest.promises.requeue is True
    # its deadline comes from the broker's timers under the scenario's fault plan
    assert manifest.clients[1].options["reply_deadline_s"] == "auto"
    scenario = load_scenario(ROOT / "scenarios" / "majordomo-noresend-kill-busy-worker.toml")
    sync, noresend = scenario.load.clients  # resending clients and no-resend ones in one run
    assert "reply_deadline_s" not in sync.options
    # two kills 6 s apart, each holding a request one 3 s expiry, then the 10 s recovery bound
    assert noresend.options["reply_deadline_s"] == 16.0 >= manifest.promises.recovery_bound_s
    assert client_budget_s(noresend) == noresend.options["reply_deadline_s"]
    assert load_manifest("majordomo").promises.requeue is False


def test_a_deadline_below_the_recovery_bound_is_refused_naming_the_key(tmp_path: Path) -> None:
    text = (ROOT / "implementations" / "majordomo" / "manifest-noresend.toml").read_text()
    bad = tmp_path / "m.toml"
    bad.write_text(text.replace('reply_deadline_s = "auto"', "reply_deadline_s = 4.0").replace(
        "{manifest_dir}", str(ROOT)))  # fmt: skip
    with pytest.raises(SetupError) as caught:
        load_manifest(bad)
    assert "clients[1].options" in str(caught.value) and "recovery_bound_s = 10" in str(caught.value)
    scenario = tmp_path / "s.toml"
    scenario.write_text('implementation = "majordomo-noresend"\n[load]\nclient = { reply_deadline_s = 3 }\n')
    with pytest.raises(SetupError) as caught:
        load_scenario(scenario)
    assert "load.client" in str(caught.value) and "shorter than [promises] recovery_bound_s" in str(
        caught.value
    )


# --- the adapter ------------------------------------------------------------------------


def test_a_noresend_client_sends_once_and_records_lost_after_its_deadline(zctx, tmp_path: Path) -> None:
    silent = zctx.socket(zmq.ROUTER)  # a broker that takes the request and never answers
    silent.linger = 0
    endpoint = f"tcp://127.0.0.1:{silent.bind_to_random_port('tcp://127.0.0.1')}"
    with HistoryWriter(tmp_path / "c.jsonl", "client-1") as writer:
        client = MdpAsyncClient(endpoint, {"reply_deadline_s": 0.5, "timeout_ms": 100}, "client-1", zctx)
        client.submit([b"client-1:1|x"], RequestLog(writer, "client-1", 1, "client-1:1"))
        assert silent.poll(5000)
        request = silent.recv_multipart()
        outcome: list = []
        wait_for(lambda: outcome.extend(client.poll(0.1)) or outcome, 10, "the deadline to run out")
        assert isinstance(outcome[0][1], Lost) and "0.5 s reply deadline" in outcome[0][1].reason
        assert not silent.poll(200), "a no-resend client resent"  # timeout_ms (100) is unused
        silent.send_multipart([request[0], b"", b"MDPC01", b"echo", request[4]])  # too late
        wait_for(lambda: client.poll(0.1) == [] and any(e["ev"] == "unexpected" for e in
                 read_events(writer.path)), 10, "the late reply recorded")  # fmt: skip
        sends = [e for e in read_events(writer.path) if e["ev"] == "send"]
        assert [e["attempt"] for e in sends] == [1]
        client.close()


def test_a_noresend_lazy_pirate_client_waits_past_a_late_reply_and_never_resends(
    zctx, tmp_path: Path
) -> None:
    """Before: the Lazy Pirate client always resent, so a request a queue forgot was never lost."""
    server = zctx.socket(zmq.ROUTER)  # a queue that answers the first request too late
    server.linger = 0
    endpoint = f"tcp://127.0.0.1:{server.bind_to_random_port('tcp://127.0.0.1')}"
    options = {"reply_deadline_s": 0.5, "timeout_ms": 100, "retries": 3}
    with HistoryWriter(tmp_path / "c.jsonl", "client-1") as writer:
        client = LazyPirateClient(endpoint, options, "client-1", zctx)
        with pytest.raises(Lost, match=r"0\.5 s reply deadline"):
            client.request([b"client-1:1|x"], RequestLog(writer, "client-1", 1, "client-1:1"))
        assert server.poll(5000)
        first = server.recv_multipart()  # sent once, as a REQ socket frames it
        assert first[1:] == [b"", b"client-1:1|x"]
        assert not server.poll(200), "a no-resend client resent"
        server.send_multipart(first)  # the late reply, then the next request's own
        answered: list = []

        def answer() -> None:
            request = server.recv_multipart()
            server.send_multipart(request)
            answered.append(request)

        helper = threading.Thread(target=lambda: server.poll(5000) and answer())
        helper.start()
        reply = client.request([b"client-1:2|y"], RequestLog(writer, "client-1", 2, "client-1:2"))
        helper.join(10)
        assert reply.frames == [b"client-1:2|y"]
        events = list(read_events(writer.path))
        assert [(e["ev"], e["seq"]) for e in events] == [("send", 1), ("send", 2), ("unexpected", 2)]
        assert events[2]["got_rid"] == "client-1:1"  # the late reply, named
        client.close()


def test_a_noresend_client_of_a_pair_asks_the_other_server_after_a_lost_request(zctx, tmp_path: Path) -> None:
    """A lost request is never resent, but the next one goes to the next endpoint: a client
    left on a server that failed over was never served again (stall-hold-star's twin)."""
    silent, serving = zctx.socket(zmq.ROUTER), zctx.socket(zmq.ROUTER)
    silent.linger = serving.linger = 0
    endpoints = [f"tcp://127.0.0.1:{s.bind_to_random_port('tcp://127.0.0.1')}" for s in (silent, serving)]
    options = {"reply_deadline_s": 0.5, "timeout_ms": 100, "retries": 3}
    with HistoryWriter(tmp_path / "c.jsonl", "client-1") as writer:
        client = LazyPirateClient(endpoints, options, "client-1", zctx)
        with pytest.raises(Lost):
            client.request([b"client-1:1|x"], RequestLog(writer, "client-1", 1, "client-1:1"))
        assert silent.poll(5000) and silent.recv_multipart()[2:] == [b"client-1:1|x"]
        answered = threading.Thread(
            target=lambda: serving.poll(5000) and serving.send_multipart(serving.recv_multipart())
        )
        answered.start()
        reply = client.request([b"client-1:2|y"], RequestLog(writer, "client-1", 2, "client-1:2"))
        answered.join(10)
        assert reply.frames == [b"client-1:2|y"] and reply.endpoint == endpoints[1]
        assert not silent.poll(200), "the lost request was resent"
        sends = [e for e in read_events(writer.path) if e["ev"] == "send"]
        assert [(e["seq"], e["endpoint"]) for e in sends] == [(1, endpoints[0]), (2, endpoints[1])]
        client.close()
