"""Run metrics from the history: a per-second timeline, exact latency percentiles, counts,
the same figures per client kind (and which endpoints answered), which server answered
and in which state it was over time, and the errors of external client programs.

Percentiles are Spark's exact ``percentile`` over the recorded ``latency_us`` of every
reply (Locust rounds to whole milliseconds; the history does not).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reports.checkers import Profile

NS = 1_000_000_000
TIMELINE_QUANTILES = (0.5, 0.9, 0.99)
OVERALL_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
#: The events the timeline follows; runner and broker events do not make a second busy.
TIMELINE_EVENTS = ("send", "reply", "retry", "abandon", "unexpected")
MAX_TIMELINE_S = 7 * 24 * 3600
CLIENT_EVENTS = ("send", "reply", "retry", "abandon", "lost", "unexpected")
NO_KIND = "(unnamed)"  # client events of a history written before kinds were recorded
MAX_CLIENT_ERRORS_SHOWN = 20
KIND_COUNTS = ("clients", "requests", "sends", "replies", "replies_not_ok", "retries", "abandons", "lost",
               "unexpected")  # fmt: skip


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000.0, 3)


def _quantiles(qs: tuple[float, ...]) -> Any:
    return F.array(*(F.lit(q) for q in qs))


def timeline(events: DataFrame, t0_ns: int) -> list[dict[str, Any]]:
    """One row per second since ``t0_ns`` (gaps filled with zeros, so an outage shows)."""
    is_reply = F.col("ev") == "reply"
    rows = (
        events.filter(F.col("ev").isin(*TIMELINE_EVENTS))
        .withColumn("t", F.floor((F.col("ts") - F.lit(t0_ns)) / F.lit(NS)).cast("long"))
        .groupBy("t")
        .agg(
            F.sum((F.col("ev") == "send").cast("int")).alias("sends"),
            F.sum(is_reply.cast("int")).alias("replies"),
            F.sum((F.col("ev") == "retry").cast("int")).alias("retries"),
            F.sum((F.col("ev") == "abandon").cast("int")).alias("abandons"),
            F.percentile(F.when(is_reply, F.col("latency_us")), _quantiles(TIMELINE_QUANTILES)).alias("q"),
        )
        .collect()
    )
    by_second = {r["t"]: r for r in rows}
    if not by_second:
        return []
    span = range(min(by_second), max(by_second) + 1)
    if len(span) > MAX_TIMELINE_S:  # a wild timestamp must not make millions of empty rows
        span = sorted(by_second)
    out = []
    for t in span:
        r = by_second.get(t)
        q = (r["q"] if r is not None else None) or [None] * len(TIMELINE_QUANTILES)
        out.append(
            {
                "t": t,
                "sends": r["sends"] if r else 0,
                "replies": r["replies"] if r else 0,
                "retries": r["retries"] if r else 0,
                "abandons": r["abandons"] if r else 0,
                "p50_ms": _ms(q[0]),
                "p90_ms": _ms(q[1]),
                "p99_ms": _ms(q[2]),
            }
        )
    return out


def servers(events: DataFrame, t0_ns: int, profile: Profile | None = None) -> dict[str, Any]:
    """Who served over time, for the timeline's band per server: ``answered`` (endpoint ->
    [[second, replies], ...], from the clients' ``reply`` events that name their endpoint:
    any failover client) and ``states`` (server -> [[seconds, state], ...], from the state
    changes a server records: Binary Star's ``bstar_state``). Empty when there are neither."""
    second = F.floor((F.col("ts") - F.lit(t0_ns)) / F.lit(NS)).cast("long")
    answered: dict[str, list[list[int]]] = {}
    rows = (
        events.filter((F.col("ev") == "reply") & F.col("endpoint").isNotNull())
        .groupBy("endpoint", second.alias("t"))
        .count()
        .collect()
    )
    for r in sorted(rows, key=lambda r: (r["endpoint"], r["t"])):
        answered.setdefault(r["endpoint"], []).append([r["t"], r["count"]])
    states: dict[str, list[list[Any]]] = {}
    changes = [] if profile is not None and not profile.has("bstar_state") else (
        events.filter(F.col("ev") == "bstar_state").select("ts", "src", "state").orderBy("ts").collect()
    )  # fmt: skip
    for r in changes:
        states.setdefault(r["src"], []).append([round((r["ts"] - t0_ns) / NS, 3), r["state"]])
    if not answered and not states:
        return {}
    return {"answered": answered, "states": states}


def latency(events: DataFrame) -> dict[str, Any]:
    """Exact reply latency percentiles over the whole run, in ms."""
    row = (
        events.filter(F.col("ev") == "reply")
        .agg(
            F.count("latency_us").alias("n"),
            F.percentile("latency_us", _quantiles(tuple(OVERALL_QUANTILES.values()))).alias("q"),
            F.max("latency_us").alias("max"),
            F.avg("latency_us").alias("mean"),
        )
        .first()
    )
    q = row["q"] or [None] * len(OVERALL_QUANTILES)
    out: dict[str, Any] = {"count": int(row["n"] or 0)}
    out.update({name: _ms(v) for name, v in zip(OVERALL_QUANTILES, q, strict=True)})
    out["max"] = _ms(row["max"])
    out["mean"] = _ms(row["mean"])
    return out


def counts(events: DataFrame) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Events per kind, and per source and kind."""
    per_kind: dict[str, int] = {}
    per_src: dict[str, dict[str, int]] = {}
    for r in events.groupBy("src", "ev").count().collect():
        src, ev = r["src"] or "?", r["ev"] or "?"
        per_kind[ev] = per_kind.get(ev, 0) + r["count"]
        per_src.setdefault(src, {})[ev] = r["count"]
    return dict(sorted(per_kind.items())), dict(sorted(per_src.items()))


def client_kinds(events: DataFrame) -> dict[str, dict[str, Any]]:
    """Per client kind: clients, requests, sends, replies (not ok), retries, abandons, lost
    (a client that never resends), unexpected messages, reply latency (ms) and the replies
    each endpoint gave."""
    ev = F.col("ev")
    is_reply = ev == "reply"
    client = events.filter(ev.isin(*CLIENT_EVENTS)).withColumn("k", F.coalesce("kind", F.lit(NO_KIND)))
    # Per request first, then per kind: two plain aggregations instead of one with two
    # distinct counts (which Spark runs by copying every event once per distinct count).
    rows = (
        client.groupBy("k", "cid", "seq")
        .agg(
            F.max((ev == "send").cast("int")).alias("sent"),
            F.sum((ev == "send").cast("int")).alias("sends"),
            F.sum(is_reply.cast("int")).alias("replies"),
            F.sum((is_reply & ~F.coalesce("ok", F.lit(False))).cast("int")).alias("replies_not_ok"),
            F.sum((ev == "retry").cast("int")).alias("retries"),
            F.sum((ev == "abandon").cast("int")).alias("abandons"),
            F.sum((ev == "lost").cast("int")).alias("lost"),
            F.sum((ev == "unexpected").cast("int")).alias("unexpected"),
        )
        .groupBy("k")
        .agg(
            F.countDistinct("cid").alias("clients"),
            F.sum("sent").alias("requests"),
            *(F.sum(c).alias(c) for c in ("sends", "replies", "replies_not_ok", "retries", "abandons")),
            *(F.sum(c).alias(c) for c in ("lost", "unexpected")),
        )
        .collect()
    )
    latencies = {
        r["k"]: r
        for r in client.filter(is_reply)
        .groupBy("k")
        .agg(
            F.percentile("latency_us", _quantiles((0.5, 0.99))).alias("q"),
            F.max("latency_us").alias("max"),
        )
        .collect()
    }
    answered = (
        client.filter(is_reply & F.col("endpoint").isNotNull()).groupBy("k", "endpoint").count().collect()
    )
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["k"]):
        lat = latencies.get(r["k"])
        q = (lat["q"] if lat is not None else None) or [None, None]
        figures = {name: int(r[name] or 0) for name in KIND_COUNTS}
        figures["latency_ms"] = {"p50": _ms(q[0]), "p99": _ms(q[1]), "max": _ms(lat["max"] if lat else None)}
        figures["replies_by_endpoint"] = {
            a["endpoint"]: a["count"]
            for a in sorted(answered, key=lambda a: a["endpoint"])
            if a["k"] == r["k"]
        }
        out[r["k"]] = figures
    return out


def client_errors(events: DataFrame, profile: Profile | None = None) -> dict[str, Any]:
    """What external client programs did wrong (``client_error`` events): counts and the first ones."""
    if profile is not None and not profile.has("client_error"):
        return {"count": 0, "by_reason": {}, "first": []}
    errors = events.filter(F.col("ev") == "client_error")
    by_reason = {r["reason"] or "?": r["count"] for r in errors.groupBy("reason").count().collect()}
    first = (
        errors.orderBy("ts")
        .select("ts", "cid", "kind", "reason", "code", "rid", "detail")
        .limit(MAX_CLIENT_ERRORS_SHOWN)
        .collect()
    )
    return {
        "count": sum(by_reason.values()),
        "by_reason": dict(sorted(by_reason.items())),
        "first": [{k: v for k, v in r.asDict().items() if v is not None} for r in first],
    }


def compute_metrics(events: DataFrame, t0_ns: int, profile: Profile | None = None) -> dict[str, Any]:
    """Everything the report shows besides the checks; ``t`` of the timeline counts from t0.
    The counts come from the history's profile when it was counted on reading."""
    if profile is not None:
        per_kind, per_src = profile.kinds, profile.sources
    else:
        per_kind, per_src = counts(events)
    return {
        "client_kinds": client_kinds(events),
        "client_errors": client_errors(events, profile),
        "t0_ns": t0_ns,
        "events_total": sum(per_kind.values()),
        "events": per_kind,
        "sources": per_src,
        "latency_ms": latency(events),
        "timeline": timeline(events, t0_ns),
        "servers": servers(events, t0_ns, profile),
    }
