"""steady_state: outside the fault windows and the warm-up, no request is retried,
abandoned or lost, and the p99 latency stays under the bound."""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import functions as F

from contract.rundir import RunMeta
from reports.checkers.core import aggregates
from reports.checkers.toolkit import (
    CheckContext,
    CheckResult,
    checker,
    count,
    events_of,
    examples,
    firsts,
    result,
    timers,
    timers_of,
)

# --- steady_state ----------------------------------------------------------------------

#: A p99 bound lets 1 request in 100 be slower. How sure a count of slower ones must make us
#: that more than that were, before it is a violation: a few slow replies among a hundred
#: judged requests (a busy machine's scheduler) are what a correct system shows too.
P99_SHARE = 0.01
P99_CONFIDENCE = 0.999


def slow_allowed(judged: int, share: float = P99_SHARE, confidence: float = P99_CONFIDENCE) -> int:
    """The most requests of ``judged`` that may be slower than a bound kept by ``1 - share``
    of them, before chance alone would give that many with probability under ``1 -
    confidence``: the smallest ``k`` with P(X > k) < 1 - confidence for X ~ Binomial(judged,
    share), in log space so that a million requests do not underflow."""
    if judged <= 0:
        return 0
    log_p, log_q = math.log(share), math.log1p(-share)
    log_pmf = judged * log_q  # P(X = 0)
    below = math.exp(log_pmf)
    k = 0
    while 1.0 - below >= 1.0 - confidence and k < judged:
        log_pmf += math.log(judged - k) - math.log(k + 1) + log_p - log_q
        k += 1
        below += math.exp(log_pmf)
    return k


def _too_little_planned(meta: RunMeta) -> str:
    """The reason steady_state is unknown on any run of this plan: the rule of a run's
    (``too_little_judged``) on the load the plan leaves it at most, or ''."""
    t = timers_of(meta)
    return aggregates.too_little_judged(aggregates.planned_coverage(meta, t), t)


@checker(
    "steady_state",
    "requests no fault excuses (see docs/manifest.md: in flight as a fault started, or sent "
    "before its stop + the manifest's expiry_ms) and sent after the warm-up: no retry, no "
    "abandon, no lost request, reply latency p99 within latency_p99_ms (more replies slower "
    "than a 1% share explains at 99.9% confidence); unknown when that "
    "judged under a fifth of the load time",
    shares=("per_request",),
    foresee=_too_little_planned,
)
def steady_state(ctx: CheckContext) -> CheckResult:
    t = timers(ctx)
    spans = aggregates.excused_send_spans(ctx, t)
    bound_ms = float(ctx.promises.get("latency_p99_ms", 500.0))
    # Each request's events met in one group (shared with no_lost): judged or excused whole.
    # ``lost``: a no-resend client's, past its deadline.
    per_request = aggregates.per_request(ctx, last_seq=False).select(
        F.col("ts").alias("first_send"),
        "last_ts", "cid", "seq",
        "retries", "abandons", "lost", "problem_ts", "latency_us", "reply_ts",
    )  # fmt: skip
    requests = aggregates.with_excused_requests(per_request, ctx, t, until="excused_until")
    judged = requests.filter(~F.col("excused"))
    # An excused request's retries after its fault's stop + grace are steady-state retries.
    # Shuffled hash joins, not broadcasts: a broadcast is a Spark job of its own, and the
    # cached requests are already partitioned by request, so only the few retries move.
    late_retries = (
        events_of(ctx, "retry")
        .select("cid", "seq", F.col("ts").alias("retry_ts"))
        .hint("shuffle_hash")
        .join(requests.filter(F.col("excused")).select("cid", "seq", "excused_until"), ["cid", "seq"])
        .filter(F.col("retry_ts") > F.col("excused_until"))
        .groupBy("cid", "seq")
        .agg(F.count("*").alias("late"), F.min("retry_ts").alias("late_ts"))
    )
    # Every figure in one query (one Spark job): the late retries beside their requests.
    not_excused = ~F.col("excused")
    row = (
        requests.join(late_retries.select("cid", "seq", "late").hint("shuffle_hash"), ["cid", "seq"], "left")
        .agg(
            F.sum(not_excused.cast("int")).alias("judged"),
            F.sum(F.col("excused").cast("int")).alias("excused"),
            F.sum(F.when(not_excused, F.col("reply_ts").isNotNull().cast("int"))).alias("replies"),
            F.sum(F.when(not_excused, F.col("retries"))).alias("retries"),
            F.sum(F.when(not_excused, F.col("abandons"))).alias("abandons"),
            F.sum(F.when(not_excused, F.col("lost"))).alias("lost"),
            F.percentile(F.when(not_excused, F.col("latency_us")), F.lit(0.99)).alias("p99_us"),
            F.max(F.when(not_excused, F.col("latency_us"))).alias("max_us"),
            F.sum(F.when(not_excused, F.col("latency_us").isNotNull().cast("int"))).alias("timed"),
            F.sum(F.when(not_excused, (F.col("latency_us") > bound_ms * 1000.0).cast("int"))).alias("over"),
            F.sum("late").alias("late"),
        )
        .collect()[0]
    )
    late = count(row["late"])
    retries, abandons, replies = count(row["retries"]) + late, count(row["abandons"]), count(row["replies"])
    lost = count(row["lost"])
    p99_ms = None if row["p99_us"] is None else row["p99_us"] / 1000.0
    timed, over = count(row["timed"]), count(row["over"])
    allowed = slow_allowed(timed)
    # Over the bound by more than chance: a p99 of few requests is their slowest two or three.
    slow = p99_ms is not None and p99_ms > bound_ms and over > allowed
    cover = aggregates.coverage(ctx, spans)
    figures = {
        "judged_requests": count(row["judged"]),
        "excused_requests": count(row["excused"]),
        "replies": replies,
        "retries": retries,
        "late_retries_of_excused": late,  # counted in retries
        "abandons": abandons,
        "lost": lost,
        "p99_ms": p99_ms,
        "max_ms": None if row["max_us"] is None else row["max_us"] / 1000.0,
        "latency_p99_bound_ms": bound_ms,
        "over_bound": over,
        "over_bound_allowed": allowed,
        **t.figures(),
        **cover,
    }
    p99_text = "n/a" if p99_ms is None else f"{p99_ms:.1f} ms"
    summary = (
        f"judged {cover['judged_s']:.1f} of {cover['load_s']:.1f} s of load "
        f"({100 * cover['judged_fraction']:.0f}%), {figures['judged_requests']} requests: "
        f"{retries} retries, {abandons} abandons, p99 {p99_text} (bound {bound_ms:g} ms)"
    )
    if p99_ms is not None and p99_ms > bound_ms:
        summary += f" ({over} of {timed} slower; chance allows {allowed} at a 1% share)"
    if lost:
        summary += f", {lost} lost"
    violations = retries + abandons + lost + int(slow)
    found: list[dict[str, Any]] = []
    if retries or abandons or lost:
        troubled = judged.filter((F.col("retries") + F.col("abandons") + F.col("lost")) > 0)
        if late:
            late_ones = requests.join(late_retries, ["cid", "seq"]).withColumn("problem_ts", F.col("late_ts"))
            troubled = troubled.unionByName(late_ones.select(*troubled.columns))
        found = examples(
            aggregates.request_details(ctx, firsts(troubled, by="excused", order="problem_ts")).select(
                F.col("problem_ts").alias("ts"),
                "src",
                F.when(F.col("retries") > 0, "retry")
                .when(F.col("abandons") > 0, "abandon")
                .otherwise("lost")
                .alias("ev"),
                "cid",
                "seq",
                F.col("any_rid").alias("rid"),
                F.col("first_send").alias("first_send_ts"),
                "retries",
                "abandons",
                "lost",
                F.when(F.col("excused"), "retried after the stop + grace of the fault that excused it")
                .otherwise("retried, abandoned or lost, though no fault excuses it")
                .alias("problem"),
            )
        )
    if slow:
        slowest = judged.filter(F.col("latency_us").isNotNull()).orderBy(F.col("latency_us").desc()).limit(1)
        found += examples(
            aggregates.request_details(ctx, slowest)
            .select(
                F.col("reply_ts").alias("ts"),
                "src",
                F.lit("reply").alias("ev"),
                "cid",
                "seq",
                F.col("any_rid").alias("rid"),
                "latency_us",
            )
            .withColumn(
                "problem",
                F.lit(
                    f"p99 latency {p99_ms:.1f} ms above {bound_ms:g} ms: {over} of {timed} replies "
                    f"slower, more than the {allowed} a 1% share gives by chance (slowest reply)"
                ),
            )
        )
    if violations:
        return result(summary, figures, violations=violations, examples=found)
    if figures["judged_requests"] == 0:
        return result(
            "no request outside fault windows",
            figures,
            unknown="every request was excused by a fault or the warm-up: schedule fewer or shorter "
            "faults, or a longer load",
        )
    reason = aggregates.too_little_judged(cover, t)
    return result(summary, figures, unknown=reason or None)
