"""Reading a run's history: its Parquet form when current; else its JSON lines converted to
that form, by pyarrow (reports/ingest/arrow.py) for a clean history, by Spark's permissive
reader for one pyarrow declines, accounting for every line that is not an event
(reports/ingest/damage.py)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.errors import SetupError
from contract.history import FIELD_TYPES
from contract.rundir import RunDir
from reports.checkers import Profile
from reports.ingest.damage import CORRUPT, history_damage, stopped_writers

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from reports.ingest.arrow import Conversion

PARQUET = "events.parquet"  # where reports.history_frame.read_history looks first


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
    lines, each an event: nearly every run) is converted by pyarrow (reports/ingest/arrow.py;
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
    """The history's JSON lines to its Parquet form by pyarrow, in a thread (reports/ingest/arrow.py),
    when it has no current Parquet form; None when there is nothing to convert. The parts written
    during the run are reused where they can be, only the lines after them converted
    (reports/ingest/follow.py). It is split by kind from ``split_min_events`` (default
    SPLIT_MIN_EVENTS) events on, as Spark's compaction is."""
    from reports.history_frame import parquet_is_current
    from reports.ingest import follow
    from reports.ingest.arrow import Conversion

    hist = run.history
    files = sorted(hist.glob("*.jsonl")) if hist.is_dir() else []
    if not files or parquet_is_current(hist / PARQUET, files):
        return None
    if stopped_writers(files):  # not whole, though every line is: Spark's reader accounts for it
        return None
    return Conversion(
        hist,
        files,
        say,
        using=follow.convert,
        parquet=PARQUET,
        account_file=ACCOUNT_FILE,
        split_min_events=SPLIT_MIN_EVENTS if split_min_events is None else split_min_events,
        bytes_per_event=BYTES_PER_EVENT,
    )


def expected_events(run: RunDir) -> int | None:
    """About how many events the history holds, before Spark starts (it sizes the JVM): the
    compaction's own count, else the JSON lines' size at about BYTES_PER_EVENT each."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return int(json.loads((run.history / PARQUET / ACCOUNT_FILE).read_text())["events"])
    with contextlib.suppress(OSError):
        return sum(f.stat().st_size for f in run.history.glob("*.jsonl")) // BYTES_PER_EVENT
    return None


# Every path handed to Spark is absolute: a Spark Connect server (reports/connect.py) reads
# it from its own working directory, not the client's.
def json_lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """The JSON lines with the explicit schema; a line that is not JSON holds only CORRUPT."""
    from pyspark.sql import types as T

    from reports.history_frame import history_schema

    schema = history_schema().add(T.StructField(CORRUPT, T.StringType(), True))
    return (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(f.absolute()) for f in files])
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
            lines.write.partitionBy("ev").parquet(str(tmp.absolute()))
    except Exception as exc:  # py4j's error of a failed write
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompactionFailed(str(exc)) from exc
    bad_rows, n_bad = None, 0
    if (tmp / f"ev={NOT_AN_EVENT}").is_dir():
        (tmp / f"ev={NOT_AN_EVENT}").rename(aside)
        bad_rows = spark.read.parquet(str(aside.absolute()))
        n_bad = bad_rows.count()
    try:
        profile = profile_of(spark.read.schema(history_schema()).parquet(str(tmp.absolute())))
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
    try:
        (tmp / ACCOUNT_FILE).write_text(json.dumps({**account, "profile": profile.as_dict()}))
    except OSError as exc:  # a full disk: no half form left; the cache's path says it
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompactionFailed(str(exc)) from None
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
        spark.conf.set(key, saved)  # type: ignore[arg-type]  # pyspark types conf.get str | None; a SQL conf with a default gives a str


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


def compact(events: DataFrame, account: dict[str, Any], profile: Profile, run: RunDir) -> None:
    """Write the events to history/events.parquet (what the next report reads), with the
    account and the profile; split by event kind from SPLIT_MIN_EVENTS on."""
    target = run.history / PARQUET
    tmp = run.history / f".{PARQUET}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if profile.events >= SPLIT_MIN_EVENTS:
            with _writers_per_kind(events.sparkSession):
                events.write.partitionBy("ev").parquet(str(tmp.absolute()))
        else:
            events.coalesce(1).write.parquet(str(tmp.absolute()))
        (tmp / ACCOUNT_FILE).write_text(json.dumps({**account, "profile": profile.as_dict()}))
    except BaseException:  # a full disk above all: nothing half-written left for the next report
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def profile_of(events: DataFrame) -> Profile:
    """Events per source and kind, first and last time (one aggregation)."""
    from pyspark.sql import functions as F

    groups = events.groupBy("src", "ev").agg(
        F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last")
    )
    return Profile.from_rows(groups.collect())
