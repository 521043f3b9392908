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
Spark does the per-event work; what comes back to Python is per worker or per fault
(registrations, expiries, reconnects, PINGs past a bound), never per request.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reports.checkers.toolkit import (
    EACH_REQUEST,
    MAX_EXAMPLES,
    MS,
    NS,
    SUBJECT_EVENTS,
    CheckContext,
    CheckResult,
    FaultWindow,
    broker_instances,
    checker,
    count,
    events_of,
    example,
    fault_spans,
    history_end,
    instance_column,
    kind_count,
    last_before,
    ms,
    nothing_to_judge,
    options,
    overlaps,
    process_events,
    registered_dispatch,
    result,
    rows,
    split_excused,
    spread,
    spread_columns,
    spreads_of,
    with_excused,
    worker_instances,
)
from reports.history_frame import history_schema

#: After a fault heals, processes restart, sockets reconnect, PINGs queued in a DEALER
#: arrive in a burst: the dialogue's timing rules resume this long after the fault's stop.
FAULT_GRACE_NS = 2 * NS
#: Both ends read one clock (time.time_ns on one host); this covers scheduling jitter
#: between an event and the record of it when a bound is checked from below.
TOLERANCE_NS = 50 * MS


def excused_spans(ctx: CheckContext, instance: str, **flags: bool) -> list[tuple[int, int]]:
    """The faults that excuse ``instance`` (see toolkit.fault_spans), plus FAULT_GRACE_NS."""
    return fault_spans(ctx, instance, grace_ns=FAULT_GRACE_NS, **flags)


def broker_end(ctx: CheckContext) -> int:
    """When the broker stopped serving for good: its last exit, else the end of the history."""
    brokers = broker_instances(ctx)
    exits = process_events(ctx, "proc_exit")
    last = max((r["ts"] for r in exits if r["instance"] in brokers and r["ts"] is not None), default=None)
    return int(last) if last else history_end(ctx)


# --- every PING is answered ------------------------------------------------------------


@checker(
    "pingpong_pings_answered",
    "every PING a worker sends gets a PONG on the same connection within BROKER_TIMEOUT "
    "(outside faults on that worker, the broker or their link)",
    needs=("ping", "pong"),
    on_damage=SUBJECT_EVENTS,
)
def pings_answered(ctx: CheckContext) -> CheckResult:
    bound_ns = int(float(options(ctx).get("broker_timeout_ms", 1000)) * MS)
    beats = events_of(ctx, "ping", "pong").select("ts", "src", "ev", "worker")
    after = Window.partitionBy("worker").orderBy("ts").rowsBetween(1, Window.unboundedFollowing)
    answered = (
        beats.withColumn("pong_ts", F.first(F.when(F.col("ev") == "pong", F.col("ts")), True).over(after))
        .filter(F.col("ev") == "ping")
        .withColumn("answer_ns", F.col("pong_ts") - F.col("ts"))
    )
    pings = (
        with_excused(answered, ctx, "faulted", instance="src", lead_ns=bound_ns, grace_ns=FAULT_GRACE_NS)
        .withColumn("excused", F.col("faulted") | (F.col("ts") + bound_ns > history_end(ctx)))
        .withColumn("late", F.col("pong_ts").isNull() | (F.col("answer_ns") > bound_ns))
    )
    counted = pings.filter(~F.col("excused"))
    agg = pings.agg(
        F.sum((~F.col("excused")).cast("int")).alias("pings"),
        F.sum(F.col("excused").cast("int")).alias("excused"),
        F.sum((F.col("late") & ~F.col("excused")).cast("int")).alias("unanswered"),
        F.expr("percentile_approx(CASE WHEN NOT excused THEN answer_ns END, 0.99)").alias("p99"),
        F.max(F.when(~F.col("late") & ~F.col("excused"), F.col("answer_ns"))).alias("max"),
    ).collect()[0]
    total, unanswered, excused = count(agg["pings"]), count(agg["unanswered"]), count(agg["excused"])
    figures = {
        "pings": total,
        "unanswered": unanswered,
        "excused_by_faults": excused,
        "bound_ms": ms(bound_ns),
        "pong_p99_ms": ms(agg["p99"]) if agg["p99"] is not None else None,
        "pong_max_ms": ms(agg["max"]) if agg["max"] is not None else None,
    }
    if total == 0:
        return result("no PING outside faults", figures, unknown="")
    found = [
        example(r, problem="no PONG" if r["pong_ts"] is None else f"PONG after {ms(r['answer_ns'])} ms")
        for r in rows(
            counted.filter("late"), "ts", "src", "ev", "worker", "pong_ts", "answer_ns", limit=MAX_EXAMPLES
        )
    ] if unanswered else []  # fmt: skip
    summary = (
        f"{total - unanswered} of {total} PINGs answered within {ms(bound_ns):g} ms "
        f"(p99 {figures['pong_p99_ms']} ms); {excused} excused by faults"
    )
    return result(summary, figures, violations=unanswered, examples=found)


# --- no job to an expired worker -------------------------------------------------------


@checker(
    "pingpong_no_dispatch_to_expired",
    "the broker sends a job only to a worker it has registered and not expired since",
    needs=("dispatch", "worker_ready"),
    on_damage=SUBJECT_EVENTS,
)
def no_dispatch_to_expired(ctx: CheckContext) -> CheckResult:
    return registered_dispatch(ctx)


# --- silent idle workers expire on time ------------------------------------------------


#: A message a worker sent this long before a lossy fault's recorded start may have been lost
#: with it: the proxy cuts as the nemesis asks, before the nemesis records the start.
IN_FLIGHT_NS = NS // 20


@checker(
    "pingpong_expiry",
    "an idle worker silent for WORKER_EXPIRE_SECONDS is removed, no sooner and at most "
    "expire_margin_s later; the figure is the time from its last message to its expiry",
    needs=("worker_ready", "ping"),
    on_damage=SUBJECT_EVENTS,
)
def expiry(ctx: CheckContext) -> CheckResult:
    opts = options(ctx)
    expire_ns = int(float(opts.get("worker_expire_s", 3.0)) * NS)
    margin_ns = int(float(ctx.promises.get("expire_margin_s", 1.0)) * NS)
    processes = worker_instances(ctx)
    end = broker_end(ctx)
    # Only the broker's own faults excuse a late expiry: the worker's death or stall, or its
    # link's, is what expiry is for.
    broker_down: dict[str, Any] = {
        "own": False,
        "link": False,
        "grace_ns": FAULT_GRACE_NS,
        "instance": "instance",
    }
    # Everything the check asks of a connection, in one grouping of its events (no join):
    # what the broker heard from it (READY, PINGs and results, but what the worker sent into a
    # partitioned or otherwise lossy link), whether it registered, its jobs sent and done,
    # and its expiries. What it sent into a lossy toxic that acts on a share of connections
    # (toxicity below 1) may have been heard or not: no expiry is timed across it, nor is a
    # connection silent after it called never expired (explore, the built-in broker, seed 7:
    # worker-1's link partitioned at toxicity 0.72 for 7.3 s, and the broker, which kept
    # hearing its PINGs, rightly kept it).
    said = with_excused(
        events_of(ctx, "ping", "done", "worker_ready", "worker_expired", "dispatch")
        .filter(F.col("worker").isNotNull())
        .select("ts", "src", "ev", "worker", "reason", "detail"),
        ctx, "lost", instance="src", lossy_only=True, every_connection=True,
    )  # fmt: skip
    said = with_excused(said, ctx, "maybe_lost", instance="src", lossy_only=True, lead_ns=IN_FLIGHT_NS)
    ev, ts = F.col("ev"), F.col("ts")
    ready = (ev == "worker_ready") & (F.col("detail") == "ready")
    sent = ev.isin("ping", "done")
    heard = (sent & ~F.col("lost") & ~F.col("maybe_lost")) | ready
    expiry_fields = ("ts", "src", "ev", "reason", "detail")
    expiry_row = F.struct(*expiry_fields)
    # Lists only where there is something to list: any list makes the grouping Spark's object
    # aggregate, and a run with no expiry nor lossy fault then spent most of the check listing
    # nothing (30M events: 11 s of CPU, the job and result counts being its only work).
    expiries = kind_count(ctx, "worker_expired") > 0
    lossy = any(f.lossy for f in ctx.faults)
    per_connection = said.groupBy("worker").agg(
        F.max(F.when(heard, ts)).alias("last_ts"),
        F.max((ev == "worker_ready").cast("int")).alias("registered"),
        F.sum((ev == "dispatch").cast("int")).alias("sent"),
        # a result the worker sent into a lossy fault (or just before it: IN_FLIGHT_NS) may
        # never have reached the broker, which then holds the worker busy (explore, the
        # built-in broker, seed 7: a worker's link disconnected 0.6 ms after it answered;
        # the seed's broker expires idle workers only, and kept it)
        F.sum(((ev == "done") & ~F.col("maybe_lost")).cast("int")).alias("done"),
        F.max(F.when(ev == "worker_expired", ts)).alias("expired_ts"),
        (
            F.array_distinct(F.collect_list(F.when(ev == "worker_expired", expiry_row)))
            if expiries
            else F.array().cast(T.ArrayType(T.StructType([history_schema()[c] for c in expiry_fields])))
        ).alias("expiries"),
        # Each expiry is timed from the last message before it (a connection may register
        # again after an expiry): the times heard, kept only when there is an expiry to time.
        (F.collect_list(F.when(heard, ts)) if expiries else F.array().cast("array<bigint>")).alias("heard"),
        # What may have been lost, only where a fault loses anything.
        (
            F.collect_list(F.when(sent & F.col("maybe_lost") & ~F.col("lost"), ts))
            if lossy
            else F.array().cast("array<bigint>")
        ).alias("maybe"),
    )
    # One row per expiry (per connection, for one with none), the connection's columns beside it.
    cols = ["ts", "src", "ev", "worker", "reason", "detail"]
    x = F.col("x")
    rows_of = per_connection.select(
        *(c for c in per_connection.columns if c != "expiries"),
        F.posexplode_outer("expiries").alias("pos", "x"),
    ).select(
        F.col("worker"),
        F.col("last_ts").alias("conn_last_ts"),
        F.col("registered"),
        (F.col("sent") > F.col("done")).alias("busy"),
        F.col("expired_ts"),
        F.col("maybe"),
        *(x[c].alias(c) for c in cols if c != "worker"),
        F.when(x.isNotNull(), F.array_max(F.filter("heard", lambda m: m <= x["ts"]))).alias("last_ts"),
        (F.col("pos").isNull() | (F.col("pos") == 0)).alias("first"),
        instance_column(F.col("worker"), processes).alias("instance"),
        (F.col("conn_last_ts") + expire_ns + margin_ns).alias("deadline"),
    )
    # An expiry timed: silent or unreachable, after a message; an excused late one is not timed.
    rows_of = with_excused(rows_of, ctx, "excused", ts="last_ts", until="ts", **broker_down)
    # Nor an early one while the broker could not read (frozen: its ZeroMQ I/O thread too):
    # the worker's last messages waited in the broker's buffers, and on waking the broker
    # timed the silence it had heard, not the one the worker kept (explore, pingpong-resend
    # seed 1: a freeze of the broker for 3.07 s, then its three workers expired 0.3-0.9 s
    # after PINGs it had not read yet). A broker's slowdown or clock fault excuses no early
    # expiry: a starved broker still reads, and one that times expiry by a wall clock a
    # clock step moved is what this check is for.
    rows_of = with_excused(rows_of, ctx, "unheard", ts="last_ts", until="ts", outage_only=True, **broker_down)
    delay = F.col("ts") - F.col("last_ts")
    early = (F.col("reason") == "silent") & (delay < expire_ns - TOLERANCE_NS)
    over = delay > expire_ns + margin_ns
    maybe_heard = F.exists("maybe", lambda m: (m > F.col("last_ts")) & (m <= F.col("ts")))
    timed = (
        F.col("reason").isin("silent", "unreachable")
        & F.col("last_ts").isNotNull()
        & ~maybe_heard
        & ~(early & F.col("unheard"))
        & (early | ~over | ~F.col("excused"))
    )
    rows_of = rows_of.withColumn("delay", F.when(timed, delay)).withColumn(
        "problem",
        F.when(timed & early, F.lit("expired before WORKER_EXPIRE_SECONDS")).when(
            timed & over & ~F.col("excused"), F.lit("expired late")
        ),
    )
    # Silent idle connections the broker never expired (this check is about idle workers:
    # the broker keeps a busy one); counted once per connection, on its first row.
    rows_of = with_excused(rows_of, ctx, "idle_excused", ts="conn_last_ts", until="deadline", **broker_down)
    idle = F.col("first") & (F.col("registered") == 1) & F.col("conn_last_ts").isNotNull()
    due = idle & (F.col("deadline") <= end)
    never_expired = (
        due
        & ~F.col("busy")
        & ~F.coalesce(F.col("expired_ts") >= F.col("conn_last_ts"), F.lit(False))
        & ~F.col("idle_excused")
        & ~F.exists("maybe", lambda m: m > F.col("conn_last_ts"))
    )
    rows_of = rows_of.withColumn("never", never_expired)
    counted = rows_of.agg(
        F.sum((due & F.col("busy")).cast("int")).alias("silent_busy"),
        F.sum(F.col("never").cast("int")).alias("never"),
        F.count("problem").alias("wrong"),
        *spread_columns(
            "delay",
            expiry_after_last_message=F.col("reason") == "silent",
            unreachable_after_last_message=F.col("reason") == "unreachable",
        ),
    ).collect()[0]
    never, silent_busy = count(counted["never"]), count(counted["silent_busy"])
    n_wrong = count(counted["wrong"])
    figures: dict[str, Any] = {
        "worker_expire_s": expire_ns / NS,
        "margin_s": margin_ns / NS,
        **spreads_of(counted, "expiry_after_last_message", "unreachable_after_last_message"),
        "never_expired": never,
        "silent_busy_workers": silent_busy,
    }
    found: list[dict[str, Any]] = []
    if n_wrong:
        found += [
            example(r, delay_ms=ms(r.pop("delay")), problem=r.pop("problem"))
            for r in rows(
                rows_of.filter(F.col("problem").isNotNull()), *cols, "last_ts", "delay", "problem",
                limit=MAX_EXAMPLES,
            )
        ]  # fmt: skip
    if never:
        found += rows(
            rows_of.filter("never").select(
                F.col("conn_last_ts").alias("ts"), "worker", "instance",
                F.lit("silent idle worker never expired").alias("problem"),
            ),
            "ts", "worker", "instance", "problem", limit=MAX_EXAMPLES,
        )  # fmt: skip
    silent, gone = figures["expiry_after_last_message"], figures["unreachable_after_last_message"]
    violations = n_wrong + never
    if not silent["count"] and not gone["count"] and not violations and silent_busy:
        # The plan silenced only busy workers (a busy worker killed): no idle worker to time.
        summary = (
            f"no idle worker fell silent; {silent_busy} silent worker(s) held a job, which the broker keeps"
        )
        return result(summary, figures)
    if not silent["count"] and not gone["count"] and not violations:
        return nothing_to_judge(
            ctx,
            "no worker fell silent",
            "a fault on a worker was planned but no worker fell silent, so expiry could not be timed",
            on=worker_instances(ctx),
            figures=figures,
        )
    summary = f"{silent['count']} silent workers expired"
    if silent["count"]:
        summary += f" {silent['min_ms']:.0f}-{silent['max_ms']:.0f} ms after their last message"
    summary += f" (WORKER_EXPIRE_SECONDS {expire_ns / NS:g} s + {margin_ns / NS:g} s)"
    if gone["count"]:
        summary += (
            f"; {gone['count']} removed as unreachable {gone['min_ms']:.0f}-{gone['max_ms']:.0f} ms after"
        )
    summary += f"; {violations} violations"
    return result(summary, figures, violations=violations, examples=found)


# --- a worker that hears nothing reconnects --------------------------------------------


@checker(
    "pingpong_reconnect",
    "a worker that hears nothing for N_TIMEOUTS x BROKER_TIMEOUT reconnects (not sooner, "
    "at most reconnect_margin_s later) and its READY registers the new connection",
    needs=("ping",),
    reads=("worker_ready",),
    on_damage=SUBJECT_EVENTS,
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
    # What the worker last heard or did before each reconnect or PING (a PONG, a job, its
    # start...; a PING only says it is still waiting). Those are few, the jobs many: each
    # is given the latest of the others before it, and those past the bound come back to
    # Python, in order, with that time beside them.
    worker_events = ev.unionByName(starts)
    marks = ev.filter(F.col("ev").isin("ping", "reconnect"))
    marked = last_before(ctx, marks, worker_events.filter(F.col("ev") != "ping"), "src", "reset_ts")
    telling = marked.filter(
        F.col("reset_ts").isNotNull()
        & (
            (F.col("ev") == "reconnect")
            | ((F.col("ev") == "ping") & (F.col("ts") - F.col("reset_ts") > silence_ns + margin_ns))
        )
    )
    by_src: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows(telling, "ts", "src", "ev", "worker", "reason", "detail", "reset_ts"):
        by_src[row["src"]].append(row)
    # Whether a new connection's READY registered is known only where the broker records
    # worker_ready: a broker of the user's that records nothing leaves that part unjudged.
    judge_ready = "worker_ready" in ctx.event_kinds()
    registered = (
        {
            r["worker"]: r["ts"]
            for r in events_of(ctx, "worker_ready").groupBy("worker").agg(F.min("ts").alias("ts")).collect()
        }
        if judge_ready
        else {}
    )
    end = history_end(ctx)
    found: list[dict[str, Any]] = []
    silences: list[int] = []
    returns: list[int] = []
    for src, events in by_src.items():
        stalled = excused_spans(ctx, src, broker=False, link=False)
        unreachable = excused_spans(ctx, src, own=False)
        reported: tuple[int, int] | None = None  # (silence start, the PING last reported in it)
        for row in events:
            kind, ts, start = row["ev"], row["ts"], row.pop("reset_ts")
            # One report per silence: after a late PING, the rest of the silence counts from it.
            reset = reported[1] if reported is not None and reported[0] == start else start
            silent = ts - reset
            if kind == "reconnect":
                silences.append(silent)
                if silent < silence_ns - TOLERANCE_NS:
                    found.append(example(row, silent_ms=ms(silent), problem="reconnected before N_TIMEOUTS"))
                elif silent > silence_ns + margin_ns and not overlaps(stalled, reset, ts):
                    found.append(example(row, silent_ms=ms(silent), problem="reconnected late"))
                seen = registered.get(row["worker"])
                if seen is not None:
                    returns.append(seen - ts)
                elif judge_ready and ts + return_ns < end and not overlaps(unreachable, ts, ts + return_ns):
                    found.append(example(row, problem="the new connection's READY registered nothing"))
            elif silent > silence_ns + margin_ns and not overlaps(stalled, reset, ts):
                found.append(
                    example(row, silent_ms=ms(silent), problem="silent past N_TIMEOUTS, no reconnect")
                )
                reported = (start, ts)
    figures: dict[str, Any] = {
        "silence_ms": ms(silence_ns),
        "margin_ms": ms(margin_ns),
        "reconnects": len(silences),
        "silence_before_reconnect": spread(silences),
        "ready_registered_after": spread(returns),
    }
    if not by_src and not worker_events.take(1):
        return result("no worker events", figures, unknown="")
    quiet = figures["silence_before_reconnect"]
    summary = f"{len(silences)} reconnects"
    if silences:
        summary += f" after {quiet['min_ms']:.0f}-{quiet['max_ms']:.0f} ms of silence"
    summary += f" (N_TIMEOUTS x BROKER_TIMEOUT = {ms(silence_ns):g} ms); {len(found)} violations"
    if silences and not judge_ready:
        summary += "; whether each READY registered is not judged: the broker records no worker_ready"
    return result(summary, figures, violations=len(found), examples=found)


# --- workers come back after a broker restart ------------------------------------------


def _restarts_process(fault: FaultWindow) -> bool:
    """A process fault with no duration of its own: a kill or a restart (the process starts again)."""
    return not fault.on_link and not fault.lasting


@checker(
    "pingpong_workers_return",
    "after the broker is restarted, every running worker is registered again within return_bound_s",
    needs=("worker_ready",),
    on_damage=SUBJECT_EVENTS,
)
def workers_return(ctx: CheckContext) -> CheckResult:
    bound_ns = int(float(ctx.promises.get("return_bound_s", 5.0)) * NS)
    brokers = broker_instances(ctx)
    starts = [r for r in process_events(ctx, "proc_start") if r["instance"] in brokers]
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
            ctx,
            "the broker was not restarted",
            "a broker kill or restart was planned but the broker did not start again during the run",
            on=brokers,
            which=_restarts_process,
            figures=figures,
        )
    end = history_end(ctx)
    workers = worker_instances(ctx)
    # One (restart, worker instance) pair to judge each; the worker's first READY after the
    # new broker started, from Spark: the pairs are few, so one aggregation over the READYs
    # with a column per pair (one Spark job, no join).
    pairs = [
        (f.fault_id, f.start_ns, started, started + bound_ns, instance)
        for f, started in restarts
        if started + bound_ns <= end
        for instance in sorted(workers)
    ]
    ready = events_of(ctx, "worker_ready").select(
        "ts", instance_column(F.col("worker"), workers).alias("inst")
    )
    firsts = ready.agg(
        *(
            F.min(F.when((F.col("inst") == instance) & (F.col("ts") >= started), F.col("ts"))).alias(f"p{i}")
            for i, (_f, _s, started, _u, instance) in enumerate(pairs)
        )
    ).collect()[0] if pairs else None  # fmt: skip
    # The worker itself down or cut off (from the fault's start to the bound) is excused.
    kept = []
    for i, (fault_id, start_ns, started, until, instance) in enumerate(pairs):
        if overlaps(excused_spans(ctx, instance, broker=False), start_ns, until):
            continue
        assert firsts is not None  # read when there are pairs
        back = firsts[f"p{i}"]
        after = None if back is None else back - started
        kept.append(
            {"fault_id": fault_id, "started": started, "instance": instance, "back": back, "after": after}
        )
    on_time = [k["after"] is not None and k["after"] <= bound_ns for k in kept]
    figures["return_after_restart"] = spread([k["after"] for k, ok in zip(kept, on_time, strict=True) if ok])
    late = [k for k, ok in zip(kept, on_time, strict=True) if not ok]
    missing = sorted(late, key=lambda k: (k["started"], k["instance"]))
    n_missing = len(missing)
    found = [
        {
            "ts": r["started"],
            "fault_id": r["fault_id"],
            "instance": r["instance"],
            "problem": "not registered again"
            if r["back"] is None
            else f"registered {ms(r['after'])} ms after the broker started again",
        }
        for r in missing[:MAX_EXAMPLES]
    ]
    back_ms = figures["return_after_restart"]
    summary = (
        f"{len(restarts)} broker restarts: workers back after {back_ms['min_ms']}-{back_ms['max_ms']} ms "
        f"(bound {bound_ns / NS:g} s); {n_missing} late or missing"
    )
    return result(summary, figures, violations=n_missing, examples=found)


# --- resend (pingpong-resend) ----------------------------------------------------------


@checker(
    "pingpong_resend",
    "with resend on: a job whose worker returns no result goes to another worker resend_ms "
    "after its dispatch (at most resend_margin_s later, never sooner)",
    needs=("dispatch",),
    on_damage=EACH_REQUEST,
)
def resend(ctx: CheckContext) -> CheckResult:
    resend_ns = int(float(options(ctx).get("resend_ms", 0)) * MS)
    margin_ns = int(float(ctx.promises.get("resend_margin_s", 1.0)) * NS)
    figures: dict[str, Any] = {"resend_ms": ms(resend_ns)}
    if resend_ns <= 0:
        return result("resend is off in this run", figures, unknown="")
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
    delay = F.col("next_ts") - F.col("ts")
    resent = F.col("next_ts").isNotNull()
    early = (
        resent
        & (delay < resend_ns - TOLERANCE_NS)
        & F.coalesce(F.col("next_detail"), F.lit("")).startswith("resend")
    )
    marked = lost.withColumn("delay_ns", delay).withColumn("early", early)
    marked = marked.withColumn("deadline", F.col("ts") + resend_ns + margin_ns)
    # Not resent in time, nor answered in time by another dispatch (a client retry), before
    # the run ended, and the broker (and the job with it) was not down.
    late = marked.filter(
        ~F.col("early")
        & ~(resent & (delay <= resend_ns + margin_ns))
        & ~(F.col("reply_ts").isNotNull() & (F.col("reply_ts") < F.col("deadline")))
        & (F.col("deadline") <= history_end(ctx))
    ).withColumn("instance", instance_column(F.col("worker"), worker_instances(ctx)))
    late = split_excused(
        late, ctx, until="deadline", instance="instance", own=False, link=False, grace_ns=FAULT_GRACE_NS
    )[0]
    stats = marked.agg(
        F.count("delay_ns").alias("n"),
        F.min("delay_ns").alias("min"),
        F.percentile("delay_ns", 0.5).alias("median"),
        F.max("delay_ns").alias("max"),
        F.sum(F.col("early").cast("int")).alias("early"),
    ).collect()[0]
    n_early, n_late = count(stats["early"]), late.count()
    cols = ("ts", "src", "worker", "rid", "next_ts", "next_worker", "next_detail", "reply_ts")
    found = [
        example(r, ev="dispatch", delay_ms=ms(r["next_ts"] - r["ts"]), problem="resent before resend_ms")
        for r in rows(marked.filter("early"), *cols, limit=MAX_EXAMPLES)
    ] + [
        example(
            r,
            ev="dispatch",
            problem="never resent"
            if r["next_ts"] is None
            else f"resent after {ms(r['next_ts'] - r['ts'])} ms",
        )
        for r in rows(late, *cols, limit=MAX_EXAMPLES)
    ]
    resent_after: dict[str, Any] = {
        "count": count(stats["n"]),
        "min_ms": None,
        "median_ms": None,
        "max_ms": None,
    }
    if resent_after["count"]:
        resent_after.update(min_ms=ms(stats["min"]), median_ms=ms(stats["median"]), max_ms=ms(stats["max"]))
    violations = n_early + n_late
    figures.update(
        {"unfinished_dispatches": resent_after["count"] + violations, "resend_after": resent_after}
    )
    if not resent_after["count"] and not violations:
        return nothing_to_judge(
            ctx,
            "no job was left unfinished",
            "a fault on a worker was planned but no job was left unfinished; kill busy workers "
            "(work_ms > 0, wait_ms = 0) to see resends",
            on=worker_instances(ctx),
            figures=figures,
        )
    after = figures["resend_after"]
    summary = (
        f"{resent_after['count']} jobs resent {after['min_ms']}-{after['max_ms']} ms after dispatch "
        f"(resend_ms {ms(resend_ns):g}); {violations} violations"
    )
    return result(summary, figures, violations=violations, examples=found)
