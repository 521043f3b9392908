"""The run metrics (reports/metrics.py) on hand-made histories in a real SparkSession."""

from __future__ import annotations

from reports.metrics import NS

T0 = 1_000 * NS


def _history() -> list[dict]:
    """Replies whose latencies repeat within a second (what a long, busy run has), two client
    kinds, one without a kind, endpoints, retries, an abandon and an unexpected message."""
    out: list[dict] = []

    def ev(ev: str, ts: int, cid: str, seq: int | None, kind: str | None, **more) -> None:
        out.append(
            {"ts": ts, "src": cid, "ev": ev, "cid": cid, "seq": seq, "rid": f"{cid}:{seq}", "kind": kind}
            | more
        )

    for i, lat in enumerate([1000, 1000, 1000, 5000]):  # second 0, kind a: 1 ms three times
        ev("send", T0 + i, "c-1", i, "a", attempt=1)
        ev("reply", T0 + 10 * i + 7, "c-1", i, "a", ok=True, latency_us=lat, endpoint="primary")
    for i, lat in enumerate([2000, 2000, 9000]):  # second 1, kind b, two endpoints
        ev("send", T0 + NS + i, "c-2", i, "b", attempt=1)
        ev("reply", T0 + NS + 10 * i + 7, "c-2", i, "b", ok=True, latency_us=lat,
           endpoint="backup" if i else "primary")  # fmt: skip
    ev("send", T0 + 2 * NS, "c-3", 0, None, attempt=1)
    ev("retry", T0 + 2 * NS + 1, "c-3", 0, None, attempt=2)
    ev("send", T0 + 2 * NS + 1, "c-3", 0, None, attempt=2)
    ev("abandon", T0 + 2 * NS + 2, "c-3", 0, None, reason="gave up")
    ev("unexpected", T0 + 3 * NS, "c-1", None, "a", detail="stray")
    return out


def _figures(events, precount: bool, here: bool = False) -> dict:
    from reports import metrics

    passed = metrics.client_pass(events, T0, precount=precount, here=here)
    return {
        "timeline": metrics.timeline(events, T0, passed),
        "latency": metrics.latency(events, passed),
        "servers": metrics.servers(events, T0, passed=passed),
        "kinds": metrics.client_kinds(events, passed),
    }


def test_counting_alike_events_first_gives_the_same_figures(spark) -> None:
    """The precount (a long history's way) weighs each counted row by how many events it
    stands for: percentiles, mean and counts are those of every event, not of the distinct
    ones (unweighted, the overall p50 of these 7 replies would be 3.5 ms, not 2 ms)."""
    from reports.history_frame import events_frame

    events = events_frame(spark, _history())
    plain, counted = _figures(events, precount=False), _figures(events, precount=True)
    assert counted == plain
    latency = counted["latency"]
    assert latency["count"] == 7 and latency["p50"] == 2.0 and latency["max"] == 9.0
    assert latency["mean"] == round((3 * 1000 + 5000 + 2 * 2000 + 9000) / 7 / 1000, 3)
    first, second, third = counted["timeline"][:3]
    assert (first["sends"], first["replies"], first["p50_ms"]) == (4, 4, 1.0)
    assert (second["sends"], second["replies"], second["p50_ms"]) == (3, 3, 2.0)
    assert (third["sends"], third["retries"], third["abandons"], third["p50_ms"]) == (2, 1, 1, None)
    assert counted["servers"]["answered"] == {"primary": [[0, 4], [1, 1]], "backup": [[1, 2]]}
    a, b = counted["kinds"]["a"], counted["kinds"]["b"]
    assert (a["latency_ms"]["p50"], a["replies_by_endpoint"], a["unexpected"]) == (1.0, {"primary": 4}, 1)
    assert (b["latency_ms"]["p50"], b["replies_by_endpoint"]) == (2.0, {"backup": 2, "primary": 1})
    assert counted["kinds"]["(unnamed)"]["abandons"] == 1


def test_grouping_the_counted_events_here_gives_spark_s_figures(spark) -> None:
    """A short history's way (``here``: Spark counts alike events, Python groups them) gives
    every figure Spark's own aggregation gives, to the last bit of each percentile and mean:
    on the history above with a send without a seq, a resend of it, a reply not ok, a client
    event without a client and latencies whose positions fall between two values."""
    from reports.history_frame import events_frame

    history = [
        *_history(),
        {"ts": T0 + 4 * NS, "src": "c-4", "ev": "send", "cid": "c-4", "seq": None, "kind": "b"},
        {"ts": T0 + 4 * NS + 5, "src": "c-4", "ev": "send", "cid": "c-4", "seq": None, "kind": "b"},
        {"ts": T0 + 4 * NS + 9, "src": "c-4", "ev": "reply", "cid": "c-4", "seq": 7, "kind": "b",
         "ok": False, "latency_us": 333},
        {"ts": T0 + 4 * NS + 11, "src": "?", "ev": "unexpected", "kind": "b"},
        {"ts": T0 + 4 * NS + 12, "src": "c-1", "ev": "lost", "cid": "c-1", "seq": 9, "kind": "a"},
    ]  # fmt: skip
    events = events_frame(spark, history)
    here = _figures(events, precount=False, here=True)
    assert here == _figures(events, precount=False)
    assert here["kinds"]["b"]["requests"] == 4 and here["kinds"]["b"]["replies_not_ok"] == 1
    assert here["kinds"]["b"]["clients"] == 2 and here["kinds"]["a"]["lost"] == 1


def test_percentiles_here_are_spark_s_to_the_last_bit(spark) -> None:
    """spark_percentiles against Spark's ``percentile`` on 200 groups of random values, some
    repeated (weighed), at percentages whose positions are fractions: every float equal."""
    import random
    from collections import Counter

    from pyspark.sql import functions as F

    from reports.metrics import spark_percentiles

    rnd = random.Random(38)
    qs = [0.5, 0.9, 0.99, 0.999, 0.123]
    rows = [
        (g, rnd.choice([rnd.randint(1, 5000), rnd.randint(1, 5_000_000)]))
        for g in range(200)
        for _ in range(rnd.randint(1, 300))
    ]
    frame = spark.createDataFrame(rows, "g long, v long")
    got = frame.groupBy("g").agg(F.percentile("v", F.array(*(F.lit(q) for q in qs))).alias("q"))
    by_group: dict[int, Counter] = {}
    for g, v in rows:
        by_group.setdefault(g, Counter())[v] += 1
    mine = {g: spark_percentiles(dict(c), qs) for g, c in by_group.items()}
    assert {r["g"]: r["q"] for r in got.collect()} == mine


def test_wild_latencies_do_not_overflow_the_mean(spark) -> None:
    """A client that records absurd latencies (2^62 us, twice) still gets its figures: the
    mean is summed in doubles, as Spark's avg does, in both ways of counting."""
    from reports.history_frame import events_frame

    wild = 2**62
    events = events_frame(
        spark,
        [
            {"ts": T0 + i, "src": "c-1", "ev": "reply", "cid": "c-1", "seq": i, "rid": f"c-1:{i}",
             "ok": True, "latency_us": wild}
            for i in range(2)
        ],
    )  # fmt: skip
    for precount, here in ((False, False), (True, False), (False, True)):
        latency = _figures(events, precount, here)["latency"]
        assert latency["count"] == 2 and latency["mean"] == latency["max"] == round(wild / 1000, 3)
