"""Checkers of the Freelance family (brokerless: clients that know several servers), black
box: decided from the clients' history (which endpoint each request went to and which
answered), the fault plan and the supervisor's ``proc_start``/``proc_exit``, never from
anything a server writes.

A server is *out* while its process is down (from its ``proc_exit`` to its next
``proc_start``), while an outage fault acts on it (kill, freeze, restart: the fault's
harm; a kill or restart until its new process starts, not until the nemesis has seen
that one ready), and while an outage fault acts on the clients' link to it
(``link:clients:<endpoint>``); *up* otherwise. Slowdowns (latency, starve...) and junk sent
to it (the malformed fault, which stops none of its good traffic: its card's ``stops``)
leave it up; but for ``freelance_failover_served`` a delay on that link of a client's attempt
or more (``outlasts_an_attempt``) puts it out: every attempt at it times out first. A fault
that cuts the link's connections one by one (reset, limit_data: ``stops = "connections"``)
may lose what is in flight, so a request then is excused as one no server could serve; but
the clients hear the server between the cuts, so sending to it is no send to a dead server:
for ``freelance_dead_server_avoided`` only the faults that stop all of a server's traffic
put it out.

- ``freelance_failover_served``: a request first sent while at least one server was up
  throughout [send - settle, send + bound] is answered within the bound
  (``serve_bound_s`` in the manifest's promises; default the client budget, timeout x
  attempts). settle is the clients' ping timeout: a server back from an outage counts
  only once its clients can have heard from it again. An abandoned request, or one
  answered past the bound, is a violation; requests no server could have served are
  excused and counted.
- ``freelance_dead_server_avoided``: no request is sent to a server later than the ping
  timeout after it went out (and before it came back, less STOP_LAG_NS: a fault_stop is
  written after the nemesis acted), unless that server answered it (it was up: a link
  fault may let some connections or bytes through). The ping timeout is the client
  kind's ``server_ttl_ms`` option (the freelance adapter's default where it gives none),
  or ``dead_server_bound_ms`` in the promises. It reads the ``endpoint`` of ``send``
  events: sends that name none (an external program's) cannot be judged, and with no
  send naming one the check is unknown.

That a reply is never taken for a different request is ``correct_reply`` (reports/checkers/
core.py): the servers echo the request, so a client that takes a stale reply records a
reply whose body is another request's (ok = false).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from contract.links import CLIENTS
from reports.checkers.toolkit import (
    EACH_REQUEST,
    END_OF_TIME,
    MS,
    NS,
    WARMUP_NS,
    CheckContext,
    CheckResult,
    FaultWindow,
    checker,
    client_budget_ns,
    count,
    events_of,
    examples,
    merge_spans,
    nothing_to_judge,
    outlasts_an_attempt,
    process_events,
    result,
    run_time,
    small_frame,
)

#: The freelance adapter's ping timeout, for a client kind that gives no server_ttl_ms.
DEFAULT_SERVER_TTL_MS = 1500.0
#: Outages this close are one (ns). It was 1 s, for a kill's window that ended as it began
#: and the exit seen a moment later; a kill now lasts until the new process starts, and
#: joining two faults a moment apart hid the server up between them (explore, freelance
#: seed 1: a freeze of server1 thawed at 6.587 s, a kill at 6.595 s, and the sends clients
#: made to it between were called late, 3.1 s into one outage).
JOIN_NS = 0
#: How long after an outage really ended its fault_stop may be written (the nemesis writes it
#: once it acted; a send this close to the end is not judged).
STOP_LAG_NS = NS // 10


def puts_out(fault: FaultWindow) -> bool:
    """Whether the fault may keep its target from serving a request: an outage (a slowdown
    leaves it up) that stops some of its good traffic (junk sent to it stops none)."""
    return fault.loses_service


def cuts_off(fault: FaultWindow) -> bool:
    """Whether the fault leaves its target unheard: it stops all of its traffic (a kill, a
    freeze, a blackholed link), not its connections one by one (reset, limit_data: the
    clients' pings get through on the new ones, and they rightly send to it: explore,
    freelance seed 1, a send through limit_data on link:clients:server1 that the cut lost
    and server3 answered was called a send to a dead server)."""
    return fault.stops_all


def _servers(ctx: CheckContext) -> dict[str, str]:
    """endpoint name -> the instance that serves it, for every endpoint the clients use."""
    manifest = ctx.meta.get("manifest") or {}
    binds = manifest.get("endpoints") or {}
    processes = ctx.meta.get("processes") or {}
    used: list[str] = []
    for kind in manifest.get("clients") or []:
        used += [e for e in kind.get("endpoints") or [] if e not in used]
    out = {}
    for endpoint in used:
        role = binds.get(endpoint)
        instances = [i for i, r in processes.items() if r == role]
        if len(instances) == 1:
            out[endpoint] = instances[0]
    return out


def ping_timeout_ns(ctx: CheckContext) -> int | None:
    """How long a client may take to stop sending to a dead server (None: no kind says)."""
    promised = ctx.promises.get("dead_server_bound_ms")
    if promised is not None:
        return int(float(promised) * MS)
    found = []
    for kind in (ctx.meta.get("manifest") or {}).get("clients") or []:
        options = kind.get("options") or {}
        if "server_ttl_ms" in options:
            found.append(float(options["server_ttl_ms"]))
        elif kind.get("adapter") == "freelance":
            found.append(DEFAULT_SERVER_TTL_MS)
    return int(max(found) * MS) if found else None


def out_spans(
    ctx: CheckContext, which: Callable[[FaultWindow], bool] = puts_out
) -> dict[str, list[tuple[int, int]]]:
    """endpoint -> the merged [lo, hi] (ns) spans in which its server was out (module doc),
    by the faults ``which`` picks and the process exits."""
    servers = _servers(ctx)
    endpoint_of = {instance: endpoint for endpoint, instance in servers.items()}
    spans: dict[str, list[tuple[int, int]]] = {e: [] for e in servers}
    # The teardown's exits (after the load) end no request that was not already over.
    stopped = run_time(ctx, "load_stopped_ns")
    procs = [r for r in process_events(ctx) if r["instance"] in endpoint_of and r["ts"] <= stopped]
    for f in ctx.faults:
        if not which(f):
            continue
        stop = END_OF_TIME if f.stop_ns is None else f.stop_ns
        if not f.on_link and not f.lasting:
            # A kill or restart ends when the nemesis has seen the new process ready, which
            # it polls for: the server may answer before (explore, freelance seed 1: a client
            # pinged server1 back 0.24 s after its restart and sent to it, 0.1 s before the
            # kill's fault_stop, and was called late). It puts the server out until its new
            # process starts (for good when none does), over its exit a moment after it.
            stop = min(
                (r["ts"] for r in procs if r["instance"] == f.target and r["ev"] == "proc_start"
                 and r["ts"] > f.start_ns),
                default=END_OF_TIME,
            )  # fmt: skip
        link = f.link
        if link is not None:
            if not link.clients:
                continue
            for e in [link.endpoint] if link.endpoint else list(servers):
                if e in spans:
                    spans[e].append((f.start_ns, stop))
        elif f.target in endpoint_of:
            spans[endpoint_of[f.target]].append((f.start_ns, stop))
    down: dict[str, int] = {}
    for r in procs:
        endpoint = endpoint_of[r["instance"]]
        if r["ev"] == "proc_exit":
            down.setdefault(endpoint, r["ts"])
        elif endpoint in down:
            spans[endpoint].append((down.pop(endpoint), r["ts"]))
    for endpoint, since in down.items():
        spans[endpoint].append((since, END_OF_TIME))
    return {e: _joined(s) for e, s in spans.items()}


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans merged where they overlap or touch (and across gaps up to JOIN_NS)."""
    out: list[tuple[int, int]] = []
    for lo, hi in merge_spans(spans):
        if out and lo - out[-1][1] <= JOIN_NS:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _span_rows(spans: dict[str, list[tuple[int, int]]]) -> list[tuple[str, int, int]]:
    return [(e, lo, hi) for e, found in spans.items() for lo, hi in found]


# --- freelance_failover_served ---------------------------------------------------------


@checker(
    "freelance_failover_served",
    "while at least one server is alive and reachable (no kill, freeze or cut link on it, and no "
    "link delay of a client attempt or more, by the fault plan and the supervisor), every "
    "request is answered within serve_bound_s "
    "(default: the client budget); requests no server could serve are excused and counted",
    on_damage=EACH_REQUEST,
)
def freelance_failover_served(ctx: CheckContext) -> CheckResult:
    servers = _servers(ctx)
    if not servers:
        return result(
            "no server endpoint known",
            unknown="the run's manifest names no endpoint its clients use that one instance serves",
        )
    bound = int(float(ctx.promises.get("serve_bound_s") or 0) * NS) or client_budget_ns(ctx)
    settle = ping_timeout_ns(ctx) or 0
    budget = client_budget_ns(ctx)
    ev = F.col("ev")
    requests = (
        events_of(ctx, "send", "reply", "abandon")
        .groupBy("cid", "seq")
        .agg(
            F.min(F.when(ev == "send", F.col("ts"))).alias("first_send"),
            F.min(F.when(ev == "abandon", F.col("ts"))).alias("abandon_ts"),
            F.min(F.when(ev == "reply", F.col("ts"))).alias("reply_ts"),
            F.min("src").alias("src"),
            F.min("rid").alias("rid"),
            F.min(F.when(ev == "abandon", F.col("reason"))).alias("reason"),
        )
        # A request abandoned unsent (no server alive) began a client budget before it.
        .withColumn("t0", F.coalesce("first_send", F.col("abandon_ts") - F.lit(budget)))
        .filter(F.col("t0").isNotNull())
        .filter(F.col("t0") >= run_time(ctx, "load_started_ns") + WARMUP_NS)
    )
    rows = _span_rows(out_spans(ctx, lambda f: puts_out(f) or outlasts_an_attempt(ctx, f)))
    if rows:
        frame = F.broadcast(small_frame(ctx, rows, {"_e": "string", "_lo": "long", "_hi": "long"}))
        meets = (F.col("_lo") <= F.col("t0") + F.lit(bound)) & (F.col("t0") - F.lit(settle) <= F.col("_hi"))
        out = (
            requests.join(frame, meets, "left").groupBy("cid", "seq").agg(F.countDistinct("_e").alias("out"))
        )
        requests = requests.join(out, ["cid", "seq"])
    else:
        requests = requests.withColumn("out", F.lit(0))
    checked = (
        requests.withColumn("due", F.col("out") < F.lit(len(servers)))
        # Neither answered nor abandoned (a client stopped with it in flight): no_lost judges it.
        .withColumn("open", F.col("reply_ts").isNull() & F.col("abandon_ts").isNull())
        .withColumn(
            "problem",
            F.when(F.col("reply_ts").isNull(), F.lit("abandoned")).when(
                F.col("reply_ts") - F.col("t0") > F.lit(bound), F.lit("answered past the bound")
            ),
        )
    )
    row = checked.agg(
        F.count("*").alias("requests"),
        F.sum((F.col("due") & ~F.col("open")).cast("int")).alias("due"),
        F.sum((~F.col("due")).cast("int")).alias("excused"),
        F.sum((F.col("due") & ~F.col("open") & F.col("problem").isNotNull()).cast("int")).alias("bad"),
    ).collect()[0]
    figures: dict[str, Any] = {
        "requests": count(row["requests"]),
        "judged": count(row["due"]),
        "excused_no_server": count(row["excused"]),
        "violations": count(row["bad"]),
        "servers": len(servers),
        "bound_s": bound / NS,
        "settle_s": settle / NS,
    }
    summary = (
        f"{figures['judged']} requests sent while a server was up: {figures['violations']} not answered "
        f"within {bound / NS:g} s; {figures['excused_no_server']} excused (no server up)"
    )
    if figures["judged"] == 0:
        return nothing_to_judge(
            ctx,
            summary,
            "no request was sent while at least one server was up (after the warm-up): "
            "a longer load, or faults that leave a server up",
            which=puts_out,
        )
    found = []
    if figures["violations"]:
        bad = checked.filter(F.col("due") & ~F.col("open") & F.col("problem").isNotNull())
        found = examples(
            bad.select(
                F.col("t0").alias("ts"),
                "src",
                F.lit("send").alias("ev"),
                "cid",
                "seq",
                "rid",
                "reply_ts",
                "abandon_ts",
                "reason",
                "problem",
            )
        )
    return result(summary, figures, violations=figures["violations"], examples=found)


# --- freelance_dead_server_avoided -----------------------------------------------------


@checker(
    "freelance_dead_server_avoided",
    "no request goes to a server later than the clients' ping timeout (server_ttl_ms) after "
    "it died, froze or was cut off from them, until it is back (from the sends' endpoint)",
    on_damage=EACH_REQUEST,
)
def freelance_dead_server_avoided(ctx: CheckContext) -> CheckResult:
    detect = ping_timeout_ns(ctx)
    if detect is None:
        return result(
            "no ping timeout known",
            unknown="no client kind gives server_ttl_ms in its options: give it, or "
            "dead_server_bound_ms in [promises]",
        )
    sends = events_of(ctx, "send").select("ts", "src", "ev", "cid", "seq", "rid", "endpoint", "kind")
    row = sends.agg(F.count("*").alias("sends"), F.count("endpoint").alias("named")).collect()[0]
    spans = out_spans(ctx, cuts_off)
    # An outage's end is its fault_stop, which the nemesis writes after it acted (a thaw's
    # SIGCONT): a client that heard the thawed server and sent to it within that lag was
    # called late (explore, freelance seed 1: a send 2 ms before the freeze's fault_stop).
    late = [
        (e, lo + detect, hi - STOP_LAG_NS)
        for e, found in spans.items()
        for lo, hi in found
        if hi - STOP_LAG_NS > lo + detect
    ]
    figures: dict[str, Any] = {
        "sends": count(row["sends"]),
        "sends_naming_endpoint": count(row["named"]),
        "ping_timeout_s": detect / NS,
        "outages": sum(len(v) for v in spans.values()),
        "outages_longer_than_timeout": len(late),
    }
    summary = (
        f"{figures['outages']} server outages ({len(late)} longer than the {detect / NS:g} s ping "
        f"timeout), {figures['sends_naming_endpoint']} of {figures['sends']} sends name their server"
    )
    if figures["sends_naming_endpoint"] == 0:
        if figures["sends"] == 0:
            return result(summary, figures, unknown="no request was sent")
        return result(
            summary,
            figures,
            unknown="no send event says which server it went to: the clients (an external program's "
            "sends, say) do not record their endpoint, so where requests went cannot be told",
        )
    if not late:
        return nothing_to_judge(
            ctx,
            summary,
            f"no server was out longer than the {detect / NS:g} s ping timeout: longer faults",
            on=set(_servers(ctx).values()) | {CLIENTS},
            which=cuts_off,
            figures=figures,
        )
    frame = F.broadcast(small_frame(ctx, late, {"_e": "string", "_lo": "long", "_hi": "long"}))
    in_outage = sends.join(
        frame, (F.col("endpoint") == F.col("_e")) & F.col("ts").between(F.col("_lo"), F.col("_hi"))
    )
    # A send that server answered (the request's last send, its reply from that endpoint)
    # found it up: a toxic may act on some connections only (toxicity below 1), and a
    # client whose connection it spared rightly sent to it (the same held for limit_data
    # before it stopped putting a server out: explore, freelance seed 1, 367 sends through
    # limit_data on link:clients:server1 answered by server1 at once).
    last_send = events_of(ctx, "send").groupBy("cid", "seq").agg(F.max("ts").alias("_last"))
    replied = events_of(ctx, "reply").groupBy("cid", "seq").agg(F.first("endpoint").alias("_by"))
    answered = (F.col("ts") == F.col("_last")) & (F.col("_by") == F.col("endpoint"))
    marked = (
        in_outage.join(last_send, ["cid", "seq"], "left")
        .join(replied, ["cid", "seq"], "left")
        .withColumn("_answered", F.coalesce(answered, F.lit(False)))
        .cache()
    )
    bad = marked.filter(~F.col("_answered"))
    violations = bad.count()
    figures["sends_to_out_servers"] = violations
    figures["answered_by_that_server"] = marked.filter(F.col("_answered")).count()
    summary += f"; {violations} sent to a server out past the timeout"
    if figures["answered_by_that_server"]:
        summary += f" ({figures['answered_by_that_server']} more answered by it: it was up)"
    found = (
        examples(
            bad.select(
                "ts",
                "src",
                "ev",
                "cid",
                "seq",
                "rid",
                "endpoint",
                F.concat(
                    F.lit("sent to "), F.col("endpoint"), F.lit(" past the ping timeout of its outage")
                ).alias("problem"),
            )
        )
        if violations
        else []
    )
    marked.unpersist()
    return result(summary, figures, violations=violations, examples=found)
