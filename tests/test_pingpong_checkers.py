"""The PING/PONG checkers on hand-made histories: each holds on a clean one, fails on a broken one."""

from __future__ import annotations

from typing import Any

import pytest

from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckContext, FaultWindow, registry
from reports.history_frame import events_frame
from tests.history import NS, T0, ev, t

OPTIONS = {"broker_timeout_ms": 1000, "n_timeouts": 3, "worker_expire_s": 3.0, "ping_ms": 1000}
PROMISES = {"expire_margin_s": 1.0, "reconnect_margin_s": 1.0, "return_bound_s": 5.0, "resend_margin_s": 1.0}
PROCESSES = {"broker": "broker", "worker-1": "worker", "worker-2": "worker"}
ENDPOINTS = {"frontend": "broker", "backend": "broker"}  # the broker binds both: it is no worker


def ctx(spark: Any, events: list[dict[str, Any]], faults=(), **options: Any) -> CheckContext:
    meta = {
        "manifest": {"options": OPTIONS, "promises": PROMISES, "endpoints": ENDPOINTS},
        "scenario": {"options": {**OPTIONS, **options}},
        "processes": PROCESSES,
    }
    return CheckContext(spark, events_frame(spark, events), meta, list(faults))


def heartbeats(worker: str, src: str, start: float, stop: float, answer_s: float = 0.002) -> list[dict]:
    """A worker pinging every second from ``start`` to ``stop``, each PONG after ``answer_s``."""
    out = []
    s = start
    while s < stop:
        out.append(ev(s, src, "ping", worker=worker))
        if answer_s is not None:
            out.append(ev(s + answer_s, src, "pong", worker=worker))
        s += 1
    return out


def run(name: str, context: CheckContext):
    return registry()[name].run(context)


def clean_history() -> list[dict]:
    """Two workers; worker-2 is killed at 10 s while idle and expired 3.2 s after its last PING."""
    events = [
        ev(0, "runner", "proc_start", role="worker", instance="worker-1", pid=1),
        ev(0, "runner", "proc_start", role="worker", instance="worker-2", pid=2),
        ev(0.3, "broker", "worker_ready", worker="worker-1-aaaa", detail="ready"),
        ev(0.3, "broker", "worker_ready", worker="worker-2-bbbb", detail="ready"),
        ev(2.5, "broker", "dispatch", worker="worker-1-aaaa", rid="c:1", detail=""),
        ev(2.501, "worker-1", "exec", worker="worker-1-aaaa", rid="c:1"),
        ev(2.502, "worker-1", "done", worker="worker-1-aaaa", rid="c:1"),
        ev(9.3 + 3.2, "broker", "worker_expired", worker="worker-2-bbbb", reason="silent", detail=""),
    ]
    events += heartbeats("worker-1-aaaa", "worker-1", 1.3, 20)
    events += heartbeats("worker-2-bbbb", "worker-2", 1.3, 10)
    events.append(ev(20.5, "runner", "phase", name="stop"))
    return events


KILL_W2 = FaultWindow(1, "kill", "worker-2", t(10.1), t(10.1))


def test_pings_answered(spark) -> None:
    assert run("pingpong_pings_answered", ctx(spark, clean_history(), [KILL_W2])).status == HELD
    # The broker answers only every other PING of worker-1.
    events = [e for e in clean_history() if not (e["ev"] == "pong" and int((e["ts"] - T0) / NS) % 2)]
    res = run("pingpong_pings_answered", ctx(spark, events, [KILL_W2]))
    assert res.status == VIOLATED and res.violations >= 8
    assert res.examples[0]["problem"] == "no PONG" or "PONG after" in res.examples[0]["problem"]


def test_pings_answered_excuses_pings_lost_with_a_killed_broker(spark) -> None:
    events = [e for e in clean_history() if not (e["ev"] == "pong" and 5 < (e["ts"] - T0) / NS < 7)]
    assert run("pingpong_pings_answered", ctx(spark, events, [KILL_W2])).status == VIOLATED
    broker_down = FaultWindow(2, "kill", "broker", t(5.2), t(6.0))
    assert run("pingpong_pings_answered", ctx(spark, events, [KILL_W2, broker_down])).status == HELD


@pytest.mark.slow
def test_no_dispatch_to_expired(spark) -> None:
    assert run("pingpong_no_dispatch_to_expired", ctx(spark, clean_history())).status == HELD
    events = [*clean_history(), ev(17, "broker", "dispatch", worker="worker-2-bbbb", rid="c:2", detail="")]
    res = run("pingpong_no_dispatch_to_expired", ctx(spark, events))
    assert res.status == VIOLATED and res.violations == 1
    assert res.examples[0]["rid"] == "c:2"
    # Registered again (its PING reached the broker) before the job: allowed.
    events.append(ev(16.8, "broker", "worker_ready", worker="worker-2-bbbb", detail="ping"))
    assert run("pingpong_no_dispatch_to_expired", ctx(spark, events)).status == HELD


@pytest.mark.slow
def test_expiry_measures_the_silence_and_bounds_it(spark) -> None:
    res = run("pingpong_expiry", ctx(spark, clean_history(), [KILL_W2]))
    assert res.status == HELD, res.examples
    assert res.figures["expiry_after_last_message"]["count"] == 1
    assert res.figures["expiry_after_last_message"]["max_ms"] == pytest.approx(3200, abs=5)
    late = [e for e in clean_history() if e["ev"] != "worker_expired"]
    late.append(ev(15, "broker", "worker_expired", worker="worker-2-bbbb", reason="silent", detail=""))
    res = run("pingpong_expiry", ctx(spark, late, [KILL_W2]))
    assert res.status == VIOLATED and res.examples[0]["problem"] == "expired late"
    early = [e for e in clean_history() if e["ev"] != "worker_expired"]
    early.append(ev(11, "broker", "worker_expired", worker="worker-2-bbbb", reason="silent", detail=""))
    res = run("pingpong_expiry", ctx(spark, early, [KILL_W2]))
    assert res.status == VIOLATED and "before" in res.examples[0]["problem"]
    never = [e for e in clean_history() if e["ev"] != "worker_expired"]
    res = run("pingpong_expiry", ctx(spark, never, [KILL_W2]))
    assert res.status == VIOLATED and res.examples[0]["problem"] == "silent idle worker never expired"


def reconnect_history(after_s: float) -> list[dict]:
    """worker-1 loses its broker at 5 s (PINGs go unanswered) and reconnects ``after_s`` later."""
    events = [ev(0, "runner", "proc_start", role="worker", instance="worker-1", pid=1)]
    events += heartbeats("worker-1-aaaa", "worker-1", 1.0, 5)
    last_pong = 4.002
    events += heartbeats("worker-1-aaaa", "worker-1", 5.0, last_pong + after_s, answer_s=None)
    s = last_pong + after_s
    events.append(
        ev(s, "worker-1", "reconnect", worker="worker-1-cccc", reason="silent", detail="worker-1-aaaa")
    )
    events.append(ev(s + 0.01, "broker", "worker_ready", worker="worker-1-cccc", detail="ready"))
    events += heartbeats("worker-1-cccc", "worker-1", s + 1, s + 8)
    return events


@pytest.mark.slow
def test_reconnect(spark) -> None:
    # The broker was frozen from 4.5 s to 9 s: the worker's silence is not its own doing.
    frozen = [FaultWindow(1, "freeze", "broker", t(4.5), t(9.0))]
    res = run("pingpong_reconnect", ctx(spark, reconnect_history(3.05), frozen))
    assert res.status == HELD, res.examples
    assert res.figures["reconnects"] == 1
    assert res.figures["silence_before_reconnect"]["max_ms"] == pytest.approx(3050, abs=1)
    res = run("pingpong_reconnect", ctx(spark, reconnect_history(2.0), frozen))
    assert res.status == VIOLATED and res.examples[0]["problem"] == "reconnected before N_TIMEOUTS"
    res = run("pingpong_reconnect", ctx(spark, reconnect_history(6.0), frozen))
    assert res.status == VIOLATED
    assert {e["problem"] for e in res.examples} >= {"silent past N_TIMEOUTS, no reconnect"}
    # The broker records registrations (worker-1's first) but not the new connection's.
    no_ready = [e for e in reconnect_history(3.05) if e["ev"] != "worker_ready"]
    no_ready.append(ev(0.9, "broker", "worker_ready", worker="worker-1-aaaa", detail="ready"))
    assert run("pingpong_reconnect", ctx(spark, no_ready, frozen)).status == HELD  # the broker was frozen
    res = run("pingpong_reconnect", ctx(spark, no_ready))
    assert res.status == VIOLATED and "READY" in res.examples[0]["problem"]
    # A broker that records no registration at all (a user's): the reconnect is timed, the
    # registration left unjudged and said so, not called a violation.
    unrecorded = [e for e in reconnect_history(3.05) if e["ev"] != "worker_ready"]
    res = run("pingpong_reconnect", ctx(spark, unrecorded))
    assert res.status == HELD, res.examples
    assert res.figures["reconnects"] == 1 and "not judged" in res.summary


def restart_history(back_after_s: float | None) -> list[dict]:
    events = [
        ev(0, "runner", "proc_start", role="broker", instance="broker", pid=10),
        ev(0.2, "broker", "worker_ready", worker="worker-1-aaaa", detail="ready"),
        ev(0.2, "broker", "worker_ready", worker="worker-2-bbbb", detail="ready"),
        ev(5.0, "runner", "proc_start", role="broker", instance="broker", pid=11),
        ev(20, "runner", "phase", name="stop"),
    ]
    if back_after_s is not None:
        events.append(ev(5.0 + back_after_s, "broker", "worker_ready", worker="worker-1-aaaa", detail="ping"))
        events.append(ev(5.0 + back_after_s, "broker", "worker_ready", worker="worker-2-bbbb", detail="ping"))
    return events


@pytest.mark.slow
def test_workers_return_after_a_broker_restart(spark) -> None:
    restart = [FaultWindow(1, "restart", "broker", t(4.5), t(5.1))]  # the stop follows the start
    res = run("pingpong_workers_return", ctx(spark, restart_history(0.9), restart))
    assert res.status == HELD and res.figures["return_after_restart"]["count"] == 2
    res = run("pingpong_workers_return", ctx(spark, restart_history(None), restart))
    assert res.status == VIOLATED and res.violations == 2
    res = run("pingpong_workers_return", ctx(spark, restart_history(7.0), restart))
    assert res.status == VIOLATED
    # No broker fault planned: nothing to judge, not a doubt (a baseline stays passed).
    assert run("pingpong_workers_return", ctx(spark, restart_history(0.9))).status == HELD
    killed = [FaultWindow(1, "kill", "broker", t(4.5), t(4.5))]  # killed for good: never back
    no_restart = [e for e in restart_history(0.9) if e.get("pid") != 11]
    assert run("pingpong_workers_return", ctx(spark, no_restart, killed)).status == UNKNOWN


def resend_history(resend_after_s: float | None) -> list[dict]:
    events = [
        ev(1.0, "broker", "dispatch", worker="worker-1-aaaa", rid="c:1", detail=""),
        ev(1.001, "worker-1", "exec", worker="worker-1-aaaa", rid="c:1"),
        ev(12, "runner", "phase", name="stop"),
    ]
    if resend_after_s is not None:
        s = 1.0 + resend_after_s
        events.append(ev(s, "broker", "dispatch", worker="worker-2-bbbb", rid="c:1", detail="resend 1"))
        events.append(ev(s + 0.001, "worker-2", "exec", worker="worker-2-bbbb", rid="c:1"))
        events.append(ev(s + 0.002, "worker-2", "done", worker="worker-2-bbbb", rid="c:1"))
    return events


@pytest.mark.slow
def test_resend(spark) -> None:
    kill = [FaultWindow(1, "kill", "worker-1", t(1.0005), t(1.0005))]
    res = run("pingpong_resend", ctx(spark, resend_history(1.02), kill, resend_ms=1000))
    assert res.status == HELD and res.figures["resend_after"]["count"] == 1
    res = run("pingpong_resend", ctx(spark, resend_history(None), kill, resend_ms=1000))
    assert res.status == VIOLATED and res.examples[0]["problem"] == "never resent"
    res = run("pingpong_resend", ctx(spark, resend_history(0.3), kill, resend_ms=1000))
    assert res.status == VIOLATED and res.examples[0]["problem"] == "resent before resend_ms"
    assert run("pingpong_resend", ctx(spark, resend_history(None), kill)).status == UNKNOWN


@pytest.mark.slow
def test_expiry_ignores_pings_lost_in_a_partition(spark) -> None:
    """worker-2's link is cut at 10 s: later PINGs never arrive; it expires 3.2 s after the last that did."""
    events = [e for e in clean_history() if e["ev"] != "worker_expired"]
    events += heartbeats("worker-2-bbbb", "worker-2", 10.3, 14, answer_s=None)
    events.append(
        ev(9.3 + 3.2, "broker", "worker_expired", worker="worker-2-bbbb", reason="silent", detail="")
    )
    res = run("pingpong_expiry", ctx(spark, events))
    assert res.status == VIOLATED and "before" in res.examples[0]["problem"]
    partition = FaultWindow(1, "partition", "worker-2", t(10.0), t(18.0))
    res = run("pingpong_expiry", ctx(spark, events, [partition]))
    assert res.status == HELD, res.examples
    assert res.figures["expiry_after_last_message"]["max_ms"] == pytest.approx(3200, abs=5)


@pytest.mark.slow
def test_expiry_does_not_judge_a_silence_a_toxic_on_a_share_of_connections_may_have_made(spark) -> None:
    """explore, the built-in broker, seed 7: worker-1's link partitioned at toxicity 0.72 for
    7.3 s, the toxic spared its connection, the broker went on hearing its PINGs and kept it;
    the check took them for lost and called it "never expired". Here worker-2 PINGs through a
    partition from 10 s to the end and is never expired."""
    events = [e for e in clean_history() if e["ev"] != "worker_expired"]
    events += heartbeats("worker-2-bbbb", "worker-2", 10.3, 20)

    def judged(share: float):
        context = ctx(spark, events, [FaultWindow(1, "partition", "worker-2", t(10.0), t(20.5))])
        context.meta["plan"] = [{"fault_id": 1, "params": {"toxicity": share}}]
        return run("pingpong_expiry", context)

    whole = judged(1.0)  # every connection cut: its PINGs were lost, and it should have gone
    assert whole.status == VIOLATED and whole.figures["never_expired"] == 1, whole
    share = judged(0.72)
    assert share.status != VIOLATED and share.figures["never_expired"] == 0, share


@pytest.mark.slow
def test_expiry_takes_a_worker_whose_result_was_lost_on_its_link_for_busy(spark) -> None:
    """explore, the built-in broker, seed 7: worker-3's link disconnected as it answered a
    job; its result never reached the broker, which held it busy (and expires idle workers
    only), while the worker reconnected under another name. Here worker-2 answers at 9.95 s
    into a disconnect of its link and falls silent."""
    events = [e for e in clean_history() if e["ev"] != "worker_expired"]
    events += [
        ev(9.9, "broker", "dispatch", worker="worker-2-bbbb", rid="c:2", detail=""),
        ev(9.95, "worker-2", "exec", worker="worker-2-bbbb", rid="c:2"),
        ev(9.95, "worker-2", "done", worker="worker-2-bbbb", rid="c:2"),
    ]
    cut = FaultWindow(1, "disconnect", "link:worker-2", t(9.92), t(16.0))
    res = run("pingpong_expiry", ctx(spark, events, [cut]))
    assert res.status != VIOLATED and res.figures["silent_busy_workers"] == 1, res
    # its result heard (the cut came 0.1 s after it): idle and silent, it should have gone
    late = FaultWindow(1, "disconnect", "link:worker-2", t(10.05), t(16.0))
    res = run("pingpong_expiry", ctx(spark, events, [late]))
    assert res.status == VIOLATED and res.figures["never_expired"] == 1, res


@pytest.mark.slow
def test_an_early_expiry_by_a_frozen_broker_is_excused(spark) -> None:
    """The broker is frozen from 8 s to 12 s while worker-2 still PINGs until 10 s (its
    PINGs wait unread), then expires it on waking, 1.7 s after its last PING."""
    events = [e for e in clean_history() if e["ev"] != "worker_expired"]
    events += heartbeats("worker-2-bbbb", "worker-2", 10.3, 11, answer_s=None)  # a last PING at 10.3
    events.append(ev(12.0, "broker", "worker_expired", worker="worker-2-bbbb", reason="silent", detail=""))
    res = run("pingpong_expiry", ctx(spark, events))
    assert res.status == VIOLATED and "before" in res.examples[0]["problem"]
    frozen = FaultWindow(1, "freeze", "broker", t(8.0), t(11.95))
    res = run("pingpong_expiry", ctx(spark, events, [frozen]))
    assert res.status == HELD, res.examples
    assert res.figures["expiry_after_last_message"]["count"] == 0  # what it timed was the freeze
    # A broker's slowdown is no excuse: a starved broker still reads what arrives.
    starved = FaultWindow(1, "starve", "broker", t(8.0), t(11.95))
    assert run("pingpong_expiry", ctx(spark, events, [starved])).status == VIOLATED
