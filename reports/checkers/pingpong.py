"""Checkers of the PING/PONG dialogue (``implementations/pingpong``, seeds/pingpong-dialogue.txt).

What the seed promises, checked on the history the worker and broker record:

- ``pingpong_pings_answered``: every PING a worker sends is answered by a PONG within
  BROKER_TIMEOUT (PONGs carry nothing to match them, so any PONG to the same connection
  in that time answers it);
- ``pingpong_no_dispatch_to_expired``: the broker never sends a job to a worker it has
  expired (and not registered again since);
- ``pingpong_expiry``: an idle worker that falls silent is removed within
  WORKER_EXPIRE_SECONDS (+ ``expire_margin_s``) of its last message, and not before;
  the measured delays are the figure;
- ``pingpong_reconnect``: a worker that hears nothing for N_TIMEOUTS x BROKER_TIMEOUT
  reconnects (not sooner, and within ``reconnect_margin_s``) and its READY registers the
  new connection;
- ``pingpong_workers_return``: after a broker restart every running worker is registered
  again within ``return_bound_s``;
- ``pingpong_resend`` (pingpong-resend only): a job whose worker returns no result is
  sent to another worker resend_ms after it was dispatched (not sooner).

Faults excuse what they cause: a check is not applied inside a fault window (plus
``FAULT_GRACE_NS``) on the worker concerned, on the broker, or on a link between them.
Protocol events are few (about one per worker per second), so after Spark has selected
and ordered them, the interval logic runs over the collected rows.
"""

from __future__ import annotations

from collections import defaultdict
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
    checker,
    events_of,
    nothing_to_judge,
)

NS = 1_000_000_000
MS = 1_000_000
#: After a fault heals, processes restart, sockets reconnect, PINGs queued in a DEALER
#: arrive in a burst: the dialogue's timing rules resume this long after the fault's stop.
FAULT_GRACE_NS = 2 * NS
#: Both ends read one clock (time.time_ns on one host); this covers scheduling jitter
#: between an event and the record of it when a bound is checked from below.
TOLERANCE_NS = 50 * MS
WORKER_ROLES = ("worker", "server")
#: Faults on a process; every other kind (partition, latency ...) is on a network link.
PROCESS_FAULTS = ("kill", "restart", "freeze", "starve")
#: Network faults that lose what is sent (rather than delay it).
LOSSY_FAULTS = ("partition", "disconnect", "reset", "limit_data", "bandwidth")


# --- helpers shared with the other family checkers --------------------------------------


def options(ctx: CheckContext) -> dict[str, Any]:
    """The implementation options of the run (the manifest's, with the scenario's overrides)."""
    merged = dict(ctx.meta.get("manifest", {}).get("options", {}))
    merged.update(ctx.meta.get("scenario", {}).get("options", {}))
    return merged


def worker_instances(ctx: CheckContext) -> set[str]:
    """Instance names of the run's worker (or server) role."""
    return {i for i, role in ctx.meta.get("processes", {}).items() if role in WORKER_ROLES}


def broker_instances(ctx: CheckContext) -> set[str]:
    """Instance names of every other role (the broker, the queue)."""
    return {i for i, role in ctx.meta.get("processes", {}).items() if role not in WORKER_ROLES}


def _concerns(
    fault: FaultWindow, instance: str, brokers: set[str], *, own: bool, broker: bool, link: bool
) -> bool:
    target = fault.target
    if target.startswith("link:") or fault.fault not in PROCESS_FAULTS:  # a fault on the network
        return link and (target == instance or target.startswith(f"link:{instance}"))
    return (own and target == instance) or (broker and target in brokers)


def excused_spans(
    ctx: CheckContext,
    instance: str,
    *,
    own: bool = True,
    broker: bool = True,
    link: bool = True,
    after_ns: int = FAULT_GRACE_NS,
) -> list[tuple[int, int]]:
    """[start, end + grace] (ns) of the faults on worker ``instance``, on a broker, or on its link."""
    brokers = broker_instances(ctx)
    end_of_time = 1 << 62
    return [
        (f.start_ns, end_of_time if f.stop_ns is None else f.stop_ns + after_ns)
        for f in ctx.faults
        if _concerns(f, instance, brokers, own=own, broker=broker, link=link)
    ]


def overlaps(spans: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return any(start <= hi and lo <= end for start, end in spans)


def excused_column(ctx: CheckContext, ts: Column, src: Column, lead_ns: int) -> Column:
    """True for an event (time ``ts``, worker instance ``src``) whose next ``lead_ns`` a fault touches."""
    brokers = broker_instances(ctx)
    end_of_time = 1 << 62
    cond = F.lit(False)
    for f in ctx.faults:
        lo = f.start_ns - lead_ns
        hi = end_of_time if f.stop_ns is None else f.stop_ns + FAULT_GRACE_NS
        here = ts.between(lo, hi)
        if f.target.startswith("link:"):
            here = here & F.lit(f.target).contains(src)
        elif f.target not in brokers:
            here = here & (src == f.target)
        cond = cond | here
    return cond


def lost_on_link(ctx: CheckContext, ts: Column, src: Column) -> Column:
    """True for a message a worker instance ``src`` sent while a lossy fault cut its link."""
    cond = F.lit(False)
    for f in ctx.faults:
        if f.fault not in LOSSY_FAULTS:
            continue
        on_it = (
            src == f.target
            if not f.target.startswith("link:")
            else F.lit(f.target).startswith(F.concat(F.lit("link:"), src))
        )
        here = ts >= f.start_ns if f.stop_ns is None else ts.between(f.start_ns, f.stop_ns)
        cond = cond | (on_it & here)
    return cond


def history_end(ctx: CheckContext) -> int:
    """When recording ended: the last event of the history (ns)."""
    return int(ctx.events.agg(F.max("ts")).first()[0] or 0)


def broker_end(ctx: CheckContext) -> int:
    """When the broker stopped serving for good: its last exit, else the end of the history."""
    brokers = list(broker_instances(ctx))
    last = None
    if brokers:
        last = (
            ctx.events.filter((F.col("ev") == "proc_exit") & F.col("instance").isin(brokers))
            .agg(F.max("ts"))
            .first()[0]
        )
    return int(last) if last else history_end(ctx)


def rows(df: DataFrame, *cols: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The rows of a small DataFrame (protocol events), as dicts, in time order."""
    df = df.select(*cols).orderBy("ts")
    return [r.asDict() for r in (df.limit(limit) if limit else df).collect()]


def example(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if v is not None}
    out.update(extra)
    return out


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


def result(name: str, found: list[dict[str, Any]], summary: str, figures: dict[str, Any]) -> CheckResult:
    found.sort(key=lambda e: e.get("ts", 0))
    status = VIOLATED if found else HELD
    return CheckResult(name, status, len(found), found[:MAX_EXAMPLES], summary, figures)


# --- every PING is answered ------------------------------------------------------------


@checker(
    "pingpong_pings_answered",
    "every PING a worker sends gets a PONG on the same connection within BROKER_TIMEOUT "
    "(outside faults on that worker, the broker or their link)",
    needs=("ping", "pong"),
)
def pings_answered(ctx: CheckContext) -> CheckResult:
    bound_ns = int(float(options(ctx).get("broker_timeout_ms", 1000)) * MS)
    beats = events_of(ctx, "ping", "pong").select("ts", "src", "ev", "worker")
    after = Window.partitionBy("worker").orderBy("ts").rowsBetween(1, Window.unboundedFollowing)
    pings = (
        beats.withColumn("pong_ts", F.first(F.when(F.col("ev") == "pong", F.col("ts")), True).over(after))
        .filter(F.col("ev") == "ping")
        .withColumn("answer_ns", F.col("pong_ts") - F.col("ts"))
        .withColumn(
            "excused",
            excused_column(ctx, F.col("ts"), F.col("src"), bound_ns)
            | (F.col("ts") + bound_ns > history_end(ctx)),
        )
        .withColumn("late", F.col("pong_ts").isNull() | (F.col("answer_ns") > bound_ns))
    )
    counted = pings.filter(~F.col("excused"))
    agg = pings.agg(
        F.sum((~F.col("excused")).cast("int")).alias("pings"),
        F.sum(F.col("excused").cast("int")).alias("excused"),
        F.sum((F.col("late") & ~F.col("excused")).cast("int")).alias("unanswered"),
        F.expr("percentile_approx(CASE WHEN NOT excused THEN answer_ns END, 0.99)").alias("p99"),
        F.max(F.when(~F.col("late") & ~F.col("excused"), F.col("answer_ns"))).alias("max"),
    ).first()
    total, unanswered = int(agg["pings"] or 0), int(agg["unanswered"] or 0)
    excused = int(agg["excused"] or 0)
    figures = {
        "pings": total,
        "unanswered": unanswered,
        "excused_by_faults": excused,
        "bound_ms": ms(bound_ns),
        "pong_p99_ms": ms(agg["p99"]) if agg["p99"] is not None else None,
        "pong_max_ms": ms(agg["max"]) if agg["max"] is not None else None,
    }
    if total == 0:
        return CheckResult(
            "pingpong_pings_answered", UNKNOWN, summary="no PING outside faults", figures=figures
        )
    found = [
        example(r, problem="no PONG" if r["pong_ts"] is None else f"PONG after {ms(r['answer_ns'])} ms")
        for r in rows(
            counted.filter("late"), "ts", "src", "ev", "worker", "pong_ts", "answer_ns", limit=MAX_EXAMPLES
        )
    ]
    summary = (
        f"{total - unanswered} of {total} PINGs answered within {ms(bound_ns):g} ms "
        f"(p99 {figures['pong_p99_ms']} ms); {excused} excused by faults"
    )
    result_ = result("pingpong_pings_answered", found, summary, figures)
    result_.violations = unanswered
    return result_


# --- no job to an expired worker -------------------------------------------------------


def dispatch_to_expired(ctx: CheckContext, name: str) -> CheckResult:
    """Every dispatch to a worker follows its registration, with no expiry in between."""
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
    agg = checked.agg(
        F.count("*").alias("n"), F.sum(F.col("state").isNull().cast("int")).alias("unknown")
    ).first()
    dispatches = int(agg["n"] or 0)
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
        return CheckResult(name, UNKNOWN, summary="no job was dispatched", figures=figures)
    summary = (
        f"{dispatches} dispatches, {expirations} expirations; {violations} to an expired or unknown worker"
    )
    result_ = result(name, found, summary, figures)
    result_.violations = violations
    return result_


@checker(
    "pingpong_no_dispatch_to_expired",
    "the broker sends a job only to a worker it has registered and not expired since",
    needs=("dispatch", "worker_ready"),
)
def no_dispatch_to_expired(ctx: CheckContext) -> CheckResult:
    return dispatch_to_expired(ctx, "pingpong_no_dispatch_to_expired")


# --- silent idle workers expire on time ------------------------------------------------


def _jobs_outstanding(ctx: CheckContext) -> set[str]:
    """Worker connections that were sent more jobs than they finished (busy when they fell silent)."""
    sent = events_of(ctx, "dispatch").groupBy("worker").agg(F.count("*").alias("sent"))
    done = events_of(ctx, "done").groupBy("worker").agg(F.count("*").alias("done"))
    busy = sent.join(done, "worker", "left").filter(F.col("sent") > F.coalesce(F.col("done"), F.lit(0)))
    return {r["worker"] for r in busy.select("worker").collect()}


@checker(
    "pingpong_expiry",
    "an idle worker silent for WORKER_EXPIRE_SECONDS is removed, no sooner and at most "
    "expire_margin_s later; the figure is the time from its last message to its expiry",
    needs=("worker_ready", "ping"),
)
def expiry(ctx: CheckContext) -> CheckResult:
    opts = options(ctx)
    expire_ns = int(float(opts.get("worker_expire_s", 3.0)) * NS)
    margin_ns = int(float(ctx.promises.get("expire_margin_s", 1.0)) * NS)
    # What the broker hears from a connection: READY (its registration), PINGs and results,
    # except what the worker sent into a partitioned (or otherwise lossy) link.
    said = (
        events_of(ctx, "ping", "done")
        .filter(~lost_on_link(ctx, F.col("ts"), F.col("src")))
        .select("ts", "worker")
    )
    ready = events_of(ctx, "worker_ready").filter(F.col("detail") == "ready").select("ts", "worker")
    registered = events_of(ctx, "worker_ready").select("worker").distinct()
    last_said = (
        said.unionByName(ready).groupBy("worker").agg(F.max("ts").alias("last_ts")).join(registered, "worker")
    )
    expired = events_of(ctx, "worker_expired").select("ts", "src", "ev", "worker", "reason", "detail")
    messages = said.unionByName(ready)
    # The last message before each expiry (a connection may be registered again afterwards).
    before = (
        expired.alias("x")
        .join(
            messages.alias("m"),
            (F.col("m.worker") == F.col("x.worker")) & (F.col("m.ts") <= F.col("x.ts")),
            "left",
        )
        .groupBy("x.ts", "x.src", "x.ev", "x.worker", "x.reason", "x.detail")
        .agg(F.max("m.ts").alias("last_ts"))
    )
    found: list[dict[str, Any]] = []
    delays: list[int] = []
    unreachable: list[int] = []  # removed as soon as a send found the connection gone
    processes = worker_instances(ctx)
    for row in rows(before, "ts", "src", "ev", "worker", "reason", "detail", "last_ts"):
        if row["reason"] not in ("silent", "unreachable") or row["last_ts"] is None:
            continue
        delay = row["ts"] - row["last_ts"]
        instance = instance_of(row["worker"], processes)
        if row["reason"] == "silent" and delay < expire_ns - TOLERANCE_NS:
            found.append(example(row, delay_ms=ms(delay), problem="expired before WORKER_EXPIRE_SECONDS"))
        elif delay > expire_ns + margin_ns:
            # The worker's own death or stall, or its link's, is what expiry is for.
            if overlaps(excused_spans(ctx, instance, own=False, link=False), row["last_ts"], row["ts"]):
                continue
            found.append(example(row, delay_ms=ms(delay), problem="expired late"))
        (delays if row["reason"] == "silent" else unreachable).append(delay)
    # Silent idle connections the broker never expired.
    expired_workers = {
        r["worker"]: r["ts"] for r in expired.groupBy("worker").agg(F.max("ts").alias("ts")).collect()
    }
    busy = _jobs_outstanding(ctx)
    end = broker_end(ctx)
    never = silent_busy = 0
    for row in last_said.collect():
        worker, last_ts = row["worker"], row["last_ts"]
        if worker in busy:  # this check is about idle workers: the broker keeps a busy one
            silent_busy += last_ts + expire_ns + margin_ns <= end
            continue
        if (expired_workers.get(worker) or 0) >= last_ts:
            continue
        deadline = last_ts + expire_ns + margin_ns
        instance = instance_of(worker, processes)
        if deadline > end or overlaps(excused_spans(ctx, instance, own=False, link=False), last_ts, deadline):
            continue
        never += 1
        found.append(
            {
                "ts": last_ts,
                "worker": worker,
                "instance": instance,
                "problem": "silent idle worker never expired",
            }
        )
    figures = {
        "worker_expire_s": expire_ns / NS,
        "margin_s": margin_ns / NS,
        "expiry_after_last_message": spread(delays),
        "unreachable_after_last_message": spread(unreachable),
        "never_expired": never,
        "silent_busy_workers": silent_busy,
    }
    if not delays and not unreachable and not found and silent_busy:
        # The plan silenced only busy workers (a busy worker killed): no idle worker to time.
        summary = (
            f"no idle worker fell silent; {silent_busy} silent worker(s) held a job, which the broker keeps"
        )
        return CheckResult("pingpong_expiry", HELD, summary=summary, figures=figures)
    if not delays and not unreachable and not found:
        return nothing_to_judge(
            ctx, "pingpong_expiry", "no worker fell silent",
            "a fault on a worker was planned but no worker fell silent, so expiry could not be timed",
            on=worker_instances(ctx), figures=figures,
        )  # fmt: skip
    silent, gone = figures["expiry_after_last_message"], figures["unreachable_after_last_message"]
    summary = f"{silent['count']} silent workers expired"
    if delays:
        summary += f" {silent['min_ms']:.0f}-{silent['max_ms']:.0f} ms after their last message"
    summary += f" (WORKER_EXPIRE_SECONDS {expire_ns / NS:g} s + {margin_ns / NS:g} s)"
    if unreachable:
        summary += (
            f"; {gone['count']} removed as unreachable {gone['min_ms']:.0f}-{gone['max_ms']:.0f} ms after"
        )
    summary += f"; {len(found)} violations"
    return result("pingpong_expiry", found, summary, figures)


def instance_of(worker: str, instances: set[str]) -> str:
    """The instance a connection identity (``worker-2-ab12``) belongs to."""
    for name in sorted(instances, key=len, reverse=True):
        if worker == name or worker.startswith(name + "-"):
            return name
    return worker.rsplit("-", 1)[0]


# --- a worker that hears nothing reconnects --------------------------------------------


@checker(
    "pingpong_reconnect",
    "a worker that hears nothing for N_TIMEOUTS x BROKER_TIMEOUT reconnects (not sooner, "
    "at most reconnect_margin_s later) and its READY registers the new connection",
    needs=("ping",),
)
def reconnect(ctx: CheckContext) -> CheckResult:
    opts = options(ctx)
    silence_ns = int(float(opts.get("broker_timeout_ms", 1000)) * MS) * int(opts.get("n_timeouts", 3))
    margin_ns = int(float(ctx.promises.get("reconnect_margin_s", 1.0)) * NS)
    return_ns = int(float(ctx.promises.get("return_bound_s", 5.0)) * NS)
    workers = worker_instances(ctx)
    ev = (
        events_of(ctx, "ping", "pong", "exec", "malformed", "reconnect")
        .filter(F.col("src").isin(list(workers)))
        .select("ts", "src", "ev", "worker", "reason", "detail")
    )
    starts = (
        events_of(ctx, "proc_start")
        .filter(F.col("instance").isin(list(workers)))
        .select("ts", F.col("instance").alias("src"), "ev", "worker", "reason", "detail")
    )
    by_src: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows(ev.unionByName(starts), "ts", "src", "ev", "worker", "reason", "detail"):
        by_src[row["src"]].append(row)
    registered = {
        r["worker"]: r["ts"]
        for r in events_of(ctx, "worker_ready").groupBy("worker").agg(F.min("ts").alias("ts")).collect()
    }
    end = history_end(ctx)
    found: list[dict[str, Any]] = []
    silences: list[int] = []
    returns: list[int] = []
    for src, events in by_src.items():
        stalled = excused_spans(ctx, src, broker=False, link=False)
        unreachable = excused_spans(ctx, src, own=False)
        reset = None  # when the worker last heard from the broker, or (re)connected
        for row in events:
            kind, ts = row["ev"], row["ts"]
            if kind == "reconnect" and reset is not None:
                silent = ts - reset
                silences.append(silent)
                if silent < silence_ns - TOLERANCE_NS:
                    found.append(example(row, silent_ms=ms(silent), problem="reconnected before N_TIMEOUTS"))
                elif silent > silence_ns + margin_ns and not overlaps(stalled, reset, ts):
                    found.append(example(row, silent_ms=ms(silent), problem="reconnected late"))
                seen = registered.get(row["worker"])
                if seen is not None:
                    returns.append(seen - ts)
                elif ts + return_ns < end and not overlaps(unreachable, ts, ts + return_ns):
                    found.append(example(row, problem="the new connection's READY registered nothing"))
            elif kind == "ping" and reset is not None:
                silent = ts - reset
                if silent > silence_ns + margin_ns and not overlaps(stalled, reset, ts):
                    found.append(
                        example(row, silent_ms=ms(silent), problem="silent past N_TIMEOUTS, no reconnect")
                    )
                    reset = ts  # one report per silence
            if kind != "ping":
                reset = ts
    figures = {
        "silence_ms": ms(silence_ns),
        "margin_ms": ms(margin_ns),
        "reconnects": len(silences),
        "silence_before_reconnect": spread(silences),
        "ready_registered_after": spread(returns),
    }
    if not by_src:
        return CheckResult("pingpong_reconnect", UNKNOWN, summary="no worker events", figures=figures)
    quiet = figures["silence_before_reconnect"]
    summary = f"{len(silences)} reconnects"
    if silences:
        summary += f" after {quiet['min_ms']:.0f}-{quiet['max_ms']:.0f} ms of silence"
    summary += f" (N_TIMEOUTS x BROKER_TIMEOUT = {ms(silence_ns):g} ms); {len(found)} violations"
    return result("pingpong_reconnect", found, summary, figures)


# --- workers come back after a broker restart ------------------------------------------


@checker(
    "pingpong_workers_return",
    "after the broker is restarted, every running worker is registered again within return_bound_s",
    needs=("worker_ready",),
)
def workers_return(ctx: CheckContext) -> CheckResult:
    bound_ns = int(float(ctx.promises.get("return_bound_s", 5.0)) * NS)
    brokers = broker_instances(ctx)
    # A broker fault after which the broker process started again (kill with restart, restart).
    starts = rows(
        events_of(ctx, "proc_start").filter(F.col("instance").isin(list(brokers))), "ts", "instance"
    )
    # Each broker fault after which the broker process started again (kill with restart,
    # restart), with the time of that start: the new broker can hear workers from then on.
    restarts = []
    for f in ctx.faults:
        if f.target in brokers and f.stop_ns is not None:
            started = [
                r["ts"] for r in starts if r["instance"] == f.target and f.start_ns <= r["ts"] <= f.stop_ns
            ]
            if started:
                restarts.append((f, started[-1]))
    figures: dict[str, Any] = {"broker_restarts": len(restarts), "bound_s": bound_ns / NS}
    if not restarts:
        return nothing_to_judge(
            ctx, "pingpong_workers_return", "the broker was not restarted",
            "a broker kill or restart was planned but the broker did not start again during the run",
            on=brokers, kinds=("kill", "restart"), figures=figures,
        )  # fmt: skip
    ready = rows(events_of(ctx, "worker_ready"), "ts", "worker", "detail")
    end = history_end(ctx)
    found: list[dict[str, Any]] = []
    times: list[int] = []
    workers = worker_instances(ctx)
    for f, started in restarts:
        if started + bound_ns > end:
            continue
        for instance in sorted(workers):
            if overlaps(excused_spans(ctx, instance, broker=False), f.start_ns, started + bound_ns):
                continue  # the worker itself was down or cut off
            back = next(
                (
                    r["ts"]
                    for r in ready
                    if r["ts"] >= started and instance_of(r["worker"], workers) == instance
                ),
                None,
            )
            if back is not None and back - started <= bound_ns:
                times.append(back - started)
            else:
                found.append(
                    {
                        "ts": started,
                        "fault_id": f.fault_id,
                        "instance": instance,
                        "problem": "not registered again"
                        if back is None
                        else f"registered {ms(back - started)} ms after the broker started again",
                    }
                )
    figures["return_after_restart"] = spread(times)
    back_ms = figures["return_after_restart"]
    summary = (
        f"{len(restarts)} broker restarts: workers back after {back_ms['min_ms']}-{back_ms['max_ms']} ms "
        f"(bound {bound_ns / NS:g} s); {len(found)} late or missing"
    )
    return result("pingpong_workers_return", found, summary, figures)


# --- resend (pingpong-resend) ----------------------------------------------------------


@checker(
    "pingpong_resend",
    "with resend on: a job whose worker returns no result goes to another worker resend_ms "
    "after its dispatch (at most resend_margin_s later, never sooner)",
    needs=("dispatch",),
)
def resend(ctx: CheckContext) -> CheckResult:
    resend_ns = int(float(options(ctx).get("resend_ms", 0)) * MS)
    margin_ns = int(float(ctx.promises.get("resend_margin_s", 1.0)) * NS)
    figures: dict[str, Any] = {"resend_ms": ms(resend_ns)}
    if resend_ns <= 0:
        return CheckResult("pingpong_resend", UNKNOWN, summary="resend is off in this run", figures=figures)
    dispatch = (
        events_of(ctx, "dispatch").filter(F.col("rid") != "").select("ts", "src", "worker", "rid", "detail")
    )
    done = events_of(ctx, "done").select(F.col("worker").alias("d_worker"), F.col("rid").alias("d_rid"))
    answered = events_of(ctx, "reply").select(F.col("rid").alias("r_rid"), F.col("ts").alias("reply_ts"))
    nxt = Window.partitionBy("rid").orderBy("ts")
    # A dispatch its worker never finished, with the next dispatch of the same job.
    lost = (
        dispatch.withColumn("next_ts", F.lead("ts").over(nxt))
        .withColumn("next_worker", F.lead("worker").over(nxt))
        .withColumn("next_detail", F.lead("detail").over(nxt))
        .join(done, (F.col("d_worker") == F.col("worker")) & (F.col("d_rid") == F.col("rid")), "left_anti")
        .join(
            answered.groupBy("r_rid").agg(F.min("reply_ts").alias("reply_ts")),
            F.col("r_rid") == F.col("rid"),
            "left",
        )
    )
    end = history_end(ctx)
    workers = worker_instances(ctx)
    found: list[dict[str, Any]] = []
    delays: list[int] = []
    for row in rows(lost, "ts", "src", "worker", "rid", "next_ts", "next_worker", "next_detail", "reply_ts"):
        ts, nxt_ts = row["ts"], row["next_ts"]
        deadline = ts + resend_ns + margin_ns
        if nxt_ts is not None:
            delay = nxt_ts - ts
            delays.append(delay)
            if delay < resend_ns - TOLERANCE_NS and (row["next_detail"] or "").startswith("resend"):
                found.append(
                    example(row, ev="dispatch", delay_ms=ms(delay), problem="resent before resend_ms")
                )
                continue
            if delay <= resend_ns + margin_ns:
                continue
        if row["reply_ts"] is not None and row["reply_ts"] < deadline:
            continue  # answered in time by another dispatch (a client retry)
        instance = instance_of(row["worker"], workers)
        if deadline > end or overlaps(excused_spans(ctx, instance, own=False, link=False), ts, deadline):
            continue  # the run ended, or the broker (and the job with it) was down
        found.append(
            example(
                row,
                ev="dispatch",
                problem="never resent" if nxt_ts is None else f"resent after {ms(nxt_ts - ts)} ms",
            )
        )
    figures.update({"unfinished_dispatches": len(delays) + len(found), "resend_after": spread(delays)})
    if not delays and not found:
        return nothing_to_judge(
            ctx, "pingpong_resend", "no job was left unfinished",
            "a fault on a worker was planned but no job was left unfinished; kill busy workers "
            "(work_ms > 0, wait_ms = 0) to see resends",
            on=worker_instances(ctx), figures=figures,
        )  # fmt: skip
    after = figures["resend_after"]
    summary = (
        f"{len(delays)} jobs resent {after['min_ms']}-{after['max_ms']} ms after dispatch "
        f"(resend_ms {ms(resend_ns):g}); {len(found)} violations"
    )
    return result("pingpong_resend", found, summary, figures)
