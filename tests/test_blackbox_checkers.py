"""Checks on a black box: a check that needs the subject's own events says so (UNKNOWN with
the reason), execution counted where exactly-once is promised, and MMI answers judged
against what the supervisor knows (real Spark, hand-made histories)."""

from __future__ import annotations

from typing import Any

from reports.checkers import HELD, UNKNOWN, VIOLATED, FaultWindow, registry
from tests.test_checkers import check, clean_history, make_ctx, t


def without(events: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ev"] not in kinds]


# --- checks that need the subject's events -----------------------------------------------


def test_every_check_that_reads_subject_events_declares_them() -> None:
    needs = {name: c.needs for name, c in registry().items()}
    assert needs["execution_count"] == ("exec",)
    assert needs["stale_execution"] == ("exec",)
    assert set(needs["no_dispatch_to_expired"]) == {"dispatch", "worker_ready"}
    # decided from zchaos's own observations only
    for name in ("no_lost", "no_duplicate", "correct_reply", "steady_state", "recovery", "mmi_service"):
        assert needs[name] == (), name


def test_without_worker_events_a_check_is_unknown_and_says_to_use_probe_workers(spark) -> None:
    ctx = make_ctx(spark, without(clean_history(), "exec"))
    for name in ("execution_count", "stale_execution"):
        result = check(name, ctx)
        assert result.status == UNKNOWN, name
        assert "exec" in result.reason and "probe workers" in result.reason and "probe =" in result.reason
        assert result.figures["missing_events"] == ["exec"]


def test_without_broker_events_a_check_is_unknown_and_says_only_the_broker_can_write_them(spark) -> None:
    result = check("no_dispatch_to_expired", make_ctx(spark, clean_history()))
    assert result.status == UNKNOWN
    assert "dispatch" in result.reason and "worker_ready" in result.reason
    assert "only the broker itself" in result.reason and "probe" not in result.reason


def test_with_the_events_present_the_check_runs(spark) -> None:
    assert check("execution_count", make_ctx(spark, clean_history())).status == HELD
    events = clean_history()
    events.append({"ts": t(1), "src": "broker", "ev": "worker_ready", "worker": "worker-1"})
    events.append({"ts": t(2), "src": "broker", "ev": "dispatch", "worker": "ghost", "rid": "client-1:1"})
    assert check("no_dispatch_to_expired", make_ctx(spark, events)).status == VIOLATED


# --- execution judged where exactly-once is promised -------------------------------------


def twice_executed() -> list[dict[str, Any]]:
    """A clean history in which client-1's request 3 ran on worker-1, then on worker-2."""
    events = clean_history()
    first = next(e for e in events if e["ev"] == "exec" and e["rid"] == "client-1:3")
    events.append({**first, "ts": first["ts"] + 400_000_000, "src": "worker-2", "worker": "worker-2"})
    return events


def test_exactly_once_holds_when_every_request_ran_once(spark) -> None:
    result = check("execution_count", make_ctx(spark, clean_history(), execution="exactly_once"))
    assert result.status == HELD and result.figures["histogram"]["2"] == 0


def test_a_request_executed_twice_violates_exactly_once_with_both_executions_shown(spark) -> None:
    result = check("execution_count", make_ctx(spark, twice_executed(), execution="exactly_once"))
    assert result.status == VIOLATED and result.violations == 1
    (ex,) = result.examples
    assert (ex["rid"], ex["cid"], ex["seq"], ex["problem"]) == (
        "client-1:3",
        "client-1",
        3,
        "executed 2 times",
    )
    assert [run["worker"] for run in ex["executions"]] == ["worker-1", "worker-2"]
    assert ex["executions"][0]["ts"] < ex["executions"][1]["ts"] == ex["ts"]


def test_at_least_once_reports_the_second_execution_without_judging_it(spark) -> None:
    result = check("execution_count", make_ctx(spark, twice_executed()))
    assert result.status == HELD and result.figures["executed_more_than_once"] == 1


def test_an_answered_request_never_executed_violates_exactly_once_too(spark) -> None:
    events = [e for e in clean_history() if not (e["ev"] == "exec" and e["rid"] == "client-2:5")]
    result = check("execution_count", make_ctx(spark, events, execution="exactly_once"))
    assert result.status == VIOLATED and result.examples[0]["problem"] == "answered, never executed"


def test_exactly_once_without_exec_events_is_unknown_with_the_reason(spark) -> None:
    result = check(
        "execution_count", make_ctx(spark, without(clean_history(), "exec"), execution="exactly_once")
    )
    assert result.status == UNKNOWN and "probe workers" in result.reason


# --- mmi_service judged from the outside -------------------------------------------------


def proc(at: float, ev: str, instance: str) -> dict[str, Any]:
    role = instance.split("-")[0]
    fields = {"expected": True, "signal": 9} if ev == "proc_exit" else {}
    return {"ts": t(at), "src": "runner", "ev": ev, "role": role, "instance": instance, "pid": 1, **fields}


def answer(at: float, code: int, latency_ms: float = 1.0) -> dict[str, Any]:
    return {
        "ts": t(at), "src": "client-1", "ev": "mmi_answer", "cid": "client-1", "service": "echo",
        "code": code, "latency_us": int(latency_ms * 1000),
    }  # fmt: skip


def mmi_ctx(spark, events: list[dict[str, Any]], *, faults=(), roles=None, options=None, **promises):
    ctx = make_ctx(spark, events, faults=list(faults), **promises)
    ctx.meta["manifest"].update(
        roles=roles or {"broker": {"service": None}, "worker": {"service": "echo", "probe": "majordomo"}},
        endpoints={"frontend": "broker", "backend": "broker"},
        clients=[{"name": "mdp_sync", "adapter": "mdp_sync", "endpoints": ["frontend"]}],
        options=options if options is not None else {"heartbeat_ms": 500, "liveness": 3},  # 2 s tolerance
    )
    return ctx


def lifecycle() -> list[dict[str, Any]]:
    """A broker from -1 s; two workers from 0 s, both killed at 10 s, started again at 20 s."""
    events = [proc(-1, "proc_start", "broker")]
    for w in ("worker-1", "worker-2"):
        events += [proc(0, "proc_start", w), proc(10, "proc_exit", w), proc(20, "proc_start", w)]
    return events


def test_mmi_answers_that_follow_the_workers_within_the_expiry_hold(spark) -> None:
    answers = [answer(5, 200), answer(11.5, 200), answer(13, 404), answer(20.5, 404), answer(21, 200)]
    answers.append(answer(14, 200, latency_ms=5000))  # asked at 9 s, while the workers lived
    result = check("mmi_service", mmi_ctx(spark, lifecycle() + answers))
    assert result.status == HELD, result.examples
    assert result.figures["tolerance_s"] == 2.0 and result.figures["codes"] == {"200": 4, "404": 2}


def test_mmi_200_when_no_worker_was_alive_is_a_violation(spark) -> None:
    result = check("mmi_service", mmi_ctx(spark, [*lifecycle(), answer(5, 200), answer(15, 200)]))
    assert result.status == VIOLATED and result.violations == 1
    (ex,) = result.examples
    assert ex["ts"] == t(15) and ex["code"] == 200 and ex["problem"].startswith("200 while no worker")


def test_mmi_404_while_a_worker_was_alive_throughout_is_a_violation(spark) -> None:
    result = check("mmi_service", mmi_ctx(spark, [*lifecycle(), answer(25, 404), answer(26, 501)]))
    assert result.status == VIOLATED and result.violations == 2
    assert result.examples[0]["problem"].startswith("404 while worker-")
    assert result.examples[1]["problem"] == "mmi.service must answer 200 or 404"


def test_frozen_or_cut_off_workers_are_not_alive(spark) -> None:
    faults = [
        FaultWindow(1, "freeze", "worker-1", t(30), t(40)),
        FaultWindow(2, "partition", "link:worker-2", t(30), t(40)),
    ]
    events = [*lifecycle(), answer(31, 200), answer(35, 200), answer(36, 404)]
    result = check("mmi_service", mmi_ctx(spark, events, faults=faults))
    assert result.violations == 1 and result.examples[0]["ts"] == t(35)


def test_a_killed_worker_is_alive_from_its_restart_not_from_its_faults_stop(spark) -> None:
    # The nemesis ends a kill's window once the restarted process is ready; it may have
    # registered and been counted by then (majordomo-kill-all-workers once failed on that).
    kills = [FaultWindow(i, "kill", f"worker-{i}", t(10), t(20.5)) for i in (1, 2)]
    events = [*lifecycle(), answer(15, 200), answer(20.3, 200)]
    result = check("mmi_service", mmi_ctx(spark, events, faults=kills))
    assert result.violations == 1 and [e["ts"] for e in result.examples] == [t(15)]


def test_a_broker_restart_or_freeze_excuses_404_until_the_workers_are_back(spark) -> None:
    events = [*lifecycle(), proc(50, "proc_exit", "broker"), proc(50, "proc_start", "broker")]
    frozen = [FaultWindow(1, "freeze", "broker", t(60), t(62))]
    answers = [answer(51, 404), answer(55, 404), answer(63, 404), answer(66, 404)]
    result = check("mmi_service", mmi_ctx(spark, events + answers, faults=frozen))
    assert result.violations == 2 and [e["ts"] for e in result.examples] == [t(55), t(66)]


def test_mmi_is_unknown_with_the_reason_when_it_cannot_be_judged(spark) -> None:
    no_answers = check("mmi_service", mmi_ctx(spark, lifecycle()))
    assert no_answers.status == UNKNOWN and "mmi_every" in no_answers.reason
    events = [*lifecycle(), answer(5, 200)]
    no_service = check("mmi_service", mmi_ctx(spark, events, roles={"worker": {"service": None}}))
    assert no_service.status == UNKNOWN and 'service = "..."' in no_service.reason
    no_expiry = check("mmi_service", mmi_ctx(spark, events, options={}))
    assert no_expiry.status == UNKNOWN and "mmi_tolerance_s" in no_expiry.reason
    promised = check("mmi_service", mmi_ctx(spark, events, options={}, mmi_tolerance_s=1.5))
    assert promised.status == HELD and promised.figures["tolerance_s"] == 1.5
