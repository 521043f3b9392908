"""Warm reports of one run, one thread against several (``ZCHAOS_REPORT_THREADS``), A/B.

A copy of the run is reported once (from its JSON lines: the columnar form is written, the
JVM warms up), then again in rounds, each round once per thread count, alternated so that
every count meets the same minutes of a shared machine's load. Each line: wall seconds,
CPU seconds of this process and its JVM (bench/checker_scaling.py ``cpu_seconds``), the
1-min load average, and whether the verdict (every check and the metrics) is the first
report's. The last lines give each count's median.

    .venv/bin/python bench/report_threads.py /tmp/demo-run --threads 1 2 3 --rounds 4

Measured on the demo run (76k events, 9 checks and the metrics, from Parquet), 2 cores
shared by five engineers, 2026-11-23 05:08-05:14 UTC, load 9.6-10.9 the whole time:

- threads 1: median 15.9 s wall, 8.8 s CPU (4 rounds: 11.9-17.6 s);
- threads 2: median 18.2 s wall, 8.9 s CPU (14.4-19.8 s);
- threads 3: median 14.8 s wall, 9.1 s CPU (13.9-17.1 s);
- every verdict the same as the first report's (checks, examples, metrics).

With every core already taken by others the threads cannot find an idle one: the figures
are within the noise, and the CPU is the same, so running tasks at once costs nothing.
The gain is for a quiet machine, where one report alone kept one core of two busy (its
JVM's CPU ~= its wall time). Per JVM thread (``/proc/PID/task``), one at a time: the
driver thread that plans 2.2 s, the two task threads 2.2 + 1.9 s, in turn (a small
history is one partition: each stage of a job is one task). The read and the first query,
which fills the cache of the events in one task (~1.5 s CPU), stay serial: every check
waits for them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checker_scaling import CI_RUN_EVENTS, cpu_seconds, load, run_argument
from contract.rundir import RunDir
from harness.synthetic import generate
from reports.ingest.read import PARQUET, expected_events
from reports.parallel import THREADS_ENV
from reports.pipeline import build_report
from reports.spark import get_spark


def essence(verdict: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the thread count: every check and the metrics."""
    out = json.loads(json.dumps(verdict, default=str))
    return {"checks": out["checks"], "metrics": out["metrics"], "errors": out.get("errors")}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run_argument(parser, "a stored run directory (copied, never reported in place)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="zchaos-threads-"))
    try:
        run = RunDir(base / "run")
        if args.run is None:
            generate(get_spark(events=CI_RUN_EVENTS), run, CI_RUN_EVENTS)
        else:
            skip = shutil.ignore_patterns(PARQUET, "verdict.json", "report.html")
            shutil.copytree(args.run, run.root, ignore=skip)
        get_spark(events=expected_events(run))
        os.environ[THREADS_ENV] = "1"
        t, c = time.perf_counter(), cpu_seconds()
        first = essence(build_report(run.root))
        print(f"first report (JSON lines, 1 thread): {time.perf_counter() - t:.1f} s, "
              f"{cpu_seconds() - c:.1f} s cpu, load {load()}", flush=True)  # fmt: skip
        figures: dict[int, list[tuple[float, float]]] = {n: [] for n in args.threads}
        for r in range(args.rounds):
            for n in args.threads:
                os.environ[THREADS_ENV] = str(n)
                t, c = time.perf_counter(), cpu_seconds()
                same = essence(build_report(run.root)) == first
                secs, cpu = time.perf_counter() - t, cpu_seconds() - c
                figures[n].append((secs, cpu))
                print(f"round {r} threads {n}: {secs:5.1f} s wall {cpu:5.1f} s cpu  load {load()}"
                      f"  {'same verdict' if same else 'VERDICT DIFFERS'}", flush=True)  # fmt: skip
        for n, got in figures.items():
            print(f"threads {n}: median {median(s for s, _ in got):.1f} s wall, "
                  f"{median(c for _, c in got):.1f} s cpu over {len(got)} rounds")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
