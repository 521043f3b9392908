"""The report's checks and metrics run a few at a time (reports/parallel.py): the same
verdict as one at a time, a crashing checker still a result, shared frames built once."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from contract.errors import SetupError
from contract.history import history_file
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


@pytest.mark.slow
def test_concurrent_report_equals_the_sequential_one(spark, tmp_path: Path, monkeypatch) -> None:
    """A whole report (checks, examples, metrics, the damaged client left out) is the same
    with three threads as with one; the progress names every task once, as it ends."""
    run = make_run(tmp_path / "run")
    with history_file(run.history, "client-2").open("a") as fh:
        fh.write('{"ts": 1763')  # a client cut off mid-line: its requests are left out of most checks
    monkeypatch.setenv(parallel.THREADS_ENV, "1")
    alone: list[str] = []
    one = _without_times(build_report(run.root, progress=alone.append))
    assert spark.getTags() == set()  # run here, each task's tag removed as it ended
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    together: list[str] = []
    three = _without_times(build_report(run.root, progress=together.append))
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
    assert parallel.cores(spark) == os.cpu_count()  # a local session sets no default parallelism
    assert parallel.report_threads(spark) == max(1, min(parallel.MAX_THREADS, os.cpu_count() or 1))


def test_each_task_runs_with_its_name_as_a_tag_and_removes_it(spark) -> None:
    """A task's Spark operations carry its name (interruptTag cancels them; a profile
    attributes them), in a pool's thread and in the caller's; none is left behind."""
    for threads in (1, 2):
        with parallel.Tasks(spark, threads) as pool:
            pool.add(parallel.Task("metrics", spark.getTags), parallel.Task("no_lost", spark.getTags))
            pool.wait()
        assert [t.value for t in pool.tasks] == [{"metrics"}, {"no_lost"}]
    assert spark.getTags() == set()


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


@pytest.mark.slow  # 7 s; the quick tier has a crashing checker among concurrent ones
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
    # The status tracker reads the listener bus's store, which learns of the cancelled jobs a moment later.
    wait_for(lambda: spark.sparkContext.statusTracker().getActiveJobsIds() == [], WAIT_S, "no job running")
    assert sum(" done in " in m for m in said) == 1 and not run.verdict_json.exists()
    assert spark.range(3).count() == 3  # the session is still usable


def test_tasks_added_first_run_while_the_caller_goes_on(spark, monkeypatch) -> None:
    """A pool's first task (the metrics, in a report) runs while the caller's thread does its
    own work (the control events), and the caller's task list stays in order."""
    go_on = threading.Event()
    with parallel.Tasks(spark, 2) as pool:
        pool.add(parallel.Task("early", lambda: (go_on.wait(WAIT_S), spark.range(5).count())[1]))
        # The task is running already: it waits for this thread, which has not called wait().
        wait_for(
            lambda: any(t.name.startswith("zchaos-report-") for t in threading.enumerate()),
            WAIT_S,
            "a thread",
        )
        go_on.set()
        wait_for(lambda: pool.tasks[0].done, WAIT_S, "the early task")
        pool.add(parallel.Task("late", lambda: spark.range(3).count()))
        ended: list[str] = []
        pool.wait(lambda t: ended.append(t.name))
    assert [(t.name, t.value, t.error) for t in pool.tasks] == [("early", 5, None), ("late", 3, None)]
    assert sorted(ended) == ["early", "late"]
    assert not [t for t in threading.enumerate() if t.name.startswith("zchaos-report-")]


def test_one_thread_runs_nothing_before_wait(spark) -> None:
    ran: list[str] = []
    with parallel.Tasks(spark, 1) as pool:
        pool.add(parallel.Task("first", lambda: ran.append("first")))
        assert ran == []
        pool.add(parallel.Task("second", lambda: ran.append("second")))
        pool.wait()
    assert ran == ["first", "second"]


def test_an_error_of_the_caller_before_wait_cancels_the_running_tasks(spark) -> None:
    """The caller fails (a bad history, Ctrl-C) while a task runs a long Spark job: the job is
    cancelled and no thread is left when the error reaches the caller's caller."""
    sc = spark.sparkContext  # the test session is a classic one: its status tracker shows the jobs
    with pytest.raises(ValueError, match="the caller broke"), parallel.Tasks(spark, 2) as pool:
        pool.add(
            parallel.Task(
                "endless", lambda: spark.range(0, 10**13, numPartitions=2).selectExpr("sum(id)").first()
            )
        )
        wait_for(lambda: sc.statusTracker().getActiveJobsIds(), WAIT_S, "the long job to start")
        raise ValueError("the caller broke")
    assert not [t for t in threading.enumerate() if t.name.startswith("zchaos-report-")]
    assert pool.tasks[0].error is not None  # cancelled, not finished
    wait_for(lambda: sc.statusTracker().getActiveJobsIds() == [], WAIT_S, "no job running")


def test_the_preloaded_modules_are_what_the_session_start_imports() -> None:
    """reports.spark preloads pyspark.testing.utils while the JVM starts because PySpark's
    NumPy converter imports it (with pandas) on the first call into the JVM: if a new PySpark
    stops doing so, the preload is dead weight and must go."""
    import inspect

    from pyspark.sql.types import NumpyArrayConverter

    from reports import spark as spark_module

    assert "pyspark.testing.utils" in inspect.getsource(NumpyArrayConverter.can_convert)
    assert "pyspark.testing.utils" in spark_module.PRELOAD
    spark_module._preload()
    import sys

    assert all(name in sys.modules for name in spark_module.PRELOAD)
