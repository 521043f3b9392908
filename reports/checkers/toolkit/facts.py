"""Run facts a check reads: the implementation options, when things happened, and which
instances are brokers and which workers (a role that binds an endpoint of the manifest
serves it, a broker or a queue; a role that only connects is a worker)."""

from __future__ import annotations

from typing import Any, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from contract.payload import RID_PATTERN
from contract.promises import STOPS_NOTHING
from contract.rundir import DEFAULT_CLIENT_BUDGET_S, RunMeta
from reports.checkers import NS, CheckContext, FaultWindow, control_rows, events_of

MS = 1_000_000
#: Later than any event: the end of a fault that never healed.
END_OF_TIME = 1 << 62
Span = tuple[int, int]  # [start, end] in ns

# --- the run ---------------------------------------------------------------------------


def options(ctx: CheckContext) -> dict[str, Any]:
    """The implementation options of the run (the manifest's, with the scenario's overrides)."""
    return options_of(ctx.meta)


def options_of(meta: RunMeta) -> dict[str, Any]:
    """``options`` of a run.json (or of the plan ``zchaos check`` makes of one)."""
    merged = dict(meta.get("manifest", {}).get("options") or {})
    merged.update(meta.get("scenario", {}).get("options") or {})
    return merged


def run_time(
    ctx: CheckContext, key: Literal["started_ns", "load_started_ns", "load_stopped_ns", "ended_ns"]
) -> int:
    """A time of run.json (``load_started_ns``...), else the first/last event's time."""
    value = ctx.meta.get(key)
    if value is not None:
        return int(value)
    if ctx.profile is not None:
        return ctx.profile.first_ts if key in ("started_ns", "load_started_ns") else ctx.profile.last_ts
    fn = F.min if key in ("started_ns", "load_started_ns") else F.max
    found = ctx.events.agg(fn("ts")).collect()[0][0]
    return int(found or 0)


def history_end(ctx: CheckContext) -> int:
    """When recording ended: the last event of the history (ns)."""
    if ctx.profile is not None:
        return ctx.profile.last_ts
    return int(ctx.events.agg(F.max("ts")).collect()[0][0] or 0)


def kind_count(ctx: CheckContext, kind: str) -> int:
    """How many events of ``kind`` the history holds: from the profile counted on reading
    (no query), else counted by Spark."""
    if ctx.profile is not None:
        return ctx.profile.kinds.get(kind, 0)
    return events_of(ctx, kind).count()


#: What ``process_events`` gives of each event (the columns of reports/run_facts.py's control events).
PROCESS_COLUMNS = ("ts", "src", "ev", "instance", "role", "pid", "code", "signal", "expected", "detail")


def process_events(ctx: CheckContext, *kinds: str) -> list[dict[str, Any]]:
    """The runner's process events of ``kinds`` (default ``proc_start`` and ``proc_exit``), in
    time order, as dicts of PROCESS_COLUMNS: from the control events the report read once
    (``ctx.control``, no query), else read."""
    found = control_rows(ctx.events, ctx.control, kinds or ("proc_start", "proc_exit"), PROCESS_COLUMNS)
    return [{c: r[c] for c in PROCESS_COLUMNS} for r in found]


def of_the_load(ctx: CheckContext, rid: Column) -> Column:
    """Whether a request id (a column) is of a request the load's clients could have sent. In a
    run with junk (a fault that is an outage by its harm but stops none of the good traffic:
    the ``malformed`` fault's strangers, whose 'x:0|...' a correct system serves like any
    request), only one whose owner (``cid`` of ``cid:seq``, contract/payload.py) is a client
    that sent something, not one that names no request id; in any other run, every one."""
    if not any(f.outage and f.stops == STOPS_NOTHING for f in ctx.faults):
        return F.lit(True)
    cids = [r["cid"] for r in events_of(ctx, "send").select("cid").distinct().collect() if r["cid"]]
    owner = F.regexp_extract(rid, RID_PATTERN, 1)
    return F.coalesce(
        F.regexp_extract(rid, RID_PATTERN, 2).rlike("^[0-9]+$") & owner.isin(cids), F.lit(False)
    )


def client_budget_ns(ctx: CheckContext) -> int:
    """How long a client works on one request before it gives up (timeout x attempts)."""
    return int(float(ctx.meta.get("client_budget_s") or DEFAULT_CLIENT_BUDGET_S) * NS)


def client_attempt_ns(ctx: CheckContext) -> int:
    """How long one attempt of a client waits for its reply before it resends or gives up:
    run.json's ``client_attempt_s``; for a run recorded before it, the longest ``timeout_ms``
    (or a no-resend ``reply_deadline_s``) its client kinds give, else the whole budget."""
    recorded = ctx.meta.get("client_attempt_s")
    if recorded:
        return int(float(recorded) * NS)
    given = []
    for kind in (ctx.meta.get("manifest") or {}).get("clients") or []:
        options = kind.get("options") or {}
        deadline = options.get("reply_deadline_s")
        if isinstance(deadline, int | float) and deadline > 0:
            given.append(float(deadline))
        elif isinstance(options.get("timeout_ms"), int | float):
            given.append(float(options["timeout_ms"]) / 1000)
        else:
            return client_budget_ns(ctx)  # a kind whose attempt is not known: the budget
    return int(max(given) * NS) if given else client_budget_ns(ctx)


#: The plan parameters that delay every message a link carries (latency's, netem's), in ms.
DELAYS_MS = ("latency_ms", "delay_ms")


def outlasts_an_attempt(ctx: CheckContext, fault: FaultWindow) -> bool:
    """Whether ``fault`` delays the messages of most connections by a client's attempt or
    more: every attempt at its target then times out before the reply can come, and a client
    that fails over finds no server there. Explore, two correct systems called broken: the
    built-in Binary Star pair (the primary frozen 6.9 s while the clients' link to the backup
    added 1.6 s to every message, 1 s attempts: "not served within 5 s"), and ping-guard's
    twin (Freelance: server1's and server3's links cut, server2's adding 1.18 s, 1 s attempts:
    clients that started then gave up, "no server alive")."""
    params = plan_params(ctx, fault)
    delay_ms = max((float(params.get(k) or 0) for k in DELAYS_MS), default=0.0)
    return share_of(ctx, fault) >= 0.5 and delay_ms * MS >= client_attempt_ns(ctx)


def plan_params(ctx: CheckContext, fault: FaultWindow) -> dict[str, Any]:
    """The parameters run.json's plan gives ``fault`` (empty where it has none)."""
    plan = ctx.meta.get("plan") or []
    return next((p.get("params") or {} for p in plan if p.get("fault_id") == fault.fault_id), {})


def share_of(ctx: CheckContext, fault: FaultWindow) -> float:
    """The share of its target's connections ``fault`` acts on: a toxic's ``toxicity`` (each
    connection drawn on its own), else 1. Below 1, whether it acted on a given one is not known."""
    share = plan_params(ctx, fault).get("toxicity")
    return 1.0 if share is None else float(share)


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


def endpoint_instances(ctx: CheckContext) -> dict[str, set[str]]:
    """endpoint name -> the instances of the role that binds it (from run.json)."""
    endpoints = (ctx.meta.get("manifest") or {}).get("endpoints") or {}
    processes = ctx.meta.get("processes") or {}
    return {e: {i for i, r in processes.items() if r == role} or {role} for e, role in endpoints.items()}


def instance_column(worker: Column, instances: set[str]) -> Column:
    """The instance a connection identity (``worker-2-ab12``) belongs to: the longest of
    ``instances`` it is or starts with (then a ``-``), else all before its last ``-``. A
    column expression (instances are few: one branch each)."""
    fallback = F.when(worker.contains("-"), F.regexp_extract(worker, r"^(.*)-[^-]*$", 1)).otherwise(worker)
    out = fallback
    for name in sorted(instances, key=len):  # the longest name is tested first
        out = F.when((worker == name) | worker.startswith(name + "-"), F.lit(name)).otherwise(out)
    return out


def load_span(ctx: CheckContext) -> Span:
    """[load start, load stop] (ns), from run.json, else the first and last events."""
    return run_time(ctx, "load_started_ns"), run_time(ctx, "load_stopped_ns")
