"""The least a report can cost on this machine with Spark in the zchaos process: issue 24 part
1's targets (a lone cold ``zchaos report`` <= 5 s; <= 2 s per run when a session is reused)
set against what Spark costs before any check runs.

Both figures use the session a report uses (reports/spark.py: ``get_spark`` sized for the
run's events, the class archive, ``fit_to``) on a stored run's Parquet form:

- **cold**: a new Python process, timed from its start: the imports, the driver JVM and its
  session, the first query (read the Parquet form and count it) and a second one (a grouping
  of the events by kind): what every cold report pays before its first check, since no JVM may
  outlive the zchaos process. Its own process group, ended with whatever it left.
- **warm**: in this process, after warming the session up with the same queries: trivial
  queries on the cached events (a filtered count; a grouping; a join of sends to replies, then
  a grouping), each with a new literal so that no plan is reused; median and lowest of 15.

Then the targets against them: the cold target minus the cold floor (negative: the target is
below what Spark's start costs here), and how many of the cheapest warm jobs fit in the warm
target. A report's checks each run at least one Spark job (a warm report of the six CI runs of
``bench/checker_scaling.py --reports``: 11-22 jobs), two at a time (reports/parallel.py).

    ./dev bench spark_floor runs/<a run reported once>     # or any stored run
    ./dev bench spark_floor                                # a synthetic run of 25,000 events

2026-11-28 01:19-01:26 UTC under the shared lock, load 1.2-2.1, 2 cores; the stored CI run
paranoid-pirate-kills (24,840 events), 3 cold processes: PySpark, JVM and session 4.05-4.25 s,
the first query 2.10-2.65 s, the second 0.67-0.72 s: 6.8 s (median) to the first answer, 7.5 s
to the second, 2.5 s over the cold target before any check. Warm (40 runs of each first): a
filtered count 135 ms, a grouping 207 ms, a join then a grouping 334 ms (medians), so the warm
target holds about 15 of the cheapest one at a time. The synthetic run (25,509 events, 2 cold
processes) gave the same: 7.0 s to the first answer, 143 / 214 / 329 ms warm. A cold
``zchaos report`` of the same CI run (its 9 checks, the metrics, the files) took 14.1-15.8 s at
load 2.8-3.3 (three processes), and a warm one of the same run again in one session 3.3-3.5 s,
two checks at a time (reports/parallel.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checker_scaling import (
    CI_RUN_EVENTS,
    COLD_TARGET_S,
    WARM_TARGET_S,
    _timed_child,
    load,
    run_argument,
)
from contract.rundir import RunDir
from reports.ingest.read import PARQUET, expected_events

#: Each warm query shape is timed this many times, after WARM_UP runs (a suite's session has run
#: many reports before: fewer left the JIT still compiling), each with a new literal.
TIMES, WARM_UP = 15, 40


def _parquet(run: RunDir) -> Path:
    path = run.history / PARQUET
    if not path.exists():
        raise SystemExit(
            f"{path}: no Parquet form of the history (report the run once: zchaos report {run.root})"
        )
    return path


def cold_child(run_dir: Path, spawned: float) -> None:
    """The cold process: each phase's seconds since ``spawned`` (the parent's monotonic clock,
    the same system-wide clock, as it started this process), as JSON on stdout."""
    from reports.spark import fit_to, get_spark, stop_spark

    run = RunDir(run_dir)
    events = expected_events(run)
    imported = time.monotonic()
    spark = get_spark(events=events)
    fit_to(spark, events or 0)
    session = time.monotonic()
    frame = spark.read.parquet(str(_parquet(run)))
    rows = frame.count()
    first = time.monotonic()
    frame.groupBy("ev").count().collect()
    second = time.monotonic()
    stop_spark()
    phases = {
        "imports": imported - spawned,
        "session": session - imported,
        "first_query": first - session,
        "second_query": second - first,
        "total": second - spawned,
    }
    print(json.dumps({**phases, "events": rows}))


def warm_floor(run: RunDir) -> dict[str, list[float]]:
    """Seconds of each trivial query shape on the cached events of a warmed-up session."""
    from pyspark.sql import functions as F

    from reports.spark import fit_to, get_spark

    events = expected_events(run)
    spark = get_spark(events=events)
    fit_to(spark, events or 0)
    cached = spark.read.parquet(str(_parquet(run))).cache()
    cached.count()
    ts = F.col("ts")

    def joined(i: int) -> None:
        sends = cached.filter(F.col("ev") == "send").select("rid", "src", ts.alias("sent"))
        replies = cached.filter(F.col("ev") == "reply").select("rid")
        sends.join(replies, "rid").filter(F.col("sent") > F.lit(i)).groupBy("src").count().collect()

    shapes = {
        "a filtered count": lambda i: cached.filter(ts > F.lit(i)).count(),
        "a grouping": lambda i: (
            cached.filter(ts > F.lit(i)).groupBy("ev").agg(F.count("*"), F.max(ts)).collect()
        ),
        "a join, then a grouping": joined,
    }
    figures: dict[str, list[float]] = {}
    for name, query in shapes.items():
        for i in range(WARM_UP):
            query(-1 - i)
        figures[name] = []
        for i in range(TIMES):
            t = time.perf_counter()
            query(i)
            figures[name].append(time.perf_counter() - t)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run_argument(parser, "a run directory whose history has its Parquet form (read only)")
    parser.add_argument("--rounds", type=int, default=3, help="cold processes (default 3)")
    parser.add_argument("--cold-child", type=float, metavar="SPAWNED", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child is not None:
        cold_child(args.run, args.cold_child)
        return
    with tempfile.TemporaryDirectory(prefix="zchaos-floor-") as scratch:
        if args.run is None:
            run = synthetic(Path(scratch) / "run")
        else:
            run = RunDir(args.run.resolve())
            _parquet(run)
        measure(run, args.rounds)


def synthetic(root: Path) -> RunDir:
    """checker_scaling's synthetic run of CI_RUN_EVENTS events, reported once (which writes
    its Parquet form) in this process's session."""
    from harness.synthetic import generate
    from reports.pipeline import build_report
    from reports.spark import get_spark

    run = RunDir(root)
    generate(get_spark(events=CI_RUN_EVENTS), run, CI_RUN_EVENTS)
    build_report(run.root)
    return run


def measure(run: RunDir, rounds: int) -> None:
    """The cold processes, then the warm queries, then the targets against them."""
    print(f"{run.root.name}: {expected_events(run) or '?'} events", flush=True)
    colds = []
    for r in range(rounds):
        out, _secs = _timed_child(
            "the cold process",
            [str(Path(__file__).resolve()), str(run.root), "--cold-child", repr(time.monotonic())],
        )
        colds.append(json.loads(out.strip().splitlines()[-1]))
        c = colds[-1]
        print(
            f"  cold {r + 1}: interpreter {c['imports']:.2f} s, PySpark, JVM and session "
            f"{c['session']:.2f} s, first query (read, count) {c['first_query']:.2f} s, second (a grouping) "
            f"{c['second_query']:.2f} s: {c['total']:.2f} s   load {load()}",
            flush=True,
        )
    warm = warm_floor(run)
    for name, secs in warm.items():
        fastest = f"median {1000 * median(secs):.0f} ms, lowest {1000 * min(secs):.0f} ms"
        print(f"  warm, {name}: {fastest}   load {load()}")
    from reports.spark import stop_spark

    stop_spark()
    cold = median(c["total"] for c in colds)
    before_checks = median(c["total"] - c["second_query"] for c in colds)
    cheapest = min(median(secs) for secs in warm.values())
    print(f"\nIssue 24 part 1 against this floor ({rounds} cold processes, medians):")
    print(
        f"  cold: {before_checks:.2f} s to the first query's answer, {cold:.2f} s to the second's, before "
        f"any check; the target {COLD_TARGET_S:g} s leaves {COLD_TARGET_S - cold:+.2f} s for the checks, "
        f"the metrics and the files"
    )
    print(
        f"  warm: the cheapest query {1000 * cheapest:.0f} ms; the target {WARM_TARGET_S:g} s holds "
        f"{WARM_TARGET_S / cheapest:.0f} such queries one at a time, {2 * WARM_TARGET_S / cheapest:.0f} "
        f"two at a time, and nothing else"
    )


if __name__ == "__main__":
    main()
