"""Checkers of the pirate family and Majordomo (queues and brokers that track workers).

- ``stale_execution``: requests executed after their client had abandoned them, counted
  and shown; a violation only where the manifest promises ``stale_execution = "forbidden"``
  (the default, ``"allowed"``, reports without judging: an at-least-once queue cannot
  call back work it already handed out).
- ``no_dispatch_to_expired``: the broker never hands a request to a worker it had given
  up on (``worker_expired``), never registered, or registered only with an earlier
  incarnation of the broker (a restart forgets every worker).
- ``mmi_service``: the ``mmi.service`` answers the load clients got (``mmi_answer``) agree
  with the workers of that service the supervisor knew to be alive (``proc_start`` /
  ``proc_exit`` and the freeze / partition windows), within the broker's expiry time: it
  reads nothing the broker writes, so it judges a black-box broker too.

A broker's incarnations are told apart by the runner's ``proc_start``/``proc_exit``
events of the instance whose name is the broker's history source.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from contract.rundir import RunMeta
from reports.checkers.toolkit import (
    EACH_REQUEST,
    END_OF_TIME,
    SUBJECT_EVENTS,
    CheckContext,
    CheckResult,
    checker,
    count,
    events_of,
    examples,
    fault_spans,
    options_of,
    process_events,
    result,
    small_frame,
)


def _restarts(ctx: CheckContext) -> DataFrame:
    """(bsrc, tr): times at which a process that may be a broker started or ended."""
    procs = events_of(ctx, "proc_start", "proc_exit")
    return procs.select(F.col("instance").alias("bsrc"), F.col("ts").alias("tr"))


# --- stale_execution -------------------------------------------------------------------


@checker(
    "stale_execution",
    "requests a worker executed after their client had abandoned them (counted; a violation "
    'only where the manifest promises stale_execution = "forbidden")',
    needs=("exec",),
    on_damage=EACH_REQUEST,
)
def stale_execution(ctx: CheckContext) -> CheckResult:
    policy = str(ctx.promises.get("stale_execution", "allowed"))
    abandons = (
        events_of(ctx, "abandon")
        .groupBy("rid")
        .agg(F.min("ts").alias("abandoned_ns"), F.first("cid").alias("cid"), F.first("seq").alias("seq"))
    )
    execs = (
        events_of(ctx, "exec")
        .select("ts", "src", "ev", "rid", "worker")
        .join(abandons, "rid", "left")
        .withColumn("stale", F.col("ts") > F.coalesce("abandoned_ns", F.lit(None).cast("long")))
    )
    row = execs.agg(
        F.count("*").alias("execs"),
        F.sum(F.col("stale").cast("int")).alias("n"),
        F.countDistinct(F.when(F.col("stale"), F.col("rid"))).alias("requests"),
    ).collect()[0]
    n_execs, n, requests = count(row["execs"]), count(row["n"]), count(row["requests"])
    figures = {"policy": policy, "stale_executions": n, "requests": requests, "exec_events": n_execs}
    if n_execs == 0:
        return result("no exec events recorded", figures, unknown="")
    summary = f"{n} execution(s) of {requests} request(s) after their client abandoned them ({policy})"
    found = []
    if n:
        found = examples(
            execs.filter(F.col("stale")).select(
                "ts", "src", "ev", "cid", "seq", "rid", "worker", "abandoned_ns",
                F.lit("executed after its client abandoned it").alias("problem"),
            )
        )  # fmt: skip
    return result(summary, figures, violations=n if policy == "forbidden" else 0, examples=found)


# --- no_dispatch_to_expired ------------------------------------------------------------


@checker(
    "no_dispatch_to_expired",
    "the broker dispatches only to workers registered with it and not expired since "
    "(nor registered with an earlier incarnation of the broker only)",
    needs=("dispatch", "worker_ready"),
    on_damage=SUBJECT_EVENTS,
)
def no_dispatch_to_expired(ctx: CheckContext) -> CheckResult:
    base = ["ts", "src", "ev", "worker", "rid", "service"]
    marks = events_of(ctx, "worker_ready", "worker_expired", "dispatch").select(*base)
    per_worker = Window.partitionBy("src", "worker").orderBy("ts")
    per_worker = per_worker.rowsBetween(Window.unboundedPreceding, -1)
    state = F.when(F.col("ev") == "worker_ready", F.lit("ready"))
    state = state.when(F.col("ev") == "worker_expired", "expired")
    ready_ts = F.when(F.col("ev") == "worker_ready", F.col("ts"))
    dispatches = (
        marks.withColumn("state", F.last(state, ignorenulls=True).over(per_worker))
        .withColumn("ready_ns", F.last(ready_ts, ignorenulls=True).over(per_worker))
        .filter(F.col("ev") == "dispatch")
        .withColumn("dispatch_id", F.monotonically_increasing_id())
    )
    restarts = _restarts(ctx)
    judged = (
        dispatches.join(
            restarts,
            (restarts["bsrc"] == dispatches["src"])
            & restarts["tr"].between(dispatches["ready_ns"], dispatches["ts"]),
            "left",
        )
        .groupBy("dispatch_id", *base, "state")
        .agg(F.count("tr").alias("restarts"))
        .withColumn(
            "problem",
            F.when(F.col("state").isNull(), "never registered")
            .when(F.col("state") == "expired", "worker had expired")
            .when(F.col("restarts") > 0, "worker registered with an earlier broker incarnation"),
        )
        .drop("dispatch_id", "state", "restarts")
    )
    counts = {r["problem"]: r["n"] for r in judged.groupBy("problem").agg(F.count("*").alias("n")).collect()}
    total = sum(counts.values())
    if total == 0:
        return result("no dispatch events recorded", unknown="")
    kinds = {k: v for k, v in counts.items() if k is not None}
    n = sum(kinds.values())
    summary = f"{total} dispatches, {n} to workers the broker did not hold" + (f" {kinds}" if kinds else "")
    found = examples(judged.filter(F.col("problem").isNotNull())) if n else []
    figures = {"dispatches": total, "offending": n, "by_problem": kinds}
    return result(summary, figures, violations=n, examples=found)


# --- mmi_service -----------------------------------------------------------------------

Span = tuple[int, "int | None"]


def _minus(spans: list[Span], cuts: list[Span]) -> list[Span]:
    """``spans`` with the times of ``cuts`` taken out (an end of None runs to the end)."""
    inf = 1 << 62
    out: list[Span] = []
    for a0, a1 in spans:
        pieces = [(a0, inf if a1 is None else a1)]
        for c0, c1 in cuts:
            c1 = inf if c1 is None else c1
            pieces = [
                piece
                for p0, p1 in pieces
                for piece in ((p0, min(p1, c0)), (max(p0, c1), p1))
                if piece[0] < piece[1]
            ]
        out += [(p0, None if p1 == inf else p1) for p0, p1 in pieces]
    return out


def _faulted(ctx: CheckContext, instance: str) -> list[Span]:
    """When ``instance`` could not serve although its process may have run: an outage on it
    (a freeze) or on its own links (a partition), as their class says. Kills and
    restarts are left to proc_exit/proc_start: their window ends only when the restarted
    process is ready, and by then it may have registered and been counted (a 200 taken for
    a false answer in majordomo-kill-all-workers)."""
    spans = fault_spans(ctx, instance, broker=False, broker_links=False, outage_only=True, lasting_only=True)
    return [(lo, None if hi == END_OF_TIME else hi) for lo, hi in spans]


def alive_spans(ctx: CheckContext, roles: list[str], broker_roles: set[str]) -> tuple[list, list]:
    """What the supervisor knows of the workers of ``roles``: (alive, serving) rows of
    (instance, t0, t1). Alive: its process ran (proc_start to proc_exit), not frozen, not cut
    off. Serving: alive, and no broker (re)start or fault on a broker since (a new broker
    knows no worker yet; a frozen one may expire them all when it wakes)."""
    procs = process_events(ctx)
    # A broker (re)started or frozen knows no worker, or a stale set, until they talk to it again.
    broker_starts = [r["ts"] for r in procs if r["ev"] == "proc_start" and r["role"] in broker_roles]
    brokers = {r["instance"] for r in procs if r["role"] in broker_roles}
    broker_faults = [(f.start_ns, f.stop_ns) for f in ctx.faults if f.target in brokers]
    ran: dict[str, list[Span]] = {}
    for r in procs:
        if r["role"] not in roles:
            continue
        spans = ran.setdefault(r["instance"], [])
        if r["ev"] == "proc_start":
            spans.append((r["ts"], None))
        elif spans and spans[-1][1] is None:
            spans[-1] = (spans[-1][0], r["ts"])
    alive, serving = [], []
    for instance, spans in ran.items():
        up = _minus(spans, _faulted(ctx, instance))
        alive += [(instance, a0, a1) for a0, a1 in up]
        cuts = [(b, b + 1) for b in broker_starts] + broker_faults
        serving += [(instance, a0, a1) for a0, a1 in _minus(up, cuts)]
    return alive, serving


def mmi_tolerance_s(meta: RunMeta) -> float | None:
    """How late an MMI answer may follow a worker's death or arrival: ``mmi_tolerance_s`` if
    promised, else the broker's expiry (heartbeat_ms x liveness) plus one heartbeat (its
    timer's turn, or a worker's reconnect after a broker restart); None if neither is known
    (a value that is not a number is not known)."""
    tolerance = meta["manifest"]["promises"].get("mmi_tolerance_s")
    if _number(tolerance):
        return float(tolerance)
    options = options_of(meta)
    heartbeat, liveness = options.get("heartbeat_ms"), options.get("liveness")
    if _number(heartbeat) and _number(liveness):
        return float(heartbeat) * (int(liveness) + 1) / 1000
    return None


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


NO_MMI_ANSWERS = (
    "no mmi.service answer was recorded: give the MDP client option mmi_every (ask every N "
    "requests), e.g. [client] options = { mmi_every = 5 }"
)
NO_TOLERANCE = (
    "the broker's expiry is unknown: give [options] heartbeat_ms and liveness, or "
    "[promises] mmi_tolerance_s (how long the broker may take to notice a worker died or came)"
)


def _undeclared(services: list[str]) -> str:
    return (
        f"no role of the manifest says it serves {', '.join(services)}: run the workers as "
        'probe = "majordomo" (its service option), or set service = "..." on the worker role'
    )


def _services_of(meta: RunMeta) -> dict[str, list[str]]:
    """Each Majordomo service the manifest's roles serve, and those roles."""
    found: dict[str, list[str]] = {}
    for name, role in meta["manifest"].get("roles", {}).items():
        if role.get("service"):
            found.setdefault(role["service"], []).append(name)
    return found


def _mmi_unknown_by_plan(meta: RunMeta) -> str:
    """The reason mmi_service is unknown on any run of this plan, or '': by the check's own
    rules, no client asks (no ``mmi_every``), no role serves what they ask, no tolerance."""
    asking = [k for k in meta["manifest"].get("clients") or [] if (k.get("options") or {}).get("mmi_every")]
    if not asking:
        return NO_MMI_ANSWERS
    served = _services_of(meta)
    # A kind that names no service asks about its adapter's default, which only a run shows.
    named = sorted({str(k["options"]["service"]) for k in asking if k["options"].get("service")})
    if not served or any(svc not in served for svc in named):
        return _undeclared([svc for svc in named if svc not in served] or ["the clients' service"])
    return NO_TOLERANCE if mmi_tolerance_s(meta) is None else ""


@checker(
    "mmi_service",
    "every mmi.service answer a load client got (mmi_answer) agrees with the workers of that "
    "service the supervisor knew to be alive (started, not killed, frozen or cut off), give or "
    "take the broker's expiry: 200 only if one was alive, 404 only if none was alive throughout",
    foresee=_mmi_unknown_by_plan,
    on_damage=EACH_REQUEST,
)
def mmi_service(ctx: CheckContext) -> CheckResult:
    answers = events_of(ctx, "mmi_answer")
    row = answers.agg(F.count("*").alias("n"), F.collect_set("service").alias("services")).collect()[0]
    if not row["n"]:
        return result("no MMI answers recorded", unknown=NO_MMI_ANSWERS)
    manifest = ctx.meta["manifest"]
    served = _services_of(ctx.meta)
    roles_of = {svc: served.get(svc, []) for svc in row["services"]}
    undeclared = sorted(svc for svc, roles in roles_of.items() if not roles)
    if undeclared:
        return result("workers of the service unknown", unknown=_undeclared(undeclared))
    tolerance = mmi_tolerance_s(ctx.meta)
    if tolerance is None:
        return result("no tolerance for the MMI answers", unknown=NO_TOLERANCE)
    # The brokers: the roles that bind an endpoint the load clients connect to.
    client_endpoints = {e for kind in manifest.get("clients", []) for e in kind.get("endpoints", [])}
    broker_roles = {r for e, r in manifest.get("endpoints", {}).items() if e in client_endpoints}
    spans: list[tuple[str, str, str, int, int | None]] = []
    for svc, roles in roles_of.items():
        alive, serving = alive_spans(ctx, roles, broker_roles)
        spans += [("alive", svc, *s) for s in alive] + [("serving", svc, *s) for s in serving]
    tol_ns = int(tolerance * 1e9)
    # The broker answered between the query (ts - latency) and its arrival (ts); it may
    # lag the workers' real state by up to the tolerance before that.
    asked = F.col("ts") - F.coalesce(F.col("latency_us"), F.lit(0)) * 1000
    judged = answers.select(
        "ts", "src", "ev", "cid", "service", "code", "latency_us", "detail",
        (asked - tol_ns).alias("w0"),
        F.monotonically_increasing_id().alias("answer_id"),
    )  # fmt: skip
    table = small_frame(
        ctx,
        spans or [("alive", "", "", 0, 0)],
        {"kind": "string", "s_service": "string", "instance": "string", "t0": "long", "t1": "long"},
    )
    overlaps = (table["t0"] <= judged["ts"]) & (table["t1"].isNull() | (table["t1"] >= judged["w0"]))
    covers = (table["t0"] <= judged["w0"]) & (table["t1"].isNull() | (table["t1"] >= judged["ts"]))
    on = (table["s_service"] == judged["service"]) & (
        ((table["kind"] == "alive") & overlaps) | ((table["kind"] == "serving") & covers)
    )
    counted = (
        judged.join(F.broadcast(table), on, "left")
        .groupBy(*(c for c in judged.columns))
        .agg(
            F.countDistinct(F.when(table["kind"] == "alive", table["instance"])).alias("alive_workers"),
            F.first(F.when(table["kind"] == "serving", table["instance"]), ignorenulls=True).alias(
                "up_worker"
            ),
        )
    )
    problem = (
        F.when(
            (F.col("code") == 200) & (F.col("alive_workers") == 0),
            F.lit(f"200 while no worker of the service was alive (in the {tolerance:g} s before)"),
        )
        .when(
            (F.col("code") == 404) & F.col("up_worker").isNotNull(),
            F.concat(
                F.lit("404 while "),
                F.col("up_worker"),
                F.lit(f" was alive throughout the {tolerance:g} s before"),
            ),
        )
        .when(~F.col("code").isin(200, 404), F.lit("mmi.service must answer 200 or 404"))
    )
    answers = counted.withColumn("problem", problem).drop("w0", "answer_id")
    rows = (
        answers.groupBy("code", F.col("problem").isNotNull().alias("bad"))
        .agg(F.count("*").alias("n"))
        .collect()
    )
    total = sum(r["n"] for r in rows)
    codes: dict[str, int] = {}
    for r in rows:
        codes[str(r["code"])] = codes.get(str(r["code"]), 0) + r["n"]
    n = sum(r["n"] for r in rows if r["bad"])
    summary = f"{total} MMI answers {codes}, {n} disagree with the workers alive (tolerance {tolerance:g} s)"
    found: list[dict[str, Any]] = examples(answers.filter(F.col("problem").isNotNull())) if n else []
    figures = {"answers": total, "codes": codes, "wrong": n, "tolerance_s": tolerance}
    return result(summary, figures, violations=n, examples=found)
