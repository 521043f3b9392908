"""The checker toolkit: the one way every checker family reads the run, excuses faults and
builds its result.

- **The run**: ``options`` (implementation knobs), ``run_time`` / ``history_end`` /
  ``client_budget_ns`` (when things happened), ``worker_instances`` / ``broker_instances``
  (an instance's kind comes from the manifest: a role that binds an endpoint serves it,
  a broker or queue; a role that only connects is a worker), ``instance_of`` /
  ``instance_column`` (the instance behind a connection identity).
- **Filtering events**: ``events_of(ctx, kind, ...)``.
- **Excusing faults**: a fault's class (on a process or on a link, lossy or not, its harm)
  comes from its kind's card through ``fault_start`` (``FaultWindow``); ``fault_spans`` says when the
  faults that concern an instance (its own, its broker's, its link's) were under way, as
  merged [lo, hi] spans for Python-side logic, and ``split_excused`` / ``with_excused``
  (and ``outside`` for spans of one's own) apply them to a DataFrame as a small broadcast
  frame joined by time range (``small_frame``), never as a chain of conditions per fault.
  ``outage_only`` keeps the faults whose target cannot serve (their ``harm``).
- **Excusing whole requests** (steady state, availability): ``timers``,
  ``excused_send_spans``, ``with_excused_requests`` (a request in flight as a fault
  started, or first sent before its stop + the manifest's expiry), ``coverage`` (how much
  of the load a check judged) and ``too_little_judged``.
- **A rule several families share**: ``registered_dispatch`` (no job to a worker the
  broker has not registered, or has expired since), on ``with_state``; ``last_before``
  (for each of a few marks, the latest of many events before it).
- **Results**: ``judged`` (held or violated, with examples), ``unknown`` (with what was
  missing), ``example`` / ``examples`` (offending events for a person to find in the logs),
  ``problems`` (several labelled offender frames counted and sampled in one Spark action),
  ``totals_and_firsts`` (a frame's totals and its first offending rows, in one aggregation
  on a large history),
  ``spread`` / ``ms`` for duration figures.

Family modules import from here (and from ``reports.checkers``), never from each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from contract.promises import expiry_s
from reports.checkers import (
    HELD,
    MAX_EXAMPLES,
    NS,
    UNKNOWN,
    VIOLATED,
    CheckContext,
    CheckResult,
    FaultWindow,
    events_of,  # also offered here: a family module needs nothing but this toolkit
    planned_windows,
)

MS = 1_000_000
DEFAULT_CLIENT_BUDGET_S = 10.0
#: Later than any event: the end of a fault that never healed.
END_OF_TIME = 1 << 62
#: The keys an example shows first, in this order (then every other non-null field).
EVENT_KEYS = ("ts", "src", "ev", "cid", "seq", "rid")


# --- the run ---------------------------------------------------------------------------


def options(ctx: CheckContext) -> dict[str, Any]:
    """The implementation options of the run (the manifest's, with the scenario's overrides)."""
    return options_of(ctx.meta)


def options_of(meta: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a run.json (or of the plan ``zchaos check`` makes of one)."""
    merged = dict(meta.get("manifest", {}).get("options") or {})
    merged.update(meta.get("scenario", {}).get("options") or {})
    return merged


def run_time(ctx: CheckContext, key: str) -> int:
    """A time of run.json (``load_started_ns``...), else the first/last event's time."""
    value = ctx.meta.get(key)
    if value is not None:
        return int(value)
    if ctx.profile is not None:
        return ctx.profile.first_ts if key in ("started_ns", "load_started_ns") else ctx.profile.last_ts
    fn = F.min if key in ("started_ns", "load_started_ns") else F.max
    found = ctx.events.agg(fn("ts")).first()[0]
    return int(found or 0)


def history_end(ctx: CheckContext) -> int:
    """When recording ended: the last event of the history (ns)."""
    if ctx.profile is not None:
        return ctx.profile.last_ts
    return int(ctx.events.agg(F.max("ts")).first()[0] or 0)


def client_budget_ns(ctx: CheckContext) -> int:
    """How long a client works on one request before it gives up (timeout x attempts)."""
    return int(float(ctx.meta.get("client_budget_s") or DEFAULT_CLIENT_BUDGET_S) * NS)


def _serving_roles(ctx: CheckContext) -> set[str]:
    """Roles that bind an endpoint of the manifest (brokers, queues, servers clients reach)."""
    return set((ctx.meta.get("manifest", {}).get("endpoints") or {}).values())


def worker_instances(ctx: CheckContext) -> set[str]:
    """Instance names of the roles that bind no endpoint: they connect to a broker (workers)."""
    serving = _serving_roles(ctx)
    return {i for i, role in (ctx.meta.get("processes") or {}).items() if role not in serving}


def broker_instances(ctx: CheckContext) -> set[str]:
    """Instance names of the roles that bind an endpoint (the broker, the queue)."""
    serving = _serving_roles(ctx)
    return {i for i, role in (ctx.meta.get("processes") or {}).items() if role in serving}


def instance_of(worker: str, instances: set[str]) -> str:
    """The instance a connection identity (``worker-2-ab12``) belongs to."""
    for name in sorted(instances, key=len, reverse=True):
        if worker == name or worker.startswith(name + "-"):
            return name
    return worker.rsplit("-", 1)[0]


def instance_column(worker: Column, instances: set[str]) -> Column:
    """``instance_of`` as a column expression (instances are few: one branch each)."""
    fallback = F.when(worker.contains("-"), F.regexp_extract(worker, r"^(.*)-[^-]*$", 1)).otherwise(worker)
    out = fallback
    for name in sorted(instances, key=len):  # the longest name is tested first
        out = F.when((worker == name) | worker.startswith(name + "-"), F.lit(name)).otherwise(out)
    return out


# --- excusing faults -------------------------------------------------------------------


def _concerned(
    fault: FaultWindow, brokers: set[str], *, own: bool, broker: bool, link: bool, broker_links: bool
) -> tuple[bool, str | None]:
    """Whether the fault excuses anything under these flags, and for which instance (None: all).

    own: a process fault on the instance itself; broker: a process fault on a broker (every
    instance depends on it); link: a fault on the instance's links; broker_links: a fault on
    a broker's links.
    """
    if fault.link is not None:
        target = fault.link.instance
        if target in brokers:
            return broker_links, None
        return link, target
    if fault.target in brokers:
        return broker, None
    return own, fault.target


def fault_spans(
    ctx: CheckContext,
    instance: str | None = None,
    *,
    own: bool = True,
    broker: bool = True,
    link: bool = True,
    broker_links: bool | None = None,
    lossy_only: bool = False,
    outage_only: bool = False,
    lasting_only: bool = False,
    lead_ns: int = 0,
    grace_ns: int = 0,
) -> list[tuple[int, int]]:
    """[start - lead_ns, stop + grace_ns] of the faults that concern ``instance``, merged, in order.

    ``instance`` None: every fault of the run, whatever its target (the flags do not
    apply). A fault that never healed lasts to END_OF_TIME. ``broker_links`` (default:
    as ``link``): faults on a broker's links. ``lossy_only``: only the faults that lose
    what is sent (their ``lossy``); ``outage_only``: only those during which
    their target cannot serve (its ``harm``), not the slowdowns; ``lasting_only``: not a
    kill or restart (no duration of its own: its window lasts until the restarted process
    is ready, after which it may already have served; proc_exit/proc_start say when it ran).
    """
    flags = _flags(own, broker, link, broker_links, lossy_only, outage_only)
    spans = _excusing(ctx, instance is not None, lead_ns, grace_ns, lasting_only=lasting_only, **flags)
    return merge_spans([(lo, hi) for lo, hi, who in spans if who is None or who == instance])


_FLAG_DEFAULTS: dict[str, Any] = {
    "own": True,
    "broker": True,
    "link": True,
    "broker_links": None,
    "lossy_only": False,
    "outage_only": False,
}


def _flags(
    own: bool, broker: bool, link: bool, broker_links: bool | None, lossy_only: bool, outage_only: bool
) -> dict[str, bool]:
    return {
        "own": own,
        "broker": broker,
        "link": link,
        "broker_links": link if broker_links is None else broker_links,
        "lossy_only": lossy_only,
        "outage_only": outage_only,
    }


def _excusing(
    ctx: CheckContext,
    targeted: bool,
    lead_ns: int,
    grace_ns: int,
    *,
    own: bool,
    broker: bool,
    link: bool,
    broker_links: bool,
    lossy_only: bool,
    outage_only: bool,
    lasting_only: bool = False,
) -> list[tuple[int, int, str | None]]:
    """(lo, hi, the instance it excuses or None for every one) of each fault that counts."""
    brokers = broker_instances(ctx) if targeted else set()
    out = []
    for f in ctx.faults:
        if (lossy_only and not f.lossy) or (outage_only and not f.outage):
            continue
        if lasting_only and not f.lasting:
            continue
        lo, hi = f.start_ns - lead_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns + grace_ns
        if not targeted:
            out.append((lo, hi, None))
            continue
        applies, who = _concerned(f, brokers, own=own, broker=broker, link=link, broker_links=broker_links)
        if applies:
            out.append((lo, hi, who))
    return out


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans, sorted, with the ones that meet merged into one."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def overlaps(spans: list[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether [lo, hi] meets one of the spans."""
    return any(start <= hi and lo <= end for start, end in spans)


def split_excused(
    df: DataFrame,
    ctx: CheckContext,
    *,
    ts: str = "ts",
    until: str | None = None,
    instance: str | None = None,
    own: bool = True,
    broker: bool = True,
    link: bool = True,
    broker_links: bool | None = None,
    lossy_only: bool = False,
    outage_only: bool = False,
    lead_ns: int = 0,
    grace_ns: int = 0,
) -> tuple[DataFrame, DataFrame]:
    """(kept, excused): the rows of ``df`` no fault touches, and those one does.

    A row is excused when its time ``ts`` (or its interval [ts, until]) meets the span of a
    fault that concerns the instance in column ``instance`` (None: any fault, whatever its
    target), under the flags of ``fault_spans``. The faults are a small broadcast frame
    joined by range: one pass over ``df``, whatever the number of faults.
    """
    flags = _flags(own, broker, link, broker_links, lossy_only, outage_only)
    spans = _excusing(ctx, instance is not None, lead_ns, grace_ns, **flags)
    if not spans:
        return df, df.filter(F.lit(False))
    faults = F.broadcast(small_frame(ctx, spans, {"_f_lo": "long", "_f_hi": "long", "_f_inst": "string"}))
    cond = _meets(ts, until)
    if instance is not None:
        cond = cond & (F.col("_f_inst").isNull() | (F.col("_f_inst") == F.col(instance)))
    return df.join(faults, cond, "left_anti"), df.join(faults, cond, "left_semi")


def outside(df: DataFrame, ctx: CheckContext, spans: list[tuple[int, int]], ts: str = "ts") -> DataFrame:
    """The rows of ``df`` whose time ``ts`` is in none of the [lo, hi] spans (a broadcast range join)."""
    if not spans:
        return df
    frame = F.broadcast(small_frame(ctx, spans, {"_f_lo": "long", "_f_hi": "long"}))
    return df.join(frame, _meets(ts, None), "left_anti")


def small_frame(ctx: CheckContext, rows: list[tuple[Any, ...]], columns: dict[str, str]) -> DataFrame:
    """A DataFrame of a few rows made of literals in the plan (fault windows...): unlike
    ``createDataFrame`` it needs no Python worker process to serve it."""
    structs = [
        F.struct(*(F.lit(v).cast(t).alias(c) for v, (c, t) in zip(row, columns.items(), strict=True)))
        for row in rows
    ]
    return ctx.spark.range(1).select(F.inline(F.array(*structs)))


def _meets(ts: str, until: str | None, outer: bool = False) -> Column:
    """The fault span [_f_lo, _f_hi] meets [ts, until] (``outer``: columns of the frame a
    subquery of the faults is asked about)."""
    start = F.col(ts).outer() if outer else F.col(ts)
    end = (F.col(until).outer() if outer else F.col(until)) if until is not None else start
    return (F.col("_f_lo") <= end) & (start <= F.col("_f_hi"))


def with_excused(
    df: DataFrame,
    ctx: CheckContext,
    name: str = "excused",
    *,
    ts: str = "ts",
    until: str | None = None,
    instance: str | None = None,
    **flags: Any,
) -> DataFrame:
    """``df`` with a boolean column ``name``: whether a fault excuses the row (the rule and the
    flags of split_excused). One pass over ``df``: an EXISTS over the small fault frame,
    which Spark runs as a broadcast existence join."""
    spans = _excusing(ctx, instance is not None, flags.pop("lead_ns", 0), flags.pop("grace_ns", 0),
                      **_flags(**{**_FLAG_DEFAULTS, **flags}))  # fmt: skip
    if not spans:
        return df.withColumn(name, F.lit(False))
    faults = small_frame(ctx, spans, {"_f_lo": "long", "_f_hi": "long", "_f_inst": "string"})
    cond = _meets(ts, until, outer=True)
    if instance is not None:
        cond = cond & (F.col("_f_inst").isNull() | (F.col("_f_inst") == F.col(instance).outer()))
    return df.withColumn(name, faults.where(cond).exists())


# --- excusing whole requests ----------------------------------------------------------
#
# The rule (harness/manifest.py documents it for users): a fault excuses a request that was
# in flight as the fault started, or was first sent between the fault's start and its
# stop + ``after`` (the manifest's ``expiry_ms``: how long the system takes to notice a
# dead peer; ``steady_grace_s`` where it gives none), with all that request's retries,
# abandon and latency, however late they come. A request first sent later is judged, even
# while another's retries are still under way, so a fault excuses what it caused and not
# the time around it. The first WARMUP_NS of load excuse their requests too.
# ``excused_send_spans`` are those send-time spans; the load time outside them is what a
# check judged (``coverage``), reported by every check that excuses whole requests.

#: Clients connect, brokers learn their workers and sockets warm up during the first
#: seconds of load; a retry or a slow reply then says nothing about steady state.
WARMUP_NS = 2 * NS
#: A steady-state check that judged less than this share of the load time is unknown.
MIN_JUDGED_FRACTION = 0.2

Span = tuple[int, int]  # [start, end] in ns


@dataclass(frozen=True)
class Timers:
    """How long after a fault's stop its requests are excused, and where that comes from."""

    after_s: float  # sends up to the fault's stop + after_s are excused
    client_budget_s: float  # a client's timeout x attempts: how late an excused request may end
    source: str  # "expiry_ms = heartbeat_ms * liveness" or "steady_grace_s (no expiry_ms)"

    @property
    def grace_s(self) -> float:
        """How long after a fault's stop its excused requests may still retry or abandon."""
        return self.after_s + self.client_budget_s

    def figures(self) -> dict[str, Any]:
        return {
            "after_stop_s": self.after_s,
            "client_budget_s": self.client_budget_s,
            "grace_s": self.grace_s,
            "grace_from": self.source,
        }


def timers(ctx: CheckContext) -> Timers:
    """The excusing timers of this run, from the manifest's expiry and the client options."""
    return timers_of(ctx.meta)


def timers_of(meta: dict[str, Any]) -> Timers:
    """``timers`` of a run.json (or of the plan ``zchaos check`` makes of one)."""
    promises = meta["manifest"]["promises"]
    budget = float(meta.get("client_budget_s") or DEFAULT_CLIENT_BUDGET_S)
    expr = promises.get("expiry_ms")
    try:
        expiry = expiry_s(expr, options_of(meta))
    except ValueError:
        expiry = None  # the manifest was checked when the run started; a scenario may have changed it
    if expiry is not None:
        return Timers(expiry, budget, f"expiry_ms = {expr}")
    grace = float(promises.get("steady_grace_s", 10.0))
    return Timers(grace, budget, "steady_grace_s (the manifest gives no expiry_ms)")


def load_span(ctx: CheckContext) -> Span:
    """[load start, load stop] (ns), from run.json, else the first and last events."""
    return run_time(ctx, "load_started_ns"), run_time(ctx, "load_stopped_ns")


def send_span(fault: FaultWindow, after_ns: int, end_ns: int) -> Span:
    """The send times a fault excuses: [start, stop + after] (to ``end_ns`` if it never healed)."""
    return fault.start_ns, end_ns if fault.stop_ns is None else fault.stop_ns + after_ns


def excused_send_spans(ctx: CheckContext, t: Timers) -> list[Span]:
    """The warm-up and each fault's excused send span, merged."""
    return excused_spans(load_span(ctx), ctx.faults, t)


def excused_spans(load: Span, faults: list[FaultWindow], t: Timers) -> list[Span]:
    """``excused_send_spans`` of a load span and fault windows (recorded, or planned)."""
    load_start, load_stop = load
    end = max(load_stop, *(f.start_ns for f in faults)) if faults else load_stop
    spans = [(load_start, load_start + WARMUP_NS)]
    spans += [send_span(f, int(t.after_s * NS), end) for f in faults]
    return merge_spans(spans)


def planned_coverage(meta: dict[str, Any], t: Timers) -> dict[str, Any]:
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
    return (
        f"judged {figures['judged_s']:.1f} s of {figures['load_s']:.1f} s of load "
        f"({100 * figures['judged_fraction']:.0f}%, under the {100 * MIN_JUDGED_FRACTION:.0f}% needed): "
        f"each fault excuses the requests sent from its start to {t.after_s:g} s after its stop "
        f"({t.source}), and the first {WARMUP_NS / NS:g} s are warm-up; schedule fewer or shorter "
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
) -> DataFrame:
    """``requests`` (one row per request: its first send and last event times) with a boolean
    column ``name``: a fault or the warm-up excuses it (first sent inside an excused send span,
    or in flight as a fault started). The spans are a small broadcast frame joined by range."""
    spans = excused_send_spans(ctx, t)
    starts = [(f.start_ns, f.start_ns, 1) for f in ctx.faults]  # in flight at a fault's start
    frame = small_frame(
        ctx, [(lo, hi, 0) for lo, hi in spans] + starts, {"_f_lo": "long", "_f_hi": "long", "_f_in": "int"}
    )
    sent, last = F.col(first_send).outer(), F.col(last_ts).outer()
    cond = ((F.col("_f_in") == 0) & sent.between(F.col("_f_lo"), F.col("_f_hi"))) | (
        (F.col("_f_in") == 1) & (sent < F.col("_f_lo")) & (last >= F.col("_f_lo"))
    )
    # One pass over the requests: an EXISTS over the small frame (a broadcast existence join).
    return requests.withColumn(name, frame.where(cond).exists())


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
        spark.conf.set(BYPASS_PARTIAL, saved)


def per_request(ctx: CheckContext) -> DataFrame:
    """One row per request a client sent (``cid``, ``seq``): its first and last send (``ts``,
    ``last_send_ts``), sends, replied / abandoned (0 or 1), retries, abandons, lost (counts),
    the first ``lost`` (``lost_ts``), the first retry, abandon or lost (``problem_ts``), its
    last event (``last_ts``), and its reply's ``latency_us`` and ``reply_ts`` (the latest);
    with ``last_seq``, its client's last request. Its texts (writer, request id, reason) are
    ``request_details``, for the few requests a check shows."""
    per = ctx.shared("per_request", _per_request)
    # Each client's last request: a small frame (one row per client) joined to each use,
    # not a window (which would sort every request by client), and from the sends alone,
    # not from the requests (whose aggregation it would repeat).
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
    is the highest of its requests with a send."""
    return events_of(ctx, "send").groupBy(F.col("cid").alias("_cid")).agg(F.max("seq").alias("last_seq"))


def request_details(ctx: CheckContext, requests: DataFrame) -> DataFrame:
    """``requests`` (a few rows of ``per_request``: the ones a check shows) with their texts:
    the writer of their sends (``src``), their request id (``rid``: the sends'; ``any_rid``:
    any of their events'), and the reason of their first ``lost`` (``lost_reason``); each
    the smallest, as in one aggregation over the request's events."""
    ev = F.col("ev")
    is_send = ev == "send"
    keys = requests.select(F.col("cid").alias("_cid"), F.col("seq").alias("_seq")).distinct()
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
        .join(rids.select("rid").distinct(), "rid", "left_semi")
        .groupBy("rid")
        .agg(F.min("cid").alias("cid"), F.min("seq").alias("seq"))
    )


# --- a rule several families share --------------------------------------------------


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


def registered_dispatch(ctx: CheckContext, name: str) -> CheckResult:
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
        .first()
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
        return unknown(name, "no job was dispatched", figures)
    summary = (
        f"{dispatches} dispatches, {expirations} expirations; {violations} to an expired or unknown worker"
    )
    return judged(name, violations, found, summary, figures)


# --- results ---------------------------------------------------------------------------


def example(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One offending event for a report: its event keys first, then every non-null field."""
    out = {k: row[k] for k in EVENT_KEYS if row.get(k) is not None}
    out.update({k: v for k, v in row.items() if k not in out and v is not None})
    out.update(extra)
    return out


def examples(df: DataFrame, n: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    """The first ``n`` rows of ``df`` by time, as examples."""
    return [example(r.asDict()) for r in df.orderBy("ts").limit(n).collect()]


def rows(df: DataFrame, *cols: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The rows of a small DataFrame, as dicts, in time order."""
    df = df.select(*cols).orderBy("ts")
    return [r.asDict() for r in (df.limit(limit) if limit else df).collect()]


def judged(
    name: str,
    violations: int,
    found: list[dict[str, Any]],
    summary: str,
    figures: dict[str, Any] | None = None,
) -> CheckResult:
    """Held, or violated ``violations`` times, with the earliest MAX_EXAMPLES examples."""
    shown = sorted(found, key=lambda e: e.get("ts") or 0)[:MAX_EXAMPLES]
    return CheckResult(name, VIOLATED if violations else HELD, violations, shown, summary, figures or {})


def unknown(name: str, summary: str, figures: dict[str, Any] | None = None, reason: str = "") -> CheckResult:
    """The history cannot decide ``name``; ``reason`` says what was missing and how to get it."""
    return CheckResult(name, UNKNOWN, summary=summary, figures=figures or {}, reason=reason)


def count(value: Any) -> int:
    """An aggregate that may be null (no rows), as an int."""
    return int(value or 0)


class Found(dict):
    """problem label -> (count, first examples)."""

    def n(self, label: str) -> int:
        return self.get(label, (0, []))[0]

    def shown(self, *labels: str) -> list[dict[str, Any]]:
        """The examples of these labels, each with its ``problem``."""
        return [example(row, problem=label) for label in labels for row in self.get(label, (0, []))[1]]


def problems(*labelled: tuple[str, DataFrame]) -> Found:
    """problem label -> (count, first examples), for every label that has rows (one action)."""
    frames = [
        df.select(F.lit(label).alias("problem"), F.to_json(F.struct(*df.columns)).alias("row"))
        for label, df in labelled
    ]
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    per_problem = Window.partitionBy("problem")
    firsts = (
        union.withColumn("n", F.count("*").over(per_problem))
        .withColumn("i", F.row_number().over(per_problem.orderBy("row")))
        .where(F.col("i") <= MAX_EXAMPLES)
    )
    found = Found()
    for r in firsts.collect():
        found.setdefault(r["problem"], (r["n"], []))[1].append(json.loads(r["row"]))
    return found


#: From this many events on, a check's totals and first offenders come from one aggregation
#: (``totals_and_firsts``); below, the totals from a generated-code aggregation and then, only
#: if there are offenders, the first of them from a second query. The one aggregation (its
#: bottom-n is not generated code) cost the demo run's in_order and no_lost 0.1-0.2 s more
#: CPU each; at 10M events it spared in_order a second window over every reply (-25% CPU).
ONE_PASS_MIN_EVENTS = 2_000_000


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
        row = df.agg(*totals, firsts.alias("_firsts")).first()
        return row, [r.asDict() for r in row["_firsts"] or []]
    row = df.agg(*totals, F.sum(offending.cast("int")).alias("_offending")).first()
    if not row["_offending"]:
        return row, []
    return row, [r.asDict() for r in df.filter(offending).orderBy(order).limit(n).collect()]


def judged_problems(
    name: str, found: Found, violations: tuple[str, ...], summary: str, **figures: Any
) -> CheckResult:
    """The result of ``problems``: violated by the rows of the labels in ``violations``."""
    n = sum(found.n(label) for label in violations)
    shown = found.shown(*violations)[:MAX_EXAMPLES]
    return CheckResult(name, VIOLATED if n else HELD, n, shown, summary, figures)


def ms(ns: float) -> float:
    return round(ns / MS, 1)


def spread(values_ns: list[int]) -> dict[str, float | int | None]:
    """count, min, median and max of durations, in ms."""
    if not values_ns:
        return {"count": 0, "min_ms": None, "median_ms": None, "max_ms": None}
    return {
        "count": len(values_ns),
        "min_ms": ms(min(values_ns)),
        "median_ms": ms(median(values_ns)),
        "max_ms": ms(max(values_ns)),
    }


def spreads(df: DataFrame, value: str, **where: Column) -> dict[str, dict[str, float | int | None]]:
    """name -> ``spread`` of the durations (ns) in column ``value`` of the rows of ``df`` where
    that name's condition holds: computed by Spark, in one job for all the names."""
    aggs = []
    for i, cond in enumerate(where.values()):
        v = F.when(cond, F.col(value))
        aggs += [F.count(v).alias(f"n{i}"), F.min(v).alias(f"lo{i}"), F.max(v).alias(f"hi{i}")]
        aggs.append(F.percentile(v, 0.5).alias(f"mid{i}"))
    row = df.agg(*aggs).first()
    out = {}
    for i, name in enumerate(where):
        n = int(row[f"n{i}"] or 0)
        out[name] = (
            spread([])
            if n == 0
            else {
                "count": n,
                "min_ms": ms(row[f"lo{i}"]),
                "median_ms": ms(row[f"mid{i}"]),
                "max_ms": ms(row[f"hi{i}"]),
            }
        )
    return out
