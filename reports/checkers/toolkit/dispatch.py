"""Rules about the broker's view of its workers that several families share: the broker's
last registration or expiry of a worker before each dispatch (``with_state``), no job to a
worker it has not registered (``registered_dispatch``), and the latest of many events
before each of a few marks (``last_before``); each a broadcast range join over time
buckets, not a window sorting every event."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers import MAX_EXAMPLES, CheckContext, CheckResult, events_of
from reports.checkers.toolkit.facts import END_OF_TIME, NS, history_end, run_time
from reports.checkers.toolkit.results import count, example, result, rows


def with_state(ctx: CheckContext, dispatches: DataFrame) -> DataFrame:
    """``dispatches`` (broker events with ``ts``, ``src``, ``worker``) with the broker's last
    registration or expiry of that worker before each (``state``: ``worker_ready``,
    ``worker_expired`` or null for none; ``state_reason``: its reason).

    The registrations and expiries are few: each holds from its time to the next of the same
    broker and worker, and each dispatch finds the one whose span holds it by a broadcast
    range join (spans cut into buckets of time, the bucket an equality key), instead of a
    window sorting every dispatch by worker (at 10M events 2M dispatches, 11 s CPU). A
    change at the very time of a dispatch counts as before it."""
    changes = events_of(ctx, "worker_ready", "worker_expired").select(
        F.col("ts").alias("_from"),
        F.col("src").alias("_src"),
        F.col("worker").alias("_worker"),
        F.col("ev").alias("state"),
        F.col("reason").alias("state_reason"),
    )
    first, last, bucket_ns = _time_buckets(ctx)
    nxt = Window.partitionBy("_src", "_worker").orderBy("_from")
    until = F.coalesce(F.lead("_from").over(nxt), F.lit(END_OF_TIME))
    bucket = F.floor(F.col("_from") / bucket_ns).cast("long")
    # A span that outlasts the history ends, for its buckets, with the history.
    last_bucket = F.floor(F.least(F.col("_until"), F.lit(max(last, first))) / bucket_ns).cast("long")
    spans = (
        changes.withColumn("_until", until)
        .filter(F.col("_from") < F.col("_until"))  # a change overridden at the same time
        .withColumn("_b", F.explode(F.sequence(bucket, F.greatest(bucket, last_bucket))))
    )
    d_bucket = F.floor(F.col("ts") / bucket_ns).cast("long")
    cond = (
        F.col("src").eqNullSafe(F.col("_src"))
        & F.col("worker").eqNullSafe(F.col("_worker"))
        & (d_bucket == F.col("_b"))
        & (F.col("_from") <= F.col("ts"))
        & (F.col("ts") < F.col("_until"))
    )
    # The history's own ``state`` field (a server's) would shadow the one found here.
    return (
        dispatches.drop("state", "state_reason")
        .join(F.broadcast(spans), cond, "left")
        .drop("_from", "_src", "_worker", "_until", "_b")
    )


#: A registration's span is cut into buckets of about this share of the history's time
#: (at least a second), so that a dispatch is compared only with the spans of its bucket.
SPAN_BUCKETS = 500


def _time_buckets(ctx: CheckContext) -> tuple[int, int, int]:
    """(first, last, bucket_ns): the history's time and the buckets a range join cuts it into."""
    first, last = run_time(ctx, "started_ns"), history_end(ctx)
    if ctx.profile is not None:
        first = min(first, ctx.profile.first_ts)
    return first, last, max(NS, (last - first) // SPAN_BUCKETS)


def last_before(ctx: CheckContext, marks: DataFrame, events: DataFrame, key: str, name: str) -> DataFrame:
    """``marks`` (few rows with ``ts`` and ``key``: a worker's PINGs, say) with column ``name``:
    the latest ``ts`` of ``events`` (many rows with ``ts`` and ``key``) of the same key
    strictly before the mark, or null when there is none.

    The marks cut each key's time into intervals (from the previous mark to this one); each
    event finds its interval by a broadcast range join (the intervals cut into time buckets,
    the bucket an equality key, as in with_state), its maximum per interval is reduced before
    any shuffle, and a running maximum over the marks carries it on. One pass over
    ``events`` with no sort of them, where a window over events and marks together sorted
    every event (at 10M events 2M worker jobs: pingpong_reconnect's 11 s of CPU)."""
    first, last, bucket_ns = _time_buckets(ctx)
    by_time = Window.partitionBy(key).orderBy("ts")
    intervals = marks.select(
        F.col(key).alias("_k"), F.lag("ts").over(by_time).alias("_lo"), F.col("ts").alias("_hi")
    )
    lo_bucket = F.floor(F.coalesce(F.col("_lo"), F.lit(first)) / bucket_ns).cast("long")
    hi_bucket = F.floor(F.least(F.col("_hi"), F.lit(max(last, first))) / bucket_ns).cast("long")
    spans = intervals.withColumn("_b", F.explode(F.sequence(lo_bucket, F.greatest(lo_bucket, hi_bucket))))
    inside = (
        F.col(key).eqNullSafe(F.col("_k"))
        & (F.floor(F.col("ts") / bucket_ns).cast("long") == F.col("_b"))
        & (F.col("ts") < F.col("_hi"))
        & (F.col("_lo").isNull() | (F.col("ts") >= F.col("_lo")))
    )
    # Two marks at one time share an interval (the second's is empty): grouped by (key, time).
    latest = (
        events.select("ts", key)
        .join(F.broadcast(spans), inside)
        .groupBy("_k", "_hi")
        .agg(F.max("ts").alias("_latest"))
    )
    so_far = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        marks.join(
            F.broadcast(latest), F.col(key).eqNullSafe(F.col("_k")) & (F.col("ts") == F.col("_hi")), "left"
        )
        .withColumn(name, F.max("_latest").over(so_far))
        .drop("_k", "_hi", "_latest")
    )


def registered_dispatch(ctx: CheckContext) -> CheckResult:
    """Every dispatch to a worker follows its registration (``worker_ready``), with no
    ``worker_expired`` in between, per broker (``src``) and worker connection."""
    broker = events_of(ctx, "worker_ready", "worker_expired", "dispatch").select(
        "ts", "src", "ev", "worker", "rid", "reason", "detail"
    )
    checked = with_state(ctx, events_of(ctx, "dispatch").select(*broker.columns))
    is_bad = F.col("state").isNull() | (F.col("state") == "worker_expired")
    bad = checked.filter(is_bad)
    # One job for the three counts: dispatches and their offenders (the joined frame) and
    # expirations (the broker's own events).
    counted = (
        checked.select(F.lit(1).alias("d"), is_bad.cast("int").alias("b"), F.lit(0).alias("x"))
        .unionByName(
            broker.filter(F.col("ev") == "worker_expired").select(
                F.lit(0).alias("d"), F.lit(0).alias("b"), F.lit(1).alias("x")
            )
        )
        .agg(F.sum("d").alias("d"), F.sum("b").alias("b"), F.sum("x").alias("x"))
        .collect()[0]
    )
    dispatches, violations, expirations = count(counted["d"]), count(counted["b"]), count(counted["x"])
    found = [
        example(
            r,
            problem="sent to a worker it never registered"
            if r["state"] is None
            else f"sent to a worker it had expired ({r['state_reason']})",
        )
        for r in rows(bad, "ts", "src", "ev", "worker", "rid", "state", "state_reason", limit=MAX_EXAMPLES)
    ] if violations else []  # fmt: skip
    figures = {"dispatches": dispatches, "expirations": expirations, "to_expired_or_unknown": violations}
    if dispatches == 0:
        return result("no job was dispatched", figures, unknown="")
    summary = (
        f"{dispatches} dispatches, {expirations} expirations; {violations} to an expired or unknown worker"
    )
    return result(summary, figures, violations=violations, examples=found)
