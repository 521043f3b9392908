"""Checker scaling: the Spark checkers on 1M and 10M-event histories, against pandas.

For each size, a synthetic history (100 clients; send, exec, reply per request; a few
lost, duplicated and out-of-order replies) is written as JSON lines, then checked for
no_lost, no_duplicate and in_order with the report pipeline's own reader and checkers:
from the JSON lines cached in Spark (up to 2M events), from the JSON lines compacted to
Parquet first (what the pipeline does from 1M events on), and from the Parquet file
already there (a rebuilt report). The same invariants are checked with plain pandas (from
the Parquet file, one core) in the same run. Prints seconds, events/s, peak memory (driver
JVM RSS and Python RSS) and the ratio to pandas.

    /work/venv/bin/python bench/checker_scaling.py                # 1M and 10M events
    /work/venv/bin/python bench/checker_scaling.py --sizes 200000  # a quick look
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.rundir import RunDir
from reports import pipeline
from reports.checkers import CheckContext, registry
from reports.spark import get_spark

NS = 1_000_000_000
T0 = 1_763_726_400 * NS
CLIENTS = 100
STEP_NS = 50_000  # one request every 50 us across all clients
CHECKS = ("no_lost", "no_duplicate", "in_order")
LOST_EVERY, DUP_EVERY, DISORDER_EVERY = 10_007, 50_021, 70_001
#: The cached-JSON way (no compaction) is measured up to this size: 10M events cached in
#: the default 2 GB driver heap leave the aggregations too little and end in OutOfMemory.
CACHED_UP_TO = 2_000_000


class PeakRss:
    """Peak RSS of this Python process and of its java child, sampled every 50 ms."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.py = self.jvm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _java(self) -> psutil.Process | None:
        for child in self.me.children(recursive=True):
            try:
                if child.name() == "java":
                    return child
            except psutil.Error:
                continue
        return None

    def _run(self) -> None:
        java = self._java()
        while not self._stop.is_set():
            try:
                self.py = max(self.py, self.me.memory_info().rss)
                java = java or self._java()
                if java is not None:
                    self.jvm = max(self.jvm, java.memory_info().rss)
            except psutil.Error:
                pass
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def generate(spark, history: Path, events: int) -> int:
    """Write about ``events`` events as JSON lines into ``history``; returns the exact count."""
    from pyspark.sql import functions as F

    requests = events // 3
    r = spark.range(requests).select(
        F.concat(F.lit("client-"), (F.col("id") % CLIENTS).cast("string")).alias("cid"),
        (F.col("id") / CLIENTS).cast("long").alias("seq0"),
        (F.lit(T0) + F.col("id") * STEP_NS).alias("t"),
        "id",
    )
    r = r.withColumn("seq", F.col("seq0") + 1).withColumn(
        "rid", F.concat_ws(":", "cid", F.col("seq").cast("string"))
    )
    lat_us = (F.col("id") * 7919 % 3000 + 200).cast("long")
    disorder = F.col("id") % DISORDER_EVERY == 11
    reply_ts = F.when(disorder, F.col("t") - 3 * CLIENTS * STEP_NS).otherwise(F.col("t") + lat_us * 1000)

    def ev(kind: str, ts: Any, **cols: Any) -> Any:
        fields = {
            "ts": ts,
            "src": F.col("cid"),
            "ev": F.lit(kind),
            "cid": F.col("cid"),
            "seq": F.col("seq"),
            "rid": F.col("rid"),
            "attempt": F.lit(None).cast("int"),
            "ok": F.lit(None).cast("boolean"),
            "latency_us": F.lit(None).cast("long"),
            "worker": F.lit(None).cast("string"),
        }
        fields.update(cols)
        return F.struct(*(v.alias(k) for k, v in fields.items()))

    send = ev("send", F.col("t"), attempt=F.lit(1))
    worker = F.concat(F.lit("worker-"), (F.col("id") % 4 + 1).cast("string"))
    exe = ev(
        "exec",
        F.col("t") + 10_000,
        src=worker,
        cid=F.lit(None).cast("string"),
        seq=F.lit(None).cast("long"),
        worker=worker,
    )
    reply = ev("reply", reply_ts, ok=F.lit(True), latency_us=lat_us, worker=worker)
    again = ev("reply", F.col("t") + 50 * NS, ok=F.lit(True), latency_us=lat_us, worker=worker)
    parts = (
        F.when(F.col("id") % LOST_EVERY == 5, F.array(send, exe))
        .when(F.col("id") % DUP_EVERY == 7, F.array(send, exe, reply, again))
        .otherwise(F.array(send, exe, reply))
    )
    out = r.select(F.explode(parts).alias("e")).select("e.*")
    tmp = history.parent / "gen"
    out.repartition(16).write.mode("overwrite").json(str(tmp))
    history.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(sorted(tmp.glob("part-*.json"))):
        part.rename(history / f"src-{i}.jsonl")
    shutil.rmtree(tmp)
    return spark.read.text(str(history / "*.jsonl")).count()


def spark_check(spark, run: RunDir, *, compact_from: int | None = None) -> dict[str, Any]:
    """The pipeline's reader and checkers; ``compact_from`` overrides COMPACT_MIN_EVENTS."""
    saved = pipeline.COMPACT_MIN_EVENTS
    pipeline.COMPACT_MIN_EVENTS = saved if compact_from is None else compact_from
    try:
        history = pipeline.read_events(spark, run)
    finally:
        pipeline.COMPACT_MIN_EVENTS = saved
    meta = {
        "manifest": {"promises": {"checks": list(CHECKS), "in_order": True}},
        "load_started_ns": T0,
        "load_stopped_ns": T0 + 10**6 * NS,
        "client_budget_s": 10,
    }
    ctx = CheckContext(spark, history.events, meta, [], run.root)
    found = {name: registry()[name].run(ctx).violations for name in CHECKS}
    history.release()
    return found


def pandas_check(path: Path) -> tuple[dict[str, int], float]:
    import pandas as pd

    t = time.perf_counter()
    df = pd.read_parquet(path, columns=["ts", "ev", "cid", "seq", "rid", "got_rid"])
    load_s = time.perf_counter() - t
    sends = df[df.ev == "send"].groupby(["cid", "seq"]).ts.agg(["min", "max"]).reset_index()
    ends = df[df.ev.isin(["reply", "abandon"])][["cid", "seq"]].drop_duplicates()
    m = sends.merge(ends, on=["cid", "seq"], how="left", indicator=True)
    last = sends.groupby("cid").seq.transform("max")
    open_ = m["_merge"] == "left_only"
    cutoff = T0 + 10**6 * NS - 10 * NS
    indeterminate = open_ & ((m["max"] > cutoff) | (m["seq"] == last))
    lost = int((open_ & ~indeterminate).sum())
    deliveries = pd.concat([df.rid[df.ev == "reply"], df.got_rid[df.ev == "unexpected"].dropna()])
    counts = deliveries.value_counts()
    dup = int((counts[counts > 1] - 1).sum())
    replies = df[df.ev == "reply"].sort_values(["cid", "ts", "seq"])
    prev = replies.groupby("cid").seq.shift()
    disorder = int((replies.seq <= prev).sum())
    return {"no_lost": lost, "no_duplicate": dup, "in_order": disorder}, load_s


def timed(fn: Callable[[], Any]) -> tuple[Any, float, PeakRss]:
    with PeakRss() as peak:
        t = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t
    return result, elapsed, peak


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000], help="events per history"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write the histories (default: a temp dir)"
    )
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="zchaos-bench-"))
    spark = get_spark()
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        for size in args.sizes:
            spark.conf.set("spark.sql.shuffle.partitions", partitions)
            run = RunDir(base / f"run-{size}")
            shutil.rmtree(run.history / "events.parquet", ignore_errors=True)
            t = time.perf_counter()
            if any(run.history.glob("*.jsonl")):  # a --dir kept from an earlier run: same data
                n, how = spark.read.text(str(run.history / "*.jsonl")).count(), "reused"
            else:
                n, how = generate(spark, run.history, size), "generated"
            json_size = sum(f.stat().st_size for f in run.history.glob("*.jsonl"))
            gen_s = time.perf_counter() - t
            print(f"\n== {n:,} events ({mb(json_size)} of JSON lines, {how} in {gen_s:.1f} s)")
            if size == args.sizes[0]:  # warm-up: JIT and planner, so the first figure is not the JVM's start
                spark_check(spark, run, compact_from=10**12 if size <= CACHED_UP_TO else 0)
            rows = []
            found = []
            if size <= CACHED_UP_TO:
                res, secs, peak = timed(lambda run=run: spark_check(spark, run, compact_from=10**12))
                rows.append(("Spark, JSON lines, cached", secs, peak))
                found.append(res)
            res, s_json, peak = timed(lambda run=run: spark_check(spark, run, compact_from=0))
            rows.append(("Spark, JSON -> Parquet, checked", s_json, peak))
            found.append(res)
            res, s_pq, peak = timed(lambda run=run: spark_check(spark, run))
            rows.append(("Spark, from Parquet (a rebuild)", s_pq, peak))
            found.append(res)
            (res, pd_load), s_pd, peak = timed(lambda run=run: pandas_check(run.history / "events.parquet"))
            rows.append((f"pandas, Parquet (load {pd_load:.1f} s)", s_pd, peak))
            found.append(res)
            pq_size = sum(f.stat().st_size for f in (run.history / "events.parquet").rglob("*.parquet"))
            assert all(f == found[0] for f in found), found
            print(f"violations found (same in all): {found[0]}")
            print(
                f"{'way':<34}{'seconds':>9}{'events/s':>14}{'JVM peak':>12}{'Python peak':>13}{'/pandas':>9}"
            )
            for name, secs, peak in rows:
                print(
                    f"{name:<34}{secs:>9.2f}{n / secs:>14,.0f}{mb(peak.jvm):>12}{mb(peak.py):>13}"
                    f"{secs / s_pd:>9.1f}"
                )
            print(f"JSON lines {mb(json_size)}, Parquet {mb(pq_size)}")
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
