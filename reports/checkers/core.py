"""The generic checkers: invariants every request-reply system under test is held to.

Each checker is a handful of Spark DataFrame operations over the whole history (nothing
but counts and the first offending events comes back to Python), and reports exact
counts, up to MAX_EXAMPLES offending events (earliest first), a one-line summary and
figures. The helpers they use are the toolkit's (reports/checkers/toolkit.py).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from contract.history import RID_PATTERN
from reports.checkers import (
    HELD,
    MAX_EXAMPLES,
    UNKNOWN,
    VIOLATED,
    CheckContext,
    CheckResult,
    checker,
    nothing_to_judge,
)
from reports.checkers import toolkit as tk
from reports.checkers.toolkit import (
    EVENT_KEYS,
    NS,
    client_budget_ns,
    count,
    events_of,
    example,
    examples,
    judged,
    run_time,
    small_frame,
    unknown,
)

LOG_TAIL_LINES = 10


# --- no_lost ---------------------------------------------------------------------------


@checker(
    "no_lost",
    "every request that was sent ends in a reply or an abandon; one still open at the end "
    "of the load (or its client's last) is indeterminate, not lost; a client that never "
    "resends records `lost` when its reply_deadline_s ran out, which counts as lost (inside "
    "a fault window only where the manifest promises requeue)",
    shares=("per_request",),
)
def no_lost(ctx: CheckContext) -> CheckResult:
    # Every send, reply, abandon and lost of a request met in one group (shared with steady_state).
    sends = tk.per_request(ctx).filter(F.col("cid").isNotNull())
    cutoff = run_time(ctx, "load_stopped_ns") - client_budget_ns(ctx)
    # Without the requeue promise the broker may drop what a dead worker held; only a
    # resend recovers it, which a no-resend client never does: such a loss inside a fault
    # window is reported, not held against the system.
    requeue = bool(ctx.promises.get("requeue", False))
    declared = (F.col("replied") == 0) & F.col("lost_ts").isNotNull()
    # A declared loss between the first send and the `lost` event meets some fault's window.
    in_fault = tk.with_excused(sends, ctx, "in_fault", ts="ts", until="lost_ts")
    excused = declared & F.lit(not requeue) & F.col("in_fault")
    requests = (
        in_fault.withColumn(
            "open", (F.col("replied") == 0) & (F.col("abandoned") == 0) & F.col("lost_ts").isNull()
        )
        .withColumn(
            "indeterminate",
            F.col("open") & ((F.col("last_send_ts") > cutoff) | (F.col("seq") == F.col("last_seq"))),
        )
        .withColumn("excused", excused)
        .withColumn("lost", (declared & ~F.col("excused")) | (F.col("open") & ~F.col("indeterminate")))
    )
    # The counts and the earliest lost requests (the examples).
    row, firsts = tk.totals_and_firsts(
        ctx,
        requests,
        [
            F.count("*").alias("requests"),
            F.sum("replied").alias("replied"),
            F.sum(F.when((F.col("replied") == 0) & (F.col("abandoned") == 1), 1)).alias("abandoned"),
            F.sum(F.col("indeterminate").cast("int")).alias("indeterminate"),
            F.sum(F.col("lost").cast("int")).alias("lost"),
            F.sum((F.col("lost") & F.col("lost_ts").isNotNull()).cast("int")).alias("past_deadline"),
            F.sum(F.col("excused").cast("int")).alias("excused"),
        ],
        F.col("lost"),
    )
    total, lost, indeterminate = count(row["requests"]), count(row["lost"]), count(row["indeterminate"])
    figures = {
        "requests": total,
        "replied": count(row["replied"]),
        "abandoned": count(row["abandoned"]),
        "indeterminate": indeterminate,
        "lost": lost,
        "lost_past_deadline": count(row["past_deadline"]),  # recorded `lost` by a no-resend client
        "lost_in_faults_unpromised": count(row["excused"]),
        "requeue_promised": requeue,
    }
    summary = (
        f"{total} requests: {figures['replied']} replied, {figures['abandoned']} abandoned, "
        f"{indeterminate} indeterminate, {lost} lost"
    )
    if figures["lost_past_deadline"]:
        summary += f" ({figures['lost_past_deadline']} past their reply deadline)"
    if figures["lost_in_faults_unpromised"]:
        summary += (
            f"; {figures['lost_in_faults_unpromised']} more lost during faults, not counted: "
            "requeue is not promised"
        )
    if total == 0:
        return unknown(
            "no_lost", "no request was sent", figures,
            reason="no send event in the history: the load clients recorded nothing (see logs/locust.log)",
        )  # fmt: skip
    found = []
    if lost:
        # The texts of the requests shown only (tk.request_details).
        kept = {"cid": "string", "seq": "long", "ts": "long", "sends": "long", "last_send_ts": "long",
                "lost_ts": "long"}  # fmt: skip
        shown = tk.request_details(ctx, small_frame(ctx, [tuple(r[k] for k in kept) for r in firsts], kept))
        offenders = shown.select(
            "ts",
            "src",
            F.lit("send").alias("ev"),
            "cid",
            "seq",
            "rid",
            "sends",
            "last_send_ts",
            "lost_ts",
            F.when(
                F.col("lost_ts").isNotNull(),
                F.concat(F.lit("lost: "), F.col("lost_reason")),
            )
            .otherwise(F.lit("no reply and no abandon"))
            .alias("problem"),
        )
        found = examples(offenders)
    return judged("no_lost", lost, found, summary, figures)


# --- no_duplicate ----------------------------------------------------------------------


@checker(
    "no_duplicate",
    "each request is delivered at most once: its replies plus the unexpected messages carrying its id",
    shares=("per_rid",),
)
def no_duplicate(ctx: CheckContext) -> CheckResult:
    cols = ["ts", "src", "ev", "cid", "seq", "rid", "got_rid"]
    deliveries = (
        events_of(ctx, "reply")
        .select(*cols, F.col("rid").alias("delivered_rid"))
        .unionByName(
            events_of(ctx, "unexpected")
            .filter(F.col("got_rid").isNotNull())
            .select(*cols, F.col("got_rid").alias("delivered_rid"))
        )
    )
    per_rid = (
        tk.per_rid(ctx)
        .filter(F.col("deliveries") > 0)
        .select(F.col("rid").alias("delivered_rid"), F.col("deliveries").alias("n"))
    )
    row = per_rid.agg(
        F.sum("n").alias("deliveries"),
        F.count("*").alias("rids"),
        F.sum(F.when(F.col("n") > 1, F.col("n") - 1)).alias("extra"),
        F.sum(F.when(F.col("n") > 1, 1)).alias("dup_rids"),
        F.max("n").alias("max_n"),
    ).first()
    extra = count(row["extra"])
    figures = {
        "deliveries": count(row["deliveries"]),
        "requests_delivered": count(row["rids"]),
        "duplicated_requests": count(row["dup_rids"]),
        "extra_deliveries": extra,
        "max_deliveries": count(row["max_n"]),
    }
    summary = (
        f"{figures['deliveries']} deliveries of {figures['requests_delivered']} requests; "
        f"{figures['duplicated_requests']} delivered more than once ({extra} extra)"
    )
    if figures["deliveries"] == 0:
        return unknown(
            "no_duplicate", "no reply was delivered", figures,
            reason="no reply reached a client, so no delivery could be counted",
        )  # fmt: skip
    found = []
    if extra:
        dup = per_rid.filter(F.col("n") > 1).select("delivered_rid", F.col("n").alias("deliveries"))
        order = Window.partitionBy("delivered_rid").orderBy("ts", "src")
        second = (
            deliveries.join(F.broadcast(dup), "delivered_rid")
            .withColumn("k", F.row_number().over(order))
            .filter(F.col("k") == 2)
            .select(
                *(F.col("delivered_rid").alias("rid") if c == "rid" else c for c in cols),
                "deliveries",
                F.lit("delivered again").alias("problem"),
            )
        )
        found = examples(second)
    return judged("no_duplicate", extra, found, summary, figures)


# --- in_order --------------------------------------------------------------------------


def _order_kinds(meta: dict[str, Any]) -> tuple[list[str], list[str], bool]:
    """(the client kinds that promise order, those that do not, whether anything does):
    each kind promises it or not (default: the manifest's promise); a mixed load is checked
    on the kinds that do."""
    kinds = meta["manifest"].get("clients") or []
    promised = meta["manifest"]["promises"].get("in_order", True)
    ordered = [k["name"] for k in kinds if k.get("in_order", promised)]
    unordered = [k["name"] for k in kinds if not k.get("in_order", promised)]
    return ordered, unordered, bool(ordered if kinds else promised)


def _order_not_promised(meta: dict[str, Any]) -> str:
    """The reason in_order is unknown on any run of this plan, or ''."""
    if _order_kinds(meta)[2]:
        return ""
    return "the manifest lists in_order among its checks but promises in_order = false: drop one"


@checker(
    "in_order",
    "per client, replies arrive in strictly increasing seq (only where the manifest promises "
    "in_order; otherwise unknown, so CI shows it as skipped rather than as a pass)",
    foresee=_order_not_promised,
)
def in_order(ctx: CheckContext) -> CheckResult:
    ordered, unordered, _ = _order_kinds(ctx.meta)
    reason = _order_not_promised(ctx.meta)
    if reason:
        return unknown("in_order", "not promised", {"promised": False}, reason=reason)
    order = Window.partitionBy("cid").orderBy("ts", "seq")
    replies = events_of(ctx, "reply")
    if unordered:
        replies = replies.filter(~F.coalesce("kind", F.lit("")).isin(*unordered))
    # Only what the order needs goes through the shuffle and the sort (at 10M events, every
    # reply); the offenders shown get their other fields back by a join.
    marked = (
        replies.select("cid", "ts", "seq")
        .withColumn("prev_seq", F.lag("seq").over(order))
        .withColumn("prev_ts", F.lag("ts").over(order))
        .withColumn("first", F.row_number().over(order) == 1)
        .withColumn("bad", F.col("seq") <= F.col("prev_seq"))
    )
    # The counts and the first offenders (at 10M events from one aggregation: one window).
    row, firsts = tk.totals_and_firsts(
        ctx,
        marked,
        [
            F.count("*").alias("replies"),
            # Each client's first reply, counted: its clients, without a distinct count's own pass.
            F.sum((F.col("first") & F.col("cid").isNotNull()).cast("int")).alias("clients"),
            F.sum(F.col("bad").cast("int")).alias("bad"),
        ],
        F.col("bad"),
    )
    bad = count(row["bad"])
    figures = {
        "promised": True,
        "kinds_checked": ordered,
        "kinds_not_promised": unordered,
        "replies": count(row["replies"]),
        "clients": count(row["clients"]),
        "out_of_order": bad,
    }
    summary = f"{figures['replies']} replies to {figures['clients']} clients; {bad} out of order"
    if unordered:
        summary += f" (kinds {', '.join(ordered)}; {', '.join(unordered)} promise no order)"
    if figures["replies"] == 0:
        return unknown(
            "in_order", "no reply arrived", figures,
            reason="no reply reached a client, so no order could be seen",
        )  # fmt: skip
    found = []
    if bad:
        keys = {"cid": "string", "ts": "long", "seq": "long", "prev_seq": "long", "prev_ts": "long"}
        shown = small_frame(
            ctx, [tuple(r[k] for k in keys) for r in firsts], {f"_{k}": t for k, t in keys.items()}
        )
        same = [F.col(c).eqNullSafe(F.col(f"_{c}")) for c in ("cid", "ts", "seq")]
        # Their other fields from the replies (a scan, no shuffle): the window carried three.
        offenders = (
            replies.select(*EVENT_KEYS)
            .join(F.broadcast(shown), same[0] & same[1] & same[2])
            .select(*EVENT_KEYS, F.col("_prev_seq").alias("prev_seq"), F.col("_prev_ts").alias("prev_ts"))
            .withColumn("problem", F.lit("seq not above the previous reply's seq"))
            .dropDuplicates()
        )
        found = examples(offenders)
    return judged("in_order", bad, found, summary, figures)


# --- correct_reply ---------------------------------------------------------------------


@checker(
    "correct_reply",
    "each reply is the one for its request: payload intact (ok), and no message meant for "
    "another client or without a request id",
)
def correct_reply(ctx: CheckContext) -> CheckResult:
    is_reply = F.col("ev") == "reply"
    owner = F.regexp_extract("got_rid", RID_PATTERN, 1)
    problem = (
        F.when(is_reply & ~F.coalesce("ok", F.lit(False)), F.lit("reply not as expected (ok=false)"))
        .when(~is_reply & F.col("got_rid").isNull(), F.lit("unexpected message without a request id"))
        .when(~is_reply & (owner != F.col("cid")), F.lit("reply meant for another client"))
    )
    checked = (
        events_of(ctx, "reply", "unexpected")
        .select("ts", "src", "ev", "cid", "seq", "rid", "ok", "got_rid", "worker", "detail")
        .withColumn("problem", problem)
    )
    row = checked.agg(
        F.sum(is_reply.cast("int")).alias("replies"),
        F.sum((is_reply & F.col("problem").isNotNull()).cast("int")).alias("bad_replies"),
        F.sum((~is_reply & F.col("problem").isNull()).cast("int")).alias("stale_own"),
        F.sum((~is_reply & F.col("problem").isNotNull()).cast("int")).alias("bad_unexpected"),
    ).first()
    figures = {
        "replies": count(row["replies"]),
        "replies_not_ok": count(row["bad_replies"]),
        "foreign_or_unidentified": count(row["bad_unexpected"]),
        "stale_own_replies": count(row["stale_own"]),  # late replies to the client's own request
    }
    bad = figures["replies_not_ok"] + figures["foreign_or_unidentified"]
    summary = (
        f"{figures['replies']} replies: {figures['replies_not_ok']} not as expected, "
        f"{figures['foreign_or_unidentified']} foreign or unidentified messages, "
        f"{figures['stale_own_replies']} stale own replies"
    )
    if figures["replies"] == 0 and bad == 0:
        return unknown(
            "correct_reply", "no reply arrived", figures,
            reason="no reply reached a client, so none could be compared with its request",
        )  # fmt: skip
    found = examples(checked.filter(F.col("problem").isNotNull())) if bad else []
    return judged("correct_reply", bad, found, summary, figures)


# --- execution_count -------------------------------------------------------------------


@checker(
    "execution_count",
    "how many times each request was executed (worker exec events): never for a request "
    'nobody sent, at least once for an answered one; with execution = "exactly_once" a '
    "request executed twice is a violation (the example lists every execution)",
    needs=("exec",),
    shares=("per_rid",),
)
def execution_count(ctx: CheckContext) -> CheckResult:
    mode = ctx.promises.get("execution", "at_least_once")
    execs = events_of(ctx, "exec").select("ts", "src", "ev", "rid", "worker")
    # Per request id (shared with no_duplicate); a null id matches no send: never a request,
    # and its executions are of no sent request.
    sent_ = (F.col("sends") > 0) & F.col("rid").isNotNull()
    shared = (
        tk.per_rid(ctx)
        .withColumn("sent", sent_)
        .withColumn("n", F.when(sent_, F.col("execs")).otherwise(0))
        .withColumn("answered", F.when(sent_ & F.col("answered"), F.lit(1)))
    )
    per_rid = shared.filter(F.col("execs") > 0).select("rid", F.col("execs").alias("n"), "sent")
    requests = shared.filter(F.col("sends") > 0).select("rid", "seq", "n", "answered")
    n, is_request = F.col("n"), F.col("sends") > 0
    hist = shared.agg(
        F.sum(is_request.cast("int")).alias("requests"),
        *(F.sum((is_request & (n == k)).cast("int")).alias(f"x{k}") for k in (0, 1, 2)),
        F.sum((is_request & (n >= 3)).cast("int")).alias("x3"),
        F.sum((is_request & (n == 0) & F.col("answered").isNotNull()).cast("int")).alias(
            "answered_unexecuted"
        ),
        F.sum("execs").alias("execs"),
        F.sum(F.when(F.col("execs") > 1, 1)).alias("multi"),
        F.sum(((F.col("execs") > 0) & ~F.col("sent")).cast("int")).alias("unsent"),
    ).first()
    row = hist
    n_unsent = count(hist["unsent"])
    unsent = per_rid.filter(~F.col("sent"))
    figures = {
        "mode": mode,
        "requests": count(hist["requests"]),
        "exec_events": count(row["execs"]),
        "histogram": {
            "0": count(hist["x0"]),
            "1": count(hist["x1"]),
            "2": count(hist["x2"]),
            "3+": count(hist["x3"]),
        },
        "executed_more_than_once": count(row["multi"]),
        "answered_but_not_executed": count(hist["answered_unexecuted"]),
        "executed_but_never_sent": n_unsent,
    }
    h = figures["histogram"]
    summary = (
        f"{figures['requests']} requests executed 0/1/2/3+ times: {h['0']}/{h['1']}/{h['2']}/{h['3+']}; "
        f"{n_unsent} executions of unsent requests"
    )
    if figures["exec_events"] == 0:
        return unknown(
            "execution_count", "no exec events: the implementation does not record executions", figures,
            reason="needs exec events from the workers, which this subject does not write: run it with "
            "zchaos's probe workers, or drop execution_count from the manifest's checks",
        )  # fmt: skip
    offenders: list[DataFrame] = []
    violations = n_unsent
    ex_cols = [
        "ts",
        "src",
        "ev",
        F.lit(None).cast("string").alias("cid"),
        F.lit(None).cast("long").alias("seq"),
    ]
    if n_unsent:
        first_exec = Window.partitionBy("rid").orderBy("ts", "src")
        offenders.append(
            execs.join(unsent.select("rid"), "rid")
            .withColumn("k", F.row_number().over(first_exec))
            .filter(F.col("k") == 1)
            .select(*ex_cols, "rid", "worker", F.lit("executed, never sent").alias("problem"))
        )
    if mode == "exactly_once" and figures["executed_more_than_once"]:
        violations += figures["executed_more_than_once"]
        # One example per request run more than once, carrying every execution of it (who
        # ran it when), so both sides of a double execution can be found in the logs.
        multi = per_rid.filter(F.col("n") > 1).select("rid", F.col("n").alias("times"))
        runs = (
            execs.join(F.broadcast(multi), "rid")
            .groupBy("rid", "times")
            .agg(F.sort_array(F.collect_list(F.struct("ts", "src", "worker"))).alias("runs"))
            .join(tk.rid_senders(ctx, multi), "rid", "left")
        )
        offenders.append(
            runs.select(
                F.col("runs")[1]["ts"].alias("ts"),
                F.col("runs")[1]["src"].alias("src"),
                F.lit("exec").alias("ev"),
                "cid",
                "seq",
                "rid",
                F.col("runs")[1]["worker"].alias("worker"),
                F.to_json(F.col("runs")).alias("executions"),
                F.concat(F.lit("executed "), F.col("times").cast("string"), F.lit(" times")).alias("problem"),
            )
        )
    if figures["answered_but_not_executed"]:  # at least once, and exactly once too
        violations += figures["answered_but_not_executed"]
        unexecuted = requests.filter((F.col("n") == 0) & F.col("answered").isNotNull()).select("rid")
        offenders.append(
            events_of(ctx, "reply")
            .filter(F.col("ok"))
            .join(unexecuted, "rid")
            .select(
                "ts",
                "src",
                "ev",
                "cid",
                "seq",
                "rid",
                "worker",
                F.lit("answered, never executed").alias("problem"),
            )
        )
    found: list[dict[str, Any]] = []
    for df in offenders:
        found.extend(examples(df))
    found = sorted(found, key=lambda e: e["ts"])[:MAX_EXAMPLES]
    for ex in found:
        if "executions" in ex:
            ex["executions"] = json.loads(ex["executions"])
    return judged("execution_count", violations, found, summary, figures)


# --- steady_state ----------------------------------------------------------------------


def _too_little_planned(meta: dict[str, Any]) -> str:
    """The reason steady_state is unknown on any run of this plan: the rule of a run's
    (``too_little_judged``) on the load the plan leaves it at most, or ''."""
    t = tk.timers_of(meta)
    return tk.too_little_judged(tk.planned_coverage(meta, t), t)


@checker(
    "steady_state",
    "requests no fault excuses (see harness/manifest.py: in flight as a fault started, or sent "
    "before its stop + the manifest's expiry_ms) and sent after the warm-up: no retry, no "
    "abandon, no lost request, reply latency p99 within latency_p99_ms; unknown when that "
    "judged under a fifth of the load time",
    shares=("per_request",),
    on_fewer="neither",
    foresee=_too_little_planned,
)
def steady_state(ctx: CheckContext) -> CheckResult:
    t = tk.timers(ctx)
    spans = tk.excused_send_spans(ctx, t)
    bound_ms = float(ctx.promises.get("latency_p99_ms", 500.0))
    # Each request's events met in one group (shared with no_lost): judged or excused whole.
    # ``lost``: a no-resend client's, past its deadline.
    per_request = tk.per_request(ctx).select(
        F.col("ts").alias("first_send"),
        "last_ts", "cid", "seq",
        "retries", "abandons", "lost", "problem_ts", "latency_us", "reply_ts",
    )  # fmt: skip
    requests = tk.with_excused_requests(per_request, ctx, t)
    judged = requests.filter(~F.col("excused"))
    row = requests.agg(
        F.sum((~F.col("excused")).cast("int")).alias("judged"),
        F.sum(F.col("excused").cast("int")).alias("excused"),
        F.sum(F.when(~F.col("excused"), F.col("reply_ts").isNotNull().cast("int"))).alias("replies"),
        F.sum(F.when(~F.col("excused"), F.col("retries"))).alias("retries"),
        F.sum(F.when(~F.col("excused"), F.col("abandons"))).alias("abandons"),
        F.sum(F.when(~F.col("excused"), F.col("lost"))).alias("lost"),
        F.percentile(F.when(~F.col("excused"), F.col("latency_us")), F.lit(0.99)).alias("p99_us"),
        F.max(F.when(~F.col("excused"), F.col("latency_us"))).alias("max_us"),
    ).first()
    retries, abandons, replies = count(row["retries"]), count(row["abandons"]), count(row["replies"])
    lost = count(row["lost"])
    p99_ms = None if row["p99_us"] is None else row["p99_us"] / 1000.0
    slow = p99_ms is not None and p99_ms > bound_ms
    cover = tk.coverage(ctx, spans)
    figures = {
        "judged_requests": count(row["judged"]),
        "excused_requests": count(row["excused"]),
        "replies": replies,
        "retries": retries,
        "abandons": abandons,
        "lost": lost,
        "p99_ms": p99_ms,
        "max_ms": None if row["max_us"] is None else row["max_us"] / 1000.0,
        "latency_p99_bound_ms": bound_ms,
        **t.figures(),
        **cover,
    }
    p99_text = "n/a" if p99_ms is None else f"{p99_ms:.1f} ms"
    summary = (
        f"judged {cover['judged_s']:.1f} of {cover['load_s']:.1f} s of load "
        f"({100 * cover['judged_fraction']:.0f}%), {figures['judged_requests']} requests: "
        f"{retries} retries, {abandons} abandons, p99 {p99_text} (bound {bound_ms:g} ms)"
    )
    if lost:
        summary += f", {lost} lost"
    violations = retries + abandons + lost + int(slow)
    found: list[dict[str, Any]] = []
    if retries or abandons or lost:
        troubled = judged.filter((F.col("retries") + F.col("abandons") + F.col("lost")) > 0)
        found = examples(
            tk.request_details(ctx, troubled.orderBy("problem_ts").limit(MAX_EXAMPLES)).select(
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
                F.lit("retried, abandoned or lost, though no fault excuses it").alias("problem"),
            )
        )
    if slow:
        slowest = judged.filter(F.col("latency_us").isNotNull()).orderBy(F.col("latency_us").desc()).limit(1)
        found += examples(
            tk.request_details(ctx, slowest)
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
                "problem", F.lit(f"p99 latency {p99_ms:.1f} ms above {bound_ms:g} ms (slowest reply)")
            )
        )
        found = sorted(found, key=lambda e: e["ts"])[:MAX_EXAMPLES]
    if violations:
        return CheckResult("steady_state", VIOLATED, violations, found, summary, figures)
    if figures["judged_requests"] == 0:
        return CheckResult(
            "steady_state",
            UNKNOWN,
            summary="no request outside fault windows",
            figures=figures,
            reason="every request was excused by a fault or the warm-up: schedule fewer or shorter "
            "faults, or a longer load",
        )
    reason = tk.too_little_judged(cover, t)
    if reason:
        return CheckResult("steady_state", UNKNOWN, 0, [], summary, figures, reason)
    return CheckResult("steady_state", HELD, 0, [], summary, figures)


# --- no_unexpected_exit ----------------------------------------------------------------


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``lines`` lines of a log file (empty if there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    tail = deque(data.decode("utf-8", "replace").splitlines(), maxlen=lines)
    return list(tail)


@checker(
    "no_unexpected_exit",
    "no process ends unless the harness ended it (a fault or the teardown); a crash shows "
    "with the tail of its log",
    reads_clients=False,
)
def no_unexpected_exit(ctx: CheckContext) -> CheckResult:
    procs = events_of(ctx, "proc_start", "proc_exit")
    unexpected = (F.col("ev") == "proc_exit") & ~F.coalesce("expected", F.lit(False))
    row = procs.agg(
        F.sum((F.col("ev") == "proc_start").cast("int")).alias("starts"),
        F.sum((F.col("ev") == "proc_exit").cast("int")).alias("exits"),
        F.sum(unexpected.cast("int")).alias("bad"),
    ).first()
    bad = count(row["bad"])
    figures = {"starts": count(row["starts"]), "exits": count(row["exits"]), "unexpected_exits": bad}
    summary = f"{figures['starts']} process starts, {figures['exits']} exits, {bad} unexpected"
    if figures["starts"] == 0 and figures["exits"] == 0:
        return unknown(
            "no_unexpected_exit", "no process events recorded", figures,
            reason="history/runner.jsonl holds no proc_start or proc_exit: the runner's history is missing",
        )  # fmt: skip
    found = []
    if bad:
        found = examples(
            procs.filter(unexpected).select(
                "ts", "src", "ev", "cid", "seq", "rid", "instance", "role", "pid", "code", "signal", "detail"
            )
        )
        for ex in found:
            how = f"signal {ex['signal']}" if ex.get("signal") is not None else f"code {ex.get('code')}"
            ex["problem"] = f"{ex.get('role')} {ex.get('instance')} exited with {how}"
            if ctx.run_dir is not None and ex.get("instance"):
                ex["log_tail"] = log_tail(ctx.run_dir / "logs" / f"{ex['instance']}.log")
    return judged("no_unexpected_exit", bad, found, summary, figures)


# --- recovery --------------------------------------------------------------------------


def _first_after(ctx: CheckContext, faults: DataFrame) -> tuple[dict[int, int], dict[int, int]]:
    """fault_id -> the first ok reply at or after the fault's stop, and fault_id -> the first
    ``exec`` by the fault's target at or after it: one range join over the small fault frame."""
    ev = F.col("ev")
    found = events_of(ctx, "reply", "exec").filter((ev == "exec") | F.col("ok")).select("ts", "ev", "worker")
    on_target = (found["worker"] == faults["target"]) | found["worker"].startswith(
        F.concat(faults["target"], F.lit("-"))
    )
    cond = (found["ts"] >= faults["stop_ns"]) & ((found["ev"] == "reply") | on_target)
    rows = (
        found.join(F.broadcast(faults), cond)
        .groupBy("fault_id")
        .agg(
            F.min(F.when(ev == "reply", F.col("ts"))).alias("ok"),
            F.min(F.when(ev == "exec", F.col("ts"))).alias("exec"),
        )
        .collect()
    )
    return (
        {r["fault_id"]: r["ok"] for r in rows if r["ok"] is not None},
        {r["fault_id"]: r["exec"] for r in rows if r["exec"] is not None},
    )


@checker(
    "recovery",
    "after each fault stops, the system serves an ok reply again within recovery_bound_s "
    "(and, as a figure, when the target worker executes again)",
    on_fewer="holds",
)
def recovery(ctx: CheckContext) -> CheckResult:
    bound_s = float(ctx.promises.get("recovery_bound_s", 10.0))
    load_stop = run_time(ctx, "load_stopped_ns")
    healed = [f for f in ctx.faults if f.stop_ns is not None]
    rows: list[dict[str, Any]] = []
    first_ok: dict[int, int] = {}
    first_exec: dict[int, int] = {}
    if healed:
        faults = small_frame(
            ctx,
            [(f.fault_id, f.stop_ns, f.target) for f in healed],
            {"fault_id": "int", "stop_ns": "long", "target": "string"},
        )
        first_ok, first_exec = _first_after(ctx, faults)
    violations, undecided = 0, 0
    found = []
    for f in ctx.faults:
        rec = tgt = None
        within: bool | None = None
        if f.stop_ns is not None:
            if f.fault_id in first_ok:
                rec = (first_ok[f.fault_id] - f.stop_ns) / NS
                within = rec <= bound_s
            elif f.stop_ns + bound_s * NS < load_stop:
                within = False
            if f.fault_id in first_exec:
                tgt = (first_exec[f.fault_id] - f.stop_ns) / NS
        rows.append(
            {
                "fault_id": f.fault_id,
                "fault": f.fault,
                "target": f.target,
                "start_ns": f.start_ns,
                "stop_ns": f.stop_ns,
                "recovery_s": rec,
                "target_recovery_s": tgt,
                "within_bound": within,
            }
        )
        if within is False:
            violations += 1
            problem = (
                "no ok reply after the fault" if rec is None else f"recovered in {rec:.2f} s > {bound_s:g} s"
            )
            found.append(
                example(
                    {
                        "ts": f.stop_ns,
                        "src": "nemesis",
                        "ev": "fault_stop",
                        "fault_id": f.fault_id,
                        "fault": f.fault,
                        "target": f.target,
                        "recovery_s": rec,
                        "problem": problem,
                    }
                )
            )
        elif f.stop_ns is not None and within is None:
            undecided += 1
    times = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
    figures = {"bound_s": bound_s, "faults": rows, "max_recovery_s": max(times) if times else None}
    worst = f", slowest {max(times):.2f} s" if times else ""
    summary = (
        f"{len(healed)} healed faults: {len(healed) - violations - undecided} recovered within "
        f"{bound_s:g} s, {violations} not, {undecided} undecided{worst}"
    )
    if violations:
        return judged("recovery", violations, found, summary, figures)
    if not healed:
        return nothing_to_judge(
            ctx, "recovery", "no fault healed during the run",
            "no planned fault ended before the run did, so no recovery could be timed; let each fault "
            "end (duration_s, restart_after_s) at least recovery_bound_s before the load stops",
            figures=figures,
        )  # fmt: skip
    if undecided:
        reason = (
            f"{undecided} fault(s) ended less than recovery_bound_s ({bound_s:g} s) before the load "
            "stopped and no ok reply came after them; schedule faults earlier or the load longer"
        )
        return unknown("recovery", summary, figures, reason=reason)
    return judged("recovery", 0, [], summary, figures)
