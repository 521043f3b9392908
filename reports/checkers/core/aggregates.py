"""The generic checks own helpers: one row per request (``per_request``) or request id
(``per_rid``), each built once per report and shared by the checks that read it, and the
rule that excuses whole requests (a fault excuses the requests in flight as it started or
first sent before its stop + the expiry), with how much of the load a check then judged."""

from __future__ import annotations

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
