"""Checkers of the pirate family and Majordomo (queues and brokers that track workers).

- ``stale_execution``: requests executed after their client had abandoned them, counted
  and shown; a violation only where the manifest promises ``stale_execution = "forbidden"``
  (the default, ``"allowed"``, reports without judging: an at-least-once queue cannot
  call back work it already handed out).
- ``no_dispatch_to_expired``: the broker never hands a request to a worker it had given
  up on (``worker_expired``), never registered, or registered only with an earlier
  incarnation of the broker (a restart forgets every worker).
- ``mmi_service``: Majordomo's ``mmi.service`` answers (``mmi_reply``) agree with the
  broker's own registrations: ``200`` exactly while a worker of that service is
  registered and not expired, ``404`` otherwise, ``501`` for any other ``mmi.*``.

A broker's incarnations are told apart by the runner's ``proc_start``/``proc_exit``
events of the instance whose name is the broker's history source.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers import CheckContext, CheckResult, checker
from reports.checkers.toolkit import count, events_of, examples, judged, unknown


def _restarts(ctx: CheckContext) -> DataFrame:
    """(bsrc, tr): times at which a process that may be a broker started or ended."""
    procs = events_of(ctx, "proc_start", "proc_exit")
    return procs.select(F.col("instance").alias("bsrc"), F.col("ts").alias("tr"))


# --- stale_execution -------------------------------------------------------------------


@checker(
    "stale_execution",
    "requests a worker executed after their client had abandoned them (counted; a violation "
    'only where the manifest promises stale_execution = "forbidden")',
)
def stale_execution(ctx: CheckContext) -> CheckResult:
    policy = str(ctx.promises.get("stale_execution", "allowed"))
    abandons = (
        events_of(ctx, "abandon")
        .groupBy("rid")
        .agg(F.min("ts").alias("abandoned_ns"), F.first("cid").alias("cid"), F.first("seq").alias("seq"))
    )
    execs = (
        events_of(ctx, "exec")
        .select("ts", "src", "ev", "rid", "worker")
        .join(abandons, "rid", "left")
        .withColumn("stale", F.col("ts") > F.coalesce("abandoned_ns", F.lit(None).cast("long")))
    )
    row = execs.agg(
        F.count("*").alias("execs"),
        F.sum(F.col("stale").cast("int")).alias("n"),
        F.countDistinct(F.when(F.col("stale"), F.col("rid"))).alias("requests"),
    ).first()
    n_execs, n, requests = count(row["execs"]), count(row["n"]), count(row["requests"])
    figures = {"policy": policy, "stale_executions": n, "requests": requests, "exec_events": n_execs}
    if n_execs == 0:
        return unknown("stale_execution", "no exec events recorded", figures)
    summary = f"{n} execution(s) of {requests} request(s) after their client abandoned them ({policy})"
    found = []
    if n:
        found = examples(
            execs.filter(F.col("stale")).select(
                "ts", "src", "ev", "cid", "seq", "rid", "worker", "abandoned_ns",
                F.lit("executed after its client abandoned it").alias("problem"),
            )
        )  # fmt: skip
    return judged("stale_execution", n if policy == "forbidden" else 0, found, summary, figures)


# --- no_dispatch_to_expired ------------------------------------------------------------


@checker(
    "no_dispatch_to_expired",
    "the broker dispatches only to workers registered with it and not expired since "
    "(nor registered with an earlier incarnation of the broker only)",
)
def no_dispatch_to_expired(ctx: CheckContext) -> CheckResult:
    base = ["ts", "src", "ev", "worker", "rid", "service"]
    marks = events_of(ctx, "worker_ready", "worker_expired", "dispatch").select(*base)
    per_worker = Window.partitionBy("src", "worker").orderBy("ts")
    per_worker = per_worker.rowsBetween(Window.unboundedPreceding, -1)
    state = F.when(F.col("ev") == "worker_ready", F.lit("ready"))
    state = state.when(F.col("ev") == "worker_expired", "expired")
    ready_ts = F.when(F.col("ev") == "worker_ready", F.col("ts"))
    dispatches = (
        marks.withColumn("state", F.last(state, ignorenulls=True).over(per_worker))
        .withColumn("ready_ns", F.last(ready_ts, ignorenulls=True).over(per_worker))
        .filter(F.col("ev") == "dispatch")
        .withColumn("dispatch_id", F.monotonically_increasing_id())
    )
    restarts = _restarts(ctx)
    judged = (
        dispatches.join(
            restarts,
            (restarts["bsrc"] == dispatches["src"])
            & restarts["tr"].between(dispatches["ready_ns"], dispatches["ts"]),
            "left",
        )
        .groupBy("dispatch_id", *base, "state")
        .agg(F.count("tr").alias("restarts"))
        .withColumn(
            "problem",
            F.when(F.col("state").isNull(), "never registered")
            .when(F.col("state") == "expired", "worker had expired")
            .when(F.col("restarts") > 0, "worker registered with an earlier broker incarnation"),
        )
        .drop("dispatch_id", "state", "restarts")
    )
    counts = {r["problem"]: r["n"] for r in judged.groupBy("problem").agg(F.count("*").alias("n")).collect()}
    total = sum(counts.values())
    if total == 0:
        return unknown("no_dispatch_to_expired", "no dispatch events recorded")
    kinds = {k: v for k, v in counts.items() if k is not None}
    n = sum(kinds.values())
    summary = f"{total} dispatches, {n} to workers the broker did not hold" + (f" {kinds}" if kinds else "")
    found = examples(judged.filter(F.col("problem").isNotNull())) if n else []
    figures = {"dispatches": total, "offending": n, "by_problem": kinds}
    return judged("no_dispatch_to_expired", n, found, summary, figures)


# --- mmi_service -----------------------------------------------------------------------


def registrations(ctx: CheckContext) -> DataFrame:
    """(bsrc, worker, service, t0, t1): when each worker was registered; t1 null = to the end."""
    ready = events_of(ctx, "worker_ready").select(
        F.col("src").alias("bsrc"), "worker", "service", F.col("ts").alias("t0")
    )
    expired = events_of(ctx, "worker_expired").select(
        F.col("src").alias("bsrc"), "worker", F.col("ts").alias("te")
    )
    ended = (
        ready.join(expired, ["bsrc", "worker"], "left")
        .filter(F.col("te").isNull() | (F.col("te") >= F.col("t0")))
        .groupBy("bsrc", "worker", "service", "t0")
        .agg(F.min("te").alias("te"))
    )
    restarts = _restarts(ctx)
    return (
        ended.join(restarts, (ended["bsrc"] == restarts["bsrc"]) & (restarts["tr"] > ended["t0"]), "left")
        .drop(restarts["bsrc"])
        .groupBy("bsrc", "worker", "service", "t0", "te")
        .agg(F.min("tr").alias("tr"))
        .select("bsrc", "worker", "service", "t0", F.least("te", "tr").alias("t1"))
    )


@checker(
    "mmi_service",
    "mmi.service answers 200 exactly while a live worker serves the service (per the broker's "
    "worker_ready/worker_expired), 404 otherwise; other mmi.* answer 501",
)
def mmi_service(ctx: CheckContext) -> CheckResult:
    answers = (
        events_of(ctx, "mmi_reply")
        .select("ts", "src", "ev", "service", "code", "detail")
        .withColumn("answer_id", F.monotonically_increasing_id())
    )
    regs = registrations(ctx)
    is_query = F.coalesce(F.col("detail"), F.lit("mmi.service")) == "mmi.service"
    live = (
        answers.join(
            regs,
            is_query
            & (answers["src"] == regs["bsrc"])
            & (answers["service"] == regs["service"])
            & (regs["t0"] <= answers["ts"])
            & (regs["t1"].isNull() | (answers["ts"] < regs["t1"])),
            "left",
        )
        .groupBy("answer_id", "ts", "src", "ev", answers["service"], "code", "detail")
        .agg(F.count("worker").alias("live_workers"))
    )
    judged = live.select(
        "ts", "src", "ev", "service", "code", "detail", "live_workers",
        F.when(~is_query, F.when(F.col("code") != 501, "other mmi.* must answer 501"))
        .when((F.col("code") == 200) & (F.col("live_workers") == 0), "200 while no worker was registered")
        .when((F.col("code") != 200) & (F.col("live_workers") > 0), "not 200 while a worker was registered")
        .alias("problem"),
    )  # fmt: skip
    rows = judged.groupBy("code", "problem").agg(F.count("*").alias("n")).collect()
    total = sum(r["n"] for r in rows)
    if total == 0:
        summary = "no MMI answers recorded (set the client's mmi_every)"
        return unknown("mmi_service", summary)
    codes: dict[str, int] = {}
    for r in rows:
        codes[str(r["code"])] = codes.get(str(r["code"]), 0) + r["n"]
    n = sum(r["n"] for r in rows if r["problem"] is not None)
    summary = f"{total} MMI answers {codes}, {n} disagree with the registered workers"
    found: list[dict[str, Any]] = examples(judged.filter(F.col("problem").isNotNull())) if n else []
    figures = {"answers": total, "codes": codes, "wrong": n}
    return judged("mmi_service", n, found, summary, figures)
