"""The WMP protocol checkers on hand-made histories: each holds on a clean one and fails on
one that breaks its invariant (real Spark)."""

from __future__ import annotations

import pytest

from reports.checkers import HELD, VIOLATED, CheckContext, FaultWindow
from reports.checkers import wmp as checks
from reports.history_frame import events_frame
from tests.history import MS

T = 1_000_000_000_000


def lock(worker: str, pid: int, lk: str, at: int, cap: int = 1) -> dict:
    return dict(
        ts=T + at * MS, src=worker, ev="wmp_lock", worker=worker, manager="m", lock=lk, pid=pid, capacity=cap
    )


def unlock(worker: str, pid: int, lk: str, at: int, reason: str) -> dict:
    return dict(
        ts=T + at * MS,
        src=worker,
        ev="wmp_unlock",
        worker=worker,
        manager="m",
        lock=lk,
        pid=pid,
        reason=reason,
    )


def take(src: str, worker: str, job: str, lk: str, at: int, pid: int | None = None) -> dict:
    e = dict(ts=T + at * MS, src=src, ev="wmp_take", worker=worker, manager="m", job=job, lock=lk)
    return e if pid is None else {**e, "pid": pid}


def clean() -> list[dict]:
    return [
        lock("worker-1", 10, "10.1", 0),
        take("m", "worker-1", "j1", "10.1", 1),
        take("worker-1", "worker-1", "j1", "10.1", 2, pid=10),
        dict(ts=T + 10 * MS, src="worker-1", ev="wmp_done", worker="worker-1", manager="m", job="j1", pid=10),
        dict(ts=T + 11 * MS, src="m", ev="wmp_result", worker="worker-1", manager="m", job="j1"),
        lock("worker-2", 20, "20.1", 1),
        dict(ts=T + 2 * MS, src="m", ev="wmp_no", worker="worker-2", manager="m", lock="20.1"),
        unlock("worker-2", 20, "20.1", 3, "no"),
        lock("worker-2", 20, "20.2", 5),
        unlock("worker-2", 20, "20.2", 1005, "timeout"),
        lock("worker-2", 20, "20.3", 5000),
        unlock("worker-2", 20, "20.3", 5001, "no"),
    ]


def run(spark, fn, events: list[dict], faults: list[FaultWindow] | None = None):
    meta = {"scenario": {"options": {"lock_timeout_ms": 1000}}, "manifest": {"promises": {}}}
    return fn(CheckContext(spark, events_frame(spark, events), meta, faults or []))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fn", "broken"),
    [
        # worker-2 also accepts j1: the job is taken by two workers (and was not given to it).
        (
            checks.single_take,
            [lock("worker-2", 20, "20.9", 3), take("worker-2", "worker-2", "j1", "20.9", 4, pid=20)],
        ),
        # worker-1 (capacity 1) locks a second slot while its job runs.
        (checks.capacity, [lock("worker-1", 10, "10.2", 5)]),
        # The lock answered NO becomes a job anyway.
        (checks.no_releases, [take("worker-2", "worker-2", "j9", "20.1", 4, pid=20)]),
    ],
)
def test_checker_fails_on_a_broken_history(spark, fn, broken: list[dict]) -> None:
    result = run(spark, fn, clean() + broken)
    assert result.status == VIOLATED and result.violations >= 1 and result.examples


@pytest.mark.slow
def test_every_checker_holds_on_the_clean_history(spark) -> None:
    for fn in (
        checks.single_take,
        checks.capacity,
        checks.no_releases,
        checks.lock_timeout,
        checks.result_routing,
    ):
        assert run(spark, fn, clean()).status == HELD, fn.__name__


@pytest.mark.slow
def test_lock_timeout_released_too_early_or_never(spark) -> None:
    early = [e for e in clean() if e.get("lock") != "20.2"] + [
        lock("worker-2", 20, "20.2", 5),
        unlock("worker-2", 20, "20.2", 300, "timeout"),
    ]
    assert run(spark, checks.lock_timeout, early).figures["early"] == 1
    never = [e for e in clean() if not (e["ev"] == "wmp_unlock" and e["lock"] == "20.2")]
    result = run(spark, checks.lock_timeout, never)
    assert result.status == VIOLATED and result.figures["late"] == 1
    # The same stuck lock during a freeze of the worker is the fault's doing.
    freeze = FaultWindow(1, "freeze", "worker-2", T, T + 3000 * MS)
    assert run(spark, checks.lock_timeout, never, [freeze]).status == HELD


@pytest.mark.slow
def test_result_routing_lost_and_misrouted(spark) -> None:
    lost = [e for e in clean() if e["ev"] != "wmp_result"]
    result = run(spark, checks.result_routing, lost)
    assert result.status == VIOLATED and result.figures["lost"] == 1
    partition = FaultWindow(1, "partition", "link:device->m", T, T + 500 * MS)
    excused = run(spark, checks.result_routing, lost, [partition])
    assert excused.status == HELD and excused.figures["lost_in_faults"] == 1
    stray = dict(
        ts=T + 12 * MS, src="m", ev="wmp_result", worker="worker-2", manager="m", job="j7", detail="x"
    )
    assert run(spark, checks.result_routing, [*clean(), stray]).figures["misrouted"] == 1
