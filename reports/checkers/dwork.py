"""Protocol invariants of the dwork scheduler (implementations/dwork).

They read the scheduler's ``task_create`` (with ``deps``), ``task_assign``,
``task_complete`` and ``task_requeue`` events, the workers' ``task_run`` and the
monitor's ``worker_expired`` (it sent Exit for that worker). ``job`` is the task name.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers.toolkit import (
    EACH_REQUEST,
    NS,
    CheckContext,
    CheckResult,
    any_row,
    checker,
    events_of,
    history_end,
    literal_rows,
    nothing_to_judge,
    problems,
    process_events,
    result,
    run_time,
    worker_instances,
)

#: Requeued tasks are handed out again, and Exit's requeues happen, within this (ns).
REQUEUE_SLACK_NS = 5 * NS


def _settle_ns(ctx: CheckContext) -> int:
    """How long before the end of the history a task may still be unfinished."""
    return int(float(ctx.promises.get("recovery_bound_s", 10.0)) * NS)


TWICE = "completed more than once"
RERUN = "run again without an Exit or Transfer before"
NOT_ASSIGNED = "completed by a worker it was not assigned to"
RUN_AGAIN = "run again after an Exit or Transfer (allowed, recorded)"
CREATED = "task created"


@checker(
    "dwork_complete_once",
    "dwork: every task completes exactly once; it runs again only after its worker's Exit or a Transfer",
    needs=("task_create", "task_complete"),
    on_damage=EACH_REQUEST,
)
def complete_once(ctx: CheckContext) -> CheckResult:
    created = events_of(ctx, "task_create").where(F.col("detail").isNull()).select("job", "ts")
    completes = events_of(ctx, "task_complete").select("job", "worker", "ts")
    twice = (
        completes.groupBy("job").agg(F.count("*").alias("times"), F.min("ts").alias("ts")).where("times > 1")
    )
    runs = events_of(ctx, "task_run").groupBy("job").agg(F.count("*").alias("runs"), F.max("ts").alias("ts"))
    requeues = events_of(ctx, "task_requeue").groupBy("job").agg(F.count("*").alias("requeues"))
    per_task = runs.join(requeues, "job", "left").fillna(0, ["requeues"])
    rerun = per_task.where(F.col("runs") > F.col("requeues") + 1)
    allowed = per_task.where((F.col("runs") > 1) & (F.col("runs") <= F.col("requeues") + 1))
    # The assignment in force when the Complete came: the latest one before it.
    assigns = events_of(ctx, "task_assign").select(
        "job", F.col("worker").alias("assigned_to"), F.col("ts").alias("at")
    )
    latest = Window.partitionBy("job", "ts").orderBy(F.col("at").desc())
    wrong = (
        completes.join(assigns, "job", "left")
        .where(F.col("at").isNull() | (F.col("at") < F.col("ts")))
        .withColumn("k", F.row_number().over(latest))
        .where("k = 1")
        .where(F.col("assigned_to").isNull() | (F.col("assigned_to") != F.col("worker")))
        .drop("k")
    )
    found = problems(
        (CREATED, created),
        (TWICE, twice),
        (RERUN, rerun),
        (NOT_ASSIGNED, wrong),
        (RUN_AGAIN, allowed),
        shown=(TWICE, RERUN, NOT_ASSIGNED),
    )
    if not found.n(CREATED):
        return result("no task was created", unknown="")
    return result(
        f"{found.n(CREATED)} tasks; {found.n(TWICE)} completed twice, {found.n(RERUN)} run again unasked, "
        f"{found.n(NOT_ASSIGNED)} by the wrong worker; {found.n(RUN_AGAIN)} re-run after Exit/Transfer",
        {
            "tasks": found.n(CREATED),
            "completed_twice": found.n(TWICE),
            "rerun_unasked": found.n(RERUN),
            "wrong_worker": found.n(NOT_ASSIGNED),
            "rerun_after_requeue": found.n(RUN_AGAIN),
        },
        violations=found.n(TWICE, RERUN, NOT_ASSIGNED),
        examples=found.shown(TWICE, RERUN, NOT_ASSIGNED),
    )


EARLY_RUN = "run before a dependency completed"
EARLY_ASSIGN = "assigned before a dependency completed"
EDGES = "dependency"


@checker(
    "dwork_deps_first",
    "dwork: no task is assigned or starts before all its dependencies completed",
    needs=("task_create", "task_complete"),
    on_damage=EACH_REQUEST,
)
def deps_first(ctx: CheckContext) -> CheckResult:
    edges = (
        events_of(ctx, "task_create")
        .where(F.col("deps").isNotNull() & (F.col("deps") != ""))
        .select("job", F.explode(F.split("deps", ",")).alias("dep"))
        .distinct()
    )
    done = events_of(ctx, "task_complete").groupBy("job").agg(F.min("ts").alias("dep_done"))
    done = done.withColumnRenamed("job", "dep")
    edges_done = edges.join(done, "dep", "left")

    def too_early(kind: str) -> DataFrame:
        starts = events_of(ctx, kind).select("job", "worker", "ts")
        return starts.join(edges_done, "job").where(
            F.col("dep_done").isNull() | (F.col("dep_done") > F.col("ts"))
        )

    found = problems(
        (EDGES, edges),
        (EARLY_ASSIGN, too_early("task_assign")),
        (EARLY_RUN, too_early("task_run")),
        shown=(EARLY_ASSIGN, EARLY_RUN),
    )
    if not found.n(EDGES):
        return result("no task had dependencies", unknown="")
    return result(
        f"{found.n(EDGES)} dependencies; {found.n(EARLY_ASSIGN)} assignments and {found.n(EARLY_RUN)} runs "
        "before a dependency completed",
        {
            "dependencies": found.n(EDGES),
            "early_assignments": found.n(EARLY_ASSIGN),
            "early_runs": found.n(EARLY_RUN),
        },
        violations=found.n(EARLY_ASSIGN, EARLY_RUN),
        examples=found.shown(EARLY_ASSIGN, EARLY_RUN),
    )


UNFINISHED = "created, never completed"
RECENT = "created near the end, not completed yet"
LOST = "open when the scheduler that created it exited (lost with it)"


@checker(
    "dwork_all_complete",
    "dwork: every created task completes in the end (while workers are alive)",
    needs=("task_create",),
    on_damage=EACH_REQUEST,
)
def all_complete(ctx: CheckContext) -> CheckResult:
    created = (
        events_of(ctx, "task_create")
        .groupBy("job")
        .agg(F.min("ts").alias("ts"), F.first("rid").alias("rid"), F.first("src").alias("src"))
    )
    end_ts = history_end(ctx)
    open_ = created.join(events_of(ctx, "task_complete").select("job"), "job", "left_anti")
    # A task open when the scheduler that created it exited (killed, restarted: it keeps its
    # graphs in memory, as the seed allows) died with it: the client's request for it ends
    # in an abandon, which no_lost judges (explore, dwork seed 1, run 7 replayed: a scheduler
    # killed at 3.4 s and restarted had 5 such tasks "never completed"). The teardown's exits
    # after the load end nothing.
    stopped = run_time(ctx, "load_stopped_ns")
    exits = [(r["instance"], r["ts"]) for r in process_events(ctx, "proc_exit") if r["ts"] <= stopped]
    frame = literal_rows(exits, {"_inst": "string", "_at": "long"})
    died = any_row(frame, lambda x: (x["_inst"] == F.col("src")) & (x["_at"] > F.col("ts")))
    lost = open_.where(died) if exits else open_.where(F.lit(False))
    open_ = open_.where(~died) if exits else open_
    cutoff = end_ts - _settle_ns(ctx)
    found = problems(
        (CREATED, created),
        (UNFINISHED, open_.where(F.col("ts") < cutoff)),
        (RECENT, open_.where(F.col("ts") >= cutoff)),
        (LOST, lost),
        shown=(UNFINISHED,),
    )
    if not found.n(CREATED):
        return result("no task was created", unknown="")
    return result(
        f"{found.n(CREATED)} tasks; {found.n(UNFINISHED)} never completed, {found.n(RECENT)} created in the "
        f"last {_settle_ns(ctx) / NS:.0f} s still open, {found.n(LOST)} lost with the scheduler "
        "that had them",
        {
            "tasks": found.n(CREATED),
            "never_completed": found.n(UNFINISHED),
            "open_at_end": found.n(RECENT),
            "lost_with_scheduler": found.n(LOST),
        },
        violations=found.n(UNFINISHED),
        examples=found.shown(UNFINISHED),
    )


KEPT = "held by a worker marked down, not put back"
NOT_AGAIN = "put back after Exit, never handed out again"
EXPIRED = "worker marked down"
RETURNED = "task put back by Exit"


@checker(
    "dwork_exit_requeues",
    "dwork: Exit puts every task its worker held back in the ready pool",
    needs=("task_assign",),
    on_damage=EACH_REQUEST,
)
def exit_requeues(ctx: CheckContext) -> CheckResult:
    expired = events_of(ctx, "worker_expired").select("worker", F.col("ts").alias("exit_ts"))
    assigns = events_of(ctx, "task_assign").select("job", "worker", F.col("ts").alias("at"))
    ends = (
        events_of(ctx, "task_complete")
        .select("job", "worker", "ts")
        .unionByName(events_of(ctx, "task_requeue").select("job", "worker", "ts"))
    )
    # What each assignment became: the first complete or requeue of that task by that worker after it.
    first_end = (
        assigns.join(ends, ["job", "worker"], "left")
        .where(F.col("ts").isNull() | (F.col("ts") > F.col("at")))
        .groupBy("job", "worker", "at")
        .agg(F.min("ts").alias("end_ts"))
    )
    held = first_end.join(expired, "worker").where(F.col("at") < F.col("exit_ts"))
    kept = held.where(F.col("end_ts").isNull() | (F.col("end_ts") > F.col("exit_ts") + REQUEUE_SLACK_NS))
    end_ts = history_end(ctx)
    back = events_of(ctx, "task_requeue").where(F.col("reason") == "exit").select("job", "worker", "ts")
    again = assigns.groupBy("job").agg(F.max("at").alias("last_at"))
    not_again = (
        back.join(again, "job", "left")
        .where(F.col("last_at").isNull() | (F.col("last_at") < F.col("ts")))
        .where(F.col("ts") + REQUEUE_SLACK_NS < end_ts)
    )
    found = problems(
        (EXPIRED, expired), (RETURNED, back), (KEPT, kept), (NOT_AGAIN, not_again), shown=(KEPT, NOT_AGAIN)
    )
    if not found.n(EXPIRED):
        return nothing_to_judge(
            ctx,
            "no worker was marked down (no Exit)",
            "a fault on a worker was planned but the scheduler marked no worker down",
            on=worker_instances(ctx),
        )
    return result(
        f"{found.n(EXPIRED)} workers marked down, {found.n(RETURNED)} tasks put back; {found.n(KEPT)} kept, "
        f"{found.n(NOT_AGAIN)} never handed out again",
        {
            "exits": found.n(EXPIRED),
            "returned": found.n(RETURNED),
            "kept": found.n(KEPT),
            "not_handed_out_again": found.n(NOT_AGAIN),
        },
        violations=found.n(KEPT, NOT_AGAIN),
        examples=found.shown(KEPT, NOT_AGAIN),
    )
