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

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from reports.checkers import MAX_EXAMPLES, UNKNOWN, CheckContext, CheckResult, checker, nothing_to_judge
from reports.checkers.pingpong import (
    NS,
    dispatch_to_expired,
    example,
    excused_spans,
    history_end,
    instance_of,
    overlaps,
    result,
    rows,
    worker_instances,
)


@checker(
    "sketch_no_repeat_exec",
    "a server never executes the same request twice in a row: a repeat is answered from its cache",
    needs=("exec",),
)
def no_repeat_exec(ctx: CheckContext) -> CheckResult:
    execs = ctx.events.filter(F.col("ev") == "exec").select("ts", "src", "ev", "worker", "rid")
    order = Window.partitionBy("worker").orderBy("ts")
    repeats = execs.withColumn("previous_rid", F.lag("rid").over(order)).filter(
        F.col("rid") == F.col("previous_rid")
    )
    agg = execs.agg(F.count("*").alias("n"), F.countDistinct("rid").alias("rids")).first()
    replays = ctx.events.filter(F.col("ev") == "replay").count()
    violations = repeats.count()
    figures = {
        "executions": int(agg["n"] or 0),
        "requests_executed": int(agg["rids"] or 0),
        "cache_replays": replays,
    }
    if not figures["executions"]:
        return CheckResult(
            "sketch_no_repeat_exec", UNKNOWN, summary="no request was executed", figures=figures
        )
    found = [
        example(r, problem="executed again right after executing it")
        for r in rows(repeats, "ts", "src", "ev", "worker", "rid", limit=MAX_EXAMPLES)
    ]
    summary = (
        f"{figures['executions']} executions of {figures['requests_executed']} requests, "
        f"{replays} answered from a server's cache; {violations} repeated executions"
    )
    res = result("sketch_no_repeat_exec", found, summary, figures)
    res.violations = violations
    return res


@checker(
    "sketch_disabled_discarded",
    "every reply a server sends while the queue has it disabled is discarded (counted), never forwarded",
    needs=("worker_ready", "done"),
)
def disabled_discarded(ctx: CheckContext) -> CheckResult:
    queue = ctx.events.filter(F.col("ev").isin("worker_ready", "worker_expired")).select(
        "ts", "worker", F.col("ev").alias("state"), "reason"
    )
    done = ctx.events.filter(F.col("ev") == "done").select("ts", "src", "ev", "worker", "rid")
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
        .filter(F.col("ev") == "done")
    )
    while_disabled = marked.filter(
        (F.col("last_state") == "worker_expired") & (F.col("last_reason") == "disabled")
    )
    discards = (
        ctx.events.filter(F.col("ev") == "discard")
        .select(F.col("worker").alias("d_worker"), F.col("rid").alias("d_rid"), F.col("ts").alias("d_ts"))
        .filter(F.col("d_rid").isNotNull())
    )
    joined = while_disabled.join(
        discards,
        (F.col("d_worker") == F.col("worker"))
        & (F.col("d_rid") == F.col("rid"))
        & (F.col("d_ts") >= F.col("ts")),
        "left_anti",
    )
    end = history_end(ctx)
    servers = worker_instances(ctx)
    found: list[dict[str, Any]] = []
    for row in rows(joined, "ts", "src", "ev", "worker", "rid"):
        # The reply may still be on its way at the end, or lost with a server or queue that
        # was killed (or a link cut) before it arrived.
        spans = excused_spans(ctx, instance_of(row["worker"], servers), after_ns=0)
        if row["ts"] + NS > end or overlaps(spans, row["ts"], row["ts"] + NS):
            continue
        found.append(example(row, problem="reply of a disabled server not discarded"))
    discarded = ctx.events.filter((F.col("ev") == "discard") & (F.col("reason") == "disabled server")).count()
    disabled = ctx.events.filter((F.col("ev") == "worker_expired") & (F.col("reason") == "disabled")).count()
    figures = {
        "disabled": disabled,
        "replies_while_disabled": while_disabled.count(),
        "discarded": discarded,
        "not_discarded": len(found),
    }
    summary = (
        f"{disabled} times a server was disabled; {discarded} replies from disabled servers discarded, "
        f"{len(found)} not"
    )
    if not disabled:
        servers = {i for i, role in ctx.meta.get("processes", {}).items() if role == "server"}
        return nothing_to_judge(
            ctx, "sketch_disabled_discarded", "no server was disabled",
            "a fault on a server was planned but the queue disabled none; stall a server for longer",
            on=servers, figures=figures,
        )  # fmt: skip
    return result("sketch_disabled_discarded", found, summary, figures)


@checker(
    "sketch_no_dispatch_to_disabled",
    "the queue sends a request only to a server it has registered and not disabled or forgotten since",
    needs=("dispatch", "worker_ready"),
)
def no_dispatch_to_disabled(ctx: CheckContext) -> CheckResult:
    return dispatch_to_expired(ctx, "sketch_no_dispatch_to_disabled")
