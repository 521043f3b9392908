"""The report pipeline: a run directory in, verdict.json, junit.xml and report.html out.

``build_report`` reads ``run.json`` and the history (one SparkSession per process), pairs
the fault events into windows, runs the checks the manifest promises, computes metrics,
and writes the three files. Bad input is a ``SetupError`` naming the file (no run.json,
no history, nothing in it).

A damaged history is named, not blamed on the system: every line that is not an event is
left out and located (file and line number), a file that ends mid-line is flagged as
truncated, and what each bad line names (a request, a client, or every writer of its file:
history_damage, damage_scope) is left out of the checks that read client events, which
keep only what still stands without it (Checker.on_fewer) and are UNKNOWN otherwise,
rather than counting what is missing (its sends, say) as violations of the system.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from contract.errors import SetupError
from contract.history import EVENTS, FIELD_TYPES, RID_PATTERN
from contract.rundir import RunDir
from reports.baseline import CHECK as BASELINE
from reports.baseline import DOC as BASELINE_DOC
from reports.baseline import baseline_check
from reports.checkers import HELD, UNKNOWN, CheckContext, Checker, CheckResult, FaultWindow, Profile, registry
from reports.store import store_for_run

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from reports.ingest import Conversion
    from reports.parallel import Tasks

MAX_BAD_LINES_LOCATED = 100  # unreadable lines listed (file, line number) in verdict.json
CORRUPT = "_corrupt_record"
PARQUET = "events.parquet"  # where harness.history_frame.read_history looks first
ACCOUNT_FILE = "_zchaos_input.json"  # inside the Parquet folder; Spark skips names starting with _
#: From this many events on, the Parquet form is split by event kind (``ev=send/`` ...), so a
#: check reads only the kinds it asks for; below, one file (many tiny files cost more to list).
SPLIT_MIN_EVENTS = 1_000_000
#: The JSON-lines size of an event, about (measured on the CI scenarios' histories: 115-120).
BYTES_PER_EVENT = 120
#: While a large history is compacted, its lines that are not events go to this kind's folder
#: (history/.events.parquet.tmp/ev=<it>), which is read for the account and then removed.
NOT_AN_EVENT = "_zchaos_not_an_event"
#: Files a compaction task may keep open at once, one per event kind (Spark's default, 0,
#: sorts each task's rows by kind instead); a history with more kinds sorts the rest.
WRITERS_PER_TASK = 64


@dataclass
class History:
    """A run's history as read: its good events, what the input held, and any cache behind them."""

    events: DataFrame  # every good event, with the columns of contract.history.FIELD_TYPES
    account: dict[str, Any]  # source, files, events, bad_lines, bad_examples
    profile: Profile
    cached: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def read_events(
    spark: SparkSession,
    run: RunDir,
    say: Callable[[str], None] = lambda _m: None,
    pending: Conversion | None = None,
) -> History:
    """The history's good events, an account of the input (files, lines that are not events)
    and its profile (events per source and kind, first and last time).

    The JSON lines are parsed once, with the explicit schema, on the first report, and their
    good events written to history/events.parquet (the run's columnar form, which every later
    report reads instead) with the account and the profile beside them. A clean history (whole
    lines, each an event: nearly every run) is converted by pyarrow (reports/ingest.py;
    ``pending``: that conversion, started by build_report while Spark started, else it runs
    now). A history it declines (lines that are not events, a file cut mid-line...) is parsed
    by Spark's permissive reader, which accounts for every line: for a large history
    (SPLIT_MIN_EVENTS, from the files' size) straight from the JSON (compact_json), for a
    smaller one from a cache of the parsed lines. The checks then read the Parquet form,
    never a cache of the whole history: building Spark's in-memory cache of every column
    cost more than all the checks' scans of the few columns each reads (the demo run, 76k
    events, warm, alternating in one session at load 15-20: a report's CPU 10.0 s cached,
    7.4 s from Parquet; the first report, from JSON: 12.9 s, 11.9 s), and at 10M events a
    cache crowds the driver heap out of the aggregations.
    """
    from pyspark.sql import functions as F

    from reports.history_frame import parquet_is_current, read_history
    from reports.spark import fit_to

    hist = run.history
    if not hist.is_dir():
        raise SetupError("no history folder in the run directory", where=hist)
    if pending is not None:
        pending.wait()
    elif (started := start_conversion(run, say)) is not None:
        try:
            started.wait()
        finally:
            started.abandon()
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
        return History(events, account, profile)
    if not files:
        raise SetupError("the history folder holds no *.jsonl file", where=hist)
    estimated = sum(f.stat().st_size for f in files) // BYTES_PER_EVENT
    if estimated >= SPLIT_MIN_EVENTS:
        fit_to(spark, estimated)
        with contextlib.suppress(CompactionFailed):  # then from a cache, as below
            return compact_json(spark, run, files, say)
    raw = json_lines(spark, files).withColumn("_file", F.input_file_name())
    # Spark refuses queries on raw JSON that touch only the corrupt-record column: cache first.
    raw = raw.cache()
    bad = not_an_event()
    # One pass: the good events' profile, and the bad lines counted.
    groups = (
        raw.withColumn("_bad", bad)
        .groupBy("_bad", "src", "ev")
        .agg(F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last"))
        .collect()
    )
    n_bad = sum(r["n"] for r in groups if r["_bad"])
    profile = Profile.from_rows([r for r in groups if not r["_bad"]])
    if profile.events == 0:
        raw.unpersist()
        raise SetupError("the history holds no event", where=hist)
    damage = history_damage(raw.filter(bad), lambda names: _writers(raw, names), files, n_bad)
    fit_to(spark, profile.events)
    account = {"files": len(files), "events": profile.events, "bad_lines": n_bad, **damage}
    # Served from raw's cache: the JSON is parsed once, the bad lines stay out.
    events = raw.filter(~bad).select(*FIELD_TYPES)
    say(f"writing the history's columnar form ({PARQUET})")
    try:
        compact(events, account, profile, run)
    except Exception as exc:  # a full disk must not stop the report: check from the cache
        return History(events, {"source": "jsonl", **account, "compaction_error": str(exc)}, profile, raw)
    raw.unpersist()
    events = read_history(spark, hist).select(*FIELD_TYPES)
    return History(events, {"source": "parquet", **account}, profile)


def start_conversion(
    run: RunDir, say: Callable[[str], None], split_min_events: int | None = None
) -> Conversion | None:
    """The history's JSON lines to its Parquet form by pyarrow, in a thread (reports/ingest.py),
    when it has no current Parquet form; None when there is nothing to convert. It is split by
    kind from ``split_min_events`` (default SPLIT_MIN_EVENTS) events on, as Spark's compaction is."""
    from reports.history_frame import parquet_is_current
    from reports.ingest import Conversion

    hist = run.history
    files = sorted(hist.glob("*.jsonl")) if hist.is_dir() else []
    if not files or parquet_is_current(hist / PARQUET, files):
        return None
    return Conversion(
        hist,
        files,
        say,
        parquet=PARQUET,
        account_file=ACCOUNT_FILE,
        split_min_events=SPLIT_MIN_EVENTS if split_min_events is None else split_min_events,
        bytes_per_event=BYTES_PER_EVENT,
    )


def json_lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """The JSON lines with the explicit schema; a line that is not JSON holds only CORRUPT."""
    from pyspark.sql import types as T

    from reports.history_frame import history_schema

    schema = history_schema().add(T.StructField(CORRUPT, T.StringType(), True))
    return (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(f) for f in files])
    )


def not_an_event() -> Column:
    """A line that is not an event: not JSON (Spark's corrupt record), or without time or kind."""
    from pyspark.sql import functions as F

    return F.col(CORRUPT).isNotNull() | F.col("ts").isNull() | F.col("ev").isNull()


class CompactionFailed(Exception):
    """The Parquet form could not be written (a full disk, say)."""


def compact_json(spark: SparkSession, run: RunDir, files: list[Path], say: Callable[[str], None]) -> History:
    """A large history: its JSON lines parsed once, straight into the Parquet form split by
    event kind, with the lines that are not events written aside (kind NOT_AN_EVENT); then
    the profile from the Parquet form (three of its columns), the account of the bad lines
    from what was written aside. One pass over the JSON, and no in-memory copy of it (at 10M
    events, caching the parsed lines to count them first cost 2.5x the CPU of this).

    Raises CompactionFailed when the Parquet form cannot be written; SetupError when the
    history holds no event.
    """
    from pyspark.sql import functions as F

    from reports.history_frame import history_schema, read_history
    from reports.spark import fit_to

    hist = run.history
    tmp, aside = hist / f".{PARQUET}.tmp", hist / f".{PARQUET}.bad.tmp"
    for folder in (tmp, aside):
        shutil.rmtree(folder, ignore_errors=True)
    bad = not_an_event()
    say(f"writing the history's columnar form ({PARQUET})")
    lines = (
        json_lines(spark, files)
        .withColumn("_file", F.when(bad, F.input_file_name()))
        .withColumn("ev", F.when(bad, F.lit(NOT_AN_EVENT)).otherwise(F.col("ev")))
    )
    try:
        with _writers_per_kind(spark):
            lines.write.partitionBy("ev").parquet(str(tmp))
    except Exception as exc:  # py4j's error of a failed write
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompactionFailed(str(exc)) from exc
    bad_rows, n_bad = None, 0
    if (tmp / f"ev={NOT_AN_EVENT}").is_dir():
        (tmp / f"ev={NOT_AN_EVENT}").rename(aside)
        bad_rows = spark.read.parquet(str(aside))
        n_bad = bad_rows.count()
    try:
        profile = profile_of(spark.read.schema(history_schema()).parquet(str(tmp)))
        if profile.events == 0:
            raise SetupError("the history holds no event", where=hist)
        fit_to(spark, profile.events)
        damage = history_damage(
            bad_rows, lambda names: _writers_in(spark, [f for f in files if f.name in names]), files, n_bad
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    account = {"files": len(files), "events": profile.events, "bad_lines": n_bad, **damage}
    (tmp / ACCOUNT_FILE).write_text(json.dumps({**account, "profile": profile.as_dict()}))
    shutil.rmtree(hist / PARQUET, ignore_errors=True)
    tmp.rename(hist / PARQUET)
    events = read_history(spark, hist).select(*FIELD_TYPES)
    return History(events, {"source": "parquet", **account}, profile)


@contextlib.contextmanager
def _writers_per_kind(spark: SparkSession) -> Iterator[None]:
    """Spark writes a partitioned folder by sorting each task's rows by kind first, unless it
    may keep a file open per kind: up to WRITERS_PER_TASK (kinds are few), so it need not
    sort (at 10M events the sort cost a third of the compaction's CPU)."""
    key = "spark.sql.maxConcurrentOutputFileWriters"
    saved = spark.conf.get(key)
    spark.conf.set(key, str(WRITERS_PER_TASK))
    try:
        yield
    finally:
        spark.conf.set(key, saved)


def _writers(raw: DataFrame, names: list[str]) -> DataFrame:
    """(``_file``, ``src``, ``cid``, ``last``: its last event's time) of the events of the
    files ``names``, from the parsed lines."""
    from pyspark.sql import functions as F

    return (
        raw.filter(F.col("ts").isNotNull() & F.col("ev").isNotNull())
        .filter(F.regexp_extract("_file", r"([^/]+)$", 1).isin(names))
        .groupBy("_file", "src", "cid")
        .agg(F.max("ts").alias("last"))
    )


def _writers_in(spark: SparkSession, files: list[Path]) -> DataFrame:
    """_writers of ``files``, parsed again (only damaged files)."""
    from pyspark.sql import functions as F

    lines = json_lines(spark, files).withColumn("_file", F.input_file_name())
    return _writers(lines, [f.name for f in files])


def _file_name(uri: str) -> str:
    """The file name of Spark's input_file_name() (a file:// URI)."""
    return Path(unquote(urlparse(uri).path)).name


def _ends_mid_line(path: Path) -> bool:
    """The file is not empty and its last byte is not a newline: its writer was cut off."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False


def _is_event_line(text: str) -> bool:
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("ts") is not None and obj.get("ev") is not None


def locate_bad_lines(path: Path, corrupt: set[str], check_json: bool, limit: int) -> list[dict[str, Any]]:
    """Line numbers (from 1) of the lines of ``path`` that are not events: those Spark could not
    parse (``corrupt``, their text), and with ``check_json`` also objects without ts or ev."""
    found: list[dict[str, Any]] = []
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as fh:
        for number, line in enumerate(fh, start=1):
            text = line.rstrip("\r\n")
            if text in corrupt or (check_json and text.strip() and not _is_event_line(text)):
                found.append({"file": path.name, "line_no": number, "line": text[:200]})
                if len(found) >= limit:
                    break
    return found


#: Unreadable lines attributed one by one (to the request or client their text names); past
#: this many distinct ones, a file's damage is taken as naming nobody (its writers left out whole).
MAX_ATTRIBUTED = 10_000


def _text_field(name: str) -> Column:
    """The value of ``"name": "..."`` in an unreadable line's text (a cut line keeps its start)."""
    from pyspark.sql import functions as F

    pattern = rf'"{name}"\s*:\s*"([^"\\]+)"'
    return F.nullif(F.regexp_extract(F.col(CORRUPT), pattern, 1), F.lit(""))


def history_damage(
    bad_rows: DataFrame | None,
    writers: Callable[[list[str]], DataFrame],
    files: list[Path],
    n_bad: int,
) -> dict[str, Any]:
    """What is wrong with the history files: unreadable lines located (``bad_examples``: file,
    line number, text), files that end mid-line (``truncated``), and whose events may be
    missing. Each unreadable line is attributed to what its text names: a request
    (``attributed_requests``: rid -> what) or else a client (``attributed_clients``); a line
    that names neither leaves its whole file in doubt (``unattributed``), as does a file
    cut mid-line, whose writers may have lost more than that line (``file_writers``: name ->
    its clients, its other sources and its last event's time; ``damage_scope`` decides).
    ``bad_rows``: the ``n_bad`` lines that are not events (``_file``, CORRUPT, the parsed
    columns); ``writers(names)``: (``_file``, ``src``, ``cid``, ``last``) of those files'
    events. Only damaged files are read again."""
    from pyspark.sql import functions as F

    truncated = sorted(f.name for f in files if _ends_mid_line(f))
    located: list[dict[str, Any]] = []
    damaged: dict[str, str] = {name: "ends mid-line (truncated)" for name in truncated}
    requests: dict[str, str] = {}
    clients: dict[str, str] = {}
    unattributed: set[str] = set()
    if n_bad and bad_rows is not None:
        per_file = (
            bad_rows.groupBy("_file")
            .agg(
                F.count("*").alias("n"),
                F.sum(F.col(CORRUPT).isNull().cast("int")).alias("objects"),
                F.slice(F.collect_set(F.col(CORRUPT)), 1, MAX_BAD_LINES_LOCATED).alias("texts"),
            )
            .collect()
        )
        by_name = {f.name: f for f in files}
        for r in sorted(per_file, key=lambda r: _file_name(r["_file"])):
            name = _file_name(r["_file"])
            if name in by_name and len(located) < MAX_BAD_LINES_LOCATED:
                located += locate_bad_lines(
                    by_name[name], set(r["texts"]), bool(r["objects"]), MAX_BAD_LINES_LOCATED - len(located)
                )
            lines = [b["line_no"] for b in located if b["file"] == name]
            where = (
                f" (line {', '.join(map(str, lines[:5]))}{', ...' if len(lines) > 5 else ''})"
                if lines
                else ""
            )
            what = f"{r['n']} unreadable line(s){where}"
            damaged[name] = f"{damaged[name]}; {what}" if name in damaged else what
        whose = (
            bad_rows.select(
                "_file",
                F.coalesce(F.col("rid"), _text_field("rid")).alias("rid"),
                F.coalesce(F.col("cid"), _text_field("cid")).alias("cid"),
            )
            .distinct()
            .limit(MAX_ATTRIBUTED + 1)
            .collect()
        )
        if len(whose) > MAX_ATTRIBUTED:
            unattributed = {_file_name(r["_file"]) for r in per_file}
        else:
            for r in whose:
                name = _file_name(r["_file"])
                if r["rid"]:
                    requests[r["rid"]] = f"history/{name}: an unreadable line of it"
                elif r["cid"]:
                    clients[r["cid"]] = f"history/{name}: an unreadable line of it"
                else:
                    unattributed.add(name)
    file_writers: dict[str, dict[str, Any]] = {}
    doubtful = sorted(unattributed | set(truncated))
    if doubtful:
        for r in writers(doubtful).collect():
            name = _file_name(r["_file"])
            entry = file_writers.setdefault(name, {"clients": [], "sources": [], "last_ns": None})
            if r["cid"] is not None:
                entry["clients"].append(r["cid"])
            elif r["src"] is not None:
                entry["sources"].append(r["src"])
            if r["last"] is not None:
                entry["last_ns"] = max(entry["last_ns"] or 0, int(r["last"]))
        for entry in file_writers.values():
            entry["clients"] = sorted(set(entry["clients"]))
            entry["sources"] = sorted(set(entry["sources"]))
    return {
        "bad_examples": located,
        "truncated": truncated,
        "damaged_files": damaged,
        "attributed_requests": dict(sorted(requests.items())),
        "attributed_clients": dict(sorted(clients.items())),
        "unattributed": sorted(unattributed),
        "file_writers": file_writers,
    }


def compact(events: DataFrame, account: dict[str, Any], profile: Profile, run: RunDir) -> None:
    """Write the events to history/events.parquet (what the next report reads), with the
    account and the profile; split by event kind from SPLIT_MIN_EVENTS on."""
    target = run.history / PARQUET
    tmp = run.history / f".{PARQUET}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if profile.events >= SPLIT_MIN_EVENTS:
        with _writers_per_kind(events.sparkSession):
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


#: The run's own few events (phases, faults, process exits), read in one job and shared by
#: the fault windows, the completeness and the table of processes.
CONTROL_EVENTS = ("phase", "phase_done", "fault_start", "fault_stop", "fault_error", "proc_exit")
CONTROL_COLUMNS = ("ts", "ev", "name", "fault_id", "fault", "target", "detail",
                   "fault_scope", "fault_lossy", "fault_harm", "fault_lasting",
                   "instance", "role", "pid", "code", "signal", "expected")  # fmt: skip


def control_events(events: DataFrame, profile: Profile | None = None) -> list[Any]:
    """The CONTROL_EVENTS of the history, in time order (one job; none when the profile has none)."""
    from pyspark.sql import functions as F

    if profile is not None and not profile.has(*CONTROL_EVENTS):
        return []
    return events.filter(F.col("ev").isin(*CONTROL_EVENTS)).select(*CONTROL_COLUMNS).orderBy("ts").collect()


def _control(events: DataFrame, control: list[Any] | None, kinds: tuple[str, ...]) -> list[Any]:
    """The rows of these kinds, from ``control`` (control_events) when given, else read for them."""
    from pyspark.sql import functions as F

    if control is not None:
        return [r for r in control if r["ev"] in kinds]
    return events.filter(F.col("ev").isin(*kinds)).select(*CONTROL_COLUMNS).orderBy("ts").collect()


def fault_windows(
    events: DataFrame, profile: Profile | None = None, control: list[Any] | None = None
) -> tuple[list[FaultWindow], list[str]]:
    """Faults paired by fault_id from fault_start/fault_stop, and what did not pair."""
    if profile is not None and not profile.has("fault_start", "fault_stop"):
        return [], []
    rows = _control(events, control, ("fault_start", "fault_stop"))
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
        FaultWindow(
            fid,
            r["fault"],
            r["target"],
            r["ts"],
            stops.get(fid),
            r["fault_scope"],
            r["fault_lossy"],
            r["fault_harm"],
            r["fault_lasting"],
        )
        for fid, r in sorted(starts.items(), key=lambda kv: kv[1]["ts"])
    ]
    return faults, warnings


def process_exits(
    events: DataFrame, profile: Profile | None = None, control: list[Any] | None = None
) -> list[dict[str, Any]]:
    if profile is not None and not profile.has("proc_exit"):
        return []
    keys = ("ts", "instance", "role", "pid", "code", "signal", "expected", "detail")
    return [{k: r[k] for k in keys} for r in _control(events, control, ("proc_exit",))]


NS = 1_000_000_000


def completeness(
    events: DataFrame,
    meta: dict[str, Any],
    control: list[Any] | None = None,
    last_ts: int | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """How far the run carried out its plan: the ways it fell short (each makes the verdict
    incomplete) and the figures (phases done, faults planned, started, failed).

    A run is complete when its load and drain ended (``phase_done`` in the history or
    ``phases_done`` in run.json: a runner killed or a machine lost leaves neither) and every
    planned fault fired without error (``fault_error`` in the history says one did not).
    ``control``: the control_events, ``last_ts``: the last event's time, when already known.
    """
    from pyspark.sql import functions as F

    rows = _control(events, control, ("phase", "phase_done", "fault_start", "fault_error"))
    done = set(meta.get("phases_done") or {}) | {r["name"] for r in rows if r["ev"] == "phase_done"}
    entered = [r["name"] for r in rows if r["ev"] == "phase"]
    started = {r["fault_id"]: r for r in rows if r["ev"] == "fault_start"}
    failed = [r for r in rows if r["ev"] == "fault_error"]
    plan = meta.get("plan") or []
    load_start = meta.get("load_started_ns")
    if load_start is None:  # a run.json written before the load began
        load_start = next((r["ts"] for r in rows if r["ev"] == "phase" and r["name"] == "load"), None)
    if last_ts is None:
        last_ts = events.agg(F.max("ts")).first()[0]
    reached_s = (last_ts - load_start) / NS if load_start is not None and last_ts is not None else None
    duration = (meta.get("scenario") or {}).get("duration_s")
    figures = {
        "phases_done": sorted(done),
        "last_phase": entered[-1] if entered else None,
        "reached_s": reached_s,
        "faults_planned": len(plan),
        "faults_started": len(started),
        "faults_failed": len(failed),
    }
    reasons = []
    if not {"load", "drain"} <= done:
        how_far = f"{reached_s:.1f} s into" if reached_s is not None else "somewhere in"
        ran = ", ".join(f"{r['fault']} {r['target']}" for r in started.values()) or "none"
        reasons.append(
            f"the run stopped during its {figures['last_phase'] or 'set-up'} phase, {how_far} "
            f"{duration if duration is not None else '?'} s of load, before its load and drain ended "
            f"(runner killed or machine lost?); {len(started)} of {len(plan)} planned faults ran ({ran})"
        )
    for r in failed:
        reasons.append(
            f"fault {r['fault_id']} ({r['fault']} {r['target']}) failed when it fired: {r['detail']}"
        )
    if {"load", "drain"} <= done:
        not_fired = [
            f
            for f in plan
            if f.get("fault_id") not in started and f.get("fault_id") not in {r["fault_id"] for r in failed}
        ]
        for f in not_fired:
            reasons.append(f"fault {f.get('fault_id')} ({f.get('kind')} {f.get('target')}) never fired")
    return reasons, figures


#: Sources whose events every check reads (the fault windows, the process starts and exits).
HARNESS_SOURCES = ("nemesis", "runner")


@dataclass
class Damage:
    """What a damaged history leaves in doubt (see damage_scope): the requests of ``clients``
    (cid -> what is wrong) and the ``requests`` (rid -> what), left out of the checks that
    read client events; and ``sources`` (src -> what), non-client writers whose events may
    be missing, which make the checks that read them unknown."""

    clients: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.clients or self.requests or self.sources)

    def left_out(self) -> str:
        """``client-2, request client-1:7`` (at most a few named)."""
        names = [*sorted(self.clients), *(f"request {rid}" for rid in sorted(self.requests))]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        return ", ".join(names[:6]) + more

    def why(self) -> str:
        whats = sorted({*self.clients.values(), *self.requests.values()})
        return "; ".join(whats[:3]) + ("; ..." if len(whats) > 3 else "")

    def sources_read_by(self, checker: Checker, profile: Profile | None) -> list[str]:
        """The damaged sources whose events ``checker`` reads: a harness source's (fault
        windows, process exits) are read by every check; another's when the check needs
        or reads a kind it wrote (every kind, when the history was not profiled)."""

        def reads(src: str) -> bool:
            if src in HARNESS_SOURCES or src == "?" or profile is None:
                return True
            return bool(set(checker.needs + checker.reads) & set(profile.sources.get(src, {})))

        return [src for src in sorted(self.sources) if reads(src)]


#: A file cut mid-line whose last event came this long before the load stopped had its writer
#: cut off early (a whole file's last events come within half a second of it, measured on the
#: CI runs: Locust stops its users first).
CUT_OFF_SLACK_NS = 2_000_000_000


def damage_scope(account: dict[str, Any], meta: dict[str, Any]) -> Damage:
    """What the damage ``account`` (history_damage's) leaves in doubt. A line naming a request
    leaves that request out; one naming only a client, that client; one naming neither, every
    writer of its file. A file cut mid-line lost its last line (attributed as any other), and
    more when its last event came well before the load stopped (CUT_OFF_SLACK_NS): its writer
    was cut off, and every writer of the file is in doubt."""
    damage = Damage(
        dict(account.get("attributed_clients") or {}), dict(account.get("attributed_requests") or {})
    )
    if "file_writers" not in account:  # compacted by an older zchaos: its clients as it named them
        damage.clients.update(account.get("damaged_clients") or {})
        return damage
    files = account.get("damaged_files") or {}
    stopped = meta.get("load_stopped_ns")
    for name, writers in (account.get("file_writers") or {}).items():
        what = f"history/{name}: {files.get(name, 'damaged')}"
        if name in (account.get("unattributed") or []):
            what += " naming no request"
        elif stopped is not None and (writers.get("last_ns") or 0) >= stopped - CUT_OFF_SLACK_NS:
            continue  # cut at the very end: only its last line is lost, attributed above
        else:
            what += ", its writer cut off before the load ended"
        for cid in writers.get("clients", []):
            damage.clients[cid] = what
        for src in writers.get("sources", []):
            damage.sources[src] = what
    # A client left out whole needs none of its requests named.
    owner = {rid: rid.rpartition(":")[0] for rid in damage.requests}
    damage.requests = {rid: w for rid, w in damage.requests.items() if owner[rid] not in damage.clients}
    return damage


def without_clients(events: DataFrame, cids: list[str], rids: list[str] | None = None) -> DataFrame:
    """The events that are not about a request of one of ``cids`` nor one of ``rids``: neither
    the client's own events nor a worker's or broker's events about its requests (request id
    ``cid:seq``)."""
    from pyspark.sql import functions as F

    owner = F.regexp_extract("rid", RID_PATTERN, 1)
    theirs = F.coalesce(F.col("cid").isin(cids), F.lit(False)) | F.coalesce(owner.isin(cids), F.lit(False))
    if rids:
        theirs = theirs | F.coalesce(F.col("rid").isin(rids), F.lit(False))
    return events.filter(~theirs)


def damaged_result(result: CheckResult, damage: Damage, checker: Checker, ctx: CheckContext) -> CheckResult:
    """A check judged without the damaged clients' and requests' events. What stands depends on
    the check (``Checker.on_fewer``): a violation of a check of each request stands (found
    among the others), and so does a pass of a check that some reply shows (recovery); the
    rest cannot vouch for what was left out (unknown). An unknown that only leaving them out
    caused says so, instead of blaming the subject for events it wrote."""
    gone = damage.left_out()
    left = f"the history of {gone} is damaged ({damage.why()}); "
    if result.status == UNKNOWN:
        missing = result.figures.get("missing_events") or []
        if (missing and all(k in ctx.event_kinds() for k in missing)) or not clean_has_requests(result):
            result.reason = left + "with them left out nothing was left to judge. Rerun, or restore the file."
        return result
    stands = (result.status == HELD and checker.on_fewer == "holds") or (
        result.status != HELD and checker.on_fewer == "violations"
    )
    if stands:
        result.summary += f" (left out, damaged history: {gone})"
        return result
    found = "held" if result.status == HELD else f"was violated ({result.violations})"
    result.status, result.violations, result.examples = UNKNOWN, 0, []
    result.summary += f"; unknown: {gone} left out (damaged history)"
    result.reason = (
        f"{left}they were left out and the check {found} for the rest, which cannot decide it for "
        "the whole run. Rerun, or restore the file."
    )
    return result


def clean_has_requests(result: CheckResult) -> bool:
    """False when a check's figures say it saw no request at all."""
    for key in ("requests", "judged_requests", "replies"):
        if key in result.figures and not result.figures[key]:
            return False
    return True


def sources_result(result: CheckResult, damage: Damage, hit: list[str]) -> CheckResult:
    """A check that reads events of damaged non-client sources: unknown, whatever it found."""
    if result.status == UNKNOWN and "damaged" in (result.reason or ""):
        return result
    where = "; ".join(f"{src}: {damage.sources[src]}" for src in hit)
    found = {HELD: "held", UNKNOWN: "was unknown"}.get(result.status, f"was violated ({result.violations})")
    result.reason = (
        f"it reads events of {', '.join(hit)}, whose history is damaged ({where}); on what was left "
        f"it {found}"
        + (f" ({result.reason})" if result.status == UNKNOWN and result.reason else "")
        + ". Rerun, or restore the file."
    )
    result.status, result.violations, result.examples = UNKNOWN, 0, []
    result.summary += f"; unknown: damaged history of {', '.join(hit)}"
    return result


def run_checks(
    ctx: CheckContext,
    names: list[str],
    say: Callable[[str], None],
    damage: Damage | None = None,
    also: dict[str, Callable[[], Any]] | None = None,
    pool: Tasks | None = None,
) -> tuple[list[CheckResult], list[str], dict[str, Any]]:
    """Each promised check; one that is unknown or crashes becomes an unknown result and an error.

    The checks run a few at a time (reports/parallel.py), each with ``also``'s work (the
    metrics: name -> function), started first; results come back in the order of ``names``,
    ``also``'s values by name (an exception of ``also`` is raised, after every task ended).
    ``pool``: where to run them, which may already run other work (its tasks count as
    ``also``'s); by default a new one. ``damage``: what a damaged history leaves in doubt:
    its clients' and requests' events are left out of every check that reads client events
    (see ``damaged_result``), and a check reading a damaged source's events is unknown.
    """
    from reports.parallel import Task, Tasks, report_threads

    checkers = registry()
    clean = ctx
    leave_out = bool(damage and (damage.clients or damage.requests))
    if damage and leave_out:
        clean = CheckContext(
            ctx.spark,
            without_clients(ctx.events, list(damage.clients), list(damage.requests)),
            ctx.meta,
            ctx.faults,
            ctx.run_dir,
        )
    errors: dict[int, str] = {}

    def check(i: int, name: str) -> CheckResult:
        found = checkers.get(name)
        if found is None:
            errors[i] = f"no checker named {name!r} (known: {', '.join(sorted(checkers))})"
            return CheckResult(
                name, UNKNOWN, summary="no such checker", reason="no checker has this name (zchaos list)"
            )
        try:
            if damage and leave_out and found.reads_clients:
                result = damaged_result(found.run(clean), damage, found, ctx)
            else:
                result = found.run(ctx)
            hit = damage.sources_read_by(found, ctx.profile) if damage else []
            return sources_result(result, damage, hit) if damage and hit else result
        except Exception as exc:  # a checker's bug must not hide the other results
            failed = f"checker failed: {type(exc).__name__}: {exc}"
            errors[i] = f"checker {name} failed:\n{traceback.format_exc(limit=8)}"
            return CheckResult(name, UNKNOWN, summary=failed, reason=f"{failed} (see errors)")

    _prepare_shared(ctx, clean, leave_out, [checkers[name] for name in names if name in checkers])
    checks = [Task(name, lambda i=i, name=name: check(i, name)) for i, name in enumerate(names)]
    try:
        with contextlib.ExitStack() as stack:
            if pool is None:
                pool = stack.enter_context(Tasks(ctx.spark, report_threads(ctx.spark)))
            pool.add(*(Task(name, fn) for name, fn in (also or {}).items()))
            extra = list(pool.tasks)
            threads = pool.threads
            what = f"{len(names)} check{'s' * (len(names) != 1)}" + "".join(
                f" and the {t.name}" for t in extra
            )
            say(f"checking {what} {f'({threads} at a time)' if threads > 1 else 'one at a time'}")
            pool.add(*checks)
            pool.wait(lambda t: say(f"  {t.name} done in {t.seconds:.1f} s"))
    finally:
        if clean is not ctx:
            clean.release()
    for task in extra + checks:
        if task.error is not None:
            raise task.error
    return [t.value for t in checks], [errors[i] for i in sorted(errors)], {t.name: t.value for t in extra}


def _prepare_shared(ctx: CheckContext, clean: CheckContext, leave_out: bool, checks: list[Checker]) -> None:
    """Plan the shared aggregates the checks read (core.aggregates.prepare) on the context each runs
    with, before any runs: the setting they are planned with is the session's."""
    from reports.checkers.core import aggregates

    kinds = ctx.event_kinds()
    runnable = [c for c in checks if all(k in kinds for k in c.needs)]
    for target in [ctx] if clean is ctx else [ctx, clean]:
        on_target = [c for c in runnable if (clean if leave_out and c.reads_clients else ctx) is target]
        names = {name for c in on_target for name in c.shares}
        # A frame that cannot be planned fails again in the check that reads it, which then
        # reports the error as that check's (run_checks); nothing to report here.
        with contextlib.suppress(Exception):
            aggregates.prepare(target, names)


def expected_events(run: RunDir) -> int | None:
    """About how many events the history holds, before Spark starts (it sizes the JVM): the
    compaction's own count, else the JSON lines' size at about BYTES_PER_EVENT each."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return int(json.loads((run.history / PARQUET / ACCOUNT_FILE).read_text())["events"])
    with contextlib.suppress(OSError):
        return sum(f.stat().st_size for f in run.history.glob("*.jsonl")) // BYTES_PER_EVENT
    return None


def check_run(
    spark: SparkSession,
    run: RunDir,
    meta: dict[str, Any],
    say: Callable[[str], None],
    pending: Conversion | None = None,
) -> dict[str, Any]:
    """The verdict of one run: its history read (``pending``: its conversion, see read_events),
    checked and measured."""
    from reports.parallel import Task, Tasks, report_threads

    say("reading history")
    history = read_events(spark, run, say, pending)
    # The metrics need neither the fault windows nor the checks: they start now, on another
    # thread, while this one reads the run's control events (at demo size the first query of
    # the process, ~1.5 s of planning and warm-up that kept one core busy and the other idle).
    with Tasks(spark, report_threads(spark)) as pool:
        pool.add(Task("metrics", lambda: _metrics(spark, history, meta)))
        return _check_history(spark, run, meta, history, say, pool)


def _metrics(spark: SparkSession, history: History, meta: dict[str, Any]) -> dict[str, Any]:
    from reports.checkers.toolkit import run_time
    from reports.metrics import compute_metrics

    t0 = run_time(CheckContext(spark, history.events, meta, [], profile=history.profile), "load_started_ns")
    return compute_metrics(history.events, t0, history.profile)


def _check_history(
    spark: SparkSession, run: RunDir, meta: dict[str, Any], history: History, say: Callable[[str], None],
    pool: Tasks,
) -> dict[str, Any]:  # fmt: skip
    """check_run's rest, while ``pool`` computes the metrics."""
    from reports.checkers.toolkit import run_time
    from reports.evidence import attach_evidence
    from reports.verdict import build_verdict

    events, account = history.events, history.account
    if account["bad_lines"]:
        say(f"skipped {account['bad_lines']} history line(s) that are not events:")
        for b in account.get("bad_examples", [])[:5]:
            say(f"  history/{b['file']} line {b['line_no']}: {b['line'][:80]}")
    control = control_events(events, history.profile)
    faults, warnings = fault_windows(events, history.profile, control)
    for name in account.get("truncated", []):
        warnings.append(f"history/{name} ends mid-line: its writer was cut off (truncated file)")
    damage = damage_scope(account, meta)
    account["damaged_clients"], account["damaged_requests"] = damage.clients, damage.requests
    account["damaged_sources"] = damage.sources
    for cid, what in damage.clients.items():
        warnings.append(f"client {cid}: damaged history ({what}); its requests are left out")
    if damage.requests:
        named = f"{len(damage.requests)} request(s) named by unreadable lines"
        warnings.append(f"{named} left out: {damage.left_out()}")
    for src, what in damage.sources.items():
        warnings.append(f"{src}: damaged history ({what}); the checks reading its events are unknown")
    if "compaction_error" in account:
        warnings.append(f"could not write history/{PARQUET}: {account.pop('compaction_error')}")
    for key, fallback in (("load_started_ns", "min"), ("load_stopped_ns", "max"), ("ended_ns", "max")):
        if meta.get(key) is None:
            warnings.append(f"run.json has no {key}: using the {fallback} event time")
    account["warnings"] = warnings
    incomplete, completion = completeness(events, meta, control, history.profile.last_ts)
    ctx = CheckContext(spark, events, meta, faults, run.root, history.profile)
    checks = list(meta["manifest"]["promises"]["checks"])
    results, errors, computed = run_checks(ctx, checks, say, damage, pool=pool)
    metrics = computed["metrics"]
    try:
        attach_evidence(ctx, results, metrics.get("t0_ns") or run_time(ctx, "load_started_ns"))
    except Exception as exc:  # a bug here must not cost the verdict: the examples stand without it
        warnings.append(f"the examples' evidence could not be gathered: {type(exc).__name__}: {exc}")
    account["unknown_event_kinds"] = sorted(ev for ev in metrics["events"] if ev not in EVENTS)
    recovery = next((r for r in results if r.name == "recovery"), None)
    fault_rows = (recovery.figures.get("faults") if recovery else None) or [
        {"fault_id": f.fault_id, "fault": f.fault, "target": f.target, "start_ns": f.start_ns}
        | {"stop_ns": f.stop_ns}
        for f in faults
    ]
    times = {k: meta.get(k) for k in ("started_ns", "load_started_ns", "load_stopped_ns", "ended_ns")}
    extra = {
        "completion": completion,
        "run_dir": str(run.root),
        "generated_ns": time.time_ns(),
        "times": times,
        "faults": fault_rows,
        "processes": process_exits(events, history.profile, control),
        "input": account,
    }
    docs = {name: c.doc for name, c in registry().items()} | {BASELINE: BASELINE_DOC}

    def verdict_of(results: list[CheckResult]) -> dict[str, Any]:
        return build_verdict(
            meta, results, metrics, docs=docs, errors=errors, incomplete=incomplete, extra=extra
        )

    verdict = verdict_of(results)
    # A regression is judged on the run's own figures, so after the other checks.
    regression = baseline_check(meta, verdict, store_for_run(run.root))
    if regression is not None:
        verdict = verdict_of([*results, regression])
    client_errors = history.profile.kinds.get("client_error", 0)
    if client_errors:  # the load's own faults, not the system's: said, never silent
        verdict["reasons"].append(
            f"{client_errors} client program error(s) (client_error events): see the report's "
            "'Client program errors' and the run's logs/client-*.log"
        )
    ctx.release()
    history.release()
    return verdict


def build_report(
    run_dir: Path, *, progress: Callable[[str], None] | None = None, events: int | None = None
) -> dict[str, Any]:
    """Check a run directory's history and write its verdict.json, junit.xml and report.html.

    Uses the process's Spark session, started here if none runs (sized for ``events`` events,
    by default this run's; a command that reports several runs in one session passes the
    largest), and left running for the next report: whoever owns the process stops it
    (harness/cli.py). Returns the verdict (the content of verdict.json). Raises SetupError,
    naming the file, when the directory is not a run or its history holds no event.
    """
    from reports.html import write_html
    from reports.junit import write_junit
    from reports.spark import FITTED, get_spark, running

    say = progress or (lambda _message: None)
    run = RunDir(Path(run_dir))
    if not run.root.is_dir():
        raise SetupError("no such run directory", where=run.root)
    meta = run.read_meta()
    # The JSON lines go to Parquet (pyarrow, its own threads) while the JVM starts (one core).
    pending = start_conversion(run, say)
    try:
        say("Spark: reusing this process's session" if running() else "starting Spark")
        spark = get_spark(events=expected_events(run) if events is None else events)
        saved = {key: spark.conf.get(key) for key in FITTED}
        try:
            verdict = check_run(spark, run, meta, say, pending)
        finally:
            for key, value in saved.items():
                spark.conf.set(key, value)
    finally:
        if pending is not None:  # Ctrl-C or an error: stopped, no half-written Parquet form left
            pending.abandon()
    say("writing verdict.json, junit.xml, report.html")
    tmp = run.verdict_json.with_suffix(".tmp")
    tmp.write_text(json.dumps(verdict, indent=2, default=str))
    tmp.replace(run.verdict_json)
    write_junit(verdict, run.junit_xml)
    write_html(verdict, meta, run, run.report_html)
    return verdict
