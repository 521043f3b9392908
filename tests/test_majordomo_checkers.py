"""Unit tests of the pirate and Majordomo checkers on hand-made histories (real Spark):
one clean history and one per kind of violation, with exact counts and the first offender."""

from __future__ import annotations

from typing import Any

from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckContext, registry
from reports.history_frame import events_frame
from tests.history import ev


def run(spark, name: str, events: list[dict[str, Any]], **promises: Any):
    meta = {"manifest": {"promises": {"checks": [name], **promises}}}
    ctx = CheckContext(spark, events_frame(spark, events), meta, [])
    return registry()[name].run(ctx)


def abandoned(cid: str, seq: int, at: float) -> list[dict[str, Any]]:
    rid = f"{cid}:{seq}"
    return [
        ev(at, cid, "send", cid=cid, seq=seq, rid=rid, attempt=1),
        ev(at + 7.5, cid, "abandon", cid=cid, seq=seq, rid=rid, reason="timeout"),
    ]


# --- stale_execution -------------------------------------------------------------------


def stale_history() -> list[dict[str, Any]]:
    return [
        *abandoned("client-1", 1, 1.0),
        ev(2.0, "worker-1", "exec", rid="client-1:1", worker="worker-1-aa"),  # before the abandon: fine
        ev(9.0, "worker-2", "exec", rid="client-1:1", worker="worker-2-bb"),  # after it: stale
        *abandoned("client-2", 4, 3.0),
        ev(12.0, "worker-1", "exec", rid="client-2:4", worker="worker-1-aa"),  # stale
        ev(13.0, "worker-1", "exec", rid="client-2:4", worker="worker-1-aa"),  # stale again
        ev(14.0, "worker-1", "exec", rid="client-3:1", worker="worker-1-aa"),  # never abandoned
    ]


def test_stale_execution_forbidden_counts_every_late_execution(spark) -> None:
    result = run(spark, "stale_execution", stale_history(), stale_execution="forbidden")
    assert result.status == VIOLATED and result.violations == 3
    assert result.figures["requests"] == 2
    first = result.examples[0]
    assert (first["rid"], first["worker"], first["cid"], first["seq"]) == (
        "client-1:1",
        "worker-2-bb",
        "client-1",
        1,
    )


def test_stale_execution_allowed_reports_without_judging(spark) -> None:
    result = run(spark, "stale_execution", stale_history())
    assert result.status == HELD and result.violations == 0
    assert result.figures["stale_executions"] == 3 and len(result.examples) == 3


def test_stale_execution_clean_and_unknown(spark) -> None:
    clean = [*abandoned("client-1", 1, 1.0), ev(2.0, "w", "exec", rid="client-1:1", worker="worker-1-aa")]
    result = run(spark, "stale_execution", clean, stale_execution="forbidden")
    assert result.status == HELD and result.figures["stale_executions"] == 0
    assert run(spark, "stale_execution", abandoned("client-1", 1, 1.0)).status == UNKNOWN


# --- no_dispatch_to_expired ------------------------------------------------------------


def ready(at: float, worker: str, src: str = "broker") -> dict[str, Any]:
    return ev(at, src, "worker_ready", worker=worker, service="echo")


def expired(at: float, worker: str, src: str = "broker") -> dict[str, Any]:
    return ev(at, src, "worker_expired", worker=worker, service="echo", reason="silent")


def dispatch(at: float, worker: str, rid: str, src: str = "broker") -> dict[str, Any]:
    return ev(at, src, "dispatch", worker=worker, rid=rid, service="echo")


def test_no_dispatch_to_expired_clean(spark) -> None:
    history = [
        ready(1, "worker-1-aa"),
        dispatch(2, "worker-1-aa", "c:1"),
        expired(3, "worker-1-aa"),
        ready(4, "worker-1-aa"),  # the same identity registered again: fine
        dispatch(5, "worker-1-aa", "c:2"),
    ]
    result = run(spark, "no_dispatch_to_expired", history)
    assert result.status == HELD and result.figures["dispatches"] == 2


def test_dispatch_after_expiry_is_flagged(spark) -> None:
    history = [
        ready(1, "worker-1-aa"),
        ready(1, "worker-2-bb"),
        expired(3, "worker-1-aa"),
        dispatch(4, "worker-2-bb", "c:1"),
        dispatch(5, "worker-1-aa", "c:2"),
        dispatch(6, "worker-1-aa", "c:3"),
    ]
    result = run(spark, "no_dispatch_to_expired", history)
    assert result.status == VIOLATED and result.violations == 2
    assert result.examples[0]["rid"] == "c:2" and result.examples[0]["problem"] == "worker had expired"


def test_dispatch_to_an_unregistered_worker_is_flagged(spark) -> None:
    history = [ready(1, "worker-1-aa"), dispatch(2, "ghost", "c:1"), dispatch(3, "worker-1-aa", "c:2")]
    result = run(spark, "no_dispatch_to_expired", history)
    assert result.violations == 1 and result.examples[0]["problem"] == "never registered"


def test_dispatch_to_a_worker_of_an_earlier_broker_incarnation_is_flagged(spark) -> None:
    history = [
        ready(1, "worker-1-aa"),
        ev(5, "runner", "proc_exit", role="broker", instance="broker", pid=1, expected=True),
        ev(6, "runner", "proc_start", role="broker", instance="broker", pid=2),
        dispatch(7, "worker-1-aa", "c:1"),
        ready(8, "worker-1-bb"),
        dispatch(9, "worker-1-bb", "c:2"),
    ]
    result = run(spark, "no_dispatch_to_expired", history)
    assert result.violations == 1
    assert result.examples[0]["rid"] == "c:1"
    assert result.examples[0]["problem"] == "worker registered with an earlier broker incarnation"


# mmi_service is judged from the clients' answers: tests/test_blackbox_checkers.py
