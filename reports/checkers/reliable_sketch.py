"""Checkers of the reliable request-reply sketch (``implementations/reliable_sketch``).

- ``sketch_no_repeat_exec``: a server never executes the same request twice in a row (its
  cache answers the repeat: a ``replay``); checked per server connection, since a
  restarted server starts with an empty cache;
- ``sketch_disabled_discarded``: a reply a server sends while the queue has it disabled is
  discarded, never forwarded; the number discarded is the figure;
- ``sketch_no_dispatch_to_disabled``: the queue sends a request only to a server it has
  registered and not disabled (or forgotten) since.

No duplicate reply reaches a client: that is the generic ``no_duplicate``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers.toolkit import (
    EACH_REQUEST,
    MAX_EXAMPLES,
    NS,
    SUBJECT_EVENTS,
    CheckContext,
    CheckResult,
    any_row,
    broker_instances,
    checker,
    count,
    events_of,
    example,
    history_end,
    instance_column,
    kind_count,
    literal_rows,
    nothing_to_judge,
    of_the_load,
    process_events,
    registered_dispatch,
    result,
    rows,
    split_excused,
    worker_instances,
)


@checker(
    "sketch_no_repeat_exec",
    "a server never executes the same request twice in a row: a repeat is answered from its cache",
    needs=("exec",),
    on_damage=EACH_REQUEST,
)
def no_repeat_exec(ctx: CheckContext) -> CheckResult:
    execs = events_of(ctx, "exec").select("ts", "src", "ev", "worker", "rid")
    order = Window.partitionBy("worker").orderBy("ts")
    marked = execs.withColumn("previous_rid", F.lag("rid").over(order))
    # Two strangers' requests that carry one id ('x:0|' and random bytes: the malformed
    # fault's junk) are two requests, rightly both run (explore, reliable-sketch seed 1, run 5).
    repeated = (F.col("rid") == F.col("previous_rid")) & of_the_load(ctx, F.col("rid"))
    # The counts and the repeats in one query (one Spark job), the replays from the profile.
    agg = marked.agg(
        F.count("*").alias("n"),
        F.countDistinct("rid").alias("rids"),
        F.sum(repeated.cast("int")).alias("repeats"),
    ).collect()[0]
    replays = kind_count(ctx, "replay")
    violations = count(agg["repeats"])
    figures = {
        "executions": count(agg["n"]),
        "requests_executed": count(agg["rids"]),
        "cache_replays": replays,
    }
    if not figures["executions"]:
        return result("no request was executed", figures, unknown="")
    found = [
        example(r, problem="executed again right after executing it")
        for r in rows(marked.filter(repeated), "ts", "src", "ev", "worker", "rid", limit=MAX_EXAMPLES)
    ] if violations else []  # fmt: skip
    summary = (
        f"{figures['executions']} executions of {figures['requests_executed']} requests, "
        f"{replays} answered from a server's cache; {violations} repeated executions"
    )
    return result(summary, figures, violations=violations, examples=found)


@checker(
    "sketch_disabled_discarded",
    "every reply a server sends while the queue has it disabled is discarded (counted), never forwarded",
    needs=("worker_ready", "done"),
    on_damage=SUBJECT_EVENTS,
)
def disabled_discarded(ctx: CheckContext) -> CheckResult:
    queue = events_of(ctx, "worker_ready", "worker_expired").select(
        "ts", "worker", F.col("ev").alias("state"), "reason"
    )
    done = events_of(ctx, "done").select("ts", "src", "ev", "worker", "rid")
    before = Window.partitionBy("worker").orderBy("ts").rowsBetween(Window.unboundedPreceding, -1)
    both = done.withColumn("state", F.lit(None).cast("string")).withColumn(
        "reason", F.lit(None).cast("string")
    )
    both = both.unionByName(
        queue.withColumn("src", F.lit(None).cast("string"))
        .withColumn("ev", F.lit("state"))
        .withColumn("rid", F.lit(None).cast("string"))
    )
    marked = (
        both.withColumn("last_state", F.last("state", True).over(before))
        .withColumn("last_reason", F.last("reason", True).over(before))
        .withColumn("state_ts", F.last(F.when(F.col("ev") == "state", F.col("ts")), True).over(before))
        .filter(F.col("ev") == "done")
    )
    disabled_now = (F.col("last_state") == "worker_expired") & (F.col("last_reason") == "disabled")
    # A queue started again since the disabling knows nothing of it: the queue that disabled
    # the server died (explore, reliable-sketch seed 1: server-2 disabled while frozen, the
    # queue killed, the server's late reply never discarded by a queue that had not disabled it).
    queues = broker_instances(ctx)
    starts = [(r["ts"],) for r in process_events(ctx, "proc_start") if r["instance"] in queues]
    if starts:
        restarted = any_row(
            literal_rows(starts, {"_s": "long"}),
            lambda r: (r["_s"] > F.col("state_ts")) & (r["_s"] <= F.col("ts")),
        )
        disabled_now = disabled_now & ~restarted
    while_disabled = marked.filter(disabled_now)
    discards = (
        events_of(ctx, "discard")
        .select(F.col("worker").alias("d_worker"), F.col("rid").alias("d_rid"), F.col("ts").alias("d_ts"))
        .filter(F.col("d_rid").isNotNull())
    )
    # A shuffled hash join, not a broadcast (a Spark job of its own).
    joined = while_disabled.join(
        discards.hint("shuffle_hash"),
        (F.col("d_worker") == F.col("worker"))
        & (F.col("d_rid") == F.col("rid"))
        & (F.col("d_ts") >= F.col("ts")),
        "left_anti",
    )
    # The reply may still be on its way at the end, or lost with a server or queue that was
    # killed (or a link cut) before it arrived.
    pending = joined.withColumn("_server", instance_column(F.col("worker"), worker_instances(ctx)))
    pending = pending.withColumn("_arrived", F.col("ts") + NS)
    offending = split_excused(pending, ctx, until="_arrived", instance="_server")[0].filter(
        F.col("_arrived") <= history_end(ctx)
    )
    # The four counts in one query (one Spark job), each frame's rows tagged with its column.
    tagged = ("not_discarded", "while_disabled", "discarded", "disabled")

    def tag(df: DataFrame, name: str) -> DataFrame:
        return df.select(*(F.lit(int(t == name)).alias(t) for t in tagged))

    counted = (
        tag(offending, "not_discarded")
        .unionByName(tag(while_disabled, "while_disabled"))
        .unionByName(tag(events_of(ctx, "discard").filter(F.col("reason") == "disabled server"), "discarded"))
        .unionByName(tag(events_of(ctx, "worker_expired").filter(F.col("reason") == "disabled"), "disabled"))
        .agg(*(F.sum(t).alias(t) for t in tagged))
        .collect()[0]
    )
    not_discarded, discarded, disabled = (
        count(counted[t]) for t in ("not_discarded", "discarded", "disabled")
    )
    found = [
        example(r, problem="reply of a disabled server not discarded")
        for r in rows(offending, "ts", "src", "ev", "worker", "rid", limit=MAX_EXAMPLES)
    ] if not_discarded else []  # fmt: skip
    figures = {
        "disabled": disabled,
        "replies_while_disabled": count(counted["while_disabled"]),
        "discarded": discarded,
        "not_discarded": not_discarded,
    }
    summary = (
        f"{disabled} times a server was disabled; {discarded} replies from disabled servers discarded, "
        f"{not_discarded} not"
    )
    if not disabled:
        return nothing_to_judge(
            ctx,
            "no server was disabled",
            "a fault on a server was planned but the queue disabled none; stall a server for longer",
            on=worker_instances(ctx),
            figures=figures,
        )
    return result(summary, figures, violations=not_discarded, examples=found)


@checker(
    "sketch_no_dispatch_to_disabled",
    "the queue sends a request only to a server it has registered and not disabled or forgotten since",
    needs=("dispatch", "worker_ready"),
    on_damage=SUBJECT_EVENTS,
)
def no_dispatch_to_disabled(ctx: CheckContext) -> CheckResult:
    return registered_dispatch(ctx)
