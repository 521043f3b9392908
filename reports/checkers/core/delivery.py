"""Delivery: every request sent is answered once, in order, with its own reply, and
executed as often as the manifest promises (no_lost, no_duplicate, in_order, correct_reply,
execution_count)."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from contract.payload import RID_PATTERN
from contract.promises import survives_every_outage
from contract.rundir import RunMeta
from reports.checkers.core import aggregates
from reports.checkers.toolkit import (
    EACH_REQUEST,
    EVENT_KEYS,
    NS,
    CheckContext,
    CheckResult,
    checker,
    client_budget_ns,
    count,
    events_of,
    examples,
    of_the_load,
    per_request,
    per_rid,
    request_details,
    result,
    rid_senders,
    run_time,
    small_frame,
    stranded,
    timers,
    transit_spans,
    with_excused,
    with_meeting,
)

# --- no_lost ---------------------------------------------------------------------------


@checker(
    "no_lost",
    "every request that was sent ends in a reply or an abandon; one still open at the end "
    "of the load (or its client's last) is indeterminate, not lost; a client that never "
    "resends records `lost` when its reply_deadline_s ran out, which counts as lost (inside "
    "a fault window, or sent less than expiry_ms after one, only where the manifest promises "
    "requeue; inside an outage of a broker "
    'only where it promises to survive every outage: `survives` holds an unscoped "outage"; '
    "nor when a client of several endpoints sent it once to a server that answered nobody until "
    "its deadline while another served, after its restart, or after a cut link moved the client "
    "there: a failover pair's passive one)",
    shares=("per_request",),
    on_damage=EACH_REQUEST,
)
def no_lost(ctx: CheckContext) -> CheckResult:
    # Every send, reply, abandon and lost of a request met in one group (shared with steady_state).
    sends = per_request(ctx).filter(F.col("cid").isNotNull())
    cutoff = run_time(ctx, "load_stopped_ns") - client_budget_ns(ctx)
    # The declared losses a fault excuses, each by its reason (recovery asks nothing of them).
    losses = with_loss_excuses(sends, ctx)
    declared, unpromised = F.col("declared"), F.col("unpromised")
    broker_died, in_transit = F.col("broker_died"), F.col("in_transit")
    requeue = bool(ctx.promises.get("requeue", False))
    survives_all = survives_every_outage(ctx.promises)

    def totals(strand: DataFrame | None) -> tuple[Any, list[Any]]:
        """The counts and the earliest lost requests (the examples); with ``strand``, the
        declared losses it holds (sent to a failover pair's passive server) are excused too."""
        frame, stuck = losses, F.lit(False)
        if strand is not None:
            frame = frame.join(strand.withColumn("_stranded", F.lit(True)), ["cid", "seq"], "left")
            stuck = declared & F.coalesce(F.col("_stranded"), F.lit(False)) & ~unpromised & ~broker_died
            stuck = stuck & ~in_transit
        requests = (
            frame.withColumn("stranded", stuck)
            .withColumn(
                "open", (F.col("replied") == 0) & (F.col("abandoned") == 0) & F.col("lost_ts").isNull()
            )
            .withColumn(
                "indeterminate",
                F.col("open") & ((F.col("last_send_ts") > cutoff) | (F.col("seq") == F.col("last_seq"))),
            )
            .withColumn("excused", unpromised | broker_died | in_transit | stuck)
            .withColumn("lost", (declared & ~F.col("excused")) | (F.col("open") & ~F.col("indeterminate")))
        )
        return aggregates.totals_and_firsts(
            ctx,
            requests,
            [
                F.count("*").alias("requests"),
                F.sum("replied").alias("replied"),
                F.sum(F.when((F.col("replied") == 0) & (F.col("abandoned") == 1), 1)).alias("abandoned"),
                F.sum(F.col("indeterminate").cast("int")).alias("indeterminate"),
                F.sum(F.col("broker_died").cast("int")).alias("broker_died"),
                F.sum(F.col("in_transit").cast("int")).alias("in_transit"),
                F.sum(F.col("stranded").cast("int")).alias("stranded"),
                F.sum(F.col("lost").cast("int")).alias("lost"),
                F.sum((F.col("lost") & F.col("lost_ts").isNotNull()).cast("int")).alias("past_deadline"),
                F.sum(F.col("excused").cast("int")).alias("excused"),
            ],
            F.col("lost"),
        )

    row, firsts = totals(None)
    # Only where something is lost (issue 38, the report's speed): the losses of clients that
    # never resend, sent to a server of a pair that was not the serving one (a pair owes them
    # only where it promises to survive every outage, as bstar_no_lost_failover rules).
    if count(row["lost"]) and not survives_all and (strand := stranded(ctx)) is not None:
        row, firsts = totals(strand)
    total, lost, indeterminate = count(row["requests"]), count(row["lost"]), count(row["indeterminate"])
    figures = {
        "requests": total,
        "replied": count(row["replied"]),
        "abandoned": count(row["abandoned"]),
        "indeterminate": indeterminate,
        "lost": lost,
        "lost_past_deadline": count(row["past_deadline"]),  # recorded `lost` by a no-resend client
        "lost_in_faults_unpromised": count(row["excused"])
        - count(row["broker_died"])
        - count(row["in_transit"])
        - count(row["stranded"]),
        "lost_in_broker_outages": count(row["broker_died"]),
        "lost_in_transit": count(row["in_transit"]),
        "lost_at_a_silent_server": count(row["stranded"]),
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
    if figures["lost_in_broker_outages"]:
        summary += (
            f"; {figures['lost_in_broker_outages']} more held by a broker that died, not counted: "
            "surviving every outage is not promised"
        )
    if figures["lost_in_transit"]:
        summary += (
            f"; {figures['lost_in_transit']} more in flight as a link fault dropped data, not counted: "
            "only a resend recovers a message a cut link lost"
        )
    if figures["lost_at_a_silent_server"]:
        summary += (
            f"; {figures['lost_at_a_silent_server']} more sent once to a server that answered nobody "
            "until their deadline while another served, after its restart, or after a cut link moved "
            "the client there (a failover pair's passive one), not counted: only a client that "
            "resends finds the serving one"
        )
    if total == 0:
        return result(
            "no request was sent",
            figures,
            unknown="no send event in the history: the load clients recorded nothing (see logs/locust.log)",
        )
    found = []
    if lost:
        # The texts of the requests shown only (request_details).
        kept = {"cid": "string", "seq": "long", "ts": "long", "sends": "long", "last_send_ts": "long",
                "lost_ts": "long"}  # fmt: skip
        shown = request_details(ctx, small_frame(ctx, [tuple(r[k] for k in kept) for r in firsts], kept))
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
    return result(summary, figures, violations=lost, examples=found)


def with_loss_excuses(sends: DataFrame, ctx: CheckContext) -> DataFrame:
    """``sends`` (``per_request`` rows) with boolean columns: ``declared`` (a client that
    never resends declared it lost, unanswered) and the reasons ``no_lost`` excuses such a
    loss, each request given the first that holds: ``unpromised`` (a fault acted between
    the first send and the ``lost``, or ended less than the system's expiry before the
    send, and requeue is not promised), ``broker_died`` (a
    broker's outage then, and surviving every outage is not promised), ``in_transit`` (a
    link fault that drops what is on the wire then: ``transit_spans``). One rule for
    ``no_lost`` and ``recovery`` (``excused_losses``), so that the two never disagree."""
    requeue = bool(ctx.promises.get("requeue", False))
    survives_all = survives_every_outage(ctx.promises)
    declared = (F.col("replied") == 0) & F.col("lost_ts").isNotNull()
    # Without the requeue promise the broker may drop what a dead worker held; only a
    # resend recovers it, which a no-resend client never does: such a loss inside a fault
    # window is reported, not held against the system. The window goes on for the system's
    # expiry after the fault's stop, where the manifest gives one: its peers' timers still
    # act on the fault then (explore, stall-queue's correct twin, seed 3: the queue was down
    # 5.3 s, a worker's 5 s of patience ran out as it came back, and the new queue, learning
    # workers from their heartbeats as the guide's does, handed a request sent 0.3 s after
    # its return to the identity the worker was about to drop).
    aftermath_ns = int((timers(ctx).expiry_s or 0.0) * NS)
    frame = with_excused(sends, ctx, "_in_fault", ts="ts", until="lost_ts", grace_ns=aftermath_ns)
    # The requeue promise is about what a dead *worker* held. A broker that dies (a kill, a
    # restart) takes what it held with it, requeue or not, unless it promises to survive any
    # outage: a no-resend request it held is then reported, not held against it (a correct
    # broker with the standard 7.5 s expiry was VIOLATED by the stock restart scenarios).
    frame = with_excused(
        frame, ctx, "_in_broker_outage", ts="ts", until="lost_ts", instance="cid",
        own=False, link=False, broker_links=False, outage_only=True,
    )  # fmt: skip
    # Nor is it about a message a cut link dropped on its way: no broker sees that loss while
    # the worker it was sent to stays alive (see transit_spans).
    frame = with_meeting(frame, transit_spans(ctx), "_in_transit", ts="ts", until="lost_ts")
    unpromised = declared & F.lit(not requeue) & F.col("_in_fault")
    broker_died = declared & F.lit(not survives_all) & F.col("_in_broker_outage") & ~unpromised
    return (
        frame.withColumn("declared", declared)
        .withColumn("unpromised", unpromised)
        .withColumn("broker_died", broker_died)
        .withColumn("in_transit", declared & F.col("_in_transit") & ~unpromised & ~broker_died)
        .drop("_in_fault", "_in_broker_outage", "_in_transit")
    )


def excused_losses(ctx: CheckContext) -> DataFrame | None:
    """The requests (``cid``, ``seq``) whose declared loss ``no_lost`` excuses: lost in a fault
    where requeue is not promised, held by a broker that died, dropped on a cut link, or
    stranded at a failover pair's silent server (toolkit ``stranded``). ``recovery`` asks
    nothing of them: none shows whether the service came back. Explore, stall-queue's correct
    twin (seed 2): the one request sent after the queue's restart went into a slicer on the
    clients' link and was lost; its client waited out its deadline to the load's end, and
    recovery said "no ok reply after the fault" while no_lost excused the same loss. None,
    with no query, where no fault ran."""
    if not ctx.faults:
        return None
    excuses = with_loss_excuses(per_request(ctx, last_seq=False), ctx)
    excused = excuses.filter(F.col("unpromised") | F.col("broker_died") | F.col("in_transit"))
    excused = excused.select("cid", "seq")
    strand = None if survives_every_outage(ctx.promises) else stranded(ctx)
    return excused if strand is None else excused.unionByName(strand.select("cid", "seq"))


# --- no_duplicate ----------------------------------------------------------------------


@checker(
    "no_duplicate",
    "each request is delivered at most once for each time its client sent it: its replies plus "
    "the unexpected messages carrying its id (a resent request's first send may be answered "
    "after its resend's reply: an answer to each send, not a duplicate)",
    shares=("per_rid",),
    on_damage=EACH_REQUEST,
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
    # An asynchronous client keeps its socket across a resend: when the system answers both
    # sends (a worker that expired while holding the first, its request handed on), the
    # second reply arrives after the first. Each answers a send of the client's own: on a
    # correct broker with a 7.5 s expiry and a 5 s client timeout this was called a duplicate.
    delivered = (
        per_rid(ctx)
        .filter(F.col("deliveries") > 0)
        .select(
            F.col("rid").alias("delivered_rid"),
            F.col("deliveries").alias("n"),
            F.greatest(F.coalesce(F.col("sends"), F.lit(0)), F.lit(1)).alias("allowed"),
        )
    )
    over = F.col("n") - F.col("allowed")
    row = delivered.agg(
        F.sum("n").alias("deliveries"),
        F.count("*").alias("rids"),
        F.sum(F.when(over > 0, over)).alias("extra"),
        F.sum(F.when(over > 0, 1)).alias("dup_rids"),
        F.sum(F.when(F.col("n") > 1, F.least(F.col("n"), F.col("allowed")) - 1)).alias("resend_answers"),
        F.max("n").alias("max_n"),
    ).collect()[0]
    extra = count(row["extra"])
    figures = {
        "deliveries": count(row["deliveries"]),
        "requests_delivered": count(row["rids"]),
        "duplicated_requests": count(row["dup_rids"]),
        "extra_deliveries": extra,
        "max_deliveries": count(row["max_n"]),
        "resend_answers": count(row["resend_answers"]),
    }
    summary = (
        f"{figures['deliveries']} deliveries of {figures['requests_delivered']} requests; "
        f"{figures['duplicated_requests']} delivered more than once ({extra} extra)"
    )
    if figures["resend_answers"]:
        summary += f"; {figures['resend_answers']} more answered a resend of their request (not duplicates)"
    if figures["deliveries"] == 0:
        return result(
            "no reply was delivered",
            figures,
            unknown="no reply reached a client, so no delivery could be counted",
        )
    found = []
    if extra:
        dup = delivered.filter(over > 0).select("delivered_rid", F.col("n").alias("deliveries"), "allowed")
        order = Window.partitionBy("delivered_rid").orderBy("ts", "src")
        second = (
            deliveries.join(F.broadcast(dup), "delivered_rid")
            .withColumn("k", F.row_number().over(order))
            .filter(F.col("k") == F.col("allowed") + 1)
            .select(
                *(F.col("delivered_rid").alias("rid") if c == "rid" else c for c in cols),
                "deliveries",
                F.lit("delivered again").alias("problem"),
            )
        )
        found = examples(second)
    return result(summary, figures, violations=extra, examples=found)


# --- in_order --------------------------------------------------------------------------


def _order_kinds(meta: RunMeta) -> tuple[list[str], list[str], bool]:
    """(the client kinds that promise order, those that do not, whether anything does):
    each kind promises it or not (default: the manifest's promise); a mixed load is checked
    on the kinds that do."""
    kinds = meta["manifest"].get("clients") or []
    promised = meta["manifest"]["promises"].get("in_order", True)
    ordered = [k["name"] for k in kinds if k.get("in_order", promised)]
    unordered = [k["name"] for k in kinds if not k.get("in_order", promised)]
    return ordered, unordered, bool(ordered if kinds else promised)


def _order_not_promised(meta: RunMeta) -> str:
    """The reason in_order is unknown on any run of this plan, or ''."""
    if _order_kinds(meta)[2]:
        return ""
    return "the manifest lists in_order among its checks but promises in_order = false: drop one"


@checker(
    "in_order",
    "per client, replies arrive in strictly increasing seq (only where the manifest promises "
    "in_order; otherwise unknown, so CI shows it as skipped rather than as a pass)",
    foresee=_order_not_promised,
    on_damage=EACH_REQUEST,
)
def in_order(ctx: CheckContext) -> CheckResult:
    ordered, unordered, _ = _order_kinds(ctx.meta)
    reason = _order_not_promised(ctx.meta)
    if reason:
        return result("not promised", {"promised": False}, unknown=reason)
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
    row, firsts = aggregates.totals_and_firsts(
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
        if unordered and not events_of(ctx, "reply").isEmpty():
            # Users go to the kinds by weight: a few users may all be of kinds that promise no order.
            return result(
                f"no reply to kinds that promise order ({', '.join(ordered)})",
                figures,
                unknown=f"the load's clients were all of kinds that promise no order "
                f"({', '.join(unordered)}); give a kind that promises order users of its own "
                f"(`users` on the kind) or the load more users",
            )
        return result(
            "no reply arrived", figures, unknown="no reply reached a client, so no order could be seen"
        )
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
    return result(summary, figures, violations=bad, examples=found)


# --- correct_reply ---------------------------------------------------------------------


@checker(
    "correct_reply",
    "each reply is the one for its request: payload intact (ok), and no message meant for "
    "another client or without a request id",
    on_damage=EACH_REQUEST,
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
    ).collect()[0]
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
        return result(
            "no reply arrived",
            figures,
            unknown="no reply reached a client, so none could be compared with its request",
        )
    found = examples(checked.filter(F.col("problem").isNotNull())) if bad else []
    return result(summary, figures, violations=bad, examples=found)


# --- execution_count -------------------------------------------------------------------


@checker(
    "execution_count",
    "how many times each request was executed (worker exec events): never for a request "
    'nobody sent, at least once for an answered one; with execution = "exactly_once" a '
    "request executed twice is a violation (the example lists every execution)",
    needs=("exec",),
    shares=("per_rid",),
    on_damage=EACH_REQUEST,
)
def execution_count(ctx: CheckContext) -> CheckResult:
    mode = ctx.promises.get("execution", "at_least_once")
    execs = events_of(ctx, "exec").select("ts", "src", "ev", "rid", "worker")
    # Per request id (shared with no_duplicate); a null id matches no send: never a request,
    # and its executions are of no sent request.
    sent_ = (F.col("sends") > 0) & F.col("rid").isNotNull()
    shared = (
        per_rid(ctx)
        .withColumn("sent", sent_)
        .withColumn("n", F.when(sent_, F.col("execs")).otherwise(0))
        .withColumn("answered", F.when(sent_ & F.col("answered"), F.lit(1)))
    )
    # An execution of a stranger's request (the malformed fault's junk, which a correct
    # system serves: explore, reliable-sketch seed 1, run 5: 'x:0', 'X', '' executed by the
    # servers behind the queue) is no execution of an unsent request of the load's.
    shared = shared.withColumn("ours", of_the_load(ctx, F.col("rid")))
    executed = shared.filter(F.col("execs") > 0).select("rid", F.col("execs").alias("n"), "sent", "ours")
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
        F.sum(((F.col("execs") > 0) & ~F.col("sent") & F.col("ours")).cast("int")).alias("unsent"),
        F.sum(F.when((F.col("execs") > 0) & ~F.col("sent") & ~F.col("ours"), F.col("execs"))).alias(
            "strangers"
        ),
    ).collect()[0]
    row = hist
    n_unsent = count(hist["unsent"])
    unsent = executed.filter(~F.col("sent") & F.col("ours"))
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
        "executions_of_strangers_requests": count(hist["strangers"]),
    }
    h = figures["histogram"]
    summary = (
        f"{figures['requests']} requests executed 0/1/2/3+ times: {h['0']}/{h['1']}/{h['2']}/{h['3+']}; "
        f"{n_unsent} executions of unsent requests"
    )
    if figures["exec_events"] == 0:
        return result(
            "no exec events: the implementation does not record executions",
            figures,
            unknown="needs exec events from the workers, which this subject does not write: run it with "
            "zchaos's probe workers, or drop execution_count from the manifest's checks",
        )
    offenders: list[DataFrame] = []
    violations = n_unsent
    ex_cols: list[Column | str] = [
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
        multi = executed.filter(F.col("n") > 1).select("rid", F.col("n").alias("times"))
        runs = (
            execs.join(F.broadcast(multi), "rid")
            .groupBy("rid", "times")
            .agg(F.sort_array(F.collect_list(F.struct("ts", "src", "worker"))).alias("runs"))
            .join(rid_senders(ctx, multi), "rid", "left")
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
    for ex in found:
        if "executions" in ex:
            ex["executions"] = json.loads(ex["executions"])
    return result(summary, figures, violations=violations, examples=found)
