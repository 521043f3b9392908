"""The reliable-sketch checkers on hand-made histories: each holds on a clean one, fails on a broken one."""

from __future__ import annotations

from typing import Any

import pytest

from reports.checkers import HELD, VIOLATED, CheckContext, FaultWindow, registry
from reports.history_frame import events_frame
from tests.history import ev

PROCESSES = {"queue": "queue", "server-1": "server", "server-2": "server"}


def ctx(spark: Any, events: list[dict[str, Any]]) -> CheckContext:
    manifest = {"options": {}, "promises": {}, "endpoints": {"frontend": "queue", "backend": "queue"}}
    meta = {"manifest": manifest, "scenario": {"options": {}}, "processes": PROCESSES}
    return CheckContext(spark, events_frame(spark, events), meta, [])


def run(name: str, events: list[dict[str, Any]], spark: Any):
    return registry()[name].run(ctx(spark, events))


def history() -> list[dict[str, Any]]:
    """server-1 stalls on c:1: disabled after 10 ms, c:1 goes to server-2; server-1's late reply is discarded.
    The client's retry of c:2 reaches server-2 again, which answers it from its cache."""
    return [
        ev(0.1, "queue", "worker_ready", worker="server-1-aaaa", detail="ready"),
        ev(0.1, "queue", "worker_ready", worker="server-2-bbbb", detail="ready"),
        ev(1.000, "queue", "dispatch", worker="server-1-aaaa", rid="c:1", detail=""),
        ev(1.0002, "server-1", "exec", worker="server-1-aaaa", rid="c:1"),
        ev(1.010, "queue", "worker_expired", worker="server-1-aaaa", reason="disabled", detail="no reply"),
        ev(1.011, "queue", "dispatch", worker="server-2-bbbb", rid="c:1", detail="resend 1"),
        ev(1.012, "server-2", "exec", worker="server-2-bbbb", rid="c:1"),
        ev(1.013, "server-2", "done", worker="server-2-bbbb", rid="c:1"),
        ev(1.020, "queue", "dispatch", worker="server-2-bbbb", rid="c:2", detail=""),
        ev(1.021, "server-2", "exec", worker="server-2-bbbb", rid="c:2"),
        ev(1.022, "server-2", "done", worker="server-2-bbbb", rid="c:2"),
        ev(2.000, "server-1", "done", worker="server-1-aaaa", rid="c:1"),
        ev(2.001, "queue", "discard", worker="server-1-aaaa", rid="c:1", reason="disabled server"),
        ev(2.001, "queue", "worker_ready", worker="server-1-aaaa", detail="re-enabled"),
        ev(3.0, "queue", "dispatch", worker="server-2-bbbb", rid="c:2", detail=""),
        ev(3.001, "server-2", "replay", worker="server-2-bbbb", rid="c:2"),
        ev(6.0, "runner", "phase", name="stop"),
    ]


@pytest.mark.slow
def test_no_repeat_exec(spark) -> None:
    res = run("sketch_no_repeat_exec", history(), spark)
    assert res.status == HELD and res.figures["cache_replays"] == 1 and res.figures["executions"] == 3
    repeated = [e for e in history() if e["ev"] != "replay"]
    repeated.append(ev(3.001, "server-2", "exec", worker="server-2-bbbb", rid="c:2"))
    res = run("sketch_no_repeat_exec", repeated, spark)
    assert res.status == VIOLATED and res.violations == 1 and res.examples[0]["rid"] == "c:2"
    # The same request again, but not in a row: allowed (the cache holds one request).
    later = [*history(), ev(4.0, "server-2", "exec", worker="server-2-bbbb", rid="c:1")]
    assert run("sketch_no_repeat_exec", later, spark).status == HELD


@pytest.mark.slow
def test_strangers_requests_with_one_id_are_no_repeat(spark) -> None:
    """explore (reliable-sketch, seed 1, run 5): junk on the queue's frontend ('x:0|' and
    random bytes, bodies with no request id) reached the servers, which rightly ran each
    (different bodies), and 247 'repeated executions' were called. Under junk a repeat of a
    stranger's id is none; a repeat of a load client's request still is."""
    junk = FaultWindow(1, "malformed", "queue", 0, 6 * 10**9)
    sends = [ev(0.5, "c", "send", cid="c", seq=s, rid=f"c:{s}", attempt=1) for s in (1, 2)]
    strangers = [ev(1.5 + i / 100, "server-1", "exec", worker="server-1-aaaa", rid=r) for i, r in
                 enumerate(("x:0", "x:0", "", ""))]  # fmt: skip
    events = [*history(), *sends, *strangers]
    res = registry()["sketch_no_repeat_exec"].run(
        CheckContext(spark, events_frame(spark, events), ctx(spark, events).meta, [junk])
    )
    assert res.status == HELD, res
    events.append(ev(3.001, "server-2", "exec", worker="server-2-bbbb", rid="c:2"))
    events = [e for e in events if e["ev"] != "replay"]
    res = registry()["sketch_no_repeat_exec"].run(
        CheckContext(spark, events_frame(spark, events), ctx(spark, events).meta, [junk])
    )
    assert res.status == VIOLATED and res.examples[0]["rid"] == "c:2", res


@pytest.mark.slow
def test_disabled_discarded(spark) -> None:
    res = run("sketch_disabled_discarded", history(), spark)
    assert res.status == HELD
    assert res.figures["discarded"] == 1 and res.figures["disabled"] == 1
    forwarded = [e for e in history() if e["ev"] != "discard"]
    res = run("sketch_disabled_discarded", forwarded, spark)
    assert res.status == VIOLATED and res.examples[0]["worker"] == "server-1-aaaa"


@pytest.mark.slow
def test_no_dispatch_to_disabled(spark) -> None:
    assert run("sketch_no_dispatch_to_disabled", history(), spark).status == HELD
    bad = [*history(), ev(1.5, "queue", "dispatch", worker="server-1-aaaa", rid="c:3", detail="")]
    res = run("sketch_no_dispatch_to_disabled", bad, spark)
    assert res.status == VIOLATED and res.examples[0]["rid"] == "c:3"


@pytest.mark.slow
def test_disabled_discarded_forgets_a_dead_queues_disabling(spark) -> None:
    # The queue that disabled server-1 is killed and started again before server-1's late
    # reply: the new queue never disabled it (explore, reliable-sketch seed 1).
    forwarded = [e for e in history() if e["ev"] != "discard"]
    restarted = [*forwarded, ev(1.5, "runner", "proc_start", role="queue", instance="queue", pid=9)]
    res = run("sketch_disabled_discarded", restarted, spark)
    assert res.status == HELD, res.examples
    assert run("sketch_disabled_discarded", forwarded, spark).status == VIOLATED
