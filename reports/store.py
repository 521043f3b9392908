"""The results store: every run's outcome, checks and key figures, in one file of the runs folder.

``RUNS_DIR/results.sqlite`` is an index of the run folders under it (``RUN/`` or
``suite-*/RUN/``): one row per run (``runs``), one per check and one per key figure
(``results``), and the baseline labels (``baselines``). The run folders stay the truth:
``rebuild`` makes the store again from their ``run.json``, ``verdict.json`` and
``baseline.json``, which is what ``zchaos index RUNS_DIR`` does for a damaged store.

Why SQLite and not a Parquet dataset: runs append a few dozen rows each, from separate
processes that may finish at the same moment (two ``zchaos run`` into one folder, a suite
beside an ad-hoc run). SQLite in WAL mode serialises those writers itself (each run's rows
go in one transaction; a writer that finds the file locked waits up to ``BUSY_TIMEOUT_S``)
and readers never block writers; a Parquet dataset would need one file per run and a
compaction that races the writers, and Spark's start-up (seconds) for a query of a few
hundred rows. The store is in the standard library, readable by any SQLite client.

Rows of ``results``: ``kind`` is ``check`` (``name`` the check, ``outcome`` its outcome,
``value`` its violations, ``detail`` its summary, or for an unknown check its reason) or
``figure`` (``name`` one of FIGURES, ``value`` in ``unit``; ``fault_id`` and ``detail`` say
which fault a per-fault figure is about). Each row repeats the run's identity (scenario,
implementation, subject version, seed, zchaos version, time): one table answers most questions.

A run whose verdict is stale (a report started to replace it and did not finish:
reports/pipeline.py ``mark_stale``) has ``outcome`` unknown and ``stale`` saying why; a
store of schema 1 gets the column when it is next opened.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contract.calibration import CALIBRATION_DIR
from contract.errors import CannotWrite, SetupError
from contract.rundir import RunDir, RunMeta, stale_reason

STORE_NAME = "results.sqlite"
#: Written in a run folder by ``zchaos baseline RUN --label L``: the labels the run is a baseline for.
BASELINE_FILE = "baseline.json"
#: How long a writer waits for another's transaction before it gives up (a run's rows take ms).
BUSY_TIMEOUT_S = 60.0
#: How deep run folders lie under the runs folder: RUN, suite-*/RUN, suite-*/seeds-*/RUN.
RUN_DEPTH = 3
SCHEMA_VERSION = 2
#: The key figures of a run, with their units (a figure that a run does not have is left out).
FIGURES: dict[str, str] = {
    "recovery_s": "s",  # per fault: from its stop to the first ok reply
    "max_recovery_s": "s",  # the slowest of those
    "availability": "ratio",  # per judged fault: share of ok replies during it / just before it
    "min_availability": "ratio",
    "p50_ms": "ms",  # reply latency over the whole run (history, exact)
    "p99_ms": "ms",
    "requests": "count",
    "retries": "count",
    "abandons": "count",
    "duration_s": "s",  # the run's wall time, set-up to teardown
}
IDENTITY = ("scenario", "implementation", "subject_version", "seed", "zchaos_version", "started_ns")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY,           -- the run folder, relative to the store's folder
    scenario TEXT NOT NULL,
    implementation TEXT NOT NULL,
    subject_version TEXT NOT NULL,  -- '' when none was given
    system TEXT NOT NULL,           -- implementation, and its version when given
    seed INTEGER,
    outcome TEXT NOT NULL,          -- contract/outcomes.py
    fault_kinds TEXT NOT NULL,      -- the scenario's fault kinds in its order, '+'-joined; 'none'
    zchaos_version TEXT NOT NULL,
    started_ns INTEGER,
    recorded_ns INTEGER NOT NULL,
    report TEXT,                    -- report.html, relative to the store's folder
    stale TEXT                      -- why the run's verdict is stale (NULL when it is not)
);
CREATE TABLE IF NOT EXISTS results (
    run TEXT NOT NULL REFERENCES runs(run) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('check', 'figure')),
    name TEXT NOT NULL,
    outcome TEXT,                   -- a check's outcome
    value REAL,                     -- a check's violations, a figure's value
    unit TEXT,
    fault_id INTEGER,               -- the fault a per-fault figure is about
    detail TEXT,
    {", ".join(f"{c} {'INTEGER' if c in ('seed', 'started_ns') else 'TEXT'}" for c in IDENTITY)}
);
CREATE INDEX IF NOT EXISTS results_run ON results(run);
CREATE TABLE IF NOT EXISTS baselines (
    label TEXT NOT NULL,
    scenario TEXT NOT NULL,
    run TEXT NOT NULL,
    PRIMARY KEY (label, scenario)
);
"""
#: What each schema version adds to a store of the one before, column by column (table,
#: column, its declaration): CREATE TABLE IF NOT EXISTS leaves an existing table as it was.
COLUMNS_ADDED = {2: [("runs", "stale", "TEXT")]}


def _full(exc: sqlite3.Error) -> bool:
    """SQLite's 'database or disk is full' (or its journal could not be written for it)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)


def _store_full(path: Path, exc: sqlite3.Error) -> CannotWrite:
    """A store that cannot take a run for want of space is whole, not damaged: said as such."""
    return CannotWrite(
        path,
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        f"the results store could not take the run ({exc}); it is unchanged. Free space and "
        f"`zchaos index {path.parent}` adds the run",
    )


class StoreDamaged(SetupError):
    """The store file is not a database SQLite can read: named, with how to rebuild it."""

    def __init__(self, path: Path, why: str) -> None:
        rebuild = f"`zchaos index {path.parent}` rebuilds it from the run folders"
        super().__init__(
            f"the results store is damaged ({why}); {rebuild}",
            where=path,
        )


def store_path(runs_dir: str | Path) -> Path:
    return Path(runs_dir) / STORE_NAME


def store_for_run(run_root: Path) -> Path:
    """The store a run folder belongs to: the nearest of its ancestors up to RUN_DEPTH that
    has one (a suite's runs are in ``RUNS_DIR/suite-*/``, its many-seeds runs one deeper),
    else a new one in its parent."""
    run_root = run_root.resolve()
    for folder in run_root.parents[:RUN_DEPTH]:
        if store_path(folder).exists():
            return store_path(folder)
    return store_path(run_root.parent)


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """An open store (created when missing), in WAL mode with a busy timeout; StoreDamaged
    when the file is not a database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreDamaged(path, str(exc)) from None
    try:
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA foreign_keys = ON")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                _upgrade(db)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            if _full(exc):
                raise _store_full(path, exc) from None
            if "unable to open" in str(exc) or "readonly" in str(exc):  # not damaged: out of reach
                raise SetupError(f"cannot open the results store: {exc}", where=path) from None
            raise StoreDamaged(path, str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise StoreDamaged(path, str(exc)) from None
        db.row_factory = sqlite3.Row
        yield db
    finally:
        db.close()


def _upgrade(db: sqlite3.Connection) -> None:
    """Bring a new or older store to SCHEMA_VERSION: the tables made, the columns added since;
    under the write lock, so two processes opening one old store add each column once."""
    db.executescript(SCHEMA)  # IF NOT EXISTS throughout; outside any transaction, as it must be
    db.execute("BEGIN IMMEDIATE")  # (a store locked past the busy timeout raises here: nothing to undo)
    try:
        for version, added in sorted(COLUMNS_ADDED.items()):
            if version > SCHEMA_VERSION:
                continue
            for table, column, declared in added:
                present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                if column not in present:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def key_figures(verdict: dict[str, Any], meta: RunMeta) -> list[dict[str, Any]]:
    """The figure rows of one run (name, value, unit, fault_id, detail), from its verdict."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: Any, fault_id: int | None = None, detail: str = "") -> None:
        if (value := _num(value)) is not None:
            rows.append(
                {"name": name, "value": value, "unit": FIGURES[name], "fault_id": fault_id, "detail": detail}
            )

    recoveries = []
    for f in verdict.get("faults") or []:
        what = f"fault {f.get('fault_id')}: {f.get('fault')} {f.get('target')}"
        if _num(f.get("recovery_s")) is not None:
            recoveries.append(f["recovery_s"])
            add("recovery_s", f["recovery_s"], f.get("fault_id"), what)
    add("max_recovery_s", max(recoveries, default=None))
    availability = ((verdict.get("checks") or {}).get("availability") or {}).get("figures") or {}
    ratios = []
    for f in availability.get("faults") or []:
        if _num(f.get("ratio")) is not None:
            ratios.append(f["ratio"])
            add(
                "availability",
                f["ratio"],
                f.get("fault_id"),
                f"fault {f.get('fault_id')}: {f.get('fault')} {f.get('target')}",
            )
    add("min_availability", min(ratios, default=None))
    metrics = verdict.get("metrics") or {}
    latency = metrics.get("latency_ms") or {}
    add("p50_ms", latency.get("p50"))
    add("p99_ms", latency.get("p99"))
    kinds = (metrics.get("client_kinds") or {}).values()
    for name in ("requests", "retries", "abandons"):
        if kinds:
            add(name, sum(k.get(name) or 0 for k in kinds))
    started, ended = meta.get("started_ns"), meta.get("ended_ns")
    if isinstance(started, int) and isinstance(ended, int):
        add("duration_s", (ended - started) / 1e9)
    return rows


def subject_version(meta: RunMeta) -> str:
    """The version of the system under test, when the run was given one."""
    return str(meta.get("subject_version") or (meta.get("manifest") or {}).get("version") or "")


def system_name(implementation: str, version: str) -> str:
    return f"{implementation} {version}" if version else implementation


def run_record(run_root: Path, store_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The ``runs`` row, the ``results`` rows and the baseline labels of one run folder that
    has a verdict (SetupError naming the file when it has none or it is unreadable)."""
    run = RunDir(run_root)
    meta = run.read_meta()
    verdict = run.read_verdict()
    scenario = meta.get("scenario") or {}
    implementation = verdict.get("implementation") or (meta.get("manifest") or {}).get("name") or ""
    version = subject_version(meta)
    # In the scenario's order (its fault lines as written, kept by the replay record): the
    # first is the kind the matrix groups the scenario under; then the plan's.
    lines = ((meta.get("replay") or {}).get("scenario_data") or {}).get("faults") or []
    listed = [f.get("kind") for f in lines if isinstance(f, dict)] + [
        f.get("kind") for f in meta.get("plan") or []
    ]
    kinds = list(dict.fromkeys(str(k) for k in listed if k))
    rel = Path(os.path.relpath(run.root.resolve(), store_dir.resolve())).as_posix()
    seed = verdict.get("seed", scenario.get("seed"))
    row = {
        "run": rel,
        "scenario": verdict.get("scenario") or scenario.get("name") or "",
        "implementation": implementation,
        "subject_version": version,
        "system": system_name(implementation, version),
        "seed": seed if isinstance(seed, int) else None,
        "outcome": verdict.get("outcome") or "unknown",
        "fault_kinds": "+".join(kinds) or "none",
        "zchaos_version": str(
            meta.get("zchaos_version") or (meta.get("replay") or {}).get("zchaos_version") or ""
        ),
        "started_ns": meta.get("started_ns"),
        "recorded_ns": time.time_ns(),
        "report": f"{rel}/report.html" if run.report_html.exists() else None,
        "stale": stale_reason(verdict),  # its outcome is then unknown (reports/verdict.py)
    }
    results = [
        {
            "kind": "check",
            "name": name,
            "outcome": c.get("outcome"),
            "value": _num(c.get("violations")),
            "unit": "violations",
            "fault_id": None,
            # Why an undecided check is unknown says more than its figures.
            "detail": str(
                (c.get("reason") if c.get("outcome") == "unknown" else None) or c.get("summary") or ""
            )[:500],
        }
        for name, c in (verdict.get("checks") or {}).items()
    ]
    results += [{"kind": "figure", "outcome": None, **f} for f in key_figures(verdict, meta)]
    labels: list[str] = []
    with contextlib.suppress(OSError, ValueError, TypeError):
        labels = [str(x) for x in json.loads((run.root / BASELINE_FILE).read_text())["labels"]]
    return row, results, labels


def _write(
    db: sqlite3.Connection, row: dict[str, Any], results: list[dict[str, Any]], labels: list[str]
) -> None:
    db.execute("DELETE FROM results WHERE run = ?", (row["run"],))
    db.execute(
        f"INSERT OR REPLACE INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        list(row.values()),
    )
    identity = [row[c] for c in IDENTITY]
    cols = ("run", "kind", "name", "outcome", "value", "unit", "fault_id", "detail", *IDENTITY)
    db.executemany(
        f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [
            [
                row["run"],
                r["kind"],
                r["name"],
                r["outcome"],
                r["value"],
                r["unit"],
                r["fault_id"],
                r["detail"],
                *identity,
            ]
            for r in results
        ],
    )
    for label in labels:
        db.execute(
            "INSERT OR REPLACE INTO baselines (label, scenario, run) VALUES (?, ?, ?)",
            (label, row["scenario"], row["run"]),
        )


def record_run(run_root: Path, store: Path | None = None) -> Path:
    """Add (or replace) one run's rows in the store (``store``: default ``store_for_run``), in
    one transaction; returns the store's path. StoreDamaged when the file is not a database."""
    store = store or store_for_run(run_root)
    row, results, labels = run_record(run_root, store.parent)
    with connect(store) as db:
        try:
            db.execute("BEGIN IMMEDIATE")  # the write lock first: no deadlock upgrading a read
            _write(db, row, results, labels)
            db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            if _full(exc):
                raise _store_full(store, exc) from None
            raise StoreDamaged(store, str(exc)) from None
    return store


def run_folders(runs_dir: Path) -> list[Path]:
    """The run folders under ``runs_dir`` down to RUN_DEPTH (``RUN/``, ``suite-*/RUN/``,
    ``suite-*/seeds-*/RUN/``), oldest first."""
    patterns = ["/".join(["*"] * depth + ["run.json"]) for depth in range(1, RUN_DEPTH + 1)]
    found = [p.parent for pattern in patterns for p in runs_dir.glob(pattern)]
    # The runs that measured a calibration (runs/calibration/) ran no scenario and have no verdict.
    found = [p for p in found if CALIBRATION_DIR not in p.relative_to(runs_dir).parts[:1]]
    return sorted(set(found), key=lambda p: p.name)


def rebuild(runs_dir: Path) -> tuple[Path, int, list[str], Path | None]:
    """The store of ``runs_dir`` made again from its run folders, written aside and then put
    in place of the old one, which is kept beside it when it was damaged. Returns the store,
    how many runs it holds, what was skipped (folders without a readable verdict, with why)
    and where a damaged store was moved."""
    path = store_path(runs_dir)
    fresh = path.with_name(f".{STORE_NAME}.rebuild-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    skipped: list[str] = []
    count = 0
    with connect(fresh) as db:
        db.execute("PRAGMA journal_mode = DELETE")  # one file to move into place
        db.execute("BEGIN IMMEDIATE")
        for folder in run_folders(runs_dir):
            try:
                _write(db, *run_record(folder, runs_dir))
                count += 1
            except SetupError as exc:
                skipped.append(str(exc))
        db.execute("COMMIT")
    moved = None
    if path.exists() and is_damaged(path):
        moved = path.with_name(f"{STORE_NAME}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        path.replace(moved)
    for suffix in ("-wal", "-shm"):  # the old file's log must not be replayed onto the new one
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    fresh.replace(path)
    return path, count, skipped, moved


def is_damaged(path: Path) -> bool:
    try:
        with connect(path) as db:
            return db.execute("PRAGMA quick_check").fetchone()[0] != "ok"
    except StoreDamaged:
        return True


def read_runs(store: Path) -> list[dict[str, Any]]:
    """Every run of the store with its results: ``checks`` (name -> row) and ``figures``
    (name -> rows), oldest first."""
    if not store.exists():
        return []
    with connect(store) as db:
        try:
            runs = {
                r["run"]: dict(r) | {"checks": {}, "figures": {}}
                for r in db.execute("SELECT * FROM runs ORDER BY started_ns")
            }
            for r in db.execute("SELECT * FROM results"):
                run = runs.get(r["run"])
                if run is None:
                    continue
                if r["kind"] == "check":
                    run["checks"][r["name"]] = dict(r)
                else:
                    run["figures"].setdefault(r["name"], []).append(dict(r))
        except sqlite3.DatabaseError as exc:
            raise StoreDamaged(store, str(exc)) from None
    return list(runs.values())


def baseline_run(store: Path, label: str, scenario: str) -> str | None:
    """The run (relative to the store's folder) stored as baseline ``label`` for ``scenario``;
    else the one run of that label when it has just one; else None."""
    if not store.exists():
        return None
    with connect(store) as db:
        try:
            rows = db.execute("SELECT scenario, run FROM baselines WHERE label = ?", (label,)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreDamaged(store, str(exc)) from None
    same = [r["run"] for r in rows if r["scenario"] == scenario]
    if same:
        return same[0]
    return rows[0]["run"] if len(rows) == 1 else None


def mark_baseline(run_root: Path, label: str, store: Path | None = None) -> Path:
    """Make a run the baseline ``label`` for its scenario: written into the run folder (so a
    rebuilt store keeps it) and into the store. Returns the store's path. A run whose verdict
    is stale (or missing) cannot be one (SetupError): its figures may not be the history's."""
    RunDir(run_root).read_verdict(fresh=True)
    path = run_root / BASELINE_FILE
    labels: list[str] = []
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        labels = list(json.loads(path.read_text())["labels"])
    if label not in labels:
        labels.append(label)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"labels": labels}, indent=2))
    tmp.replace(path)
    return record_run(run_root, store)
