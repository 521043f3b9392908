"""The generic checks own helpers: one row per request (``per_request``) or request id
(``per_rid``), each built once per report and shared by the checks that read it, and the
rule that excuses whole requests (a fault excuses the requests in flight as it started or
first sent before its stop + the expiry), with how much of the load a check then judged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from contract.rundir import RunMeta
from reports.checkers.toolkit import (
    MAX_EXAMPLES,
    NS,
    WARMUP_NS,
    CheckContext,
    FaultWindow,
    Span,
    Timers,
    any_row,
    events_of,
    literal_rows,
    load_span,
    merge_spans,
    planned_windows,
    send_span,
)

# --- excusing whole requests ----------------------------------------------------------
#
# The rule (docs/manifest.md documents it for users): a fault excuses a request that was
# in flight as the fault started, or was first sent between the fault's start and its
# stop + ``after`` (the manifest's ``expiry_ms``: how long the system takes to notice a
# dead peer; ``steady_grace_s`` where it gives none), with that request's abandon, latency
# and retries up to the fault's grace (``with_excused_requests`` ``until``: a later retry is
# a steady-state one). A request first sent later is judged, even
# while another's retries are still under way, so a fault excuses what it caused and not
# the time around it. The first WARMUP_NS of load excuse their requests too.
# ``excused_send_spans`` are those send-time spans; the load time outside them is what a
# check judged (``coverage``), reported by every check that excuses whole requests.

#: A steady-state check that judged less than this share of the load time is unknown.
MIN_JUDGED_FRACTION = 0.2


def excused_send_spans(ctx: CheckContext, t: Timers) -> list[Span]:
    """The warm-up and each fault's excused send span, merged."""
    return excused_spans(load_span(ctx), ctx.faults, t)


def excused_spans(load: Span, faults: list[FaultWindow], t: Timers) -> list[Span]:
    """``excused_send_spans`` of a load span and fault windows (recorded, or planned)."""
    load_start, load_stop = load
    end = max(load_stop, *(f.start_ns for f in faults)) if faults else load_stop
    spans = [(load_start, load_start + WARMUP_NS)]
    spans += [send_span(f, t, end) for f in faults]
    return merge_spans(spans)


def planned_coverage(meta: RunMeta, t: Timers) -> dict[str, Any]:
    """``coverage`` as the plan foresees it, before any run (``zchaos check``): the load from
    0 to ``duration_s``, each fault as ``planned_windows`` sets it. A run's faults last at
    least that long (a restart waits for its process to be ready), so a run judges about as
    much or less (its load may stop a little after ``duration_s``)."""
    load_ns = int(float(meta["scenario"]["duration_s"]) * NS)
    return coverage_of(0, load_ns, excused_spans((0, load_ns), planned_windows(meta), t))


def judged_ns(spans: list[Span], lo: int, hi: int) -> int:
    """How much of [lo, hi] lies outside the (merged) spans."""
    covered = sum(max(0, min(end, hi) - max(start, lo)) for start, end in spans)
    return max(0, hi - lo - covered)


def coverage(ctx: CheckContext, spans: list[Span]) -> dict[str, Any]:
    """How much of the load time lies outside the excused spans: figures for a CheckResult."""
    return coverage_of(*load_span(ctx), spans)


def coverage_of(lo: int, hi: int, spans: list[Span]) -> dict[str, Any]:
    """``coverage`` of the load span [lo, hi]."""
    load = max(0, hi - lo)
    judged = judged_ns(spans, lo, hi)
    return {
        "load_s": round(load / NS, 3),
        "judged_s": round(judged / NS, 3),
        "judged_fraction": round(judged / load, 4) if load else 0.0,
        "excused_spans_ns": [[s, e] for s, e in spans],
    }


def too_little_judged(figures: dict[str, Any], t: Timers) -> str:
    """The reason a steady-state check is unknown for judging under a fifth of the load, or ''."""
    if figures["load_s"] and figures["judged_fraction"] >= MIN_JUDGED_FRACTION:
        return ""
    hosts = "; on hosts, a fault that lost packets as long again as it lasted" if t.on_hosts else ""
    return (
        f"judged {figures['judged_s']:.1f} s of {figures['load_s']:.1f} s of load "
        f"({100 * figures['judged_fraction']:.0f}%, under the {100 * MIN_JUDGED_FRACTION:.0f}% needed): "
        f"each fault excuses the requests sent from its start to {t.after_s:g} s after its stop "
        f"({t.source}{hosts}), and the first {WARMUP_NS / NS:g} s are warm-up; schedule fewer or shorter "
        "faults, or a longer load"
    )


def with_excused_requests(
    requests: DataFrame,
    ctx: CheckContext,
    t: Timers,
    *,
    first_send: str = "first_send",
    last_ts: str = "last_ts",
    name: str = "excused",
    until: str | None = None,
) -> DataFrame:
    """``requests`` (one row per request: its first send and last event times) with a boolean
    column ``name``: a fault or the warm-up excuses it (first sent inside an excused send span,
    or in flight as a fault started). The spans are a literal array asked about in each row.

    With ``until``, a column of that name too: the latest time at which the excuse covers a
    retry of the request (the excusing span's end, or the fault's stop + ``after``, plus the
    client budget: the fault's grace), null for a request no fault excuses. A retry after it
    is a steady-state retry: a request caught by a fault is not excused however late it
    retries (a broker that dropped it is found by the late resend it needed)."""
    spans = excused_send_spans(ctx, t)
    budget = int(t.client_budget_s * NS)
    end = spans[-1][1] if spans else load_span(ctx)[1]
    # In flight at a fault's start: excused until that fault's own stop + after + budget.
    starts = [(f.start_ns, f.start_ns, 1, send_span(f, t, end)[1] + budget) for f in ctx.faults]
    frame = literal_rows(
        [(lo, hi, 0, hi + budget) for lo, hi in spans] + starts,
        {"_f_lo": "long", "_f_hi": "long", "_f_in": "int", "_f_until": "long"},
    )
    sent, last = F.col(first_send), F.col(last_ts)

    def cond(f: Column) -> Column:
        return ((f["_f_in"] == 0) & sent.between(f["_f_lo"], f["_f_hi"])) | (
            (f["_f_in"] == 1) & (sent < f["_f_lo"]) & (last >= f["_f_lo"])
        )

    # One pass over the requests: the spans are a literal array each request is asked about
    # (no join: a broadcast is a Spark job of its own per query).
    if until is None:
        return requests.withColumn(name, any_row(frame, cond))
    # The spans are asked once: a request is excused exactly when one meets it, which is when
    # the latest end among those that do exists (every span has one).
    latest = F.array_max(F.transform(F.filter(frame, cond), lambda f: f["_f_until"]))
    return (
        requests.withColumn(until, latest)
        .withColumn(name, F.col(until).isNotNull())
        .select(*requests.columns, name, until)
    )


# --- shared aggregates ---------------------------------------------------------------
#
# Several checks judge the same requests: each reads these frames, built and cached once
# per report (``CheckContext.shared``), instead of grouping the events by request again.
# A checker names the ones it reads (``@checker(shares=...)``), so that ``prepare`` plans
# them before the checks start.

#: The client events a request's row sums up.
REQUEST_EVENTS = ("send", "reply", "retry", "abandon", "lost")
#: The Spark setting that plans an aggregation as one step after its shuffle instead of a
#: partial aggregation before it and a final one after.
BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"


def prepare(ctx: CheckContext, names: Iterable[str]) -> None:
    """Plan the shared aggregates ``names`` (of SHARED) before the checks start, each without
    a partial aggregation: each of their groups (a request, a request id) meets only 2-3
    events, so a partial aggregation before the shuffle reduces almost nothing and costs a
    hash table of every event (at 2M events, warm: per_request 3.4 -> 2.3 s CPU, per_rid
    2.6 -> 1.6 s; bench/checker_scaling.py). The setting is the session's: it is set only
    while these frames are planned (``cache`` plans at once; nothing runs yet), which is
    before any check runs in another thread. Frames not prepared are built on first use
    as before, with Spark's usual two-step aggregation."""
    names = sorted(set(names))
    if not names:
        return
    spark = ctx.spark
    saved = spark.conf.get(BYPASS_PARTIAL, "false")
    spark.conf.set(BYPASS_PARTIAL, "true")
    try:
        for name in names:
            ctx.shared(name, SHARED[name])
    finally:
        spark.conf.set(BYPASS_PARTIAL, saved)  # type: ignore[arg-type]  # pyspark types conf.get str | None; a SQL conf with a default gives a str


def per_request(ctx: CheckContext, *, last_seq: bool = True) -> DataFrame:
    """One row per request a client sent (``cid``, ``seq``): its first and last send (``ts``,
    ``last_send_ts``), sends, replied / abandoned (0 or 1), retries, abandons, lost (counts),
    the first ``lost`` (``lost_ts``), the first retry, abandon or lost (``problem_ts``), its
    last event (``last_ts``), and its reply's ``latency_us`` and ``reply_ts`` (the latest);
    with ``last_seq``, its client's last request (``last_seq=False``: without it, and without
    the broadcast join that brings it, a Spark job of its own in each query). Its texts
    (writer, request id, reason) are ``request_details``, for the few requests a check shows."""
    per = ctx.shared("per_request", _per_request)
    if not last_seq:
        return per
    # Each client's last request: a small frame (one row per client) joined to each use,
    # not a window (which would sort every request by client), and from the cached requests:
    # no second scan of the sends, and no shuffle of them (only a row per client and task).
    last = ctx.shared("last_seq", _last_seqs)
    return per.join(F.broadcast(last), per["cid"].eqNullSafe(last["_cid"]), "left").drop("_cid")


def _per_request(ctx: CheckContext) -> DataFrame:
    ev = F.col("ev")
    is_send = ev == "send"
    is_lost = ev == "lost"
    # Only fixed-width values: Spark aggregates in a hash table only then; a minimum of a
    # text (the writer, the request id) makes it sort every event instead, which at 10M
    # events doubled this aggregation's CPU (bench/checker_scaling.py). Those texts serve
    # only the examples: request_details looks them up for the requests shown.
    return (
        events_of(ctx, *REQUEST_EVENTS)
        .groupBy("cid", "seq")
        .agg(
            F.min(F.when(is_send, F.col("ts"))).alias("ts"),
            F.max(F.when(is_send, F.col("ts"))).alias("last_send_ts"),
            F.sum(is_send.cast("int")).alias("sends"),
            F.max((ev == "reply").cast("int")).alias("replied"),
            F.max((ev == "abandon").cast("int")).alias("abandoned"),
            F.sum((ev == "retry").cast("int")).alias("retries"),
            F.sum((ev == "abandon").cast("int")).alias("abandons"),
            F.sum(is_lost.cast("int")).alias("lost"),
            F.min(F.when(is_lost, F.col("ts"))).alias("lost_ts"),
            F.min(F.when(ev.isin("retry", "abandon", "lost"), F.col("ts"))).alias("problem_ts"),
            F.max("ts").alias("last_ts"),
            F.max(F.when(ev == "reply", F.col("latency_us"))).alias("latency_us"),
            F.max(F.when(ev == "reply", F.col("ts"))).alias("reply_ts"),
        )
        .filter(F.col("sends") > 0)
    )


def _last_seqs(ctx: CheckContext) -> DataFrame:
    """Each client's (``_cid``) last request (``last_seq``): the highest ``seq`` it sent, which
    is the highest of its requests with a send (a null ``seq`` counts in neither)."""
    requests = ctx.shared("per_request", _per_request)
    return requests.groupBy(F.col("cid").alias("_cid")).agg(F.max("seq").alias("last_seq"))


def request_details(ctx: CheckContext, requests: DataFrame) -> DataFrame:
    """``requests`` (a few rows of ``per_request``: the ones a check shows) with their texts:
    the writer of their sends (``src``), their request id (``rid``: the sends'; ``any_rid``:
    any of their events'), and the reason of their first ``lost`` (``lost_reason``); each
    the smallest, as in one aggregation over the request's events."""
    ev = F.col("ev")
    is_send = ev == "send"
    # No distinct: a semi join keeps each event once however often its key repeats (a
    # distinct of these few keys was an exchange and a job of its own).
    keys = requests.select(F.col("cid").alias("_cid"), F.col("seq").alias("_seq"))
    mine = F.col("cid").eqNullSafe(F.col("_cid")) & F.col("seq").eqNullSafe(F.col("_seq"))
    details = (
        events_of(ctx, *REQUEST_EVENTS)
        .join(F.broadcast(keys), mine, "left_semi")
        .groupBy(F.col("cid").alias("_cid"), F.col("seq").alias("_seq"))
        .agg(
            F.min(F.when(is_send, F.col("src"))).alias("src"),
            F.min(F.when(is_send, F.col("rid"))).alias("rid"),
            F.min("rid").alias("any_rid"),
            F.min(F.when(ev == "lost", F.col("reason"))).alias("lost_reason"),
        )
    )
    return requests.join(details, mine, "left").drop("_cid", "_seq")


def per_rid(ctx: CheckContext) -> DataFrame:
    """One row per request id (``rid``; null for events without one) that was sent, executed
    or delivered: its sends (with the smallest ``seq`` of them; its client: ``rid_senders``),
    its executions (``execs``, worker ``exec`` events), whether an ok reply answered it
    (``answered``) and its deliveries (replies carrying it, and unexpected messages whose
    ``got_rid`` it is)."""
    return ctx.shared("per_rid", _per_rid)


def _per_rid(ctx: CheckContext) -> DataFrame:
    ev = F.col("ev")
    is_send = ev == "send"
    unexpected = (ev == "unexpected") & F.col("got_rid").isNotNull()
    events = events_of(ctx, "send", "exec", "reply", "unexpected").filter((ev != "unexpected") | unexpected)
    return (
        events.withColumn("key", F.when(ev == "unexpected", F.col("got_rid")).otherwise(F.col("rid")))
        .groupBy("key")
        .agg(
            # No text but the key (see _per_request): the client is rid_senders'.
            F.sum(is_send.cast("int")).alias("sends"),
            F.min(F.when(is_send, F.col("seq"))).alias("seq"),
            F.sum((ev == "exec").cast("int")).alias("execs"),
            F.max((ev == "reply") & F.coalesce(F.col("ok"), F.lit(False))).alias("answered"),
            F.sum(((ev == "reply") | unexpected).cast("int")).alias("deliveries"),
        )
        .withColumnRenamed("key", "rid")
    )


#: The shared aggregates of one group per request or request id, by name (see ``prepare``).
SHARED = {"per_request": _per_request, "per_rid": _per_rid}


def rid_senders(ctx: CheckContext, rids: DataFrame) -> DataFrame:
    """For the request ids in column ``rid`` of ``rids`` (few: those a check shows), the ones
    sent, with the smallest ``cid`` and ``seq`` of their sends."""
    return (
        events_of(ctx, "send")
        .join(rids.select("rid"), "rid", "left_semi")  # a semi join: repeated ids need no distinct
        .groupBy("rid")
        .agg(F.min("cid").alias("cid"), F.min("seq").alias("seq"))
    )


#: From this many events on, a check's totals and first offenders come from one aggregation
#: (``totals_and_firsts``); below, the totals from a generated-code aggregation and then, only
#: if there are offenders, the first of them from a second query. The one aggregation (its
#: bottom-n is not generated code) cost the demo run's in_order and no_lost 0.1-0.2 s more
#: CPU each; at 10M events it spared in_order a second window over every reply (-25% CPU);
#: at 1M, warm, in_order 3.3 -> 2.5 s wall, 4.6 -> 3.4 s CPU, no_lost the same
#: (bench/checker_scaling.py).
ONE_PASS_MIN_EVENTS = 500_000


def totals_and_firsts(
    ctx: CheckContext,
    df: DataFrame,
    totals: list[Column],
    offending: Column,
    n: int = MAX_EXAMPLES,
    order: str = "ts",
) -> tuple[Any, list[dict[str, Any]]]:
    """The aggregate ``totals`` over ``df`` (a Row) and the first ``n`` of its rows by ``order``
    where ``offending`` holds (dicts, in that order). On a history of ONE_PASS_MIN_EVENTS or
    more both come from ONE aggregation, Spark keeping each task's bottom ``n`` (``min_by``
    with a count), so ``df``'s plan (a window's shuffle and sort, say) runs once; on a shorter
    one the totals first, then the offenders if there are any."""
    if ctx.profile is not None and ctx.profile.events >= ONE_PASS_MIN_EVENTS:
        firsts = F.min_by(F.when(offending, F.struct(*df.columns)), F.when(offending, F.col(order)), n)
        row = df.agg(*totals, firsts.alias("_firsts")).collect()[0]
        return row, [r.asDict() for r in row["_firsts"] or []]
    row = df.agg(*totals, F.sum(offending.cast("int")).alias("_offending")).collect()[0]
    if not row["_offending"]:
        return row, []
    return row, [r.asDict() for r in df.filter(offending).orderBy(order).limit(n).collect()]
