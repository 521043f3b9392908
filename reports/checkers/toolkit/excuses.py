"""Fault excuses: which faults concern an instance (its own, its broker's, its link's), as
merged [lo, hi] spans for Python-side logic (``fault_spans``), and applied to a DataFrame
as one expression over a literal array of the spans (``split_excused``, ``with_excused``,
and ``outside`` for spans of one's own: ``literal_rows``, ``any_row``), never as a chain of
conditions per fault nor a join (a broadcast is a Spark job of its own in every query). A fault's
class (on a process or on a link, lossy or not, an outage or a slowdown) comes from its
kind's card through ``fault_start`` (``FaultWindow``). ``timers`` says how long after a
fault's stop its requests stay excused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from contract.links import target_instance
from contract.promises import expiry_s, unrecovered
from contract.rundir import DEFAULT_CLIENT_BUDGET_S, RunMeta
from reports.checkers import CheckContext, FaultWindow
from reports.checkers.toolkit.facts import (
    END_OF_TIME,
    NS,
    Span,
    broker_instances,
    options_of,
    share_of,
)

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
    every_connection: bool | None = None,
    lasting_only: bool = False,
    lead_ns: int = 0,
    grace_ns: int = 0,
) -> list[tuple[int, int]]:
    """[start - lead_ns, stop + grace_ns] of the faults that concern ``instance``, merged, in order.

    ``instance`` None: every fault of the run, whatever its target (the flags do not
    apply). A fault that never healed lasts to END_OF_TIME. ``broker_links`` (default:
    as ``link``): faults on a broker's links. ``lossy_only``: only the faults that lose
    what is sent (their ``lossy``); ``outage_only``: only those during which
    their target cannot serve (its ``harm``), not the slowdowns; ``every_connection``: True,
    only the faults that act on every connection of their target, False, only those that act
    on a share (a toxicity below 1: ``share_of``), None, both; ``lasting_only``: not a
    kill or restart (no duration of its own: its window lasts until the restarted process
    is ready, after which it may already have served; proc_exit/proc_start say when it ran).
    """
    flags = _flags(own, broker, link, broker_links, lossy_only, outage_only, every_connection)
    spans = _excusing(ctx, instance is not None, lead_ns, grace_ns, lasting_only=lasting_only, **flags)
    return merge_spans([(lo, hi) for lo, hi, who in spans if who is None or who == instance])


_FLAG_DEFAULTS: dict[str, Any] = {
    "own": True,
    "broker": True,
    "link": True,
    "broker_links": None,
    "lossy_only": False,
    "outage_only": False,
    "every_connection": None,
    "lead_ns": 0,
    "grace_ns": 0,
}


def _flags(
    own: bool,
    broker: bool,
    link: bool,
    broker_links: bool | None,
    lossy_only: bool,
    outage_only: bool,
    every_connection: bool | None = None,
) -> dict[str, Any]:
    return {
        "own": own,
        "broker": broker,
        "link": link,
        "broker_links": link if broker_links is None else broker_links,
        "lossy_only": lossy_only,
        "outage_only": outage_only,
        "every_connection": every_connection,
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
    every_connection: bool | None = None,
    lasting_only: bool = False,
) -> list[tuple[int, int, str | None]]:
    """(lo, hi, the instance it excuses or None for every one) of each fault that counts."""
    brokers = broker_instances(ctx) if targeted else set()
    out: list[tuple[int, int, str | None]] = []
    for f in ctx.faults:
        if (lossy_only and not f.lossy) or (outage_only and not f.outage):
            continue
        if every_connection is not None and (share_of(ctx, f) >= 1.0) != every_connection:
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


def _flagged(
    ctx: CheckContext, instance: str | None, flags: dict[str, Any]
) -> list[tuple[int, int, str | None]]:
    """``_excusing`` under the keyword flags of ``fault_spans`` given to split_excused or
    with_excused (an unknown one is a TypeError, as for any keyword)."""
    given = {**_FLAG_DEFAULTS, **flags}
    lead_ns, grace_ns = given.pop("lead_ns"), given.pop("grace_ns")
    return _excusing(ctx, instance is not None, lead_ns, grace_ns, **_flags(**given))


def has_spare(ctx: CheckContext, fault: FaultWindow, spans: dict[int, tuple[int, int]]) -> bool:
    """Whether another instance of the fault's target's role keeps serving while it acts:
    one no other outage hits within its span (``spans``: fault_id -> [lo, hi]). False for a
    target of no known role (the clients' links: every request crosses them)."""
    roles: dict[str, str] = ctx.meta.get("processes") or {}
    target = target_instance(fault.target)
    role = roles.get(target)
    if role is None:
        return False
    lo, hi = spans[fault.fault_id]
    touched = {target}
    for other in ctx.faults:
        olo, ohi = spans[other.fault_id]
        if other.outage and olo <= hi and lo <= ohi:
            touched.add(target_instance(other.target))
    return any(r == role and i not in touched for i, r in roles.items())


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
    **flags: Any,
) -> tuple[DataFrame, DataFrame]:
    """(kept, excused): the rows of ``df`` no fault touches, and those one does.

    A row is excused when its time ``ts`` (or its interval [ts, until]) meets the span of a
    fault that concerns the instance in column ``instance`` (None: any fault, whatever its
    target), under the flags of ``fault_spans`` (``lasting_only`` aside). The faults are a
    literal array asked about in each row (``with_excused``): one pass over ``df``, whatever
    the number of faults, and no job of their own.
    """
    if not _flagged(ctx, instance, flags):
        return df, df.filter(F.lit(False))
    hit = with_excused(df, ctx, "_excused", ts=ts, until=until, instance=instance, **flags)
    columns = df.columns
    return hit.filter(~F.col("_excused")).select(*columns), hit.filter(F.col("_excused")).select(*columns)


def outside(df: DataFrame, ctx: CheckContext, spans: list[tuple[int, int]], ts: str = "ts") -> DataFrame:
    """The rows of ``df`` whose time ``ts`` is in none of the [lo, hi] spans."""
    if not spans:
        return df
    frame = literal_rows(spans, {"_f_lo": "long", "_f_hi": "long"})
    return df.filter(~any_row(frame, lambda f: _meets(f, ts, None)))


def small_frame(ctx: CheckContext, rows: list[tuple[Any, ...]], columns: dict[str, str]) -> DataFrame:
    """A DataFrame of a few rows made of literals in the plan (fault windows...): unlike
    ``createDataFrame`` it needs no Python worker process to serve it. Joined, it is
    broadcast, a Spark job of its own in each query: to ask each row of a frame whether it
    meets one of them, ``literal_rows`` and ``any_row`` cost none."""
    return ctx.spark.range(1).select(F.inline(literal_rows(rows, columns)))


def frozen(ctx: CheckContext, df: DataFrame) -> DataFrame:
    """The rows of ``df`` (a few: the ones a check shows) made a ``small_frame``: a query over
    them starts from these rows, not from the plan that found them. A violated
    steady_state's examples, asked of its troubled requests' first few, were a query of 36
    shuffles, 3.2 s on a test's history of 200 events (issue 38)."""
    got = df.collect()
    if not got:
        return df
    return small_frame(ctx, [tuple(r) for r in got], {f.name: f.dataType.simpleString() for f in df.schema})


def literal_rows(rows: list[tuple[Any, ...]], columns: dict[str, str]) -> Column:
    """A few rows (fault windows...) as one literal array of structs with ``columns`` (name ->
    type), for an expression over each of them (``any_row``; ``F.filter``, ``F.transform``)."""
    return F.array(
        *(
            F.struct(*(F.lit(v).cast(t).alias(c) for v, (c, t) in zip(row, columns.items(), strict=True)))
            for row in rows
        )
    )


def join_rows(
    df: DataFrame, rows: list[tuple[Any, ...]], columns: dict[str, str], cond: Callable[[Column], Column]
) -> DataFrame:
    """``df`` joined to a few literal rows (``columns``: name -> type; fault windows...) where
    ``cond`` (of one row, a struct of those fields, and ``df``'s columns) holds: each row of
    ``df`` once per row it meets, with that row's columns, as an inner join. Each row of
    ``df`` picks its rows out of a literal array: no broadcast (a Spark job of its own)."""
    picked = F.explode(F.filter(literal_rows(rows, columns), cond)).alias("_row")
    return df.select("*", picked).select(*df.columns, *(F.col("_row")[c].alias(c) for c in columns))


def any_row(rows: Column, cond: Callable[[Column], Column]) -> Column:
    """Whether ``cond`` (of one element, a struct) holds for an element of the array ``rows``:
    as EXISTS, never null (a condition that is null for an element does not hold)."""
    return F.coalesce(F.exists(rows, cond), F.lit(False))


def _meets(fault: Column, ts: str, until: str | None) -> Column:
    """The fault span [_f_lo, _f_hi] (fields of the struct ``fault``) meets [ts, until]."""
    end = F.col(until) if until is not None else F.col(ts)
    return (fault["_f_lo"] <= end) & (F.col(ts) <= fault["_f_hi"])


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
    flags of split_excused). One pass over ``df``, one expression: the faults are a literal
    array (``literal_rows``) each row is asked about, with no join and no job of their own
    (as an EXISTS over ``small_frame``, a broadcast existence join, it was a job per query)."""
    return with_meeting(df, _flagged(ctx, instance, flags), name, ts=ts, until=until, instance=instance)


def with_meeting(
    df: DataFrame,
    spans: list[tuple[int, int, str | None]],
    name: str,
    *,
    ts: str = "ts",
    until: str | None = None,
    instance: str | None = None,
) -> DataFrame:
    """``df`` with a boolean column ``name``: whether the row's [ts, until] meets one of the
    spans (lo, hi, the instance it concerns or None for every one) - for spans a checker
    picks by a rule of its own; ``with_excused`` picks them by the flags."""
    if not spans:
        return df.withColumn(name, F.lit(False))
    faults = literal_rows(spans, {"_f_lo": "long", "_f_hi": "long", "_f_inst": "string"})

    def concerns(f: Column) -> Column:
        cond = _meets(f, ts, until)
        if instance is not None:
            cond = cond & (f["_f_inst"].isNull() | (f["_f_inst"] == F.col(instance)))
        return cond

    return df.withColumn(name, any_row(faults, concerns))


# --- the timers of a whole-request excuse ---------------------------------------------
#
# A fault excuses the requests in flight as it started or first sent up to its stop + the
# timers' ``after_s`` (the rule: reports/checkers/core/aggregates.py; for users:
# docs/manifest.md), and the first WARMUP_NS of load excuse theirs.

#: Clients connect, brokers learn their workers and sockets warm up during the first
#: seconds of load; a retry or a slow reply then says nothing about steady state.
WARMUP_NS = 2 * NS


@dataclass(frozen=True)
class Timers:
    """How long after a fault's stop its requests are excused, and where that comes from."""

    after_s: float  # sends up to the fault's stop + after_s are excused
    client_budget_s: float  # the adapter's worst case per request: how late an excused request may end
    source: str  # "expiry_ms = heartbeat_ms * liveness" or "steady_grace_s (no expiry_ms)"
    on_hosts: bool = False  # network = "hosts": real TCP between hosts, no proxy (chaos/hosts.py)
    #: the promises and the run's processes (instance -> role), for ``never_healed``
    promises: dict[str, Any] = field(default_factory=dict)
    processes: dict[str, str] = field(default_factory=dict)
    #: the manifest's ``expiry_ms`` in seconds (None: it gives none, ``after_s`` is the grace)
    expiry_s: float | None = None

    def never_healed(self, fault: FaultWindow) -> bool:
        """The system does not promise to recover from the fault (a restart of a role its
        manifest names in ``unrecovered_restarts``, a fault that loses data on a link of a
        role it names in ``unrecovered_link_loss``, junk sent to a role it names in
        ``unrecovered_malformed``): it excuses to the end of the run."""
        restarts = not fault.on_link and not fault.lasting and fault.outage
        link_loss = fault.on_link and bool(fault.lossy)
        junk = fault.fault == "malformed"
        return unrecovered(self.promises, self.processes, fault.target, restarts, link_loss, junk)

    def after_ns(self, fault: FaultWindow) -> int:
        """How long after ``fault``'s stop its sends are excused: ``after_s``; on hosts, after a
        fault that lost packets, at least as long as the fault lasted. TCP backs its
        retransmissions off through the silence, and the first one after the heal comes up to
        about that late (through the proxy, the cut connections close at the heal and are made
        again at once): a WMP manager partitioned 8 s was heard again 5 s after the heal, and
        steady_state called its clients' retries then a correct system's."""
        after = int(self.after_s * NS)
        if self.on_hosts and fault.lossy and fault.stop_ns is not None:
            return max(after, fault.stop_ns - fault.start_ns)
        return after

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


def timers_of(meta: RunMeta) -> Timers:
    """``timers`` of a run.json (or of the plan ``zchaos check`` makes of one)."""
    promises = meta["manifest"]["promises"]
    budget = float(meta.get("client_budget_s") or DEFAULT_CLIENT_BUDGET_S)
    expr = promises.get("expiry_ms")
    try:
        expiry = expiry_s(expr, options_of(meta))
    except ValueError:
        expiry = None  # the manifest was checked when the run started; a scenario may have changed it
    on_hosts = (meta.get("scenario") or {}).get("network") == "hosts"
    promised, processes = dict(promises), dict(meta.get("processes") or {})
    if expiry is not None:
        return Timers(expiry, budget, f"expiry_ms = {expr}", on_hosts, promised, processes, expiry)
    grace = float(promises.get("steady_grace_s", 10.0))
    source = "steady_grace_s (the manifest gives no expiry_ms)"
    return Timers(grace, budget, source, on_hosts, promised, processes)


def send_span(fault: FaultWindow, t: Timers, end_ns: int) -> Span:
    """The send times a fault excuses: [start, stop + its after] (to ``end_ns`` if it never
    healed, or the system does not promise to recover from it: ``Timers.never_healed``)."""
    if fault.stop_ns is None or t.never_healed(fault):
        return fault.start_ns, end_ns
    return fault.start_ns, fault.stop_ns + t.after_ns(fault)


#: How long after a lossy link fault's stop what is sent may still die on the wire: the
#: connections it cut are closed at the heal, and their peers connect again (libzmq's
#: reconnect interval is 100 ms by default) and shake hands.
HEAL_NS = NS // 2


def transit_spans(ctx: CheckContext) -> list[tuple[int, int, str | None]]:
    """The faults during which a no-resend request may die on the wire, requeue or not: lossy
    faults (a partition, a reset, a cut connection) on a client's link, where nothing but the
    client could send it again, and those shorter than the system's expiry on any link, which
    leave the worker alive in its broker's eyes while what was sent to it is gone. A longer
    cut expires the worker, and the requeue promise covers what it held. Each span goes on
    HEAL_NS past the fault's stop: the proxy closes the cut connections at the heal, and what
    was written into them as it did is gone too (explore, stall-queue's seed 1, 2026-12-04: a
    request sent 10 ms after a partition of a worker's link healed, lost)."""
    expiry_ns = int(timers(ctx).after_s * NS)
    spans: list[tuple[int, int, str | None]] = []
    for f in ctx.faults:
        if not f.lossy:
            continue
        on_clients = f.link is not None and f.link.clients
        brief = f.stop_ns is not None and f.stop_ns - f.start_ns < expiry_ns
        if on_clients or brief:
            spans.append((f.start_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns + HEAL_NS, None))
    return spans
