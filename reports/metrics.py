"""Run metrics from the history: a per-second timeline, exact latency percentiles, counts,
the same figures per client kind (and which endpoints answered), which server answered
and in which state it was over time, and the errors of external client programs.

Percentiles are Spark's exact ``percentile`` over the recorded ``latency_us`` of every
reply (Locust rounds to whole milliseconds; the history does not).
"""

from __future__ import annotations

from collections.abc import Sequence
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


#: The groupings of the one pass over the client events (``client_pass``): per second of the
#: timeline, per client kind, the whole run, and the replies that name their endpoint per
#: second (``servers``) and per kind (``client_kinds``).
BY_SECOND, BY_KIND, OVERALL, ENDPOINT_SECOND, KIND_ENDPOINT = "t", "k", "all", "et", "ke"
#: The rows of ``_kind_counts`` (clients, requests... per kind), which client_pass returns too.
KIND_COUNTS_G = "kc"
#: Every quantile any of them shows (each of Spark's exact percentiles is computed on its own
#: from the sorted values: asking for more in one call gives the same figures).
ALL_QUANTILES = tuple(sorted({*TIMELINE_QUANTILES, *OVERALL_QUANTILES.values(), 0.5, 0.99}))


#: From this many events on, client_pass counts alike client events first (see there).
PRECOUNT_MIN_EVENTS = 2_000_000


def client_pass(events: DataFrame, t0_ns: int, precount: bool = False) -> dict[str, list[Any]]:
    """Grouping -> its rows, from ONE aggregation over the client events (one Spark job
    instead of one per figure): each event is copied into the groupings it counts in (an
    array of keys, exploded), and the latency percentiles are computed only for the first three;
    beside it in the same query (so the same job), the per-kind counts (``_kind_counts``, rows
    of grouping KIND_COUNTS_G).

    ``precount``: count alike events (same kind of event, client kind, endpoint, second and
    latency) first and give the percentiles those counts as frequencies: the figures are the
    same, and the copies are made of the counted rows, not of every event. It pays for a long
    history (sends collapse to one row per second and kind; replies as far as their
    microsecond latencies repeat within a second, which they do at thousands of replies per
    second); for a short one the extra aggregation costs more than it saves.

    Rows: ``g`` (the grouping), ``k`` (client kind), ``e`` (endpoint), ``t`` (second since
    ``t0_ns``), ``n`` (events), ``sends``, ``replies``, ``retries``, ``abandons``, ``q`` (the
    ALL_QUANTILES of reply latency, us), ``lat_n``, ``lat_max``, ``lat_mean``."""
    ev = F.col("ev")
    is_reply = ev == "reply"
    answered = is_reply & F.col("endpoint").isNotNull()
    second = F.floor((F.col("ts") - F.lit(t0_ns)) / F.lit(NS)).cast("long")
    kind = F.coalesce("kind", F.lit(NO_KIND))
    no_text, no_second = F.lit(None).cast("string"), F.lit(None).cast("long")

    def key(group: str, where: Any, k: Any, e: Any, t: Any) -> Any:
        return F.when(where, F.struct(F.lit(group).alias("g"), k.alias("k"), e.alias("e"), t.alias("t")))

    keys = F.array(
        key(BY_SECOND, ev.isin(*TIMELINE_EVENTS), no_text, no_text, F.col("second")),
        key(BY_KIND, is_reply, F.col("kind"), no_text, no_second),
        key(OVERALL, is_reply, no_text, no_text, no_second),
        key(ENDPOINT_SECOND, answered, no_text, F.col("endpoint"), F.col("second")),
        key(KIND_ENDPOINT, answered, F.col("kind"), F.col("endpoint"), no_second),
    )
    client = events.filter(ev.isin(*CLIENT_EVENTS)).select(
        "ev", "latency_us", "endpoint", kind.alias("kind"), second.alias("second")
    )
    if precount:
        client = client.groupBy(*client.columns).agg(F.count("*").alias("w"))
    else:
        client = client.withColumn("w", F.lit(1).cast("long"))
    copies = (
        client.select("ev", "latency_us", "w", F.explode(keys).alias("key"))
        .filter(F.col("key").isNotNull())
        .select("ev", "latency_us", "w", "key.*")
    )
    w = F.col("w")

    def weighed(where: Any) -> Any:  # the events (of ``w`` each) that ``where`` holds for
        return F.sum(F.when(where, w).otherwise(0))

    lat = F.when(is_reply & F.col("g").isin(BY_SECOND, BY_KIND, OVERALL), F.col("latency_us"))
    lat_w = F.when(lat.isNotNull(), w)
    passes = copies.groupBy("g", "k", "e", "t").agg(
        F.sum(w).alias("n"),
        *(weighed(ev == kind_).alias(f"{kind_}s") for kind_ in ("send", "reply", "retry")),
        weighed(ev == "abandon").alias("abandons"),
        F.percentile(lat, _quantiles(ALL_QUANTILES), w).alias("q"),
        F.coalesce(F.sum(lat_w), F.lit(0)).alias("lat_n"),
        F.max(lat).alias("lat_max"),
        # In doubles, as avg sums: a wild latency must not overflow a long sum.
        (F.sum(lat.cast("double") * w) / F.sum(lat_w)).alias("lat_mean"),
    )
    # The per-kind counts of requests and clients, another grouping of the client events: in
    # the same query, so the same job.
    kinds = _kind_counts(events).withColumn("g", F.lit(KIND_COUNTS_G))
    rows = passes.unionByName(kinds, allowMissingColumns=True).collect()
    out: dict[str, list[Any]] = {
        g: [] for g in (BY_SECOND, BY_KIND, OVERALL, ENDPOINT_SECOND, KIND_ENDPOINT, KIND_COUNTS_G)
    }
    for r in rows:
        out[r["g"]].append(r)
    return out


def _q(row: Any, *qs: float) -> list[float | None]:
    """The quantiles ``qs`` of a client_pass row (None: no reply latency in its group)."""
    q = (row["q"] if row is not None else None) or [None] * len(ALL_QUANTILES)
    return [q[ALL_QUANTILES.index(x)] for x in qs]


def timeline(
    events: DataFrame, t0_ns: int, passed: dict[str, list[Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per second since ``t0_ns`` (gaps filled with zeros, so an outage shows)."""
    passed = passed or client_pass(events, t0_ns)
    by_second = {r["t"]: r for r in passed[BY_SECOND]}
    if not by_second:
        return []
    span: Sequence[int] = range(min(by_second), max(by_second) + 1)
    if len(span) > MAX_TIMELINE_S:  # a wild timestamp must not make millions of empty rows
        span = sorted(by_second)
    out = []
    for t in span:
        r = by_second.get(t)
        q = _q(r, *TIMELINE_QUANTILES)
        out.append(
            {
                "t": t,
                "sends": r["sends"] if r else 0,
                "replies": r["replys"] if r else 0,
                "retries": r["retrys"] if r else 0,
                "abandons": r["abandons"] if r else 0,
                "p50_ms": _ms(q[0]),
                "p90_ms": _ms(q[1]),
                "p99_ms": _ms(q[2]),
            }
        )
    return out


def servers(
    events: DataFrame, t0_ns: int, profile: Profile | None = None, passed: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """Who served over time, for the timeline's band per server: ``answered`` (endpoint ->
    [[second, replies], ...], from the clients' ``reply`` events that name their endpoint:
    any failover client) and ``states`` (server -> [[seconds, state], ...], from the state
    changes a server records: Binary Star's ``bstar_state``). Empty when there are neither."""
    passed = passed or client_pass(events, t0_ns)
    answered: dict[str, list[list[int]]] = {}
    for r in sorted(passed[ENDPOINT_SECOND], key=lambda r: (r["e"], r["t"])):
        answered.setdefault(r["e"], []).append([r["t"], r["n"]])
    states: dict[str, list[list[Any]]] = {}
    changes = [] if profile is not None and not profile.has("bstar_state") else (
        events.filter(F.col("ev") == "bstar_state").select("ts", "src", "state").orderBy("ts").collect()
    )  # fmt: skip
    for r in changes:
        states.setdefault(r["src"], []).append([round((r["ts"] - t0_ns) / NS, 3), r["state"]])
    if not answered and not states:
        return {}
    return {"answered": answered, "states": states}


def latency(events: DataFrame, passed: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """Exact reply latency percentiles over the whole run, in ms."""
    passed = passed or client_pass(events, 0)
    row = passed[OVERALL][0] if passed[OVERALL] else None
    out: dict[str, Any] = {"count": int(row["lat_n"] or 0) if row else 0}
    out.update(
        {
            name: _ms(v)
            for name, v in zip(OVERALL_QUANTILES, _q(row, *OVERALL_QUANTILES.values()), strict=True)
        }
    )
    out["max"] = _ms(row["lat_max"] if row else None)
    out["mean"] = _ms(row["lat_mean"] if row else None)
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


def _kind_counts(events: DataFrame) -> DataFrame:
    """Per client kind (``k``): clients, requests, sends, replies (not ok), retries, abandons,
    lost and unexpected messages (KIND_COUNTS), one row each (not collected: client_pass does)."""
    ev = F.col("ev")
    is_reply = ev == "reply"
    client = events.filter(ev.isin(*CLIENT_EVENTS)).withColumn("k", F.coalesce("kind", F.lit(NO_KIND)))
    # Grouped by kind, client and word of seqs first: before the shuffle each task is left
    # with about a row per kind and client (grouping every client event by request instead
    # shuffled them all: at 10M events 2.8x this function's CPU). The requests are the
    # distinct (kind, client, seq) of the sends, counted exactly as bits: each seq is bit
    # ``seq & 63`` of word ``seq >> 6`` (which names every long once), OR-ed per word. A
    # null seq is one request of its own, as in a grouping.
    is_send, seq = ev == "send", F.col("seq")
    bit = F.call_function("shiftleft", F.lit(1).cast("long"), seq.bitwiseAND(63).cast("int"))
    counted = ("sends", "replies", "replies_not_ok", "retries", "abandons", "lost", "unexpected")
    return (
        client.groupBy("k", "cid", F.when(is_send, F.shiftright(seq, 6)).alias("word"))
        .agg(
            F.sum(is_send.cast("int")).alias("sends"),
            F.sum(is_reply.cast("int")).alias("replies"),
            F.sum((is_reply & ~F.coalesce("ok", F.lit(False))).cast("int")).alias("replies_not_ok"),
            F.sum((ev == "retry").cast("int")).alias("retries"),
            F.sum((ev == "abandon").cast("int")).alias("abandons"),
            F.sum((ev == "lost").cast("int")).alias("lost"),
            F.sum((ev == "unexpected").cast("int")).alias("unexpected"),
            F.bit_or(F.when(is_send, bit)).alias("bits"),
            F.max(is_send & seq.isNull()).alias("null_seq_sent"),
        )
        .groupBy("k", "cid")
        .agg(
            *(F.sum(c).alias(c) for c in counted),
            (F.coalesce(F.sum(F.bit_count("bits")), F.lit(0)) + F.max("null_seq_sent").cast("int")).alias(
                "requests"
            ),
        )
        .groupBy("k")
        .agg(F.count("cid").alias("clients"), *(F.sum(c).alias(c) for c in (*counted, "requests")))
    )


def client_kinds(events: DataFrame, passed: dict[str, list[Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Per client kind: clients, requests, sends, replies (not ok), retries, abandons, lost
    (a client that never resends), unexpected messages, reply latency (ms) and the replies
    each endpoint gave (all from ``client_pass``)."""
    passed = passed or client_pass(events, 0)
    rows = passed[KIND_COUNTS_G]
    latencies = {r["k"]: r for r in passed[BY_KIND]}
    answered = sorted(passed[KIND_ENDPOINT], key=lambda a: a["e"])
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["k"]):
        lat = latencies.get(r["k"])
        p50, p99 = _q(lat, 0.5, 0.99)
        figures: dict[str, Any] = {name: int(r[name] or 0) for name in KIND_COUNTS}
        figures["latency_ms"] = {
            "p50": _ms(p50),
            "p99": _ms(p99),
            "max": _ms(lat["lat_max"] if lat else None),
        }
        figures["replies_by_endpoint"] = {a["e"]: a["n"] for a in answered if a["k"] == r["k"]}
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
    big = profile is not None and profile.events >= PRECOUNT_MIN_EVENTS
    passed = client_pass(events, t0_ns, precount=big)
    return {
        "client_kinds": client_kinds(events, passed),
        "client_errors": client_errors(events, profile),
        "t0_ns": t0_ns,
        "events_total": sum(per_kind.values()),
        "events": per_kind,
        "sources": per_src,
        "latency_ms": latency(events, passed),
        "timeline": timeline(events, t0_ns, passed),
        "servers": servers(events, t0_ns, profile, passed),
    }
