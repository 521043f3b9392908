"""Checkers of Binary Star (``implementations/binary_star``): a primary/backup pair of
servers of which at most one serves, failing over when the active one dies.

They judge a black box from the clients' history first: each ``reply`` says which endpoint
answered (``endpoint``), and the request's last ``send`` is when that answer was asked for,
so the server answered at some time in [that send, the reply]. Where the servers write
their state changes (``bstar_state``), those are judged too.

- ``bstar_single_active``: never two servers answering as active at the same time. Three
  rules, each labelled in the examples:

  * *both answering*: server E answered before and after an answer of another server F,
    all three within the pair's peer timeout (``expiry_ms``). A correct pair cannot hand
    over from E to F and back faster than that: a passive server takes over only once its
    peer has been silent for the peer timeout. The times are bounds, never guesses: E's
    earlier answer is one whose reply came before F's request was sent, its later one was
    asked for after F's reply came, and the span from the first's send to the second's
    reply is under the timeout.
  * *takeover without cause*: the answering server changed from E to F while nothing the
    plan did could have made E give up being active (no process fault on E, no fault on a
    link between the servers, from E's last answer to F's first, with the peer timeout and
    a client's budget of grace after the fault). An active server leaves that state only
    by dying, stalling or hearing that its peer is active, so E was still active when F
    answered. Faults on the clients' own links are no cause: they cut clients off, not
    the servers from each other. Where the servers write ``bstar_state``, E recording a
    state other than active between its last answer and F's first explains the handover
    too: E stepped down, whatever told it to (a thawed peer's stale "active" announcement,
    sent just before its freeze and delivered after it, makes a correct active step down).
  * *both in state active* (servers that write ``bstar_state``): two servers' recorded
    active intervals overlap, outside the windows of process faults on either of them
    (a frozen server serves nothing) and the peer timeout after each (a thawed server's
    time to hear its peer and step down).

  A handover the plan explains is a failover, never split brain: a failover leaves the
  old active silent for at least the peer timeout before the new one answers.
- ``bstar_failover_time``: after each process fault (kill, restart, freeze ...) on the
  server that was answering, service resumes - a reply from another server, or from the same
  one to a request sent after the fault began (a fault of an outage's kind that left it
  serving, junk at its state endpoint, took nothing out) - within ``[promises]
  failover_bound_s``: of the fault's start, or of its stop when the server was back before
  the other could take over (its peer silent for the peer timeout at a client's vote, one
  attempt and settle in); and, as a takeover waits for a client's vote, of the first request
  after that when none was in flight then (an idle client asks later; with no request at all
  after it, nothing was owed). A failover needs a server to fail over to: where the other
  one was out of the clients' reach too within the bound (a process outage on it, or an
  outage of the clients' link to it), service that came back later is not held against the
  pair (``recovery`` judges its return); alone, such a case is unknown.
- ``bstar_no_lost_failover``: every request in flight as such a fault started, or first
  sent until service resumed, ends in a reply (at-least-once: none abandoned nor left
  unanswered); how many were answered after a resend, and (where the servers write
  ``exec``) how many ran on more than one server, are counted. A request of a client that
  never resends, declared lost at its deadline, is counted apart: only a resend crosses a
  failover, so a pair owes it only where it promises to survive every outage.

Undecidable cases are UNKNOWN with the reason: no reply names its endpoint (the client
adapter records none), no fault took the answering server out, or the load stopped before
the bound could be judged.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from contract.promises import survives_every_outage
from reports.checkers.toolkit import (
    EACH_REQUEST,
    END_OF_TIME,
    MAX_EXAMPLES,
    NS,
    CheckContext,
    CheckResult,
    FaultWindow,
    Found,
    checker,
    client_attempt_ns,
    count,
    endpoint_instances,
    events_of,
    example,
    history_end,
    merge_spans,
    ms,
    nothing_to_judge,
    outlasts_an_attempt,
    per_request,
    problems,
    process_events,
    result,
    run_time,
    small_frame,
    stranded,
    timers,
)

BOTH, TAKEOVER = "both answering", "takeover without cause"
NO_ENDPOINT = (
    "no reply in the history says which endpoint answered it: the client adapter records none "
    "(a failover client such as lazy_pirate with several endpoints does), so who answered when is unknown"
)


# --- the run's facts ---------------------------------------------------------------------


def answers(ctx: CheckContext) -> DataFrame:
    """One row per answered request: cid, seq, rid, endpoint, s (its last send), r (its reply)."""
    ev = F.col("ev")
    return (
        events_of(ctx, "send", "reply")
        .groupBy("cid", "seq")
        .agg(
            F.max(F.when(ev == "send", F.col("ts"))).alias("s"),
            F.min(F.when(ev == "reply", F.col("ts"))).alias("r"),
            F.first(F.when(ev == "reply", F.col("endpoint")), ignorenulls=True).alias("endpoint"),
            F.first("rid", ignorenulls=True).alias("rid"),
        )
        .filter(F.col("r").isNotNull() & F.col("endpoint").isNotNull() & F.col("s").isNotNull())
    )


def peer_timeout_ns(ctx: CheckContext) -> int:
    """The pair's peer timeout: the manifest's expiry_ms (0 when it gives none)."""
    t = timers(ctx)
    return int(t.after_s * NS) if t.source.startswith("expiry_ms") else 0


def takeout_spans(ctx: CheckContext, instances: set[str], grace_ns: int) -> list[tuple[int, int]]:
    """When a fault could have made one of ``instances`` give up being active: process
    faults on it, faults on a link between the servers (any link but the clients'); each
    from its start to its stop + grace."""
    spans = []
    for f in ctx.faults:
        if f.link is not None:
            if f.link.clients:
                continue
        elif f.target not in instances:
            continue
        spans.append((f.start_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns + grace_ns))
    return merge_spans(spans)


# --- bstar_single_active ------------------------------------------------------------------


def _both_answering(ctx: CheckContext, ans: DataFrame, endpoints: list[str], window_ns: int) -> DataFrame:
    """Answers of one endpoint that another one (``around``) answered before and after,
    all within ``window_ns``: one pass per direction, partitioned by ``around``."""
    around = ans.crossJoin(F.broadcast(small_frame(ctx, [(e,) for e in endpoints], {"around": "string"})))
    mine = F.col("endpoint") == F.col("around")
    keep = ("around", "cid", "seq", "rid", "endpoint", "s", "r")
    # Before: the latest send among ``around``'s answers whose reply came strictly before the
    # probe's send (a probe sorts first at an equal key: the inequality is strict).
    before = (
        around.withColumn("k", F.when(mine, F.col("r")).otherwise(F.col("s")))
        .withColumn("o", mine.cast("int"))
        .withColumn(
            "before_s",
            F.max(F.when(mine, F.col("s"))).over(
                Window.partitionBy("around").orderBy("k", "o").rowsBetween(Window.unboundedPreceding, 0)
            ),
        )
        .filter(~mine)
        .select(*keep, "before_s")
    )
    # After: the earliest reply among ``around``'s answers sent strictly after the probe's reply.
    after = (
        around.withColumn("k", F.when(mine, F.col("s")).otherwise(F.col("r")))
        .withColumn("o", mine.cast("int"))
        .withColumn(
            "after_r",
            F.min(F.when(mine, F.col("r"))).over(
                Window.partitionBy("around")
                .orderBy(F.col("k").desc(), F.col("o"))
                .rowsBetween(Window.unboundedPreceding, 0)
            ),
        )
        .filter(~mine)
        .select("around", "cid", "seq", "after_r")
    )
    return (
        before.join(after, ["around", "cid", "seq"])
        .filter((F.col("after_r") - F.col("before_s")) < window_ns)
        .withColumn("ts", F.col("s"))
    )


def _handovers(
    ctx: CheckContext, ans: DataFrame, grace_ns: int, states: list[tuple[int, str, str]]
) -> DataFrame:
    """Changes of the answering endpoint (by reply time) that no fault on the previous one explains."""
    order = Window.orderBy("r", "s")
    changes = (
        ans.withColumn("prev_endpoint", F.lag("endpoint").over(order))
        .withColumn("prev_s", F.lag("s").over(order))
        .withColumn("prev_r", F.lag("r").over(order))
        .filter(F.col("prev_endpoint").isNotNull() & (F.col("prev_endpoint") != F.col("endpoint")))
    )
    rows = []
    step_downs: dict[str, list[int]] = {}
    for ts, src, state in states:
        if state != "active":
            step_downs.setdefault(src, []).append(ts)
    for endpoint, instances in endpoint_instances(ctx).items():
        for lo, hi in takeout_spans(ctx, instances, grace_ns):
            rows.append((endpoint, lo, hi))
        # A server that recorded leaving active gave up its clients: the handover is explained
        # whatever made it step down (a thawed peer's stale "active" does, with no fault on it).
        rows.extend((endpoint, ts, ts) for i in instances for ts in step_downs.get(i, ()))
    if not rows:
        return changes
    spans = F.broadcast(small_frame(ctx, rows, {"_e": "string", "_lo": "long", "_hi": "long"}))
    cond = (
        (F.col("_e") == F.col("prev_endpoint"))
        & (F.col("_lo") <= F.col("r"))
        & (F.col("prev_s") <= F.col("_hi"))
    )
    return changes.join(spans, cond, "left_anti")


def _states(ctx: CheckContext) -> list[tuple[int, str, str]]:
    """The servers' own state changes, (ts, server, state), read once ([] where they write none)."""
    if "bstar_state" not in ctx.event_kinds():
        return []
    return [
        (r["ts"], r["src"], r["state"])
        for r in events_of(ctx, "bstar_state").select("ts", "src", "state").collect()
    ]


def _state_intervals(
    ctx: CheckContext, states: list[tuple[int, str, str]]
) -> dict[str, list[tuple[int, int]]]:
    """server -> the [from, to] spans it recorded itself active (to its next state, or its exit)."""
    if not states:
        return {}
    exits = process_events(ctx)
    ends: dict[str, list[int]] = {}
    for e in exits:
        ends.setdefault(e["instance"], []).append(e["ts"])
    end = history_end(ctx)
    by_src: dict[str, list[tuple[int, str]]] = {}
    for ts, src, state in states:
        by_src.setdefault(src, []).append((ts, state))
    out: dict[str, list[tuple[int, int]]] = {}
    for src, seq in by_src.items():
        seq.sort()
        cuts = sorted(ends.get(src, []))
        for i, (ts, state) in enumerate(seq):
            if state != "active":
                continue
            stop = seq[i + 1][0] if i + 1 < len(seq) else end
            stop = min([stop, *(c for c in cuts if c > ts)])
            out.setdefault(src, []).append((ts, stop))
    return out


def _state_overlaps(
    ctx: CheckContext, grace_ns: int, states: list[tuple[int, str, str]]
) -> list[dict[str, Any]]:
    """Spans where two servers recorded themselves active, outside their process faults (+ grace)."""
    active = _state_intervals(ctx, states)
    found = []
    servers = sorted(active)
    for i, a in enumerate(servers):
        for b in servers[i + 1 :]:
            excused = merge_spans(
                [
                    (f.start_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns + grace_ns)
                    for f in ctx.faults
                    if not f.on_link and f.target in (a, b)
                ]
            )
            for a_lo, a_hi in active[a]:
                for b_lo, b_hi in active[b]:
                    lo, hi = max(a_lo, b_lo), min(a_hi, b_hi)
                    if lo >= hi:
                        continue
                    for part_lo, part_hi in _minus((lo, hi), excused):
                        found.append(
                            {
                                "ts": part_lo,
                                "src": f"{a}+{b}",
                                "ev": "bstar_state",
                                "problem": "both in state active",
                                "servers": [a, b],
                                "overlap_ms": ms(part_hi - part_lo),
                            }
                        )
    return found


def _minus(span: tuple[int, int], cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``span`` outside the merged ``cuts``."""
    lo, hi = span
    parts = []
    for c_lo, c_hi in cuts:
        if c_hi < lo or c_lo > hi:
            continue
        if c_lo > lo:
            parts.append((lo, c_lo))
        lo = max(lo, c_hi)
        if lo >= hi:
            return parts
    if lo < hi:
        parts.append((lo, hi))
    return parts


@checker(
    "bstar_single_active",
    "never two servers answering as active at once: from which endpoint answered when (client history), "
    "handovers the fault plan explains, and the servers' own state events where they write them",
    reads=("bstar_state",),
)
def single_active(ctx: CheckContext) -> CheckResult:
    ans = ctx.shared("bstar_answers", answers)  # one shuffle for the three checks
    per_endpoint = {
        r["endpoint"]: r["n"] for r in ans.groupBy("endpoint").agg(F.count("*").alias("n")).collect()
    }
    timeout_ns = peer_timeout_ns(ctx)
    grace_ns = timeout_ns + int(timers(ctx).client_budget_s * NS)
    states = _states(ctx)  # read once: the handovers and the overlaps both judge them
    has_states = "bstar_state" in ctx.event_kinds()
    if not per_endpoint and not has_states:
        return result("no reply names the endpoint that answered it", unknown=NO_ENDPOINT)
    labelled = []
    if timeout_ns and len(per_endpoint) > 1:
        labelled.append((BOTH, _both_answering(ctx, ans, sorted(per_endpoint), timeout_ns)))
    if len(per_endpoint) > 1:
        unexplained = _handovers(ctx, ans, grace_ns, states)
        labelled.append((TAKEOVER, unexplained.select("cid", "seq", "rid", "endpoint", "prev_endpoint", "r")))
    found = problems(*labelled) if labelled else Found()
    n_both, n_unexplained = found.n(BOTH), found.n(TAKEOVER)
    both = [
        example(
            {"ts": r["s"], "src": r["cid"], "ev": "reply", **r},
            problem=f"{r['endpoint']} answered while {r['around']} answered before and after, "
            f"{ms(r['after_r'] - r['before_s'])} ms apart (peer timeout {ms(timeout_ns)} ms)",
        )
        for r in found.get(BOTH, (0, []))[1]
    ]
    takeovers = [
        example(
            {
                "ts": r["r"],
                "src": r["cid"],
                "ev": "reply",
                "cid": r["cid"],
                "seq": r["seq"],
                "rid": r["rid"],
            },
            endpoint=r["endpoint"],
            previous=r["prev_endpoint"],
            problem=f"{r['endpoint']} answered after {r['prev_endpoint']}, which no fault had taken out: "
            "both active",
        )
        for r in found.get(TAKEOVER, (0, []))[1]
    ]
    overlaps = _state_overlaps(ctx, timeout_ns, states) if has_states else []
    violations = n_both + n_unexplained + len(overlaps)
    figures = {
        "replies_by_endpoint": dict(sorted(per_endpoint.items())),
        "both_answering": n_both,
        "takeovers_without_cause": n_unexplained,
        "state_overlaps": len(overlaps),
        "peer_timeout_ms": ms(timeout_ns),
        "judged_from": "client replies" + (" and server state events" if has_states else ""),
    }
    summary = (
        f"{sum(per_endpoint.values())} replies from {len(per_endpoint)} endpoint(s); "
        f"{n_both} answered between another server's answers within the peer timeout, "
        f"{n_unexplained} takeovers no fault explains"
        + (
            f", {len(overlaps)} spans with two servers in state active"
            if has_states
            else "; no server state events"
        )
    )
    if not timeout_ns and len(per_endpoint) > 1:
        summary += " (no expiry_ms: the both-answering rule was not applied)"
    return result(summary, figures, violations=violations, examples=both + takeovers + overlaps)


# --- failover ----------------------------------------------------------------------------


def _process_outage(fault: FaultWindow) -> bool:
    """A process fault after which the target cannot serve (kill, restart, freeze ...)."""
    return not fault.on_link and fault.outage


def _outage_faults(ctx: CheckContext) -> list[FaultWindow]:
    return [f for f in ctx.faults if _process_outage(f)]


def _other_servers(ctx: CheckContext, endpoint: str) -> list[tuple[set[str], set[str]]]:
    """The servers other than the one that binds ``endpoint``, each as (its instances, the
    endpoints it binds)."""
    by_instances: dict[frozenset[str], set[str]] = {}
    for name, instances in endpoint_instances(ctx).items():
        by_instances.setdefault(frozenset(instances), set()).add(name)
    mine = endpoint_instances(ctx).get(endpoint, set())
    return [(set(i), names) for i, names in by_instances.items() if not i & mine]


def _out_of_reach(
    ctx: CheckContext, server: tuple[set[str], set[str]], lo: int, hi: int
) -> FaultWindow | None:
    """A fault that kept ``server`` (its instances, its endpoints) from serving the clients at
    some time in [lo, hi]: a process outage on it (kill, restart, freeze ...), or an outage of
    the clients' link to it (a partition), or a delay on that link of at least one client
    attempt (``outlasts_an_attempt``); None when it was in reach throughout."""
    instances, endpoints = server
    for f in ctx.faults:
        if f.start_ns > hi or (f.stop_ns is not None and f.stop_ns < lo):
            continue
        link = f.link
        if f.outage and link is None and f.target in instances:
            return f
        to_it = link is not None and link.clients and (link.endpoint is None or link.endpoint in endpoints)
        if to_it and (f.outage or outlasts_an_attempt(ctx, f)):
            return f
    return None


def _all_out_of_reach(
    ctx: CheckContext, servers: list[tuple[set[str], set[str]]], lo: int, hi: int
) -> FaultWindow | None:
    """The fault that had the first of ``servers`` out of reach in [lo, hi] when every one of
    them was (None: one was there to fail over to, or there is no other server)."""
    out = [_out_of_reach(ctx, server, lo, hi) for server in servers]
    return out[0] if out and all(out) else None


def _failovers(ctx: CheckContext, ans: DataFrame) -> list[dict[str, Any]]:
    """For each outage of the server that was answering: when service resumed (or None), and
    the other servers (``others``: whether one was there to fail over to is asked of the
    window service is timed in, which may start after the fault)."""
    instances = endpoint_instances(ctx)
    out = []
    for f in _outage_faults(ctx):
        last = ans.filter(F.col("r") < f.start_ns).orderBy(F.col("r").desc()).select("endpoint").first()
        if last is None or f.target not in instances.get(last["endpoint"], set()):
            continue  # the fault hit a server that was not answering: nothing to fail over
        resumed = (
            ans.filter(
                (F.col("r") > f.start_ns)
                # Another server, or the same one asked after the fault began: a fault of an
                # outage's class that left it serving (junk at its state endpoint, explore's
                # stall-hold-star seed 1: 5.6 s of it, 30799 replies from the primary) is none.
                & ((F.col("endpoint") != last["endpoint"]) | (F.col("s") > F.lit(f.start_ns)))
            )
            .agg(F.min("r"))
            .collect()[0][0]
        )
        others = _other_servers(ctx, last["endpoint"])
        out.append({"fault": f, "endpoint": last["endpoint"], "resumed": resumed, "others": others})
    return out


def _bound_s(ctx: CheckContext) -> float:
    return float(ctx.promises.get("failover_bound_s") or ctx.promises.get("recovery_bound_s") or 10.0)


def takeover_ns(ctx: CheckContext) -> int:
    """How long the answering server must stay out before the other can take over: its peer
    silent for the peer timeout, at a client's vote, which comes after one attempt and the
    client's settle (the clients' ``settle_ms``). A server back sooner was never failed over
    from, rightly: a client that had left it to vote at the other, refused, comes back one
    round later (explore, stall-hold-star's twin: the primary frozen 2 s, served again 6.0 s
    after the freeze began, 4.0 s after the thaw)."""
    kinds = (ctx.meta.get("manifest") or {}).get("clients") or []
    settle = max((float((k.get("options") or {}).get("settle_ms") or 0) for k in kinds), default=0.0)
    return max(peer_timeout_ns(ctx), client_attempt_ns(ctx) + int(settle * NS / 1000))


def first_asked(ctx: CheckContext, times: list[int], without: DataFrame | None = None) -> list[int | None]:
    """For each time of ``times``: when service was first asked for from then on - that time
    itself if a request was in flight at it (sent before, its last event at or after it) and
    resent or answered, else the first send of a request after it (None: no request came). One query for all.

    A Binary Star takeover is driven by the clients: the backup takes over only when a
    client's request (its vote) comes while the primary has been silent for the peer
    timeout. Under an idle load nobody asks for a while after a fault, and service can only
    resume a timeout and a settle after the next request (explore, stall-hold-star's correct
    twin: one client 2.5 s between requests as the primary was killed). The requests
    ``without`` (cid, seq) ask nothing."""
    if not times:
        return []
    # Each request's first send and last event: the table no_lost and steady_state share.
    per = per_request(ctx, last_seq=False).filter(F.col("seq").isNotNull())
    if without is not None:
        per = per.join(without, ["cid", "seq"], "left_anti")
    sent, last = F.col("ts"), F.col("last_ts")
    # A request in flight asks only if it was resent (a vote) or answered: one of a client
    # that never resends waits out its deadline and votes nowhere (explore, stall-hold-star's
    # twin: twelve such clients held requests as the primary was killed, their deadlines
    # past the load's end, and nobody asked again: "resumed never" was a false alarm).
    asking = (F.col("retries") > 0) | (F.col("replied") > 0)
    row = per.agg(
        *(
            F.max(((sent < at) & (last >= at) & asking).cast("int")).alias(f"in_{i}")
            for i, at in enumerate(times)
        ),
        *(F.min(F.when(sent >= at, sent)).alias(f"next_{i}") for i, at in enumerate(times)),
    ).collect()[0]
    return [at if row[f"in_{i}"] else row[f"next_{i}"] for i, at in enumerate(times)]


@checker(
    "bstar_failover_time",
    "after the answering server dies or stalls, another one (or it, back) answers within failover_bound_s "
    "of the first request asked for after the fault (a takeover needs a client's vote)",
    shares=("per_request",),
)
def failover_time(ctx: CheckContext) -> CheckResult:
    ans = ctx.shared("bstar_answers", answers)  # one shuffle for the three checks
    if ans.limit(1).count() == 0:
        return result("no reply names the endpoint that answered it", unknown=NO_ENDPOINT)
    found = _failovers(ctx, ans)
    bound_ns = int(_bound_s(ctx) * NS)
    if not found:
        return nothing_to_judge(
            ctx,
            "no process fault hit the server that was answering",
            "the plan's faults hit no server while it was the one answering (or no reply came before "
            "them): target the active server (the primary at first) with a kill, restart or freeze",
            which=_process_outage,
        )
    load_stop = run_time(ctx, "load_stopped_ns")
    needed_ns = takeover_ns(ctx)
    bad, undecided, times, unowed, unasked, returned, idle = [], [], [], [], [], 0, 0
    # A server back before the other could take over: service is timed from its return.
    starts = []
    for item in found:
        f = item["fault"]
        short = f.stop_ns is not None and f.stop_ns - f.start_ns < needed_ns
        starts.append(f.stop_ns if short else f.start_ns)
        returned += short
    asked_at = first_asked(ctx, starts)
    # A request a failover client sent once to a server of the pair that was not serving
    # (the passive one) asked for nothing the pair could serve (toolkit ``stranded``): asked
    # again without them, only where service would otherwise not be timed within the bound.
    late = [
        (item["resumed"] is None or item["resumed"] - max(start, asked) > bound_ns)
        for item, start, asked in zip(found, starts, asked_at, strict=True)
        if asked is not None
    ]
    if any(late) and (strand := stranded(ctx)) is not None:
        asked_at = first_asked(ctx, starts, without=strand)
    for item, start, asked in zip(found, starts, asked_at, strict=True):
        f = item["fault"]
        if asked is None and item["resumed"] is None:
            unasked.append(item)  # nobody asked for service after the fault: none was owed
            continue
        # Timed from the first request after the fault: a takeover waits for a client's vote.
        since = start if asked is None else max(start, asked)
        idle += since != start
        if item["resumed"] is not None and item["resumed"] - since <= bound_ns:
            times.append(item["resumed"] - since)
        elif item["resumed"] is None and load_stop < since + bound_ns:
            undecided.append(item)
        elif (others_out := _all_out_of_reach(ctx, item["others"], since, since + bound_ns)) is not None:
            # The other server was out too (killed, frozen, cut off from the clients) within
            # the bound: no server to fail over to, so service came back when one of them did,
            # and the clients, which try the two in turn (timeout + settle each), found it one
            # or two rounds later. That return is `recovery`'s to judge, against its own bound
            # (explore, binary-star seed 1: the primary frozen 3 s while the backup was killed,
            # served again 6.0 s after the freeze began, 2.9 s after the thaw).
            unowed.append(others_out)
        else:
            took = (
                "never"
                if item["resumed"] is None
                else f"after {ms(item['resumed'] - since) / 1000:.1f} s"
                + (
                    " of the first request after the fault"
                    if since != start
                    else " of the server's return"
                    if since != f.start_ns
                    else ""
                )
            )
            bad.append(
                {
                    "ts": f.start_ns,
                    "src": "nemesis",
                    "ev": "fault_start",
                    "fault": f.fault,
                    "target": f.target,
                    "problem": f"service resumed {took} (bound {_bound_s(ctx):g} s)",
                }
            )
    figures = {
        "failovers": len(found),
        "within_bound": len(times),
        "slowest_ms": ms(max(times)) if times else None,
        "bound_s": _bound_s(ctx),
        "undecided": len(undecided),
        "other_server_out": len(unowed),
        "timed_from_return": returned,
        "timed_from_first_request": idle,
        "not_asked": len(unasked),
        "takeover_after_ms": ms(needed_ns),
    }
    summary = (
        f"{len(found)} outages of the answering server: {len(times)} served again within "
        f"{_bound_s(ctx):g} s, {len(bad)} not, {len(undecided)} undecided"
        + (f"; slowest {ms(max(times)) / 1000:.2f} s" if times else "")
        + (
            f"; {len(unowed)} more not served within it while the other server was out too "
            "(no failover possible: recovery judges them)"
            if unowed
            else ""
        )
    )
    if unasked:
        summary += f"; {len(unasked)} more with no request after them (nothing asked, nothing owed)"
    if unasked and not (bad or times or undecided or unowed):
        return result(
            summary,
            figures,
            unknown="no client asked for anything after the answering server's outage: a takeover needs "
            "a client's request, so there was no failover to time; keep a client busy after the fault",
        )
    if unowed and not (bad or times or undecided):
        f = unowed[0]
        return result(
            summary,
            figures,
            unknown=f"the other server was out too ({f.fault} on {f.target}) whenever the answering one "
            "was taken out: there was no server to fail over to",
        )
    if undecided and not bad:
        return result(
            summary,
            figures,
            unknown="the load stopped before the failover bound had passed after a fault: "
            "schedule the fault earlier or lengthen the load",
        )
    return result(summary, figures, violations=len(bad), examples=bad)


@checker(
    "bstar_no_lost_failover",
    "no request lost across a failover: each one in flight or sent until service resumed gets a reply "
    "(at-least-once; resends and executions on both servers counted)",
    on_damage=EACH_REQUEST,
)
def no_lost_failover(ctx: CheckContext) -> CheckResult:
    ans = ctx.shared("bstar_answers", answers)  # one shuffle for the three checks
    if ans.limit(1).count() == 0:
        return result("no reply names the endpoint that answered it", unknown=NO_ENDPOINT)
    found = _failovers(ctx, ans)
    if not found:
        return nothing_to_judge(
            ctx,
            "no failover to judge",
            "no process fault hit the server that was answering (see bstar_failover_time)",
            which=_process_outage,
        )
    end = history_end(ctx)
    budget_ns = int(timers(ctx).client_budget_s * NS)
    windows = [
        (item["fault"].start_ns, item["resumed"] if item["resumed"] is not None else end) for item in found
    ]
    ev = F.col("ev")
    requests = (
        events_of(ctx, "send", "reply", "abandon", "lost", "retry")
        .groupBy("cid", "seq")
        .agg(
            F.min(F.when(ev == "send", F.col("ts"))).alias("first_send"),
            F.max("ts").alias("last_ts"),
            F.first("rid", ignorenulls=True).alias("rid"),
            F.count(F.when(ev == "reply", 1)).alias("replies"),
            F.count(F.when(ev.isin("abandon", "lost"), 1)).alias("given_up"),
            F.count(F.when(ev == "lost", 1)).alias("declared"),
            F.count(F.when(ev == "retry", 1)).alias("retries"),
        )
        .filter(F.col("first_send").isNotNull())
    )
    # A client that never resends declares a request `lost` at its deadline. Only a resend
    # carries a request across a failover (the server that took it is out, or passive once
    # back, and drops what it held), so such a loss is owed only by a pair that promises to
    # survive every outage, as no_lost rules (stall-hold-star's correct twin: clients that
    # never resend lost what they had sent the primary as it froze).
    survives_all = survives_every_outage(ctx.promises)
    unpromised = (F.col("declared") > 0) & (F.col("replies") == 0) & F.lit(not survives_all)
    cond = F.lit(False)
    for lo, hi in windows:
        # in flight as the fault started, or first sent before service resumed
        cond = cond | (
            (F.col("first_send") <= hi) & (F.col("last_ts") >= lo) & (F.col("first_send") >= lo - budget_ns)
        )
    across = requests.filter(cond).cache()
    lost = across.filter(
        (F.col("replies") == 0)
        & ((F.col("given_up") > 0) | (F.col("first_send") + budget_ns <= end))
        & ~unpromised
    )
    pending = across.filter(
        (F.col("replies") == 0) & (F.col("given_up") == 0) & (F.col("first_send") + budget_ns > end)
    )
    agg = across.agg(
        F.count("*").alias("n"),
        F.sum((F.col("retries") > 0).cast("int")).alias("resent"),
        F.sum(unpromised.cast("int")).alias("unpromised"),
    ).collect()[0]
    n_lost = lost.count()
    n_pending = pending.count()
    shown = [
        example(
            {"ts": r["first_send"], "src": r["cid"], "ev": "send", **r.asDict()},
            problem="abandoned across a failover" if r["given_up"] else "never answered across a failover",
        )
        for r in lost.orderBy("first_send").limit(MAX_EXAMPLES).collect()
    ]
    twice = None
    if "exec" in ctx.event_kinds():
        twice = count(
            events_of(ctx, "exec")
            .join(across.select("rid"), "rid", "left_semi")
            .groupBy("rid")
            .agg(F.countDistinct("src").alias("servers"))
            .filter(F.col("servers") > 1)
            .count()
        )
    across.unpersist()
    figures = {
        "failovers": len(found),
        "requests_across": count(agg["n"]),
        "answered_after_resend": count(agg["resent"]),
        "lost": n_lost,
        "lost_by_clients_that_never_resend": count(agg["unpromised"]),
        "indeterminate": n_pending,
        "executed_on_two_servers": twice,
    }
    summary = (
        f"{figures['requests_across']} requests across {len(found)} failover(s): {n_lost} lost, "
        f"{n_pending} still in flight at the end, {figures['answered_after_resend']} resent"
        + (f", {twice} executed on two servers" if twice is not None else "")
        + (
            f"; {figures['lost_by_clients_that_never_resend']} more lost by clients that never resend "
            "(no resend, no failover for them: not promised)"
            if figures["lost_by_clients_that_never_resend"]
            else ""
        )
    )
    if not figures["requests_across"]:
        return result(summary, figures, unknown="no request was in flight across a failover: raise the load")
    return result(summary, figures, violations=n_lost, examples=shown)
