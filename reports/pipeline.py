"""The report pipeline: a run directory in, verdict.json, junit.xml and report.html out.

``build_report`` reads ``run.json`` and the history (one SparkSession per process), pairs
the fault events into windows, runs the checks the manifest promises, computes metrics,
and writes the three files. Bad input is a ``SetupError`` naming the file (no run.json,
no history, nothing in it); lines that are not JSON events (a line cut short by a killed
writer) are counted, shown in the report, and left out.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import SetupError
from harness.history import EVENTS, FIELD_TYPES
from harness.rundir import RunDir
from reports.checkers import UNKNOWN, CheckContext, CheckResult, FaultWindow, Profile, registry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MAX_BAD_LINES_SHOWN = 5
CORRUPT = "_corrupt_record"
PARQUET = "events.parquet"  # where harness.history_frame.read_history looks first
ACCOUNT_FILE = "_zchaos_input.json"  # inside the Parquet folder; Spark skips names starting with _
#: Up to this many events the history is checked from Spark's in-memory cache; a larger one
#: from its Parquet form, uncached. Measured (bench/checker_scaling.py, 2 shared cores): a
#: cache of 10M events crowds the 2 GB driver heap out of the aggregations, while Parquet
#: columns are cheap to scan again.
CACHE_MAX_EVENTS = 1_000_000
#: From this many events on, the Parquet form is split by event kind (``ev=send/`` ...), so a
#: check reads only the kinds it asks for; below, one file (many tiny files cost more to list).
SPLIT_MIN_EVENTS = 1_000_000
#: The JSON-lines size of an event, about (measured on the CI scenarios' histories: 115-120).
BYTES_PER_EVENT = 120


def load_meta(run: RunDir) -> dict[str, Any]:
    """run.json, checked for what the report needs."""
    try:
        meta = json.loads(run.run_json.read_text())
    except FileNotFoundError:
        raise SetupError("no run.json: not a run directory", where=run.run_json) from None
    except (OSError, ValueError) as exc:
        raise SetupError(f"cannot read run.json: {exc}", where=run.run_json) from None
    if not isinstance(meta, dict):
        raise SetupError("run.json should hold a JSON object", where=run.run_json)
    promises = (meta.get("manifest") or {}).get("promises")
    if not isinstance(promises, dict) or not isinstance(promises.get("checks"), list):
        raise SetupError("run.json lacks manifest.promises.checks (the checks to run)", where=run.run_json)
    return meta


@dataclass
class History:
    """A run's history as read: its good events, what the input held, and any cache behind them."""

    events: DataFrame  # every good event, with the columns of harness.history.FIELD_TYPES
    account: dict[str, Any]  # source, files, events, bad_lines, bad_examples
    profile: Profile
    cached: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def read_events(spark: SparkSession, run: RunDir, say: Callable[[str], None] = lambda _m: None) -> History:
    """The history's good events, an account of the input (files, lines that are not events)
    and its profile (events per source and kind, first and last time).

    The JSON lines are parsed once, with the explicit schema, on the first report; their
    good events are written to history/events.parquet (the run's columnar form, which every
    later report reads instead) with the account and the profile beside them. A history of
    up to CACHE_MAX_EVENTS is checked from Spark's cache, a larger one from the Parquet form.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from reports.history_frame import history_schema, parquet_is_current, read_history
    from reports.spark import fit_to

    hist = run.history
    if not hist.is_dir():
        raise SetupError("no history folder in the run directory", where=hist)
    files = sorted(hist.glob("*.jsonl"))
    parquet = hist / PARQUET
    if parquet_is_current(parquet, files):
        events = read_history(spark, hist).select(*FIELD_TYPES)
        account: dict[str, Any] = {"files": len(files), "bad_lines": 0, "bad_examples": []}
        stored: dict[str, Any] = {}
        # What the JSON lines held when they were compacted (their bad lines, above all).
        with contextlib.suppress(OSError, ValueError):
            stored = json.loads((parquet / ACCOUNT_FILE).read_text())
        profile = Profile.of(stored.pop("profile", None)) or profile_of(events)
        account.update(stored)
        account["events"] = profile.events
        account["source"] = "parquet"
        if profile.events == 0:
            raise SetupError("the history holds no event", where=parquet)
        fit_to(spark, profile.events)
        if profile.events <= CACHE_MAX_EVENTS:
            events = events.cache()
            return History(events, account, profile, events)
        return History(events, account, profile)
    if not files:
        raise SetupError("the history folder holds no *.jsonl file", where=hist)
    schema = history_schema().add(T.StructField(CORRUPT, T.StringType(), True))
    raw = (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(f) for f in files])
        .withColumn("_file", F.input_file_name())
    )
    # Spark refuses queries on raw JSON that touch only the corrupt-record column: cache first.
    raw = raw.cache()
    bad = F.col(CORRUPT).isNotNull() | F.col("ts").isNull() | F.col("ev").isNull()
    # One pass: the good events' profile, and the bad lines counted.
    groups = (
        raw.withColumn("_bad", bad)
        .groupBy("_bad", "src", "ev")
        .agg(F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last"))
        .collect()
    )
    n_bad = sum(r["n"] for r in groups if r["_bad"])
    profile = Profile.from_rows([r for r in groups if not r["_bad"]])
    shown = []
    if n_bad:
        for r in raw.filter(bad).select("_file", CORRUPT).limit(MAX_BAD_LINES_SHOWN).collect():
            text = r[CORRUPT] if r[CORRUPT] is not None else "(a JSON object without ts or ev)"
            shown.append({"file": Path(r["_file"]).name, "line": text[:200]})
    if profile.events == 0:
        raw.unpersist()
        raise SetupError("the history holds no event", where=hist)
    fit_to(spark, profile.events)
    account = {"files": len(files), "events": profile.events, "bad_lines": n_bad, "bad_examples": shown}
    # Served from raw's cache: the JSON is parsed once, the bad lines stay out.
    events = raw.filter(~bad).select(*FIELD_TYPES)
    say(f"writing the history's columnar form ({PARQUET})")
    try:
        compact(events, account, profile, run)
    except Exception as exc:  # a full disk must not stop the report: check from the cache
        return History(events, {"source": "jsonl", **account, "compaction_error": str(exc)}, profile, raw)
    if profile.events <= CACHE_MAX_EVENTS:
        return History(events, {"source": "jsonl", **account}, profile, raw)
    raw.unpersist()
    events = read_history(spark, hist).select(*FIELD_TYPES)
    return History(events, {"source": "parquet", **account}, profile)


def compact(events: DataFrame, account: dict[str, Any], profile: Profile, run: RunDir) -> None:
    """Write the events to history/events.parquet (what the next report reads), with the
    account and the profile; split by event kind from SPLIT_MIN_EVENTS on."""
    target = run.history / PARQUET
    tmp = run.history / f".{PARQUET}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if profile.events >= SPLIT_MIN_EVENTS:
        events.write.partitionBy("ev").parquet(str(tmp))
    else:
        events.coalesce(1).write.parquet(str(tmp))
    (tmp / ACCOUNT_FILE).write_text(json.dumps({**account, "profile": profile.as_dict()}))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def profile_of(events: DataFrame) -> Profile:
    """Events per source and kind, first and last time (one aggregation)."""
    from pyspark.sql import functions as F

    groups = events.groupBy("src", "ev").agg(
        F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last")
    )
    return Profile.from_rows(groups.collect())


def fault_windows(events: DataFrame, profile: Profile | None = None) -> tuple[list[FaultWindow], list[str]]:
    """Faults paired by fault_id from fault_start/fault_stop, and what did not pair."""
    from pyspark.sql import functions as F

    if profile is not None and not profile.has("fault_start", "fault_stop"):
        return [], []
    rows = (
        events.filter(F.col("ev").isin("fault_start", "fault_stop"))
        .select("ts", "ev", "fault_id", "fault", "target", "fault_scope", "fault_lossy")
        .orderBy("ts")
        .collect()
    )
    starts: dict[int, Any] = {}
    stops: dict[int, int] = {}
    warnings = []
    for r in rows:
        if r["ev"] == "fault_start":
            starts.setdefault(r["fault_id"], r)
        else:
            stops.setdefault(r["fault_id"], r["ts"])
    for fid in sorted(stops.keys() - starts.keys(), key=str):
        warnings.append(f"fault_stop of fault {fid} without a fault_start: ignored")
    faults = [
        FaultWindow(fid, r["fault"], r["target"], r["ts"], stops.get(fid), r["fault_scope"], r["fault_lossy"])
        for fid, r in sorted(starts.items(), key=lambda kv: kv[1]["ts"])
    ]
    return faults, warnings


def process_exits(events: DataFrame, profile: Profile | None = None) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    if profile is not None and not profile.has("proc_exit"):
        return []
    rows = (
        events.filter(F.col("ev") == "proc_exit")
        .select("ts", "instance", "role", "pid", "code", "signal", "expected", "detail")
        .orderBy("ts")
        .collect()
    )
    return [r.asDict() for r in rows]


def run_checks(
    ctx: CheckContext, names: list[str], say: Callable[[str], None]
) -> tuple[list[CheckResult], list[str]]:
    """Each promised check; one that is unknown or crashes becomes an unknown result and an error."""
    checkers = registry()
    results, errors = [], []
    for name in names:
        say(f"checking {name}")
        found = checkers.get(name)
        if found is None:
            results.append(CheckResult(name, UNKNOWN, summary="no such checker"))
            errors.append(f"no checker named {name!r} (known: {', '.join(sorted(checkers))})")
            continue
        try:
            results.append(found.run(ctx))
        except Exception as exc:  # a checker's bug must not hide the other results
            results.append(CheckResult(name, UNKNOWN, summary=f"checker failed: {type(exc).__name__}: {exc}"))
            errors.append(f"checker {name} failed:\n{traceback.format_exc(limit=8)}")
    return results, errors


def expected_events(run: RunDir) -> int | None:
    """About how many events the history holds, before Spark starts (it sizes the JVM): the
    compaction's own count, else the JSON lines' size at about BYTES_PER_EVENT each."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return int(json.loads((run.history / PARQUET / ACCOUNT_FILE).read_text())["events"])
    with contextlib.suppress(OSError):
        return sum(f.stat().st_size for f in run.history.glob("*.jsonl")) // BYTES_PER_EVENT
    return None


def check_run(
    spark: SparkSession, run: RunDir, meta: dict[str, Any], say: Callable[[str], None]
) -> dict[str, Any]:
    """The verdict of one run: its history read, checked and measured."""
    from reports.checkers.toolkit import run_time
    from reports.metrics import compute_metrics
    from reports.verdict import build_verdict

    say("reading history")
    history = read_events(spark, run, say)
    events, account = history.events, history.account
    if account["bad_lines"]:
        say(f"skipped {account['bad_lines']} history line(s) that are not events")
    faults, warnings = fault_windows(events, history.profile)
    if "compaction_error" in account:
        warnings.append(f"could not write history/{PARQUET}: {account.pop('compaction_error')}")
    for key, fallback in (("load_started_ns", "min"), ("load_stopped_ns", "max"), ("ended_ns", "max")):
        if meta.get(key) is None:
            warnings.append(f"run.json has no {key}: using the {fallback} event time")
    account["warnings"] = warnings
    ctx = CheckContext(spark, events, meta, faults, run.root, history.profile)
    results, errors = run_checks(ctx, list(meta["manifest"]["promises"]["checks"]), say)
    say("computing metrics")
    metrics = compute_metrics(events, run_time(ctx, "load_started_ns"), history.profile)
    account["unknown_event_kinds"] = sorted(ev for ev in metrics["events"] if ev not in EVENTS)
    recovery = next((r for r in results if r.name == "recovery"), None)
    fault_rows = (recovery.figures.get("faults") if recovery else None) or [
        {"fault_id": f.fault_id, "fault": f.fault, "target": f.target, "start_ns": f.start_ns}
        | {"stop_ns": f.stop_ns}
        for f in faults
    ]
    times = {k: meta.get(k) for k in ("started_ns", "load_started_ns", "load_stopped_ns", "ended_ns")}
    verdict = build_verdict(
        meta,
        results,
        metrics,
        docs={name: c.doc for name, c in registry().items()},
        errors=errors,
        extra={
            "run_dir": str(run.root),
            "generated_ns": time.time_ns(),
            "times": times,
            "faults": fault_rows,
            "processes": process_exits(events, history.profile),
            "input": account,
        },
    )
    history.release()
    return verdict


def build_report(run_dir: Path, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Check a run directory's history and write its verdict.json, junit.xml and report.html.

    Returns the verdict (the content of verdict.json). Raises SetupError, naming the file,
    when the directory is not a run or its history holds no event.
    """
    from reports.html import write_html
    from reports.junit import write_junit
    from reports.spark import get_spark

    say = progress or (lambda _message: None)
    run = RunDir(Path(run_dir))
    if not run.root.is_dir():
        raise SetupError("no such run directory", where=run.root)
    meta = load_meta(run)
    say("starting Spark")
    spark = get_spark(events=expected_events(run))
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        verdict = check_run(spark, run, meta, say)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    say("writing verdict.json, junit.xml, report.html")
    tmp = run.verdict_json.with_suffix(".tmp")
    tmp.write_text(json.dumps(verdict, indent=2, default=str))
    tmp.replace(run.verdict_json)
    write_junit(verdict, run.junit_xml)
    write_html(verdict, meta, run, run.report_html)
    return verdict
