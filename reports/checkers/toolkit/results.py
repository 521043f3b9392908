"""Building a check's result: ``result`` (the one builder), offending events as examples
for a person to find in the logs (``example``, ``examples``, ``rows``; ``firsts``: the
first rows of each kind of problem), several labelled offender frames counted and sampled
in one Spark action (``problems``), and duration figures (``spread``; ``spread_columns``
and ``spreads_of`` computed by Spark; ``ms``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from statistics import median
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from contract.links import target_instance
from reports.checkers import (
    HELD,
    MAX_EXAMPLES,
    UNKNOWN,
    VIOLATED,
    CheckContext,
    CheckResult,
    FaultWindow,
    planned_windows,
    shown_first,
)
from reports.checkers.toolkit.facts import MS

#: The keys an example shows first, in this order (then every other non-null field).
EVENT_KEYS = ("ts", "src", "ev", "cid", "seq", "rid")


def example(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One offending event for a report: its event keys first, then every non-null field."""
    out = {k: row[k] for k in EVENT_KEYS if row.get(k) is not None}
    out.update({k: v for k, v in row.items() if k not in out and v is not None})
    out.update(extra)
    return out


def firsts(df: DataFrame, n: int = MAX_EXAMPLES, *, by: str = "problem", order: str = "ts") -> DataFrame:
    """The first ``n`` rows of ``df`` by ``order``; where ``df`` has a ``by`` column (the kind
    of problem), also the first row of each of its first ``n`` kinds, so that ``result`` can
    show every kind however many rows of one came first. At most ``2 n`` rows, however many
    kinds (a label may name a worker or a time)."""
    if by not in df.columns:
        return df.orderBy(order).limit(n)
    first = F.row_number().over(Window.partitionBy(by).orderBy(order)) == 1
    marked = df.withColumn("_first", first)
    kinds = marked.where(F.col("_first")).orderBy(order).limit(n)
    others = marked.where(~F.col("_first")).orderBy(order).limit(n)
    return kinds.unionByName(others).drop("_first").orderBy(order)


def examples(df: DataFrame, n: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    """The first ``n`` rows of ``df`` by time, and the first of each ``problem`` (``firsts``),
    as examples."""
    return [example(r.asDict()) for r in firsts(df, n).collect()]


def rows(df: DataFrame, *cols: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The rows of a small DataFrame, as dicts, in time order; with ``limit``, the first
    ``limit``, and the first of each ``problem`` among ``cols`` (``firsts``)."""
    df = df.select(*cols)
    return [r.asDict() for r in (firsts(df, limit) if limit else df.orderBy("ts")).collect()]


def result(
    summary: str,
    figures: dict[str, Any] | None = None,
    *,
    violations: int = 0,
    examples: Iterable[dict[str, Any]] = (),
    unknown: str | None = None,
) -> CheckResult:
    """A check's result, the one way to build it; the registry fills in the check's name.

    Violated when ``violations`` is not 0; else unknown when ``unknown`` is given (the
    reason: what the history lacked and how to get it, "" when the summary says it all);
    else held. It shows MAX_EXAMPLES of ``examples`` in time order: the first of each
    ``problem`` they name, then the earliest others (``shown_first``); ``figures`` are
    the numbers worth showing. For example::

        return result(f"{n} replies, {bad} out of order", {"replies": n}, violations=bad, examples=found)
        return result("no reply arrived", figures, unknown="no reply reached a client: a longer load")
        found = problems((LOST, lost), (TWICE, twice))  # one Spark action for both labels
        return result(summary, figures, violations=found.n(LOST, TWICE), examples=found.shown(LOST, TWICE))
    """
    by_time = sorted(examples, key=lambda e: e.get("ts") or 0)
    shown = [by_time[i] for i in shown_first(by_time, MAX_EXAMPLES)]
    status = VIOLATED if violations else HELD if unknown is None else UNKNOWN
    return CheckResult("", status, violations, shown, summary, figures or {}, unknown or "")


def nothing_to_judge(
    ctx: CheckContext,
    summary: str,
    reason: str,
    *,
    on: set[str] | None = None,
    which: Callable[[FaultWindow], bool] | None = None,
    figures: dict[str, Any] | None = None,
) -> CheckResult:
    """The result of a check that found nothing to judge.

    When the fault plan gave it nothing (no fault planned or recorded on the instances
    ``on`` (None: any; a link fault counts for the instance that connects over the link)
    for which ``which`` holds (None: any; it sees each planned fault as a FaultWindow
    without times, with its class: ``lambda f: f.outage``)), the check holds: a
    baseline without faults has nothing to recover from, which is no doubt about the
    system. When such a fault was planned and still nothing showed, it is unknown, with
    ``reason``.
    """

    def relevant(f: FaultWindow) -> bool:
        return (which is None or which(f)) and (on is None or target_instance(f.target) in on)

    if any(map(relevant, planned_faults(ctx))) or any(map(relevant, ctx.faults)):
        return result(summary, figures, unknown=reason)
    return result(f"{summary}: the plan has no fault that would give it any", figures)


def planned_faults(ctx: CheckContext) -> list[FaultWindow]:
    """The faults of run.json's plan, as windows with their class and no times (0, None)."""
    return planned_windows(ctx.meta, timed=False)


def count(value: Any) -> int:
    """An aggregate that may be null (no rows), as an int."""
    return int(value or 0)


class Found(dict):
    """problem label -> (count, first examples); ``totals``: the other figures of ``problems_in``."""

    def __init__(self) -> None:
        super().__init__()
        self.totals: dict[str, Any] = {}

    def n(self, *labels: str) -> int:
        """How many rows these labels have, together."""
        return sum(self.get(label, (0, []))[0] for label in labels)

    def shown(self, *labels: str) -> list[dict[str, Any]]:
        """The examples of these labels, each with its ``problem``."""
        return [example(row, problem=label) for label in labels for row in self.get(label, (0, []))[1]]


def problems(*labelled: tuple[str, DataFrame], shown: Iterable[str] | None = None) -> Found:
    """problem label -> (count, first examples), for every label that has rows (one action).

    With ``shown`` (the labels whose examples the check shows), the rows are first only
    counted, in one action, and the examples of the shown labels that have rows read by a
    second: a correct history's labels cost no JSON and no sort of their rows."""
    if shown is not None:
        tags = [df.select(F.lit(label).alias("problem")) for label, df in labelled]
        union = tags[0]
        for df in tags[1:]:
            union = union.unionByName(df)
        counts = {
            r["problem"]: r["n"] for r in union.groupBy("problem").agg(F.count("*").alias("n")).collect()
        }
        wanted = [(label, df) for label, df in labelled if label in set(shown) and counts.get(label)]
        found = problems(*wanted) if wanted else Found()
        for label, n in counts.items():
            found.setdefault(label, (n, []))
        return found
    # The first examples are the earliest where a frame has a time (``ts``), whatever its
    # first column (dwork's rows start with their task).
    frames = [
        df.select(
            F.lit(label).alias("problem"),
            (F.col("ts") if "ts" in df.columns else F.lit(None)).cast("long").alias("_ts"),
            F.to_json(F.struct(*df.columns)).alias("row"),
        )
        for label, df in labelled
    ]
    union = frames[0]
    for df in frames[1:]:
        union = union.unionByName(df)
    per_problem = Window.partitionBy("problem")
    firsts = (
        union.withColumn("n", F.count("*").over(per_problem))
        .withColumn("i", F.row_number().over(per_problem.orderBy(F.col("_ts").asc_nulls_last(), "row")))
        .where(F.col("i") <= MAX_EXAMPLES)
    )
    found = Found()
    for r in firsts.collect():
        found.setdefault(r["problem"], (r["n"], []))[1].append(json.loads(r["row"]))
    return found


def problems_in(
    df: DataFrame, *labelled: tuple[str, Column, list[Column | str]], totals: Iterable[Column] = ()
) -> Found:
    """``problems`` of offenders that are rows of one frame: label -> (how many rows of ``df``
    meet its condition, the first of them as the columns ``cols`` give them), with
    ``totals`` (aggregates over ``df``) as ``Found.totals``. The counts come with the totals
    from one aggregation, and only labels that have rows are read again for their examples
    (``problems``: a correct history asks Spark one query). ``problems`` over filters of one
    frame and a second query for its totals made Spark analyse, optimise and plan a copy of
    the frame per label (titanic_durable: four copies of a grouping by request)."""
    counts = [F.count_if(cond).alias(f"_n{i}") for i, (_label, cond, _cols) in enumerate(labelled)]
    row = df.agg(*totals, *counts).collect()[0].asDict()
    offending = [
        (label, df.filter(cond).select(*cols))
        for i, (label, cond, cols) in enumerate(labelled)
        if row.pop(f"_n{i}")
    ]
    found = problems(*offending) if offending else Found()
    found.totals = row
    return found


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


def spread_columns(value: str, **where: Column) -> list[Column]:
    """The aggregates of ``spreads_of`` for each name's condition: the durations (ns) in column
    ``value`` of the rows where it holds, to compute in the same aggregation as a check's counts."""
    aggs = []
    for name, cond in where.items():
        v = F.when(cond, F.col(value))
        aggs += [F.count(v).alias(f"_{name}_n"), F.min(v).alias(f"_{name}_lo"), F.max(v).alias(f"_{name}_hi")]
        aggs.append(F.percentile(v, 0.5).alias(f"_{name}_mid"))
    return aggs


def spreads_of(row: Any, *names: str) -> dict[str, dict[str, float | int | None]]:
    """name -> ``spread`` of its durations, from an aggregation's ``row`` with its ``spread_columns``."""
    out: dict[str, dict[str, float | int | None]] = {}
    for name in names:
        n = int(row[f"_{name}_n"] or 0)
        out[name] = (
            spread([])
            if n == 0
            else {
                "count": n,
                "min_ms": ms(row[f"_{name}_lo"]),
                "median_ms": ms(row[f"_{name}_mid"]),
                "max_ms": ms(row[f"_{name}_hi"]),
            }
        )
    return out
