"""Checker scaling: the whole report (every check the Paranoid Pirate and PING/PONG manifests
promise) at 100k, 1M and 10M events, whole process and warm, against pandas in the same run.

For each size a synthetic run is written: a broker, 4 workers and 100 clients; per request
a send, a dispatch, an exec, a done and a reply; each worker PINGs every second and is
answered; a latency fault on the clients' link; a few lost, duplicated and out-of-order
replies. Its run.json is the PING/PONG manifest's (options, endpoints) promising the union
of both manifests' checks (14). Then it is reported four ways, each verdict compared:

- **whole process, JSON**: ``zchaos report RUN`` in a new process on the JSON lines (JVM
  start, parsing, the columnar form written, every check, the three output files);
- **whole process, Parquet**: the same again, now reading history/events.parquet (a rebuild);
- **warm, JSON / warm, Parquet**: ``build_report`` in this process, the session running;
- **pandas**: no_lost, no_duplicate and in_order (only those three) with plain pandas from
  the Parquet form, one core: the bar the issue sets for the engine's overhead.

Each line shows the load average (1 min) when it ended, and every figure is also given as
a multiple of pandas's time on the same history in the same run ("x pandas"): the machine
this was written on is shared by five engineers, so seconds taken under load say little,
while the ratio to a baseline measured minutes apart says more. The last lines are the
table of issue 12, each figure against its target. The one command for it (``--demo``: a
stored run of the demo scenario, made with ``zchaos run scenarios/paranoid-pirate-kill-worker.toml``):

    .venv/bin/python bench/checker_scaling.py --demo runs/<the demo run>    # 100k, 1M, 10M
    .venv/bin/python bench/checker_scaling.py --sizes 100000 --profile      # the demo's size only

``--profile`` prints, per step of a warm report from Parquet, the wall seconds, the CPU
seconds of this process and its JVM together (which moves far less with the load than the
wall time), and the Spark jobs and stages (each ``count()``, ``first()``, ``collect()`` and
broadcast is a job; with adaptive execution each shuffle stage is one more).

The latest figures (2026-11-26, nothing else running, this machine slower than the day before:
the session-start tree took 44-51 s for the 10M rebuild that took 41-53 s then); each change
measured alone against the tree before it, figures and examples identical on 4 stored runs:

- whole process, 10M: 50.9 s from JSON, 35.1 s rebuilt (the day before 72.5 / 52.7 s; runs
  of this session before its last changes: 63.3 / 40.9 and 55.3 / 37.2 s); warm rebuild 24.0 s
  (39.4); pandas (3 checks) 12.4 s, so 2.8x pandas rebuilt. 1M: 17.0 / 16.5 s. 100k: 10.9 /
  11.8 s (9.7 / 10.8 the day before). The demo run: 8.7 / 8.0 s in the benchmark's single
  runs; 6 pairs alternating with the session's start tree, rebuilt: median 7.70 s against
  7.78 s (so a single figure at demo size is +-1 s of noise).
- The JSON lines' conversion (reports/ingest.py) writes a split history's files on a thread
  while it reads the next: 10M, the conversion alone, 3 pairs: 16.7-17.3 -> 13.1-14.5 s.
- JIT: a cold 10M report spent 45 s of CPU compiling (C2 37 s, -XX:+CITime), on two cores
  beside its tasks: with C2 inlining less (reports/spark.py LESS_INLINING) the rebuild took
  37.9-48.0 s (median 40.1) against 44.4-51.5 s (48.8), 5 pairs. The quick compiler alone
  (C1) at 10M: 70 s against 52.6 s; C2 alone: no better; higher C2 thresholds: no change.
- client_kinds (metrics): counts per kind and client, requests as 64-seq bit words OR-ed per
  client, in one chain of aggregations reduced before each shuffle: 10M warm 7.7-9.3 -> 2.1-2.5
  s CPU; demo metrics cold 2.95 -> 2.5 s.
- pingpong_reconnect: each PING's last other event by a broadcast range join
  (toolkit.last_before), not a window sorting every job by worker: 10M warm 9.4-10.4 -> 2.9-3.6
  s CPU; at 100k 0.2-0.3 s more (two more jobs).
- in_order at 10M: counts and first offenders from one aggregation (totals_and_firsts, min_by
  keeping a bottom ten), where the window ran twice when anything was out of order: 7.6-8.9 ->
  5.7-6.6 s CPU; below 2M events the count stays generated code (one aggregation cost the demo
  0.1-0.2 s per check).
- Measured and not kept: shuffle compression off at 10M (noise); the object-hash aggregation's
  sort fallback threshold raised for client_pass (no change); a window over an integer client
  key instead of the client's name (no change); the counts and examples as a union of two
  queries sharing the window's shuffle (3.1 s against 1.85 + 1.71 s: little).
- Where a 10M rebuild's time goes now (whole process, 2 at a time): Spark start 3 s, the first
  query (control events, beside the metrics' start) 5 s, metrics 18 s and no_lost 18 s side by
  side (no_lost builds the per-request aggregate: 3.6 s wall / 6.8 s CPU warm, of which caching
  is half; its examples' texts, request_details, scan every client event: 1.5 s), no_duplicate
  11 s (per_rid: a shuffle of 6M rows by request id), every other check 0.2-3.5 s. Cold JVM
  code (compilation) is the larger part of the difference between warm (24 s) and whole (35 s).

The figures before, the first on a quiet machine (2026-11-25, nothing else running; the
load average shown is the benchmark's own, one report on two cores), main at a28f419:

- demo run (105,787 events, 9 checks), whole process: 7.3 s from JSON lines, 7.3 s rebuilt
  (the benchmark); by hand, 7 rounds each: 7.4-9.6 s from JSON, 7.4-8.7 s rebuilt.
- 100k synthetic (14 checks): 9.7 s JSON, 10.8 s rebuilt, warm 8.6 / 5.7 s; pandas 0.1 s.
- 1M: 17.1 s JSON, 16.4 s rebuilt, warm 13.2 / 13.8 s; pandas 0.7 s.
- 10M (10,000,664 events, 1.15 GB): 72.5 s JSON, 52.7 s rebuilt, warm 69.3 / 39.4 s;
  pandas (3 checks) 11.9 s. So the loaded figures below overstated the wall time 5-10x.
- 10M, per step of a warm rebuild, each step alone (s wall / s CPU): no_lost 11.0 / 21.3
  (with building the per-request aggregate: 9 / 17.5 of it, of which caching it was half),
  metrics 11.1 / 18.8 (client_pass 4.7 / 6.1, client_kinds 4.6 / 8.9), no_duplicate 6.4 /
  12.0 (with per_rid), in_order 5.9 / 11.5 (with violations its window runs twice: once
  for the counts, once for the examples), pingpong_reconnect 5.7 / 11.2, steady_state 2.6 /
  5.0, pingpong_expiry 2.1 / 4.0, the fault windows 1.8 / 3.5, every other under 1 s.
- Measured and kept: the in-memory cache uncompressed (reports/spark.py). Measured and not
  kept: adaptive execution off at 10M (2 rounds alternating, warm: 37.1 / 30.9 s on
  against 33.1 / 32.8 s off: noise).

Where the time goes (measured 2026-11-23 on main at 35d3e7a, before this round of work):

- 100k events (11 MB of JSON), at the start of the session, load 0.4-3.6: whole process
  33.6 s from JSON lines, 31.9 s rebuilt from Parquet; warm (session running) 22.7 s from
  JSON; pandas 0.5 s for its three checks (load 9.8). So about 11 s is fixed (Python
  imports, the JVM, the session, the first query's planning and code generation) and
  about 22 s is the checks and metrics: ~95 Spark jobs of 0.1-0.5 s each on a history of
  11 MB. Per step (load 10-11): no_lost 5.2 s (10 jobs), execution_count 3.2 s (12),
  metrics 4.4 s (8), pingpong_expiry 3.3 s (10), the first query 2.8 s (it fills the
  cache from Parquet), every other check 0.1-2.7 s (2-8 jobs).
- 1M events (114 MB), load 10-18: whole process 107.5 s from JSON, 130.9 s from Parquet,
  warm 164 s; pandas 4.0 s. Per step (load 15-18): metrics 65 s (16 jobs: exact
  percentiles per second of the timeline, per client kind and overall, each a pass),
  no_lost 36 s (21), execution_count 25 s (26), pingpong_no_dispatch_to_expired 21 s
  (16), pingpong_reconnect 15 s, in_order 14.5 s, steady_state 11 s. Above
  CACHE_MAX_EVENTS (1M) nothing is cached and each of these passes reads the Parquet
  form again.
- **What dominates**: not JSON parsing (once per run, at the first report, with the
  explicit schema: it is in the JSON-vs-Parquet difference, small next to the rest), nor
  rows collected to the driver (counts and at most 10 examples per check, since the
  toolkit), but the number of Spark jobs and passes: at demo size each job's fixed cost
  (planning, code generation, task launch, adaptive re-planning of each shuffle stage, the
  broadcast of each small fault frame) times ~95 jobs; at 1M, the same passes over
  uncached data and the metrics' exact percentiles. The JVM start and first query are
  about a third of the demo-size whole process.

What changed since (issue 12 parts 2 and 3, this session): the requests are grouped once
for no_lost and steady_state (``toolkit.per_request``) and once per request id for
no_duplicate and execution_count (``toolkit.per_rid``), cached; pingpong_expiry and
workers_return judge in Spark; the run's control events (faults, phases, process exits)
are read in one job for the fault windows, the completeness and the process table, and
its last event time comes from the profile; the broker-dispatch rule counts in one job;
adaptive execution is off below ADAPTIVE_MIN_EVENTS (reports/spark.py); the client-kind
metrics are two plain aggregations instead of one with two distinct counts; a fault
excuses rows through an EXISTS over the small fault frame (one broadcast existence join,
one pass) instead of a semi join, an anti join and a union (two passes, and the windowed
frames computed twice). Measured after (load 3.5-6, verdicts identical on 12 stored CI-like
runs and the 100k synthetic one, every check's figures, summary and examples compared):

- 100k, warm report (``check_run``, rounds 2-3 of a session; main at 35d3e7a, then this
  code, load 3.8-5.4): Spark jobs 96 -> 43; wall 19-29 s -> 14-15 s; CPU 15.6-23.0 s ->
  16.1-17.4 s, which is within the noise: halving the jobs did not halve the CPU, so what
  is left per query (planning, code generation of each new plan) is the next thing to
  look at. Per step now (load 5): every check 1-7 jobs, 0.1-3.1 s CPU.
- 1M, warm, from Parquet: 43-45 jobs, 46-54 s CPU (load 3.5-5; caching the 1M events, as
  below CACHE_MAX_EVENTS, made no measurable difference). The client-kind metrics alone:
  6.7-7.0 s -> 2.1-2.3 s CPU, same figures on 6 histories.
- Whole process (load 4-6, too noisy to tell main from this code: 40-66 s both): the demo
  run (76k events, 9 checks) 60.3 s from JSON, 33.9 s rebuilt; 100k synthetic 39.0 s
  from JSON, 30.2 s rebuilt; pandas 0.1 s. A session start alone took 15 s and its first
  query 7.8 s at load 6: on this machine the fixed cost is now most of a demo report.
- Not measured then: 10M, and any figure on a quiet machine.

10M events (10,000,664 events, 1,152 MB of JSON lines; ``--sizes 10000000 --dir D`` keeps
the run in D/run-10000000 for the next time), measured 2026-11-23 04:18-05:45 UTC with
every other engineer's reports running (load 8-21, so the wall seconds say little: CPU
seconds are python + JVM, whole process, in-process timing of ``build_report``):

- Before (main at 1b3749e): JSON -> checked 1031 s at load 8-13, 342.6 s CPU (GC 14.9 s);
  rebuilt from Parquet 558 s at load 9-12, 229.0 s CPU (GC 7.4 s), 83 jobs. Where the CPU
  went, per step of the rebuild: session start 12.3 s, reading 7.9 s, no_lost 71.4 s and
  no_duplicate 44.0 s (their shared per-request and per-id aggregations: a minimum of a
  text makes Spark sort every event instead of hashing it; the per-request one alone was
  41 s sorted against 20 s hashed on the same events), metrics 27.3 s, pingpong_reconnect
  16.6 s and pingpong_no_dispatch_to_expired 11.0 s (windows sorting every exec or dispatch
  by worker), in_order 13.7 s (a window sorting every reply by client), every other check
  0.5-5.7 s. From the JSON lines, the read and compaction took about 120 s more: the
  parsed lines cached in memory, counted (profile, bad lines), then written from the cache
  split by kind (Spark sorts each task's rows by kind first). On an eighth of the lines:
  parsing alone 3.6-5.1 s CPU, that cache-count-write 21.0 s, one pass straight to Parquet
  without the sort (a file open per kind) 8.6 s.
- After (the shared aggregations hold only fixed-width values, texts looked up for the
  examples shown; a large history's JSON goes to Parquet in one pass, bad lines aside; with
  main's two-at-a-time checks and class-data archive): JSON -> checked 932 s at load 11-21,
  257.2 s CPU (read + compaction 102.7 s of it); rebuilt from Parquet 463 s at load 11-13,
  167.7 s CPU (GC 6.4 s); verdicts identical. The rebuild's CPU now: no_lost with the
  metrics (run together) 74.5 s, in_order with no_duplicate 38.2 s, pingpong_reconnect
  18.4 s, pingpong_no_dispatch_to_expired 10.8 s, everything else under 7 s each.
- So the targets (30 s and 15 s on 2 cores, which bounds the CPU at about 60 s and 30 s)
  are far off: the JSON parse alone is about 30-40 s CPU at 10M, and the checks about 150
  s. What dominates: the per-request aggregations and the metrics' exact percentiles per
  second (each a shuffle of millions of rows), and the windows that sort every reply,
  dispatch or exec event.

Then (issue 12 part 2 at demo size, this session): a JFR profile of warm demo reports
showed 19% of the JVM's samples building Spark's in-memory cache (a third of that choosing
column compressions), so the checks read the history's Parquet form instead of a cache of
every column (per-request and per-id frames stay cached); the metrics' timeline, overall
and per-kind latency and endpoint figures come from one aggregation (each event copied
into the groupings it counts in; 6 jobs -> 2); recovery's first ok reply and first target
exec per fault from one range join (4 -> 2); no check builds a frame with createDataFrame
(it starts a Python worker process), small frames are literals in the plan. The demo run,
warm, alternating in one session (load 15-20): CPU 10.0 s (cached) -> 7.4 s (Parquet)
median of 5; jobs 22 -> 17; the first report (from JSON) 12.9 -> 11.9 s.

Then (the JSON lines -> Parquet step, reports/ingest.py): a clean history is converted by
pyarrow's JSON reader (the explicit schema of FIELD_TYPES, 4 MB blocks, its own threads), file
by file, in a thread started before the JVM; Spark's permissive reader stays for a history
with lines that are not events. CPU is the process and its JVM together (psutil, sampled);
``zchaos report`` whole process, 2026-11-23 07:45-07:54 UTC, load 7-10, alternating:

- the demo run (105,787 events, 13 MB, 9 checks), 3 rounds: main at c2ccae0 from JSON 24.8-26.8
  s wall, 19.4-22.4 s CPU; now from JSON 16.4-20.6 s, 15.1-16.7 s CPU; from Parquet 18.4-20.9
  s, 15.3-17.6 s CPU. From "reading history" to "checking": 10.2-11.2 s before, 2.1-3.6 s
  now (from Parquet: 2.5-2.9 s): the conversion (alone 0.6-0.9 s wall, 0.5-0.7 s CPU at load
  7; 2.7-3.8 s wall beside the JVM's start at load 11-16) ends before the JVM is up, so a
  report from JSON costs what a rebuild costs. Again at 08:20 with main's later work (load
  9-11, 2 rounds): main at c2ccae0 from JSON 38.5-42.4 s wall, 23.4-27.2 s CPU, from Parquet
  26.7-27.2 s, 19.4-20.0 s CPU; now from JSON 27.6-33.9 s, 19.2-21.9 s CPU, from Parquet
  26.3-31.2 s, 18.1-21.2 s CPU.
- 10M (10,000,664 events, 1.15 GB): the conversion alone 31.5 s CPU (124 s wall at load
  14-15, with a golden comparison beside it; peak memory 658 MB), where Spark's read and
  compaction cost 102.7 s CPU; JSON -> checked whole process 357 s wall at load 7.5-9.7,
  199.5 s CPU (last session: 932 s at load 11-21, 257.2 s CPU), the conversion 61 s of it
  (19 s beside the JVM's start), the checks 287 s; verdict and account identical.
- Kept identical: the same events, profile and account as Spark's path on all 41 golden runs
  (pyarrow took 40; damaged-demo was declined: garbage lines), and the same verdicts
  (/work/golden/compare.py). What pyarrow reads otherwise than Spark (two objects on a line,
  an object over two lines, a lone carriage return, bytes that are not UTF-8, Jackson's depth,
  number and name limits) is declined, with the lines that are not events
  (tests/test_ingest.py feeds both readers the same lines).

Then (the demo report's fixed cost from Parquet, 2026-11-23 07:12-08:28 UTC, load 2-16;
process + JVM CPU, the JVM's per thread from /proc/PID/task; /tmp/demo-run copied):

- Where a whole-process report's CPU goes (load 13): the JVM 9.9 s, Python 1.1 s. Of the
  JVM's: the executor's task threads 3.0 s, the quick compiler (C1) 2.9 s, the py4j threads
  that analyse, plan and generate code for each query 1.9 s, the JVM's start 0.7 s, GC 0.6 s.
- "reading history" is not a read: the Parquet form's DataFrame with its explicit schema
  costs 0.3 s CPU and no job (the session's SQL state, made on first use, and a listing of
  one folder; no schema inference, no footers). The rest of that step was the process's
  first query (the control events: 1 job, 1.5-1.8 s CPU cold, 0.12-0.18 s warm).
- Cold against warm, one process, the same steps three times in a row (load 12): 10.6 s
  CPU the first time, 5.4-5.7 s after, with the same 17 jobs (no_lost 3, metrics,
  steady_state, recovery and availability 2, every other step 1); metrics 2.8 -> 1.3 s,
  no_lost 2.2 -> 1.3 s. So half of a report's query CPU is first-time cost, not jobs: the
  JVM interpreting code before C1 compiles it, class initialisation, lambdas spun (not in
  the class archive) and Janino compiling each new generated class. A JFR profile of one
  cold and five warm passes: Janino 21% of the samples, generating the code 12%, running it
  13%, Java serialization (tasks, closures) 8%, py4j's reflection 7%, class loading and
  lambdas 7%, the scheduler 6.5%, building the per-request caches 6%, the analyser 5%.
- py4j: a cold demo report makes 4,941 round trips (1,861 calls, 1,388 releases of Python
  references, 739 class and 739 member look-ups of pyspark.sql.functions); an expression
  such as ``F.col`` costs ~0.9 ms of CPU, the same with its look-ups cached (not done).
- PySpark's first call into the JVM imported pandas, NumPy and pyarrow (its NumPy
  converter imports pyspark.testing.utils): 0.31-0.34 s CPU on the main thread while the
  other core idled. Now imported on a thread while the JVM starts (reports/spark.py PRELOAD).
- The metrics need no fault window: they now start as soon as the history is read, on the
  second thread, while the first reads the control events (reports/parallel.py ``Tasks``),
  instead of after them with one core idle during the process's first query.
- The serial collector below SERIAL_GC_EVENTS (1M): 0.7 s less CPU on average over 9 pairs
  (less in 7); a G1 archive is used under it and the other way round. Its GC log (load 10):
  19 young pauses of 8-95 ms and one full collection for the metadata threshold (250 ms).
- Measured and not kept (alternating pairs, CPU): C1's thresholds raised 5-10x: 0.8-1.2 s
  more (more interpreting); the in-memory cache uncompressed, the two-level aggregation map
  off, plan descriptions ``simple``, shuffle and broadcast compression off, all together:
  16.0 against 16.2 s (4 pairs); ``-XX:MetaspaceSize=256m`` (no full collection): no change
  (4 pairs); a 600 MB young generation: 5 pauses instead of 20 but longer, more in all;
  Parallel GC: within the noise; the launcher JVM with C1 and the serial collector: 0.12 s
  CPU either way; Python's exit (module teardown, 0.22 s at load 10): left.
- Whole process from Parquet, main at c2ccae0 against this work, 4 pairs alternating at load
  9-11 (after ingest's changes): CPU 19.3-21.4 s against 19.4-20.3 s; wall 20-32 s against
  21-31 s. CPU seconds drifted by a third within the hour with the other machines' load
  (the same tree 14.6 s at 08:12, 19-20 s at 08:25): only alternating pairs compare, and
  the overlap's gain (a core that idled) shows only on a quiet machine, which this was not.

Then (10M rebuilt from Parquet, the checks' passes; 2026-11-23 07:15-08:45 UTC, load 8-18
throughout, so every figure below is noisy: CPU of the process and its JVM):

- Measured first (2M events, ``--sizes 2000000 --profile``, warm, load 11-18): no_lost 10.6 s
  CPU, metrics 7.8, no_duplicate 5.9, in_order 3.7, pingpong_reconnect 3.2,
  pingpong_no_dispatch_to_expired 2.7, pingpong_expiry 2.3; all steps 43.7 s. A JFR profile
  of warm rounds: partial (pre-shuffle) hash aggregation 16% of the samples, sorting for
  windows 10%, the shuffle's row writing and hashing most of the rest.
- The shared per-request and per-id aggregates (``toolkit.prepare``): each group (a request,
  an id) meets 2-3 events, so Spark's partial aggregation before the shuffle reduces nothing
  and costs a hash table of every event. They are now planned, before any check runs, with
  ``spark.sql.execution.bypassPartialAggregation`` (one aggregation after the shuffle). At
  2M, warm, alone: per_request 3.4 -> 2.3 s CPU, per_rid 2.6 -> 1.6 s. per_request's
  ``last_seq`` was a second full per-request aggregation hidden in its plan (a broadcast of
  each client's last request computed from the requests again): now each client's highest
  sent ``seq``, from the sends. in_order's window shuffles and sorts only cid, ts and seq
  (the offenders shown get their other fields by a join) and counts clients without a
  distinct count. registered_dispatch (pingpong_no_dispatch_to_expired,
  sketch_no_dispatch_to_disabled): each dispatch finds its worker's registration by a
  broadcast range join over the few registrations and expiries (their spans cut into time
  buckets, the bucket an equality key), not a window sorting every dispatch.
- 10M rebuilt from Parquet after these (one process, each step alone and cold, JIT included,
  load 8.1-9.6; /tmp prof script, the same steps as ``--profile``): 300 s wall, 174.4 s CPU.
  Per step: no_lost 40.8 s CPU (16 jobs, with the per-request aggregate), metrics 34.7 (6),
  no_duplicate 18.5 (7, with per_rid), pingpong_reconnect 17.8, in_order 16.2, steady_state
  11.0 (an exact p99 over 2M latencies), pingpong_expiry 7.4, the fault windows (the first
  query) 6.7, pingpong_no_dispatch_to_expired 3.9 (was 10.8), recovery 3.7, every other
  under 3. Against the last session's rebuild (2 at a time, load 11-13): no_lost with the
  metrics 74.5 -> 75.5, in_order with no_duplicate 38.2 -> 34.7, reconnect 18.4 -> 17.8. So
  apart from the dispatch rule the gains measured alone at 2M do not show through this
  noise at 10M, and the 15 s target (about 25 s CPU) stays far: the per-request and per-id
  aggregations, the metrics' exact percentiles and the reply and exec windows are each
  still a shuffle of millions of rows.
- Measured and not kept: pingpong_reconnect without its window (each PING's last other
  event from per-bucket maxima and a join within its bucket): 6.9 s CPU at 2M against 4.9
  s for the window (two scans of every exec and four jobs cost more than one sort); the
  bypass for every aggregation of a report (2M, 3 rounds): 46.6 against 47.0 s CPU, no
  difference (though the metrics alone, 2M warm: 5.25 -> 4.3 s).
- Not done: the metrics from fewer copies of each reply (the overall latency equals the
  one client kind's when there is one), client_kinds' per-request aggregation shared with
  per_request, request_details' scan of every request's events for the ten shown, the
  exact p99 of steady_state.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.manifest import load_manifest
from harness.rundir import RunDir
from reports.pipeline import PARQUET, build_report
from reports.spark import get_spark

ROOT = Path(__file__).resolve().parent.parent
NS = 1_000_000_000
T0 = 1_763_726_400 * NS
CLIENTS = 100
WORKERS = 4
STEP_NS = 50_000  # one request every 50 us across all clients, over at least MIN_SPAN_NS
MIN_SPAN_NS = 60 * NS  # the demo run's minute of load
LOST_EVERY, DUP_EVERY, DISORDER_EVERY = 10_007, 50_021, 70_001
#: Issue 12's targets, whole process (seconds), with the history size whose pandas time is the bar.
TARGETS = {
    "demo run, JSON -> checked": (8.0, 100_000),
    "demo run, rebuild from Parquet": (8.0, 100_000),
    "100k synthetic, JSON -> checked": (8.0, 100_000),
    "100k synthetic, rebuild from Parquet": (8.0, 100_000),
    "10M synthetic, JSON -> checked": (30.0, 10_000_000),
    "10M synthetic, rebuild from Parquet": (15.0, 10_000_000),
}


def load() -> str:
    return f"{os.getloadavg()[0]:5.1f}"


def generate(spark, run: RunDir, events: int) -> int:
    """Write a run of about ``events`` events (JSON lines and run.json); returns the exact count."""
    from pyspark.sql import functions as F

    requests = events // 5
    step_ns = max(STEP_NS, MIN_SPAN_NS // requests)
    span_ns = requests * step_ns
    r = spark.range(requests).select(
        F.concat(F.lit("client-"), (F.col("id") % CLIENTS).cast("string")).alias("cid"),
        ((F.col("id") / CLIENTS).cast("long") + 1).alias("seq"),
        (F.lit(T0) + F.col("id") * step_ns).alias("t"),
        "id",
    )
    r = r.withColumn("rid", F.concat_ws(":", "cid", F.col("seq").cast("string")))
    lat_us = (F.col("id") * 7919 % 3000 + 200).cast("long")
    disorder = F.col("id") % DISORDER_EVERY == 11
    reply_ts = F.when(disorder, F.col("t") - 3 * CLIENTS * step_ns).otherwise(F.col("t") + lat_us * 1000)
    instance = F.concat(F.lit("worker-"), (F.col("id") % WORKERS + 1).cast("string"))
    conn = F.concat(instance, F.lit("-c0"))
    none = {"attempt": "int", "ok": "boolean", "latency_us": "long", "worker": "string", "detail": "string"}

    def ev(kind: str, ts: Any, src: Any, **cols: Any) -> Any:
        fields = {"ts": ts, "src": src, "ev": F.lit(kind), "cid": F.col("cid"), "seq": F.col("seq")}
        fields["rid"] = F.col("rid")
        fields.update({k: F.lit(None).cast(t) for k, t in none.items()})
        fields.update(cols)
        return F.struct(*(v.alias(k) for k, v in fields.items()))

    no_client = {"cid": F.lit(None).cast("string"), "seq": F.lit(None).cast("long")}
    send = ev("send", F.col("t"), F.col("cid"), attempt=F.lit(1))
    dispatch = ev("dispatch", F.col("t") + 5_000, F.lit("broker"), worker=conn, detail=F.lit(""), **no_client)
    exe = ev("exec", F.col("t") + 10_000, instance, worker=conn, **no_client)
    done = ev("done", F.col("t") + 20_000, instance, worker=conn, **no_client)
    reply = ev("reply", reply_ts, F.col("cid"), ok=F.lit(True), latency_us=lat_us, worker=conn)
    again = ev("reply", F.col("t") + 50 * NS, F.col("cid"), ok=F.lit(True), latency_us=lat_us, worker=conn)
    parts = (
        F.when(F.col("id") % LOST_EVERY == 5, F.array(send, dispatch, exe, done))
        .when(F.col("id") % DUP_EVERY == 7, F.array(send, dispatch, exe, done, reply, again))
        .otherwise(F.array(send, dispatch, exe, done, reply))
    )
    out = r.select(F.explode(parts).alias("e")).select("e.*")
    tmp = run.root / "gen"
    out.repartition(16).write.mode("overwrite").json(str(tmp))
    run.history.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(sorted(tmp.glob("part-*.json"))):
        part.rename(run.history / f"src-{i}.jsonl")
    shutil.rmtree(tmp)
    side = _side_events(span_ns)
    (run.history / "protocol.jsonl").write_text("".join(json.dumps(e) + "\n" for e in side))
    _write_meta(run, span_ns)
    return spark.read.text(str(run.history / "*.jsonl")).count()


def _side_events(span_ns: int) -> list[dict[str, Any]]:
    """Processes, registrations, heartbeats and one latency fault on the clients' link."""
    out: list[dict[str, Any]] = [
        {"ts": T0 - NS, "src": "runner", "ev": "proc_start", "role": "broker", "instance": "broker", "pid": 1}
    ]
    for w in range(1, WORKERS + 1):
        inst, conn = f"worker-{w}", f"worker-{w}-c0"
        out.append(
            {
                "ts": T0 - NS,
                "src": "runner",
                "ev": "proc_start",
                "role": "worker",
                "instance": inst,
                "pid": 10 + w,
            }
        )
        out.append(
            {"ts": T0 - NS // 2, "src": "broker", "ev": "worker_ready", "worker": conn, "detail": "ready"}
        )
        for k in range(span_ns // NS + 1):
            at = T0 + k * NS + w * 1000
            out.append({"ts": at, "src": inst, "ev": "ping", "worker": conn})
            out.append({"ts": at + 1_000_000, "src": inst, "ev": "pong", "worker": conn})
    for inst in ["broker"] + [f"worker-{w}" for w in range(1, WORKERS + 1)]:
        role = inst.split("-")[0]
        exit_ = {"role": role, "instance": inst, "pid": 1, "signal": 15, "expected": True}
        out.append({"ts": T0 + span_ns + NS // 2, "src": "runner", "ev": "proc_exit", **exit_})
    start, stop = T0 + span_ns // 3, T0 + span_ns // 3 + span_ns // 100
    fault = {"fault": "latency", "target": "link:clients", "fault_id": 1, "params": "{}"}
    out.append({"ts": start, "src": "nemesis", "ev": "fault_start", **fault})
    out.append({"ts": stop, "src": "nemesis", "ev": "fault_stop", **fault})
    return out


def _write_meta(run: RunDir, span_ns: int) -> None:
    pingpong = load_manifest("pingpong").as_dict()
    pirate = load_manifest("paranoid-pirate").as_dict()
    checks = list(dict.fromkeys(pirate["promises"]["checks"] + pingpong["promises"]["checks"]))
    pingpong["promises"]["checks"] = checks
    processes = {"broker": "broker"} | {f"worker-{w}": "worker" for w in range(1, WORKERS + 1)}
    run.write_meta(
        {
            "scenario": {"name": "checker-scaling", "seed": 1, "options": {}},
            "manifest": pingpong,
            "processes": processes,
            "started_ns": T0 - 2 * NS,
            "load_started_ns": T0,
            "load_stopped_ns": T0 + span_ns,
            "ended_ns": T0 + span_ns + 51 * NS,
            "client_budget_s": 10,
        }
    )


def whole_process(run: RunDir) -> tuple[dict[str, Any], float]:
    """``zchaos report RUN`` in a new process: its verdict and wall time."""
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "report", str(run.root)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    secs = time.perf_counter() - t
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"zchaos report failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(run.verdict_json.read_text()), secs


def warm(run: RunDir) -> tuple[dict[str, Any], float]:
    t = time.perf_counter()
    verdict = build_report(run.root)
    return json.loads(json.dumps(verdict, default=str)), time.perf_counter() - t


def pandas_check(path: Path, load_stopped_ns: int) -> dict[str, int]:
    """no_lost, no_duplicate and in_order in plain pandas (one core), from the Parquet form."""
    import pandas as pd

    df = pd.read_parquet(path, columns=["ts", "ev", "cid", "seq", "rid", "got_rid"])
    sends = df[df.ev == "send"].groupby(["cid", "seq"]).ts.agg(["min", "max"]).reset_index()
    ends = df[df.ev.isin(["reply", "abandon"])][["cid", "seq"]].drop_duplicates()
    m = sends.merge(ends, on=["cid", "seq"], how="left", indicator=True)
    last = sends.groupby("cid").seq.transform("max")
    open_ = m["_merge"] == "left_only"
    indeterminate = open_ & ((m["max"] > load_stopped_ns - 10 * NS) | (m["seq"] == last))
    lost = int((open_ & ~indeterminate).sum())
    deliveries = pd.concat([df.rid[df.ev == "reply"], df.got_rid[df.ev == "unexpected"].dropna()])
    counts = deliveries.value_counts()
    dup = int((counts[counts > 1] - 1).sum())
    replies = df[df.ev == "reply"].sort_values(["cid", "ts", "seq"])
    prev = replies.groupby("cid").seq.shift()
    return {"no_lost": lost, "no_duplicate": dup, "in_order": int((replies.seq <= prev).sum())}


def cpu_seconds() -> float:
    """CPU time used so far by this process and the JVM behind its SparkSession (user + system):
    on a shared machine it moves far less with the load than the wall time does."""
    from pyspark import SparkContext

    own = os.times()
    total = own.user + own.system
    jvm = getattr(SparkContext._gateway, "proc", None) if SparkContext._gateway else None
    if jvm is not None:
        with open(f"/proc/{jvm.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def where_the_time_goes(spark, run: RunDir) -> None:
    """Per step of a warm report: seconds, Spark jobs and stages (each check in its own job group)."""
    from reports import pipeline
    from reports.checkers import CheckContext, registry, toolkit
    from reports.metrics import compute_metrics

    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def step(name: str, fn: Callable[[], Any]) -> Any:
        sc.setJobGroup(name, name)
        t, c = time.perf_counter(), cpu_seconds()
        out = fn()
        secs, cpu = time.perf_counter() - t, cpu_seconds() - c
        jobs = tracker.getJobIdsForGroup(name)
        stages = sum(len(info.stageIds) for j in jobs if (info := tracker.getJobInfo(j)) is not None)
        print(
            f"    {name:<34}{secs:7.2f} s {cpu:6.2f} s cpu {len(jobs):4d} jobs {stages:4d} stages"
            f"   load {load()}"
        )
        return out

    meta = run.read_meta()
    history = step("read (profile, bad lines)", lambda: pipeline.read_events(spark, run))
    faults, _ = step("fault windows", lambda: pipeline.fault_windows(history.events, history.profile))
    ctx = CheckContext(spark, history.events, meta, faults, run.root, history.profile)
    names = meta["manifest"]["promises"]["checks"]
    shared = {s for name in names if name in registry() for s in registry()[name].shares}
    step("plan shared aggregates", lambda: toolkit.prepare(ctx, shared))
    for name in names:
        step(name, lambda name=name: registry()[name].run(ctx))
    step("metrics", lambda: compute_metrics(history.events, meta["load_started_ns"], history.profile))
    sc.setJobGroup("other", "other")
    history.release()


def outcome(verdict: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {name: (c["status"], c["violations"]) for name, c in verdict["checks"].items()}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t


def report_table(figures: dict[str, tuple[float, str]], pandas: dict[int, tuple[float, str]]) -> None:
    """The table of issue 12: each figure against its target and against pandas on the same
    history in the same run (the ratio that means something on a loaded machine)."""
    print("\nIssue 12's table (whole process; figure / target <= 1.0 meets it; x pandas: / pandas's")
    print("time for the same history in this run, one core, 3 checks; load: 1-min load average after it):")
    print(f"  {'work':<40}{'figure':>9}{'load':>7}{'target':>8}{'/target':>9}{'x pandas':>10}")
    for name, (target, size) in TARGETS.items():
        if name not in figures:
            print(f"  {name:<40}{'not measured':>16}")
            continue
        secs, at = figures[name]
        vs_pandas = f"{secs / pandas[size][0]:9.1f}x" if size in pandas else f"{'-':>10}"
        print(f"  {name:<40}{secs:8.1f}s{at:>7}{target:7.0f}s{secs / target:9.2f}{vs_pandas}")
    for size, (secs, at) in sorted(pandas.items()):
        print(f"  {f'pandas, {size:,} events (the bar)':<40}{secs:8.1f}s{at:>7}")


def demo_report(demo: Path, base: Path) -> tuple[float, str, float, str]:
    """``zchaos report`` of a copy of a stored run, from its JSON lines (a first report) and
    again from the Parquet form the first wrote (a rebuild): (seconds, load) of each."""
    run = RunDir(base / "demo")
    shutil.rmtree(run.root, ignore_errors=True)
    shutil.copytree(demo, run.root, ignore=shutil.ignore_patterns(PARQUET, "verdict.json", "report.html"))
    first, secs_json = whole_process(run)
    load_json = load()
    again, secs_parquet = whole_process(run)
    assert outcome(first) == outcome(again), (outcome(first), outcome(again))
    return secs_json, load_json, secs_parquet, load()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000], help="events per history"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write the runs (default: a temp dir)"
    )
    parser.add_argument(
        "--demo", type=Path, default=None,
        help="a stored run directory (the demo's: zchaos run scenarios/paranoid-pirate-kill-worker.toml) "
        "whose whole-process report is timed too (on a copy)",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="seconds, CPU, jobs and stages per check")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="zchaos-bench-"))
    figures: dict[str, tuple[float, str]] = {}
    pandas: dict[int, tuple[float, str]] = {}
    try:
        if args.demo is not None:
            secs_json, at_json, secs_parquet, at_parquet = demo_report(args.demo, base)
            print(
                f"demo run {args.demo.name}: whole process {secs_json:.1f} s from JSON lines "
                f"(load {at_json}), {secs_parquet:.1f} s rebuilt from Parquet (load {at_parquet})"
            )
            figures["demo run, JSON -> checked"] = (secs_json, at_json)
            figures["demo run, rebuild from Parquet"] = (secs_parquet, at_parquet)
        spark = get_spark(events=max(args.sizes))
        for size in args.sizes:
            run = RunDir(base / f"run-{size}")
            shutil.rmtree(run.history / PARQUET, ignore_errors=True)
            if any(run.history.glob("*.jsonl")):  # a --dir kept from an earlier run: same data
                n, how = spark.read.text(str(run.history / "*.jsonl")).count(), "reused"
            else:
                n, how = generate(spark, run, size), "generated"
            mb = sum(f.stat().st_size for f in run.history.glob("*.jsonl")) / 2**20
            print(f"\n== {n:,} events ({mb:,.0f} MB of JSON lines, {how}); load average {load()}", flush=True)
            rows: list[tuple[str, float, str]] = []
            verdicts = []
            for name, fn in (
                ("whole process, JSON lines", lambda run=run: whole_process(run)),
                ("whole process, Parquet (rebuild)", lambda run=run: whole_process(run)),
                ("warm, JSON lines", lambda run=run: warm(run)),
                ("warm, Parquet (rebuild)", lambda run=run: warm(run)),
            ):
                if name.endswith("JSON lines"):
                    shutil.rmtree(run.history / PARQUET, ignore_errors=True)
                verdict, secs = fn()
                rows.append((name, secs, load()))
                verdicts.append(outcome(verdict))
                print(f"  {name:<36}{secs:8.1f} s   load {rows[-1][2]}", flush=True)
            meta = run.read_meta()
            found, secs = timed(
                lambda run=run, meta=meta: pandas_check(run.history / PARQUET, meta["load_stopped_ns"])
            )
            pandas[size] = (secs, load())
            print(f"  {'pandas, Parquet (3 checks)':<36}{secs:8.1f} s   load {pandas[size][1]}", flush=True)
            print("  x pandas: " + ", ".join(f"{name} {t / secs:.1f}x" for name, t, _ in rows))
            if args.profile:
                print("  where the time goes (warm, from Parquet):")
                where_the_time_goes(spark, run)
            assert all(v == verdicts[0] for v in verdicts), verdicts
            spark_found = {k: verdicts[0][k][1] for k in found}
            assert spark_found == found, (spark_found, found)
            print(f"  verdicts identical in all four ways; {len(verdicts[0])} checks: {verdicts[0]}")
            print(f"  pandas finds the same: {found}")
            label = {100_000: "100k", 1_000_000: "1M", 10_000_000: "10M"}.get(size)
            if label is not None:
                figures[f"{label} synthetic, JSON -> checked"] = rows[0][1:]
                figures[f"{label} synthetic, rebuild from Parquet"] = rows[1][1:]
        report_table(figures, pandas)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
