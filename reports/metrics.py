"""Run metrics from the history: a per-second timeline, exact latency percentiles, counts,
the same figures per client kind (and which endpoints answered), which server answered
and in which state it was over time, and the errors of external client programs.

Percentiles are Spark's exact ``percentile`` over the recorded ``latency_us`` of every
reply (Locust rounds to whole milliseconds; the history does not).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
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


def client_pass(
    events: DataFrame, t0_ns: int, precount: bool = False, here: bool = False
) -> dict[str, list[Any]]:
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

    ``here``: the same figures, with alike events counted by Spark (as the precount does, each
    with its client, a send's seq and a reply's ok) and the groupings, percentiles and per-kind
    counts made here, in Python, from those counted rows (``_grouped_here``): one aggregation
    instead of four, and no copies. For a short history (HERE_MAX_EVENTS), whose queries Spark
    interprets, copying each event into its groupings cost far more than its rows.

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
    shown: list[Column | str] = ["ev", "latency_us", "endpoint", kind.alias("kind"), second.alias("second")]
    if here:
        # Alike events counted, with what the per-kind counts need: each event's client, each
        # send's seq (its request) and whether each reply was ok.
        mine = events.filter(ev.isin(*CLIENT_EVENTS)).select(
            *shown,
            "cid",
            F.when(ev == "send", F.col("seq")).alias("sent_seq"),
            F.when(is_reply, ~F.coalesce("ok", F.lit(False))).alias("not_ok"),
        )
        return _grouped_here(mine.groupBy(*mine.columns).agg(F.count("*").alias("w")).collect())
    client = events.filter(ev.isin(*CLIENT_EVENTS)).select(*shown)
    # The per-kind counts of requests and clients, another grouping of the client events: in
    # the same query, so the same job.
    kinds = _kind_counts(events).withColumn("g", F.lit(KIND_COUNTS_G))
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
    rows = passes.unionByName(kinds, allowMissingColumns=True).collect()
    out: dict[str, list[Any]] = {
        g: [] for g in (BY_SECOND, BY_KIND, OVERALL, ENDPOINT_SECOND, KIND_ENDPOINT, KIND_COUNTS_G)
    }
    for r in rows:
        out[r["g"]].append(r)
    return out


#: Below this many events client_pass groups the counted client events here (``here``). At a
#: CI run's size Spark interprets the report's queries (reports/spark.py INTERPRETED_MAX_EVENTS),
#: and interpreted, the copies of each event into its groupings were most of a report's single
#: most costly query: a CI run of lazy-pirate (20k events), warm, the explode alone 0.5-0.6 s of
#: a task's time (compiled 0.04 s), the whole metrics query 2.5-3.1 s (issue 38).
HERE_MAX_EVENTS = 50_000
#: The groupings whose rows carry the reply latencies' figures (percentiles, max, mean).
TIMED = (BY_SECOND, BY_KIND, OVERALL)


def _grouped_here(counted: Iterable[Any]) -> dict[str, list[Any]]:
    """``client_pass``'s rows made from the counted client events (``ev``, ``latency_us``,
    ``endpoint``, ``kind``, ``second``, ``cid``, ``sent_seq``, ``not_ok`` and ``w``, how many
    events are alike), as Spark's aggregations make them: the same groupings, counts, maxima
    and means, the percentiles by Spark's own rule (``spark_percentiles``), and the per-kind
    counts of ``_kind_counts``."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    latencies: dict[tuple[Any, ...], dict[int, int]] = {}
    per_kind: dict[str, dict[str, Any]] = {}
    requests: dict[tuple[str, Any], set[Any]] = {}  # (kind, client) -> the seqs it sent (None too)
    for r in counted:
        ev, lat, endpoint, kind, second, w = (
            r["ev"], r["latency_us"], r["endpoint"], r["kind"], r["second"], r["w"]
        )  # fmt: skip
        _count_kind(per_kind, requests, kind, r["cid"], ev, r["sent_seq"], r["not_ok"], w)
        reply = ev == "reply"
        keys = [(BY_SECOND, None, None, second)] if ev in TIMELINE_EVENTS else []
        if reply:
            keys += [(BY_KIND, kind, None, None), (OVERALL, None, None, None)]
            if endpoint is not None:
                keys += [(ENDPOINT_SECOND, None, endpoint, second), (KIND_ENDPOINT, kind, endpoint, None)]
        for key in keys:
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"g": key[0], "k": key[1], "e": key[2], "t": key[3], "n": 0,
                                   "sends": 0, "replys": 0, "retrys": 0, "abandons": 0,
                                   "lat_n": 0, "lat_max": None, "_sum": 0.0}  # fmt: skip
            g["n"] += w
            field = {"send": "sends", "reply": "replys", "retry": "retrys", "abandon": "abandons"}.get(ev)
            if field is not None:
                g[field] += w
            if reply and lat is not None and key[0] in TIMED:
                g["lat_n"] += w
                g["lat_max"] = lat if g["lat_max"] is None else max(g["lat_max"], lat)
                g["_sum"] += float(lat) * w  # in doubles, as Spark sums them
                seen = latencies.setdefault(key, {})
                seen[lat] = seen.get(lat, 0) + w
    out: dict[str, list[Any]] = {
        g: [] for g in (BY_SECOND, BY_KIND, OVERALL, ENDPOINT_SECOND, KIND_ENDPOINT, KIND_COUNTS_G)
    }
    for key, g in groups.items():
        total = g.pop("_sum")
        g["q"] = spark_percentiles(latencies[key], ALL_QUANTILES) if key in latencies else None
        g["lat_mean"] = total / g["lat_n"] if g["lat_n"] else None
        out[key[0]].append(g)
    for (kind, _cid), seqs in requests.items():
        per_kind[kind]["requests"] += len(seqs)
    for figures in per_kind.values():
        del figures["_clients"]
    out[KIND_COUNTS_G] = [{"k": kind, **figures} for kind, figures in per_kind.items()]
    return out


def _count_kind(
    per_kind: dict[str, dict[str, Any]],
    requests: dict[tuple[str, Any], set[Any]],
    kind: str, cid: str | None, ev: str, sent_seq: int | None, not_ok: bool | None, w: int,
) -> None:  # fmt: skip
    """One counted row into the per-kind counts, as ``_kind_counts`` makes them: its clients
    (each client named once), its requests (each client's distinct seqs sent, a send without
    one counting once), and its events by kind."""
    figures = per_kind.get(kind)
    if figures is None:
        figures = per_kind[kind] = {name: 0 for name in KIND_COUNTS}
        figures["_clients"] = set()
    sent = requests.setdefault((kind, cid), set())
    if cid is not None and cid not in figures["_clients"]:
        figures["_clients"].add(cid)
        figures["clients"] += 1
    field = {"send": "sends", "reply": "replies", "retry": "retries", "abandon": "abandons",
             "lost": "lost", "unexpected": "unexpected"}.get(ev)  # fmt: skip
    if field is not None:
        figures[field] += w
    if ev == "send":
        sent.add(sent_seq)
    if ev == "reply" and not_ok:
        figures["replies_not_ok"] += w


def spark_percentiles(counts: dict[int, int], percentages: Sequence[float]) -> list[float]:
    """The exact percentiles of values given with their counts (value -> how many), as Spark's
    ``percentile`` computes them (its Percentile aggregate): the values sorted, each
    percentage's position ``(total - 1) * p`` among them, interpolated linearly between the
    values at its floor and its ceiling, in the same double arithmetic (the same floats, to the
    last bit: tests/test_metrics.py)."""
    values = sorted(counts)
    reached = list(itertools.accumulate(counts[v] for v in values))
    last = reached[-1] - 1
    out = []
    for p in percentages:
        position = last * p
        lower, higher = math.floor(position), math.ceil(position)
        low = values[bisect.bisect_left(reached, lower + 1)]
        high = values[bisect.bisect_left(reached, higher + 1)]
        if higher == lower or high == low:
            out.append(float(low))
        else:
            out.append(float(low) + (position - lower) * (float(high) - float(low)))
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
    small = profile is not None and profile.events < HERE_MAX_EVENTS
    passed = client_pass(events, t0_ns, precount=big, here=small)
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
