"""A synthetic history of about N events, written as a run folder: 100 clients' requests
through a broker to 4 workers, each request's send, dispatch, execution and reply, with a
few planted faults of the system (a lost request every LOST_EVERY, a duplicated reply every
DUP_EVERY, a reply out of order every DISORDER_EVERY) and one latency fault on the clients'
link. The benchmarks measure the report on it at any size (bench/checker_scaling.py), the
tests compare verdicts on it, a new Spark Connect server warms up on it (``warm_up``,
called by ``zchaos spark start``), and ``zchaos spark archive`` makes Spark's class archive
with a report of it (``make_class_archive``)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from contract.rundir import RunDir

NS = 1_000_000_000
T0 = 1_763_726_400 * NS
CLIENTS = 100
WORKERS = 4
STEP_NS = 50_000  # one request every 50 us across all clients, over at least MIN_SPAN_NS
MIN_SPAN_NS = 60 * NS  # the demo run's minute of load
LOST_EVERY, DUP_EVERY, DISORDER_EVERY = 10_007, 50_021, 70_001


def fault_at(span_ns: int) -> int:
    """When the one fault starts, after the load began."""
    return span_ns // 3


def generate(spark: SparkSession, run: RunDir, events: int) -> int:
    """Write a run of about ``events`` events (JSON lines and run.json); returns the exact count."""
    from pyspark.sql import functions as F

    requests = events // 5
    step_ns, _span = _timing(events)
    # 16 partitions from the start, not a repartition: at 100M events a shuffle of every
    # event cost more than the rest of the generation.
    r = spark.range(0, requests, 1, 16).select(
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
    out.write.mode("overwrite").json(str(tmp))
    run.history.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(sorted(tmp.glob("part-*.json"))):
        part.rename(run.history / f"src-{i}.jsonl")
    shutil.rmtree(tmp)
    write_run_side(run, events)
    return spark.read.text(str(run.history / "*.jsonl")).count()


def _timing(events: int) -> tuple[int, int]:
    """The time between requests and the load's length of a run of about ``events`` events."""
    requests = events // 5
    step_ns = max(STEP_NS, MIN_SPAN_NS // requests)
    return step_ns, requests * step_ns


def write_run_side(run: RunDir, events: int) -> None:
    """The run's run.json and its runner, broker and worker side events (history/protocol.jsonl),
    also rewritten for a run kept from an earlier benchmark (whose generator may have differed)."""
    _step, span_ns = _timing(events)
    side = _side_events(span_ns)
    (run.history / "protocol.jsonl").write_text("".join(json.dumps(e) + "\n" for e in side))
    _write_meta(run, span_ns)


def _side_events(span_ns: int) -> list[dict[str, Any]]:
    """The phases, processes, registrations, heartbeats and one latency fault on the clients'
    link: a complete run (load and drain ended, the planned fault fired), as the runner records it."""
    drained = T0 + span_ns + 50 * NS
    phases = [("phase", "setup", T0 - 2 * NS), ("phase", "load", T0), ("phase_done", "load", T0 + span_ns),
              ("phase_done", "drain", drained), ("phase", "teardown", drained)]  # fmt: skip
    out: list[dict[str, Any]] = [
        {"ts": ts, "src": "runner", "ev": ev, "name": name} for ev, name, ts in phases
    ]
    out.append(
        {"ts": T0 - NS, "src": "runner", "ev": "proc_start", "role": "broker", "instance": "broker", "pid": 1}
    )
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
    start, stop = T0 + fault_at(span_ns), T0 + fault_at(span_ns) + span_ns // 100
    fault = {"fault": "latency", "target": "link:clients", "fault_id": 1}
    out.append({"ts": start, "src": "nemesis", "ev": "fault_start", **fault})
    out.append({"ts": stop, "src": "nemesis", "ev": "fault_stop", **fault})
    return out


def _write_meta(run: RunDir, span_ns: int) -> None:
    from contract.faults import fault_class
    from harness.manifest import load_manifest

    latency = fault_class("latency", "link:clients")

    pingpong = load_manifest("pingpong").as_dict()
    pirate = load_manifest("paranoid-pirate").as_dict()
    checks = list(dict.fromkeys(pirate["promises"]["checks"] + pingpong["promises"]["checks"]))
    pingpong["promises"]["checks"] = checks
    processes = {"broker": "broker"} | {f"worker-{w}": "worker" for w in range(1, WORKERS + 1)}
    run.write_meta(
        {
            "scenario": {"name": "checker-scaling", "seed": 1, "options": {}, "duration_s": span_ns / NS},
            "manifest": pingpong,
            "plan": [
                {
                    "at_s": fault_at(span_ns) / NS,
                    "fault_id": 1,
                    "kind": "latency",
                    "params": {},
                    "selector": "link:clients",
                    "target": "link:clients",
                    "fault_scope": latency.scope,
                    "fault_lossy": latency.lossy,
                    "fault_harm": latency.harm,
                    "fault_stops": latency.stops,
                    "fault_lasting": latency.lasting,
                }
            ],
            "phases_done": {"load": T0 + span_ns, "drain": T0 + span_ns + 50 * NS},
            "processes": processes,
            "started_ns": T0 - 2 * NS,
            "load_started_ns": T0,
            "load_stopped_ns": T0 + span_ns,
            "ended_ns": T0 + span_ns + 51 * NS,
            "client_budget_s": 10,
        }
    )


#: The warm-up's history: big enough for every query shape of a CI run, small enough to
#: be generated and reported three times in about 18 s on 2 idle cores (25 s on a server
#: without the class archive, reports/connect.py).
WARM_UP_EVENTS = 20_000
#: Reports of it: a new server's first report of a CI run took 9.2 s, its next ones 3.3 then
#: 2.6-2.9 s (its JIT compiling Spark's code as queries use it); three synthetic reports at
#: start brought a first report of each of six families down to 1.0-2.2 s (bench/report_connect.py).
WARM_UP_REPORTS = 3


def warm_up(say: Callable[[str], None], reports: int = WARM_UP_REPORTS) -> None:
    """Report a synthetic run of WARM_UP_EVENTS events ``reports`` times on the Spark Connect
    server this process would use (``zchaos spark start`` calls it once the server listens), so
    that the user's first report finds Spark's code compiled; the run is written in a folder of
    the server's state folder and removed after, and its reports are not counted as served."""
    import tempfile

    from contract.rundir import RunDir
    from reports import connect
    from reports import spark as spark_session
    from reports.pipeline import build_report
    from reports.spark import fallback_notes, get_spark

    if not connect.wanted():
        say(f"not warming the server up: this shell sends reports elsewhere ({connect.SWITCH}=0, "
            "ZCHAOS_SPARK_MASTER or ZCHAOS_SPARK_REMOTE)")  # fmt: skip
        return
    times = f"{reports} report{'s' * (reports != 1)}"
    say(f"warming the server up: {times} of a synthetic run of {WARM_UP_EVENTS:,} events (--warm-up N)")
    folder = Path(tempfile.mkdtemp(prefix="warm-up-", dir=connect.state_dir()))
    spark_session.count_served = False
    try:
        started = time.monotonic()
        spark = get_spark(events=WARM_UP_EVENTS)
        if fallback_notes:  # it did not answer: warming a session of this process would be no use
            say(f"not warmed up: {fallback_notes.pop(0)}")
            return
        run = RunDir(folder / "run")
        generate(spark, run, WARM_UP_EVENTS)
        for i in range(reports):
            began = time.monotonic()
            build_report(run.root, store=folder / "results.sqlite")
            say(f"  report {i + 1} of {reports} in {time.monotonic() - began:.1f} s")
        say(f"warmed up in {time.monotonic() - started:.1f} s")
    except Exception as exc:  # the server is up all the same: its first reports will be slower
        say(f"the warm-up failed ({type(exc).__name__}: {exc}); the server is up, its first reports slower")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        spark_session.count_served = True


#: The class archive's run: its report loads the classes of every query shape; more events
#: would only take longer.
ARCHIVE_EVENTS = 5_000


def make_class_archive(say: Callable[[str], None]) -> int:
    """Make this install's Spark class archive now (reports/cds.py), as the first report on a
    machine does at its end: an in-process session (never a Spark Connect server's, whose JVM
    is not this machine's report's) reports a synthetic run of ARCHIVE_EVENTS events once and
    stops, and its JVM writes the archive. For a CI image, or before a test run whose five
    processes would otherwise start their JVMs without it (the first of them made it at its
    exit, after every other JVM of the run had started without). Exit code: 0 when the
    archive is there, being made by another process, or not to be had (CDS off, a Java that
    cannot make one); 1 when its JVM wrote none (``say`` tells why in each case)."""
    import os
    import tempfile

    from contract.rundir import RunDir
    from reports import cds, connect
    from reports import spark as spark_session
    from reports.pipeline import build_report

    archive = spark_session.class_archive()
    if archive is None:
        say(f"reports use no class archive here ({cds.SWITCH}=0, your own SPARK_CONF_DIR, or no java found)")
        return 0
    if archive.exists():
        say(f"Spark's class archive is made already: {archive}")
        return 0
    if cds.being_made(archive):  # two CI jobs of one machine at once
        say(f"another process is making Spark's class archive now: {archive}")
        return 0
    os.environ[connect.SWITCH] = "0"  # this process's session is a local one
    os.environ.pop(connect.REMOTE_ENV, None)
    say(f"making Spark's class archive (once per install, about 40 s): {archive}")
    started = time.monotonic()
    spark = spark_session.get_spark(events=ARCHIVE_EVENTS)
    if not spark_session.making_archive():
        spark_session.stop_spark()
        if archive.exists():
            say(f"Spark's class archive is made already: {archive}")
        elif cds.being_made(archive):  # its lock was taken since
            say(f"another process is making Spark's class archive now: {archive}")
        else:  # a Java that cannot, an unusable cache folder: reports start without it
            say(f"no class archive can be made here; the reason is in {spark_session.SPARK_LOG}")
        return 0
    folder = Path(tempfile.mkdtemp(prefix="zchaos-archive-"))
    try:
        run = RunDir(folder / "run")
        generate(spark, run, ARCHIVE_EVENTS)
        build_report(run.root, store=folder / "results.sqlite")
        spark_session.stop_spark(say)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not archive.exists():
        say(f"not made: the JVM wrote no archive (see {spark_session.SPARK_LOG})")
        return 1
    size = archive.stat().st_size / 2**20
    say(f"made {archive} ({size:.0f} MB) in {time.monotonic() - started:.0f} s")
    return 0
