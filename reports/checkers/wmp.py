"""Protocol invariants of the Worker-Manager Protocol (implementations/wmp).

They read the ``wmp_*`` events: managers record ``wmp_take`` (TAKE sent), ``wmp_no`` and
``wmp_result`` (DONE received); workers record ``wmp_lock``, ``wmp_unlock``, ``wmp_take``
(job accepted) and ``wmp_done``. Manager-side ``wmp_take`` events are those whose ``src``
is the manager they name. A lock id is unique in a run (it starts with the worker's pid).

The lock timeout comes from the run's options (``lock_timeout_ms``), 1000 ms by default.
Where the network or a process was faulted, a message may be lost (the seed leaves
reliability to the application): losses that overlap a fault window are counted, not
held against the implementation.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers import HELD, MAX_EXAMPLES, UNKNOWN, VIOLATED, CheckContext, CheckResult, checker

#: How long a message may take to get through (devices, a loaded machine) before it counts as lost.
DELIVERY_SLACK_NS = 2_000_000_000
#: How late after its timeout a lock may be released (a busy single-threaded worker).
RELEASE_SLACK_NS = 1_000_000_000
#: A timeout release may come this much before the timeout (clock granularity).
EARLY_TOLERANCE_NS = 5_000_000


def _lock_timeout_ns(ctx: CheckContext) -> int:
    options = ctx.meta.get("scenario", {}).get("options", {}) or ctx.meta.get("manifest", {}).get(
        "options", {}
    )
    return int(float(options.get("lock_timeout_ms", 1000)) * 1_000_000)


def _in_fault(ctx: CheckContext, start_ns: int, stop_ns: int) -> bool:
    """Whether [start_ns, stop_ns] overlaps any fault window (an unhealed one lasts forever)."""
    return any(f.start_ns <= stop_ns and (f.stop_ns is None or f.stop_ns >= start_ns) for f in ctx.faults)


def _rows(df: DataFrame, limit: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.asDict().items() if v is not None} for r in df.limit(limit).collect()]


def _result(name: str, violations: int, examples: list[dict], summary: str, **figures: Any) -> CheckResult:
    return CheckResult(
        name, VIOLATED if violations else HELD, violations, examples[:MAX_EXAMPLES], summary, figures
    )


def _manager_side(ev: DataFrame) -> DataFrame:
    return ev.where(F.col("src") == F.col("manager"))


def _worker_side(ev: DataFrame) -> DataFrame:
    return ev.where(F.col("pid").isNotNull())


@checker("wmp_single_take", "WMP: each job is TAKEn by exactly one worker (given once, accepted once)")
def single_take(ctx: CheckContext) -> CheckResult:
    takes = ctx.events.where(F.col("ev") == "wmp_take").select(
        "ts", "src", "worker", "manager", "job", "lock", "pid"
    )
    given = _manager_side(takes).cache()
    accepted = _worker_side(takes).cache()
    n_given = given.count()
    if n_given == 0:
        return CheckResult("wmp_single_take", UNKNOWN, summary="no job was given (no manager-side wmp_take)")
    twice = given.groupBy("manager", "job").agg(F.count("*").alias("times"), F.min("ts").alias("ts"))
    twice = twice.where("times > 1")
    by_many = accepted.groupBy("manager", "job").agg(
        F.count("*").alias("times"), F.collect_set("worker").alias("workers"), F.min("ts").alias("ts")
    )
    by_many = by_many.where("times > 1")
    g = given.select("manager", "job", F.col("worker").alias("given_to"))
    phantom = accepted.join(g, ["manager", "job"], "left").where(
        F.col("given_to").isNull() | (F.col("given_to") != F.col("worker"))
    )
    unaccepted = given.join(accepted.select("manager", "job"), ["manager", "job"], "left_anti").count()
    n_twice, n_many, n_phantom = twice.count(), by_many.count(), phantom.count()
    examples = (
        [{"problem": "given twice", **r} for r in _rows(twice)]
        + [{"problem": "accepted more than once", **r} for r in _rows(by_many)]
        + [{"problem": "accepted but not given to this worker", **r} for r in _rows(phantom)]
    )
    return _result(
        "wmp_single_take",
        n_twice + n_many + n_phantom,
        examples,
        f"{n_given} jobs given; {n_twice} given twice, {n_many} accepted more than once, "
        f"{n_phantom} accepted by another worker; {unaccepted} never accepted (lost or late)",
        given=n_given,
        given_twice=n_twice,
        accepted_twice=n_many,
        phantom=n_phantom,
        never_accepted=unaccepted,
    )


@checker("wmp_capacity", "WMP: a worker never holds more jobs and locks than its capacity")
def capacity(ctx: CheckContext) -> CheckResult:
    ev = _worker_side(ctx.events.where(F.col("ev").isin("wmp_lock", "wmp_unlock", "wmp_done", "wmp_take")))
    ev = ev.select("ts", "ev", "worker", "pid", "lock", "job", "capacity").cache()
    if ev.where(F.col("ev") == "wmp_lock").limit(1).count() == 0:
        return CheckResult("wmp_capacity", UNKNOWN, summary="no worker locked a slot")
    delta = (
        F.when(F.col("ev") == "wmp_lock", 1).when(F.col("ev").isin("wmp_unlock", "wmp_done"), -1).otherwise(0)
    )
    # At one instant, releases count before new locks: that is the order the worker acts in.
    w = Window.partitionBy("worker", "pid").orderBy("ts", "d").rowsBetween(Window.unboundedPreceding, 0)
    cap = Window.partitionBy("worker", "pid")
    held = (
        ev.withColumn("d", delta)
        .withColumn("held", F.sum("d").over(w))
        .withColumn("cap", F.max("capacity").over(cap))
        .cache()
    )
    over = held.where((F.col("held") > F.col("cap")) | (F.col("held") < 0))
    locks = ev.where(F.col("ev") == "wmp_lock").select("worker", "pid", "lock", F.col("ts").alias("lock_ts"))
    takes = ev.where(F.col("ev") == "wmp_take")
    unlocked_take = takes.join(locks, ["worker", "pid", "lock"], "left").where(
        F.col("lock_ts").isNull() | (F.col("lock_ts") > F.col("ts"))
    )
    n_over, n_unlocked = over.count(), unlocked_take.count()
    peak = held.groupBy("worker", "pid").agg(F.max("held").alias("peak"), F.max("cap").alias("cap")).collect()
    full = sum(1 for r in peak if r["peak"] == r["cap"])
    examples = [{"problem": "over capacity (or below zero)", **r} for r in _rows(over.drop("d"))] + [
        {"problem": "job taken without a lock", **r} for r in _rows(unlocked_take.drop("capacity"))
    ]
    return _result(
        "wmp_capacity",
        n_over + n_unlocked,
        examples,
        f"{len(peak)} worker processes; {n_over} events over capacity, {n_unlocked} taken without a lock; "
        f"{full} processes reached their capacity",
        workers=len(peak),
        over_capacity=n_over,
        taken_without_lock=n_unlocked,
        reached_capacity=full,
    )


def _lock_lifecycle(ctx: CheckContext) -> DataFrame:
    """One row per lock: when it was taken, how and when it ended, the worker's last event."""
    ev = _worker_side(ctx.events.where(F.col("ev").isin("wmp_lock", "wmp_unlock", "wmp_take", "wmp_done")))
    # A late TAKE locks the same id a second time: the lock's life starts at its first lock.
    locks = (
        ev.where(F.col("ev") == "wmp_lock")
        .groupBy("worker", "pid", "lock")
        .agg(F.min("ts").alias("lock_ts"), F.first("manager").alias("manager"))
    )
    how = F.when(F.col("ev") == "wmp_take", F.lit("take")).otherwise(F.col("reason"))
    ends = (
        ev.where(F.col("ev").isin("wmp_unlock", "wmp_take"))
        .withColumn("how", how)
        .groupBy("worker", "pid", "lock")
        .agg(
            F.min("ts").alias("end_ts"),
            F.min_by("how", "ts").alias("how"),
            F.sum(F.when(F.col("ev") == "wmp_take", 1).otherwise(0)).alias("takes"),
        )
    )
    last = ctx.events.where(F.col("pid").isNotNull() & F.col("ev").startswith("wmp_"))
    last = last.groupBy("worker", "pid").agg(F.max("ts").alias("last_ts"))
    return locks.join(ends, ["worker", "pid", "lock"], "left").join(last, ["worker", "pid"], "left")


@checker("wmp_no_releases", "WMP: a NO from the manager releases the worker's lock (it never becomes a job)")
def no_releases(ctx: CheckContext) -> CheckResult:
    nos = _manager_side(ctx.events.where(F.col("ev") == "wmp_no")).select(
        "worker", "lock", F.col("manager").alias("no_from"), F.col("ts").alias("no_ts")
    )
    n_no = nos.count()
    if n_no == 0:
        return CheckResult("wmp_no_releases", UNKNOWN, summary="no manager answered NO")
    timeout = _lock_timeout_ns(ctx)
    joined = nos.join(_lock_lifecycle(ctx), ["worker", "lock"], "left").cache()
    taken = joined.where(F.col("takes") > 0)
    # Not released although the worker lived on well past the lock's timeout.
    stuck = joined.where(
        F.col("end_ts").isNull()
        & F.col("lock_ts").isNotNull()
        & (F.col("last_ts") > F.col("lock_ts") + timeout + RELEASE_SLACK_NS)
    )
    by_no = joined.where(F.col("how") == "no").count()
    by_timeout = joined.where(F.col("how") == "timeout").count()
    n_taken, n_stuck = taken.count(), stuck.count()
    examples = [{"problem": "answered NO, yet became a job", **r} for r in _rows(taken)] + [
        {"problem": "answered NO, never released", **r} for r in _rows(stuck)
    ]
    return _result(
        "wmp_no_releases",
        n_taken + n_stuck,
        examples,
        f"{n_no} NO answers: {by_no} released the lock, {by_timeout} arrived after its timeout; "
        f"{n_taken} became jobs, {n_stuck} never released",
        no=n_no,
        released_by_no=by_no,
        released_by_timeout=by_timeout,
        became_job=n_taken,
        never_released=n_stuck,
    )


@checker(
    "wmp_lock_timeout", "WMP: a lock neither TAKEn nor refused is released after its timeout, not before"
)
def lock_timeout(ctx: CheckContext) -> CheckResult:
    timeout = _lock_timeout_ns(ctx)
    locks = _lock_lifecycle(ctx).cache()
    n_locks = locks.count()
    if n_locks == 0:
        return CheckResult("wmp_lock_timeout", UNKNOWN, summary="no worker locked a slot")
    early = locks.where(
        (F.col("how") == "timeout") & (F.col("end_ts") < F.col("lock_ts") + timeout - EARLY_TOLERANCE_NS)
    )
    late = locks.where(
        (F.col("how") == "timeout") & (F.col("end_ts") > F.col("lock_ts") + timeout + RELEASE_SLACK_NS)
    )
    stuck = locks.where(
        F.col("end_ts").isNull() & (F.col("last_ts") > F.col("lock_ts") + timeout + RELEASE_SLACK_NS)
    )
    # A frozen or starved worker releases late: that is the fault's doing, not the protocol's.
    late_rows = [r.asDict() for r in late.union(stuck).collect()]
    blamed = [r for r in late_rows if not _in_fault(ctx, r["lock_ts"], r["end_ts"] or r["last_ts"])]
    n_early = early.count()
    timed_out = locks.where(F.col("how") == "timeout").count()
    examples = [{"problem": "released before its timeout", **r} for r in _rows(early)] + [
        {"problem": "held past its timeout", **{k: v for k, v in r.items() if v is not None}} for r in blamed
    ]
    return _result(
        "wmp_lock_timeout",
        n_early + len(blamed),
        examples,
        f"{n_locks} locks, {timed_out} released by timeout ({timeout / 1e6:.0f} ms); {n_early} too early, "
        f"{len(blamed)} held too long outside faults ({len(late_rows) - len(blamed)} during faults)",
        locks=n_locks,
        timed_out=timed_out,
        early=n_early,
        late=len(blamed),
        late_in_faults=len(late_rows) - len(blamed),
    )


@checker("wmp_result_routing", "WMP: every result reaches the manager that gave the job, through devices too")
def result_routing(ctx: CheckContext) -> CheckResult:
    ev = ctx.events
    sent = _worker_side(ev.where(F.col("ev") == "wmp_done")).select(
        "worker", "manager", "job", F.col("ts").alias("done_ts")
    )
    received = _manager_side(ev.where(F.col("ev") == "wmp_result")).select(
        "worker", "manager", "job", "detail", F.col("ts").alias("result_ts")
    )
    n_sent = sent.count()
    if n_sent == 0:
        return CheckResult("wmp_result_routing", UNKNOWN, summary="no worker finished a job")
    misrouted = received.where(F.col("detail").isNotNull())
    end_ts = ev.agg(F.max("ts")).first()[0]
    missing = sent.join(
        received.select("worker", "manager", "job"), ["worker", "manager", "job"], "left_anti"
    )
    missing_rows = [r.asDict() for r in missing.collect()]
    # Results sent in the last moments of the history may be on their way when it stops.
    counted = [r for r in missing_rows if r["done_ts"] + DELIVERY_SLACK_NS < end_ts]
    blamed = [
        r
        for r in counted
        if not _in_fault(ctx, r["done_ts"] - DELIVERY_SLACK_NS, r["done_ts"] + DELIVERY_SLACK_NS)
    ]
    n_mis = misrouted.count()
    examples = [
        {"problem": "received by a manager that did not give it (or from another worker)", **r}
        for r in _rows(misrouted)
    ]
    examples += [{"problem": "result never reached its manager", **r} for r in blamed]
    return _result(
        "wmp_result_routing",
        n_mis + len(blamed),
        examples,
        f"{n_sent} results sent; {n_mis} misrouted, {len(blamed)} lost outside faults, "
        f"{len(counted) - len(blamed)} lost during faults",
        sent=n_sent,
        misrouted=n_mis,
        lost=len(blamed),
        lost_in_faults=len(counted) - len(blamed),
    )
