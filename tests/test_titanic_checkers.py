"""Unit tests of the Titanic checkers (reports/checkers/titanic.py) on hand-made histories
(real Spark): each check held on a clean history, violated with the offender named, and
unknown where the history cannot tell."""

from __future__ import annotations

from typing import Any

import pytest

from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckContext, FaultWindow, registry
from reports.history_frame import events_frame
from tests.history import ev, t

REPLY, CLOSE = "titanic.reply", "titanic.close"


def run(spark, name: str, events: list[dict[str, Any]], faults: list[FaultWindow] = (), **promises: Any):
    meta = {
        "manifest": {"promises": {"checks": [name], **promises}},
        "load_stopped_ns": t(100),
        "client_budget_s": 30,
    }
    ctx = CheckContext(spark, events_frame(spark, events), meta, list(faults))
    return registry()[name].run(ctx)


def cycle(
    seq: int,
    at: float,
    *,
    cid: str = "client-1",
    sends: int = 1,
    execs: int = 1,
    got: float | None = 1.0,
    forgot: float | None = None,
    abandon: float | None = None,
    closed: bool = True,
) -> list[dict[str, Any]]:
    """One Titanic request: sends, ticket, polls, (reply, close), and its executions."""
    rid, uuid = f"{cid}:{seq}", f"{seq:032x}"
    out = [ev(at + i * 0.1, cid, "send", cid=cid, seq=seq, rid=rid, attempt=i + 1) for i in range(sends)]
    out.append(ev(at + 0.2, cid, "ticket", cid=cid, seq=seq, rid=rid, uuid=uuid))
    answer = {"cid": cid, "seq": seq, "rid": rid, "uuid": uuid}
    out.append(ev(at + 0.3, cid, "ticket_answer", service=REPLY, code=300, **answer))
    out += [ev(at + 0.4 + i * 0.01, "worker-1", "exec", rid=rid, worker="worker-1-aa") for i in range(execs)]
    if forgot is not None:
        out.append(ev(at + forgot, cid, "ticket_answer", service=REPLY, code=400, **answer))
        out.append(ev(at + forgot, cid, "abandon", cid=cid, seq=seq, rid=rid, reason="400"))
    elif got is not None:
        out.append(ev(at + got, cid, "ticket_answer", service=REPLY, code=200, **answer))
        out.append(ev(at + got, cid, "reply", cid=cid, seq=seq, rid=rid, ok=True, latency_us=1000))
        if closed:
            out.append(ev(at + got + 0.1, cid, "ticket_answer", service=CLOSE, code=200, **answer))
    elif abandon is not None:
        out.append(ev(at + abandon, cid, "abandon", cid=cid, seq=seq, rid=rid, reason="deadline"))
    return out


def kill(at: float, target: str = "titanic") -> FaultWindow:
    return FaultWindow(1, "kill", target, t(at), t(at + 2))


# --- titanic_durable ----------------------------------------------------------------------


@pytest.mark.slow
def test_durable_holds_when_every_ticket_is_answered_across_a_kill(spark) -> None:
    history = cycle(1, 1.0) + cycle(2, 5.0, got=6.0) + cycle(3, 20.0)  # seq 2 waits out the kill at 8 s
    # A 400 for a uuid after its close is no loss; a ticket still open at the end is indeterminate.
    closed = {"cid": "client-1", "uuid": f"{1:032x}", "service": REPLY, "code": 400}
    history += [ev(9.0, "client-1", "ticket_answer", **closed), *cycle(4, 95.0, got=None)]
    result = run(spark, "titanic_durable", history, [kill(8.0)])
    assert result.status == HELD, result.summary
    figures = result.figures
    assert (figures["tickets"], figures["obtained_across_a_fault"], figures["indeterminate"]) == (4, 1, 1)


def test_durable_names_forgotten_abandoned_and_unexecuted_tickets(spark) -> None:
    history = (
        cycle(1, 1.0)
        + cycle(2, 5.0, forgot=6.0)  # 400 after the kill at 8 s: the server lost it
        + cycle(3, 6.0, got=None, abandon=30.0)  # never answered within the deadline
        + cycle(4, 7.0, got=5.0, execs=0)  # a reply, but no worker ever ran it
    )
    result = run(spark, "titanic_durable", history, [kill(8.0)])
    assert result.status == VIOLATED and result.violations == 3
    problems = {e["problem"]: e["rid"] for e in result.examples}
    assert problems == {
        "forgotten: titanic.reply answered 400 for an acknowledged uuid": "client-1:2",
        "abandoned: no reply within the client's deadline": "client-1:3",
        "reply obtained but the request was never executed": "client-1:4",
    }


@pytest.mark.slow
def test_durable_unknown_without_tickets_or_without_a_crossing(spark) -> None:
    assert run(spark, "titanic_durable", []).status == UNKNOWN
    # A kill while nothing was stored and waiting: durability was not exercised.
    result = run(spark, "titanic_durable", cycle(1, 1.0) + cycle(2, 20.0), [kill(8.0)])
    assert result.status == UNKNOWN and "outstanding" in result.summary and result.reason


def test_durable_counts_a_ticket_stored_during_a_worker_outage_and_answered_after_it(spark) -> None:
    """Before: only a ticket acknowledged before a fault began counted as crossing it, so this
    run was unknown ("none was outstanding while a fault struck")."""
    # The worker is down from 8 s to 10 s; the request is stored at 9.2 s, answered at 12 s.
    history = cycle(1, 1.0) + cycle(2, 9.0, got=3.0) + cycle(3, 20.0)
    result = run(spark, "titanic_durable", history, [kill(8.0, "worker-1")])
    assert result.status == HELD, (result.summary, result.reason)
    assert result.figures["obtained_across_a_fault"] == 1


# --- titanic_executed_once ------------------------------------------------------------------


@pytest.mark.slow
def test_executed_once_counts_and_judges_only_where_promised(spark) -> None:
    # seq 2 was submitted once and ran twice; seq 3 was resent once (two uuids) and ran twice.
    history = cycle(1, 1.0) + cycle(2, 2.0, execs=2) + cycle(3, 3.0, sends=2, execs=2)
    counted = run(spark, "titanic_executed_once", history)
    assert counted.status == HELD and counted.figures["uuid_ran_again"] == 1
    assert counted.figures["histogram"] == {"0": 0, "1": 1, "2": 2, "3+": 0}
    judged = run(spark, "titanic_executed_once", history, titanic_execution="exactly_once")
    assert judged.status == VIOLATED and judged.violations == 1
    assert judged.examples[0]["rid"] == "client-1:2" and judged.examples[0]["execs"] == 2
    clean = run(spark, "titanic_executed_once", cycle(1, 1.0), titanic_execution="exactly_once")
    assert clean.status == HELD


def test_executed_once_unknown_without_exec_events(spark) -> None:
    result = run(spark, "titanic_executed_once", cycle(1, 1.0, execs=0))
    assert result.status == UNKNOWN and "exec" in result.reason


# --- the probes --------------------------------------------------------------------------


def probe(at: float, kind: str, code: int, uuid: str = "e" * 32) -> dict[str, Any]:
    return ev(
        at, "client-1", "ticket_answer", cid="client-1", uuid=uuid, service=REPLY, code=code, probe=kind
    )


def test_no_phantom_reply(spark) -> None:
    name = "titanic_no_phantom_reply"
    held = run(spark, name, [probe(1, "forged", 400), probe(2, "forged", 500), probe(3, "closed", 200)])
    assert held.status == HELD and held.figures["probes_answered"] == 2
    bad = run(spark, name, [probe(1, "forged", 400), probe(2, "forged", 200), probe(3, "forged", 300)])
    assert bad.status == VIOLATED and bad.violations == 2 and bad.examples[0]["code"] == 200
    assert run(spark, name, [probe(1, "forged", 500)]).status == UNKNOWN
    assert "probe_every" in run(spark, name, cycle(1, 1.0)).reason


def test_closed_stay_closed(spark) -> None:
    name = "titanic_closed_stay_closed"
    assert run(spark, name, [probe(1, "closed", 400), probe(2, "forged", 200)]).status == HELD
    bad = run(spark, name, [probe(1, "closed", 400), probe(2, "closed", 200, uuid="a" * 32)])
    assert bad.status == VIOLATED and bad.examples[0]["uuid"] == "a" * 32
    assert run(spark, name, []).status == UNKNOWN
