"""The report's checks and metrics run a few at a time (reports/parallel.py): the same
verdict as one at a time, a crashing checker still a result, shared frames built once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.errors import SetupError
from harness.history import history_file
from reports import parallel, pipeline
from reports.checkers import HELD, UNKNOWN, CheckContext, CheckResult, registry
from reports.pipeline import build_report
from tests.procs import wait_for
from tests.test_report import make_run

WAIT_S = 60  # a deadline, never a pause: every wait below ends as soon as its condition holds


def _without_times(verdict: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(verdict, default=str))
    out.pop("generated_ns")
    out["input"].pop("source")  # JSON lines the first time, the columnar form after
    return out


def test_concurrent_report_equals_the_sequential_one(spark, tmp_path: Path, monkeypatch) -> None:
    """A whole report (checks, examples, metrics, the damaged client left out) is the same
    with three threads as with one; the progress names every task once, as it ends."""
    run = make_run(tmp_path / "run")
    with history_file(run.history, "client-2").open("a") as fh:
        fh.write('{"ts": 1763')  # a client cut off mid-line: its requests are left out of most checks
    monkeypatch.setenv(parallel.THREADS_ENV, "1")
    alone: list[str] = []
    one = _without_times(build_report(run.root, progress=alone.append))
    sc = spark.sparkContext
    assert sc.getLocalProperty("spark.jobGroup.id") is None  # run here, the caller's group put back
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    together: list[str] = []
    three = _without_times(build_report(run.root, progress=together.append))
    # Each task's jobs are in its own job group (a profile attributes them by name).
    assert sc.statusTracker().getJobIdsForGroup("metrics")
    assert sc.statusTracker().getJobIdsForGroup("no_duplicate")
    assert three == one
    assert one["checks"]["no_duplicate"]["status"] == "violated"  # the run has something to find
    assert list(one["input"]["damaged_clients"]) == ["client-2"]
    checks = list(one["checks"])
    assert f"checking {len(checks)} checks and the metrics (3 at a time)" in together
    assert f"checking {len(checks)} checks and the metrics one at a time" in alone
    for messages in (alone, together):
        done = [m.split()[0] for m in messages if m.startswith("  ") and " done in " in m]
        assert sorted(done) == sorted([*checks, "metrics"])


def _crash(ctx: CheckContext) -> CheckResult:
    raise RuntimeError("a checker's own bug")


def test_a_crashing_checker_among_concurrent_ones_is_unknown_with_its_traceback(spark, monkeypatch) -> None:
    from reports import checkers
    from tests.test_checkers import clean_history, make_ctx

    registry()
    monkeypatch.setitem(checkers._REGISTRY, "crashes", checkers.Checker("crashes", "always crashes", _crash))
    names = ["no_lost", "crashes", "in_order", "no_such_check", "no_duplicate"]
    said: list[str] = []
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    ctx = make_ctx(spark, clean_history())
    results, errors, also = pipeline.run_checks(ctx, names, said.append, also={"two": lambda: 2})
    ctx.release()
    assert [r.name for r in results] == names  # the manifest's order, whatever ended first
    assert also == {"two": 2}
    by_name = {r.name: r for r in results}
    assert by_name["crashes"].status == UNKNOWN
    assert by_name["crashes"].summary == "checker failed: RuntimeError: a checker's own bug"
    assert by_name["no_such_check"].status == UNKNOWN
    assert all(by_name[n].status == HELD for n in ("no_lost", "in_order", "no_duplicate"))
    assert len(errors) == 2
    assert errors[0].startswith("checker crashes failed:\nTraceback")
    assert "RuntimeError: a checker's own bug" in errors[0] and "_crash" in errors[0]
    assert errors[1].startswith("no checker named 'no_such_check'")
    monkeypatch.setenv(parallel.THREADS_ENV, "1")
    ctx = make_ctx(spark, clean_history())
    alone, alone_errors, _ = pipeline.run_checks(ctx, names, said.append)
    ctx.release()
    assert [(r.name, r.status, r.violations, r.summary, r.examples) for r in alone] == [
        (r.name, r.status, r.violations, r.summary, r.examples) for r in results
    ]
    assert [e.splitlines()[0] for e in alone_errors] == [e.splitlines()[0] for e in errors]


def test_an_exception_outside_the_checks_reaches_the_caller_after_every_task(spark, monkeypatch) -> None:
    from tests.test_checkers import clean_history, make_ctx

    def broken() -> None:
        raise ValueError("metrics broke")

    monkeypatch.setenv(parallel.THREADS_ENV, "2")
    ctx = make_ctx(spark, clean_history())
    with pytest.raises(ValueError, match="metrics broke"):
        pipeline.run_checks(ctx, ["no_lost", "in_order"], lambda _m: None, also={"metrics": broken})
    ctx.release()
    assert not [t for t in threading.enumerate() if t.name.startswith("zchaos-report-")]


@pytest.mark.parametrize("raw", ["0", "two", "-1"])
def test_a_bad_thread_count_names_the_variable(spark, monkeypatch, raw: str) -> None:
    monkeypatch.setenv(parallel.THREADS_ENV, raw)
    with pytest.raises(SetupError, match=parallel.THREADS_ENV):
        parallel.report_threads(spark)


def test_the_default_thread_count_follows_the_master(spark, monkeypatch) -> None:
    monkeypatch.delenv(parallel.THREADS_ENV, raising=False)
    cores = spark.sparkContext.defaultParallelism
    assert parallel.report_threads(spark) == max(1, min(parallel.MAX_THREADS, cores))


def _two_threads(*calls: Any) -> list[Any]:
    """Run each call in its own thread, all started together; their values (or exceptions)."""
    out: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait(WAIT_S)
        try:
            out[i] = calls[i]()
        except BaseException as exc:  # shown by the assertion on the values
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not any(t.is_alive() for t in threads), "a thread is stuck (deadlock?)"
    return out


def test_a_shared_frame_asked_for_by_two_threads_is_built_once(spark, monkeypatch) -> None:
    """The second thread asks while the first is building: it waits and gets the same frame."""
    ctx = CheckContext(spark, spark.range(10), {}, [])
    asked = threading.Event()
    builds: list[str] = []
    lock_of = ctx._lock_of

    def lock_of_noting(name: str):
        if threading.current_thread().name == "second" and name == "frame":
            asked.set()  # the second thread is about to wait for the lock
        return lock_of(name)

    monkeypatch.setattr(ctx, "_lock_of", lock_of_noting)

    def build(c: CheckContext):
        builds.append(threading.current_thread().name)
        assert asked.wait(WAIT_S), "the second thread never asked"
        return c.events.selectExpr("id * 2 AS x")

    first_built: list[Any] = []
    first = threading.Thread(target=lambda: first_built.append(ctx.shared("frame", build)), name="first")
    first.start()
    wait_for(lambda: builds == ["first"], WAIT_S, "the first thread to build")
    second_got: list[Any] = []
    second = threading.Thread(target=lambda: second_got.append(ctx.shared("frame", build)), name="second")
    second.start()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert builds == ["first"]
    assert first_built[0] is second_got[0]
    assert sorted(r.x for r in second_got[0].collect()) == list(range(0, 20, 2))
    ctx.release()


def test_a_builder_may_ask_for_another_shared_frame_while_a_thread_asks_for_it(spark) -> None:
    """No deadlock: one thread builds ``outer`` (which asks for ``inner``) while another asks
    for ``inner`` then ``outer``; each is built once."""
    ctx = CheckContext(spark, spark.range(100), {}, [])
    builds: list[str] = []

    def inner(c: CheckContext):
        builds.append("inner")
        return c.events.filter("id % 2 = 0")

    def outer(c: CheckContext):
        builds.append("outer")
        return c.shared("inner", inner).selectExpr("count(*) AS n")

    got = _two_threads(
        lambda: ctx.shared("outer", outer).first()["n"],
        lambda: (ctx.shared("inner", inner).count(), ctx.shared("outer", outer).first()["n"]),
    )
    assert got == [50, (50, 50)]
    assert sorted(builds) == ["inner", "outer"]
    ctx.release()


def test_an_interrupt_while_the_checks_run_stops_every_thread_and_job(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C reaching the waiting thread as the first task ends (the others running or
    queued): it propagates only once no thread of the report is left and no job runs."""
    run = make_run(tmp_path / "run")
    monkeypatch.setenv(parallel.THREADS_ENV, "2")
    said: list[str] = []

    def progress(message: str) -> None:
        said.append(message)
        if " done in " in message:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_report(run.root, progress=progress)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("zchaos-report-")]
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert sum(" done in " in m for m in said) == 1 and not run.verdict_json.exists()
    assert spark.range(3).count() == 3  # the session is still usable
