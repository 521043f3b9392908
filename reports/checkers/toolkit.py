"""The checker toolkit: the one way every checker family reads the run, excuses faults and
builds its result.

- **The run**: ``options`` (implementation knobs), ``run_time`` / ``history_end`` /
  ``client_budget_ns`` (when things happened), ``worker_instances`` / ``broker_instances``
  (an instance's kind comes from the manifest: a role that binds an endpoint serves it,
  a broker or queue; a role that only connects is a worker), ``instance_of`` /
  ``instance_column`` (the instance behind a connection identity).
- **Filtering events**: ``events_of(ctx, kind, ...)``.
- **Excusing faults**: a fault's class (on a process or on a link, lossy or not) comes from
  the fault table (chaos/faults.py) through ``fault_start``; ``fault_spans`` says when the
  faults that concern an instance (its own, its broker's, its link's) were under way, as
  merged [lo, hi] spans for Python-side logic, and ``split_excused`` / ``with_excused``
  (and ``outside`` for spans of one's own) apply them to a DataFrame as a small broadcast
  frame joined by time range (``small_frame``), never as a chain of conditions per fault.
- **A rule several families share**: ``registered_dispatch`` (no job to a worker the
  broker has not registered, or has expired since).
- **Results**: ``judged`` (held or violated, with examples), ``unknown`` (with what was
  missing), ``example`` / ``examples`` (offending events for a person to find in the logs),
  ``problems`` (several labelled offender frames counted and sampled in one Spark action),
  ``spread`` / ``ms`` for duration figures.

Family modules import from here (and from ``reports.checkers``), never from each other.
"""

from __future__ import annotations

import json
from statistics import median
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers import (
    HELD,
    MAX_EXAMPLES,
    UNKNOWN,
    VIOLATED,
    CheckContext,
    CheckResult,
    FaultWindow,
    events_of,  # also offered here: a family module needs nothing but this toolkit
)

NS = 1_000_000_000
MS = 1_000_000
DEFAULT_CLIENT_BUDGET_S = 10.0
#: Later than any event: the end of a fault that never healed.
END_OF_TIME = 1 << 62
#: The keys an example shows first, in this order (then every other non-null field).
EVENT_KEYS = ("ts", "src", "ev", "cid", "seq", "rid")


# --- the run ---------------------------------------------------------------------------


def options(ctx: CheckContext) -> dict[str, Any]:
    """The implementation options of the run (the manifest's, with the scenario's overrides)."""
    merged = dict(ctx.meta.get("manifest", {}).get("options") or {})
    merged.update(ctx.meta.get("scenario", {}).get("options") or {})
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


def _link_instance(fault: FaultWindow) -> str:
    """The instance whose links a link fault cuts: ``link:worker-1:backend`` -> ``worker-1``."""
    return fault.target.removeprefix("link:").split(":", 1)[0]


def _concerned(
    fault: FaultWindow, brokers: set[str], *, own: bool, broker: bool, link: bool
) -> tuple[bool, str | None]:
    """Whether the fault excuses anything under these flags, and for which instance (None: all).

    own: a process fault on the instance itself; broker: a process fault on a broker (every
    instance depends on it); link: a fault on the instance's links, or on a broker's links.
    """
    if fault.on_link:
        target = _link_instance(fault)
        if not link:
            return False, None
        return True, (None if target in brokers else target)
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
    lossy_only: bool = False,
    lead_ns: int = 0,
    grace_ns: int = 0,
) -> list[tuple[int, int]]:
    """[start - lead_ns, stop + grace_ns] of the faults that concern ``instance``, merged, in order.

    ``instance`` None: every fault of the run, whatever its target (the flags do not
    apply). A fault that never healed lasts to END_OF_TIME. ``lossy_only``: only the
    faults that lose what is sent (the fault table's ``lossy``).
    """
    flags = {"own": own, "broker": broker, "link": link, "lossy_only": lossy_only}
    spans = _excusing(ctx, instance is not None, lead_ns, grace_ns, **flags)
    return merge_spans([(lo, hi) for lo, hi, who in spans if who is None or who == instance])


def _excusing(
    ctx: CheckContext,
    targeted: bool,
    lead_ns: int,
    grace_ns: int,
    *,
    own: bool,
    broker: bool,
    link: bool,
    lossy_only: bool,
) -> list[tuple[int, int, str | None]]:
    """(lo, hi, the instance it excuses or None for every one) of each fault that counts."""
    brokers = broker_instances(ctx) if targeted else set()
    out = []
    for f in ctx.faults:
        if lossy_only and not f.lossy:
            continue
        lo, hi = f.start_ns - lead_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns + grace_ns
        if not targeted:
            out.append((lo, hi, None))
            continue
        applies, who = _concerned(f, brokers, own=own, broker=broker, link=link)
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
    lossy_only: bool = False,
    lead_ns: int = 0,
    grace_ns: int = 0,
) -> tuple[DataFrame, DataFrame]:
    """(kept, excused): the rows of ``df`` no fault touches, and those one does.

    A row is excused when its time ``ts`` (or its interval [ts, until]) meets the span of a
    fault that concerns the instance in column ``instance`` (None: any fault, whatever its
    target), under the flags of ``fault_spans``. The faults are a small broadcast frame
    joined by range: one pass over ``df``, whatever the number of faults.
    """
    flags = {"own": own, "broker": broker, "link": link, "lossy_only": lossy_only}
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


def _meets(ts: str, until: str | None) -> Column:
    start = F.col(ts)
    end = F.col(until) if until is not None else start
    return (F.col("_f_lo") <= end) & (start <= F.col("_f_hi"))


def with_excused(df: DataFrame, ctx: CheckContext, name: str = "excused", **how: Any) -> DataFrame:
    """``df`` with a boolean column ``name``: whether a fault excuses the row (see split_excused)."""
    kept, excused = split_excused(df, ctx, **how)
    return kept.withColumn(name, F.lit(False)).unionByName(excused.withColumn(name, F.lit(True)))


# --- a rule several families share --------------------------------------------------


def registered_dispatch(ctx: CheckContext, name: str) -> CheckResult:
    """Every dispatch to a worker follows its registration (``worker_ready``), with no
    ``worker_expired`` in between, per broker (``src``) and worker connection."""
    broker = events_of(ctx, "worker_ready", "worker_expired", "dispatch").select(
        "ts", "src", "ev", "worker", "rid", "reason", "detail"
    )
    before = Window.partitionBy("src", "worker").orderBy("ts").rowsBetween(Window.unboundedPreceding, -1)
    state = F.when(F.col("ev") != "dispatch", F.col("ev"))
    checked = (
        broker.withColumn("state", F.last(state, True).over(before))
        .withColumn(
            "state_reason", F.last(F.when(F.col("ev") != "dispatch", F.col("reason")), True).over(before)
        )
        .filter(F.col("ev") == "dispatch")
    )
    bad = checked.filter(F.col("state").isNull() | (F.col("state") == "worker_expired"))
    dispatches = checked.count()
    expirations = broker.filter(F.col("ev") == "worker_expired").count()
    violations = bad.count()
    found = [
        example(
            r,
            problem="sent to a worker it never registered"
            if r["state"] is None
            else f"sent to a worker it had expired ({r['state_reason']})",
        )
        for r in rows(bad, "ts", "src", "ev", "worker", "rid", "state", "state_reason", limit=MAX_EXAMPLES)
    ]
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
