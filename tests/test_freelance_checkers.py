"""The Freelance checkers on hand-made histories (real Spark): freelance_failover_served and
freelance_dead_server_avoided, each held, violated and undecidable."""

from __future__ import annotations

from typing import Any

from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckContext, FaultWindow, registry
from reports.history_frame import events_frame
from tests.history import T0, t

LOAD_S = 30
SERVERS = ("server1", "server2", "server3")


def request(cid: str, seq: int, at: float, endpoints: list[str], *, answered: float | None = 0.002):
    """A request sent at ``at`` s to each of ``endpoints`` in turn (1 s apart), answered
    ``answered`` s after its first send by the last of them (None: abandoned after 3 s)."""
    rid = f"{cid}:{seq}"
    base = {"src": cid, "cid": cid, "seq": seq, "rid": rid}
    events: list[dict[str, Any]] = []
    for i, endpoint in enumerate(endpoints):
        if i:
            events.append({**base, "ts": t(at + i) - 1, "ev": "retry", "attempt": i + 1})
        events.append({**base, "ts": t(at + i), "ev": "send", "attempt": i + 1, "endpoint": endpoint})
    if answered is None:
        events.append({**base, "ts": t(at + 3), "ev": "abandon", "reason": "no reply"})
    else:
        us = int(answered * 1e6)
        events.append(
            {
                **base,
                "ts": t(at + answered),
                "ev": "reply",
                "ok": True,
                "latency_us": us,
                "endpoint": endpoints[-1],
            }
        )
    return events


def procs(killed: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """The runner's proc_start of each server, and a proc_exit at ``killed[server]`` s."""
    out = []
    for s in SERVERS:
        out.append({"ts": t(-1), "src": "runner", "ev": "proc_start", "role": s, "instance": s, "pid": 1})
    for s, at in (killed or {}).items():
        out.append(
            {"ts": t(at) + 1000, "src": "runner", "ev": "proc_exit", "role": s, "instance": s, "pid": 1,
             "signal": 9, "expected": True}
        )  # fmt: skip
    return out


def kill(server: str, at: float, fault_id: int = 1) -> FaultWindow:
    return FaultWindow(fault_id, "kill", server, t(at), t(at) + 100)


def ctx_of(spark, events: list[dict[str, Any]], faults: list[FaultWindow] = (), **promises: Any):
    prom = {
        "checks": ["freelance_failover_served", "freelance_dead_server_avoided"],
        "serve_bound_s": 2.5,
        **promises,
    }
    meta = {
        "manifest": {
            "name": "freelance",
            "promises": prom,
            "endpoints": {s: s for s in SERVERS},
            "clients": [
                {"name": "freelance", "adapter": "freelance", "endpoints": list(SERVERS), "options": {}}
            ],
        },
        "scenario": {"name": "unit"},
        "processes": {s: s for s in SERVERS},
        "plan": [{"kind": f.fault, "target": f.target} for f in faults],
        "load_started_ns": T0,
        "load_stopped_ns": t(LOAD_S),
        "client_budget_s": 3.0,
    }
    return CheckContext(spark, events_frame(spark, events), meta, list(faults))


def check(name: str, ctx: CheckContext):
    return registry()[name].run(ctx)


def failover_history(*, bad: bool) -> tuple[list[dict[str, Any]], list[FaultWindow]]:
    """server1 killed at 10 s: the request in flight fails over to server2 (or, when
    ``bad``, is abandoned though two servers live); later requests go to server2 (or,
    when ``bad``, one goes to the dead server1 5 s after the kill)."""
    events = procs({"server1": 10})
    for seq in range(1, 41):
        at = 2.5 + seq * 0.5
        if at < 10:
            events += request("client-1", seq, at, ["server1"])
        elif at == 10:
            events += request("client-1", seq, at, ["server1"] if bad else ["server1", "server2"],
                              answered=None if bad else 1.01)  # fmt: skip
        elif bad and at == 15:
            events += request("client-1", seq, at, ["server1", "server2"], answered=1.01)
        else:
            events += request("client-1", seq, at, ["server2"])
    return events, [kill("server1", 10)]


def test_failover_and_dead_server_hold_on_a_clean_failover(spark) -> None:
    events, faults = failover_history(bad=False)
    ctx = ctx_of(spark, events, faults)
    served = check("freelance_failover_served", ctx)
    assert served.status == HELD, served
    assert served.figures["judged"] > 30 and served.figures["excused_no_server"] == 0
    avoided = check("freelance_dead_server_avoided", ctx)
    assert avoided.status == HELD, avoided
    assert avoided.figures["outages"] == 1  # the kill's window and the process exit are one outage


def test_an_abandon_while_servers_live_and_a_send_to_a_dead_server_are_violations(spark) -> None:
    events, faults = failover_history(bad=True)
    ctx = ctx_of(spark, events, faults)
    served = check("freelance_failover_served", ctx)
    assert served.status == VIOLATED and served.violations == 1, served
    assert served.examples[0]["rid"] == "client-1:15" and served.examples[0]["problem"] == "abandoned"
    avoided = check("freelance_dead_server_avoided", ctx)
    assert avoided.status == VIOLATED and avoided.violations == 1, avoided
    (bad,) = avoided.examples
    assert bad["rid"] == "client-1:25" and bad["endpoint"] == "server1"


def test_requests_while_no_server_is_up_are_excused_and_a_slow_failover_is_not(spark) -> None:
    # Every server killed at 10 s (the abandons after are excused); before that one reply
    # took 2.8 s with two servers up (past the 2.5 s bound).
    events = procs(dict.fromkeys(SERVERS, 10))
    events += request("client-1", 1, 3, ["server1"])
    events += request("client-1", 2, 4, ["server1", "server2", "server3"], answered=2.8)
    for seq in range(3, 10):
        events += request("client-1", seq, 5 + seq * 0.5, ["server1"])
    for seq in range(10, 15):
        events += request("client-1", seq, 10 + seq - 10, ["server1"], answered=None)
    faults = [kill(s, 10, i) for i, s in enumerate(SERVERS, 1)]
    served = check("freelance_failover_served", ctx_of(spark, events, faults))
    assert served.status == VIOLATED and served.violations == 1, served
    assert served.examples[0]["problem"] == "answered past the bound"
    assert served.figures["excused_no_server"] >= 5


def test_sends_that_name_no_endpoint_leave_dead_server_avoided_unknown(spark) -> None:
    events, faults = failover_history(bad=False)
    for e in events:
        e.pop("endpoint", None)
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, events, faults))
    assert avoided.status == UNKNOWN and "do not record their endpoint" in avoided.reason


def server1_away(*, exit_at: float, started_at: float, back_at: float) -> list[dict[str, Any]]:
    """server1's process exits at ``exit_at`` and starts again at ``started_at``; client-1 sends
    every 0.5 s from 3 s, to server2 from 10 s until ``back_at``, to server1 otherwise."""
    events = procs({"server1": exit_at})
    events.append({"ts": t(started_at), "src": "runner", "ev": "proc_start", "role": "server1",
                   "instance": "server1", "pid": 2})  # fmt: skip
    for seq in range(1, 41):
        at = 2.5 + seq * 0.5
        events += request("client-1", seq, at, ["server2"] if 10 <= at < back_at else ["server1"])
    return events


def test_a_server_restarted_is_back_at_its_start_not_when_the_nemesis_saw_it_ready(spark) -> None:
    """explore (freelance, seed 1): server1 killed and restarted answered a client's pings
    and requests 0.1-0.24 s before the kill's fault_stop (the nemesis polls for the new
    process's readiness), and those sends were called sends to a dead server. Its new
    process's start ends the outage; a send before that start is still late."""
    events = server1_away(exit_at=10, started_at=12, back_at=12.5)
    events += request("client-2", 1, 12.2, ["server1"])  # the new server1 answers
    restart = FaultWindow(1, "kill", "server1", t(10), t(12.5))
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, events, [restart]))
    assert avoided.status == HELD, avoided
    late = events + request("client-3", 1, 11.8, ["server1"], answered=None)
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, late, [restart]))
    assert avoided.status == VIOLATED and [e["rid"] for e in avoided.examples] == ["client-3:1"], avoided


def test_a_send_the_server_answered_found_it_up_and_a_stop_is_written_after_the_thaw(spark) -> None:
    """explore (freelance, seed 1): sends through a partition that spares some connections
    (toxicity below 1), answered by server1 at once, would be called sends to a dead server;
    so was a send 2 ms before the freeze's fault_stop, which the nemesis writes after the
    SIGCONT. A send through the cut that another server had to answer is still late, and so
    is one well before the thaw."""
    events = procs()
    for seq in range(1, 41):
        at = 2.5 + seq * 0.5
        events += request("client-1", seq, at, ["server2"] if 10 <= at < 14 else ["server1"])
    through = events + request("client-2", 1, 12.0, ["server1"])  # answered by server1
    cut = FaultWindow(1, "partition", "link:clients:server1", t(10), t(14))
    assert cut.stops_all
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, through, [cut]))
    assert avoided.status == HELD and avoided.figures["answered_by_that_server"] == 1, avoided
    failed_over = through + request("client-3", 1, 12.5, ["server1", "server2"], answered=1.01)
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, failed_over, [cut]))
    assert avoided.status == VIOLATED and [e["rid"] for e in avoided.examples] == ["client-3:1"], avoided
    freeze = FaultWindow(1, "freeze", "server1", t(10), t(14))
    for at, status in ((13.95, HELD), (13.5, VIOLATED)):
        sent = events + request("client-4", 1, at, ["server1", "server2"], answered=1.01)
        assert check("freelance_dead_server_avoided", ctx_of(spark, sent, [freeze])).status == status, at


def test_a_fault_that_cuts_connections_one_by_one_leaves_the_server_heard(spark) -> None:
    """explore (freelance, seed 1): limit_data on the clients' link to server1 (each connection
    closed after so many bytes; the clients reconnect and hear server1's pings between the
    cuts) lost a send to server1 with its connection, and server3 answered it: called a send
    to a dead server, though the clients rightly took server1 for alive. Such a fault (and a
    reset) no longer puts the server out; a partition of the link still does, and the same
    send through it is late (the test above). A request then is still one no server may have
    served: with every server's link so cut, an abandon is excused."""
    events = procs()
    for seq in range(1, 41):
        at = 2.5 + seq * 0.5
        events += request("client-1", seq, at, ["server1"])
    lost_on_a_cut = events + request("client-3", 1, 12.5, ["server1", "server3"], answered=1.01)
    for kind in ("limit_data", "reset"):
        cut = FaultWindow(1, kind, "link:clients:server1", t(10), t(14))
        assert cut.outage and cut.lossy and not cut.stops_all and cut.loses_service, kind
        avoided = check("freelance_dead_server_avoided", ctx_of(spark, lost_on_a_cut, [cut]))
        assert avoided.status == HELD, (kind, avoided)
        assert avoided.figures["outages"] == 0, avoided
    # Every server's link cut so: a request abandoned then is excused (no server sure to serve).
    abandoned = events + request("client-4", 1, 12.0, ["server1", "server2", "server3"], answered=None)
    cuts = [FaultWindow(i, "limit_data", f"link:clients:{s}", t(10), t(14)) for i, s in enumerate(SERVERS, 1)]
    served = check("freelance_failover_served", ctx_of(spark, abandoned, cuts))
    assert served.status == HELD and served.figures["excused_no_server"] >= 1, served


def test_a_server_up_between_two_faults_is_no_dead_server(spark) -> None:
    """explore (freelance, seed 1): server1 thawed at 6.587 s and was killed at 6.595 s;
    clients that heard it in between sent to it, and joined into one outage from the
    freeze's start those sends were called late. Each fault is its own outage now; a send
    late into the kill's is still late."""
    events = server1_away(exit_at=13.01, started_at=15, back_at=15.5)
    freeze = FaultWindow(1, "freeze", "server1", t(10), t(13))
    kill_ = FaultWindow(2, "kill", "server1", t(13.01), t(15.3))
    between = events + request("client-2", 1, 13.005, ["server1", "server2"], answered=1.01)
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, between, [freeze, kill_]))
    assert avoided.status == HELD and avoided.figures["outages"] == 2, avoided
    late = events + request("client-3", 1, 14.8, ["server1", "server2"], answered=1.01)
    avoided = check("freelance_dead_server_avoided", ctx_of(spark, late, [freeze, kill_]))
    assert avoided.status == VIOLATED and [e["rid"] for e in avoided.examples] == ["client-3:1"], avoided


def test_a_server_behind_a_delay_no_attempt_outwaits_is_no_server_to_fail_over_to(spark) -> None:
    """explore (ping-guard's correct twin, seed 3): server1's and server3's links cut while
    server2's added 1.18 s to most messages (toxicity 0.81), with 1 s client attempts: the
    clients that started then found no server alive and gave up, called a violation though
    no server could answer them. A delay of an attempt or more now puts its server out; a
    shorter one leaves it up, and the abandon is still a violation."""
    events = procs()
    for seq in range(1, 41):
        events += request("client-1", seq, 2.5 + seq * 0.5, ["server1"])
    events += request("client-3", 1, 12.0, ["server1", "server2", "server3"], answered=None)
    cuts = [
        FaultWindow(1, "partition", "link:clients:server1", t(10), t(16)),
        FaultWindow(2, "latency", "link:clients:server2", t(10), t(16)),
        FaultWindow(3, "disconnect", "link:clients:server3", t(10), t(16)),
    ]
    for latency_ms, status in ((1182, HELD), (500, VIOLATED)):
        ctx = ctx_of(spark, events, cuts)
        ctx.meta["client_attempt_s"] = 1.0
        ctx.meta["plan"] = [
            {"fault_id": f.fault_id, "kind": f.fault, "target": f.target, "params": {}} for f in cuts
        ]
        ctx.meta["plan"][1]["params"] = {"latency_ms": latency_ms, "toxicity": 0.81}
        served = check("freelance_failover_served", ctx)
        assert served.status == status, (latency_ms, served)
        assert (served.figures["excused_no_server"] >= 1) == (status == HELD), served
