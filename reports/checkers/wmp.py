"""Protocol invariants of the Worker-Manager Protocol (implementations/wmp).

They read the ``wmp_*`` events: managers record ``wmp_take`` (TAKE sent), ``wmp_no`` and
``wmp_result`` (DONE received); workers record ``wmp_lock``, ``wmp_unlock``, ``wmp_take``
(job accepted) and ``wmp_done``. Manager-side events are those whose ``src`` is the
manager they name; worker-side ones carry the worker's ``pid``. A lock id is unique in a
run (it starts with the worker's pid).

The lock timeout comes from the run's options (``lock_timeout_ms``), 1000 ms by default.
Where the network or a process was faulted, a message may be lost or late (the seed
leaves reliability to the application): such cases that overlap a fault window are
counted and shown, not held against the implementation.

Each checker gathers every problem it finds into one frame (the toolkit's ``problems``: a
``problem`` label and the offending row) and reads it with a single Spark action: a
handful of queries per checker, whatever the size of the history.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers.toolkit import (
    EACH_REQUEST,
    SUBJECT_EVENTS,
    CheckContext,
    CheckResult,
    checker,
    events_of,
    history_end,
    options,
    problems,
    result,
    split_excused,
)

#: How long a result may take to get through (devices, a loaded machine) before it counts as lost.
DELIVERY_SLACK_NS = 2_000_000_000
#: How late after its timeout a lock may be released (a busy single-threaded worker).
RELEASE_SLACK_NS = 1_000_000_000
#: A timeout release may come this much before the timeout (clock granularity).
EARLY_TOLERANCE_NS = 5_000_000


def _lock_timeout_ns(ctx: CheckContext) -> int:
    return int(float(options(ctx).get("lock_timeout_ms", 1000)) * 1_000_000)


def _manager_side(ev: DataFrame) -> DataFrame:
    return ev.where(F.col("src") == F.col("manager"))


def _worker_side(ev: DataFrame) -> DataFrame:
    return ev.where(F.col("pid").isNotNull())


GIVEN_TWICE = "given twice"
ACCEPTED_TWICE = "accepted more than once"
PHANTOM = "accepted by a worker it was not given to"
NEVER_ACCEPTED = "given, never accepted (lost on the way, or its lock had expired)"


@checker(
    "wmp_single_take",
    "WMP: each job is TAKEn by exactly one worker (given once, accepted once)",
    needs=("wmp_take", "wmp_result"),
    on_damage=EACH_REQUEST,
)
def single_take(ctx: CheckContext) -> CheckResult:
    takes = events_of(ctx, "wmp_take").select("ts", "src", "worker", "manager", "job", "lock", "pid")
    given = _manager_side(takes)
    accepted = _worker_side(takes)
    n_given = given.count()
    if n_given == 0:
        return result("no job was given (no manager-side wmp_take)", unknown="")
    twice = (
        given.groupBy("manager", "job")
        .agg(F.count("*").alias("times"), F.min("ts").alias("ts"))
        .where("times > 1")
    )
    many = (
        accepted.groupBy("manager", "job")
        .agg(F.count("*").alias("times"), F.collect_set("worker").alias("workers"), F.min("ts").alias("ts"))
        .where("times > 1")
    )
    owner = given.select("manager", "job", F.col("worker").alias("given_to"))
    phantom = accepted.join(owner, ["manager", "job"], "left").where(
        F.col("given_to").isNull() | (F.col("given_to") != F.col("worker"))
    )
    unaccepted = given.join(accepted.select("manager", "job"), ["manager", "job"], "left_anti")
    found = problems(
        (GIVEN_TWICE, twice), (ACCEPTED_TWICE, many), (PHANTOM, phantom), (NEVER_ACCEPTED, unaccepted)
    )
    return result(
        f"{n_given} jobs given; {found.n(GIVEN_TWICE)} given twice, {found.n(ACCEPTED_TWICE)} accepted "
        f"more than once, {found.n(PHANTOM)} by another worker; {found.n(NEVER_ACCEPTED)} never accepted",
        {
            "given": n_given,
            "given_twice": found.n(GIVEN_TWICE),
            "accepted_twice": found.n(ACCEPTED_TWICE),
            "phantom": found.n(PHANTOM),
            "never_accepted": found.n(NEVER_ACCEPTED),
        },
        violations=found.n(GIVEN_TWICE, ACCEPTED_TWICE, PHANTOM),
        examples=found.shown(GIVEN_TWICE, ACCEPTED_TWICE, PHANTOM),
    )


OVER = "held more than its capacity (or fewer than none)"
UNLOCKED_TAKE = "job accepted without a lock"
FULL = "worker process that reached its capacity"


@checker(
    "wmp_capacity",
    "WMP: a worker never holds more jobs and locks than its capacity",
    needs=("wmp_lock",),
    on_damage=SUBJECT_EVENTS,
)
def capacity(ctx: CheckContext) -> CheckResult:
    ev = _worker_side(events_of(ctx, "wmp_lock", "wmp_unlock", "wmp_done", "wmp_take"))
    ev = ev.select("ts", "ev", "worker", "pid", "lock", "job", "capacity")
    delta = (
        F.when(F.col("ev") == "wmp_lock", 1).when(F.col("ev").isin("wmp_unlock", "wmp_done"), -1).otherwise(0)
    )
    # At one instant, releases count before new locks: that is the order the worker acts in.
    running = Window.partitionBy("worker", "pid").orderBy("ts", "d").rowsBetween(Window.unboundedPreceding, 0)
    held = (
        ev.withColumn("d", delta)
        .withColumn("held", F.sum("d").over(running))
        .withColumn("cap", F.max("capacity").over(Window.partitionBy("worker", "pid")))
    )
    over = held.where((F.col("held") > F.col("cap")) | (F.col("held") < 0)).drop("d")
    locks = (
        ev.where(F.col("ev") == "wmp_lock").groupBy("worker", "pid", "lock").agg(F.min("ts").alias("lock_ts"))
    )
    unlocked = (
        ev.where(F.col("ev") == "wmp_take")
        .join(locks, ["worker", "pid", "lock"], "left")
        .where(F.col("lock_ts").isNull() | (F.col("lock_ts") > F.col("ts")))
        .drop("capacity")
    )
    peaks = held.groupBy("worker", "pid").agg(F.max("held").alias("peak"), F.max("cap").alias("cap"))
    full = peaks.where(F.col("peak") >= F.col("cap"))
    found = problems((OVER, over), (UNLOCKED_TAKE, unlocked), (FULL, full), ("worker process", peaks))
    if not found.n("worker process"):
        return result("no worker locked a slot", unknown="")
    return result(
        f"{found.n('worker process')} worker processes, {found.n(FULL)} reached their capacity; "
        f"{found.n(OVER)} events over capacity, {found.n(UNLOCKED_TAKE)} jobs without a lock",
        {
            "workers": found.n("worker process"),
            "reached_capacity": found.n(FULL),
            "over_capacity": found.n(OVER),
            "taken_without_lock": found.n(UNLOCKED_TAKE),
        },
        violations=found.n(OVER, UNLOCKED_TAKE),
        examples=found.shown(OVER, UNLOCKED_TAKE),
    )


def _lock_lifecycle(ctx: CheckContext) -> DataFrame:
    """One row per lock: when it was taken, how and when it ended, the worker's last event."""
    ev = _worker_side(ctx.events.where(F.col("ev").startswith("wmp_")))  # every wmp_* kind
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
    last = ev.groupBy("worker", "pid").agg(F.max("ts").alias("last_ts"))
    return locks.join(ends, ["worker", "pid", "lock"], "left").join(last, ["worker", "pid"], "left")


NO_TAKEN = "answered NO, yet became a job"
NO_STUCK = "answered NO, never released though the worker lived on"
NO_RELEASED = "released by the NO"
NO_TOO_LATE = "NO arrived after the lock had timed out"
NO_ANSWER = "NO"


@checker(
    "wmp_no_releases",
    "WMP: a NO from the manager releases the worker's lock (it never becomes a job)",
    needs=("wmp_lock", "wmp_result"),
    on_damage=SUBJECT_EVENTS,
)
def no_releases(ctx: CheckContext) -> CheckResult:
    nos = _manager_side(events_of(ctx, "wmp_no")).select(
        "worker", "lock", F.col("manager").alias("no_from"), F.col("ts").alias("no_ts")
    )
    timeout = _lock_timeout_ns(ctx)
    joined = nos.join(_lock_lifecycle(ctx).drop("manager"), ["worker", "lock"], "left")
    stuck = joined.where(
        F.col("end_ts").isNull() & (F.col("last_ts") > F.col("lock_ts") + timeout + RELEASE_SLACK_NS)
    )
    found = problems(
        (NO_ANSWER, nos),
        (NO_TAKEN, joined.where(F.col("takes") > 0)),
        (NO_STUCK, stuck),
        (NO_RELEASED, joined.where(F.col("how") == "no")),
        (NO_TOO_LATE, joined.where(F.col("how") == "timeout")),
    )
    if not found.n(NO_ANSWER):
        return result("no manager answered NO", unknown="")
    return result(
        f"{found.n(NO_ANSWER)} NO answers: {found.n(NO_RELEASED)} released their lock, "
        f"{found.n(NO_TOO_LATE)} came after its timeout; {found.n(NO_TAKEN)} became jobs, "
        f"{found.n(NO_STUCK)} never released",
        {
            "no": found.n(NO_ANSWER),
            "released_by_no": found.n(NO_RELEASED),
            "released_by_timeout": found.n(NO_TOO_LATE),
            "became_job": found.n(NO_TAKEN),
            "never_released": found.n(NO_STUCK),
        },
        violations=found.n(NO_TAKEN, NO_STUCK),
        examples=found.shown(NO_TAKEN, NO_STUCK),
    )


EARLY = "released before its timeout"
LATE = "held past its timeout"
LATE_IN_FAULT = "held past its timeout during a fault"
TIMED_OUT = "released by timeout"
LOCK = "lock"


@checker(
    "wmp_lock_timeout",
    "WMP: a lock neither TAKEn nor refused is released after its timeout, not before",
    needs=("wmp_lock",),
    on_damage=SUBJECT_EVENTS,
)
def lock_timeout(ctx: CheckContext) -> CheckResult:
    timeout = _lock_timeout_ns(ctx)
    locks = _lock_lifecycle(ctx)
    by_timeout = F.col("how") == "timeout"
    early = locks.where(by_timeout & (F.col("end_ts") < F.col("lock_ts") + timeout - EARLY_TOLERANCE_NS))
    bound = F.col("lock_ts") + timeout + RELEASE_SLACK_NS
    late = locks.where(
        (by_timeout & (F.col("end_ts") > bound)) | (F.col("end_ts").isNull() & (F.col("last_ts") > bound))
    )
    # A frozen or starved worker releases late: that is the fault's doing, not the protocol's.
    late_kept, late_excused = split_excused(
        late.withColumn("held_until", F.coalesce("end_ts", "last_ts")), ctx, ts="lock_ts", until="held_until"
    )
    found = problems(
        (LOCK, locks),
        (TIMED_OUT, locks.where(by_timeout)),
        (EARLY, early),
        (LATE, late_kept.drop("held_until")),
        (LATE_IN_FAULT, late_excused.drop("held_until")),
    )
    if not found.n(LOCK):
        return result("no worker locked a slot", unknown="")
    return result(
        f"{found.n(LOCK)} locks, {found.n(TIMED_OUT)} released by timeout ({timeout / 1e6:.0f} ms); "
        f"{found.n(EARLY)} too early, {found.n(LATE)} held too long "
        f"({found.n(LATE_IN_FAULT)} during faults)",
        {
            "locks": found.n(LOCK),
            "timed_out": found.n(TIMED_OUT),
            "early": found.n(EARLY),
            "late": found.n(LATE),
            "late_in_faults": found.n(LATE_IN_FAULT),
        },
        violations=found.n(EARLY, LATE),
        examples=found.shown(EARLY, LATE),
    )


MISROUTED = "received by a manager that did not give it (or from another worker)"
LOST = "result never reached its manager"
LOST_IN_FAULT = "result lost during a fault"
SENT = "result sent"


@checker(
    "wmp_result_routing",
    "WMP: every result reaches the manager that gave the job, through devices too",
    needs=("wmp_done", "wmp_result"),
    on_damage=EACH_REQUEST,
)
def result_routing(ctx: CheckContext) -> CheckResult:
    sent = _worker_side(events_of(ctx, "wmp_done")).select(
        "worker", "manager", "job", "rid", F.col("ts").alias("done_ts")
    )
    received = _manager_side(events_of(ctx, "wmp_result"))
    misrouted = received.where(F.col("detail").isNotNull()).select("ts", "worker", "manager", "job", "detail")
    end_ts = history_end(ctx)
    # Results sent in the last moments of the history may be on their way when it stops.
    missing = sent.join(
        received.select("worker", "manager", "job"), ["worker", "manager", "job"], "left_anti"
    )
    missing = missing.where(F.col("done_ts") + DELIVERY_SLACK_NS < end_ts)
    lost, lost_in_fault = split_excused(
        missing.withColumn("_from", F.col("done_ts") - DELIVERY_SLACK_NS).withColumn(
            "_to", F.col("done_ts") + DELIVERY_SLACK_NS
        ),
        ctx,
        ts="_from",
        until="_to",
    )
    found = problems(
        (SENT, sent),
        (MISROUTED, misrouted),
        (LOST, lost.drop("_from", "_to")),
        (LOST_IN_FAULT, lost_in_fault.drop("_from", "_to")),
    )
    if not found.n(SENT):
        return result("no worker finished a job", unknown="")
    return result(
        f"{found.n(SENT)} results sent; {found.n(MISROUTED)} misrouted, {found.n(LOST)} lost outside "
        f"faults, {found.n(LOST_IN_FAULT)} lost during faults",
        {
            "sent": found.n(SENT),
            "misrouted": found.n(MISROUTED),
            "lost": found.n(LOST),
            "lost_in_faults": found.n(LOST_IN_FAULT),
        },
        violations=found.n(MISROUTED, LOST),
        examples=found.shown(MISROUTED, LOST),
    )
