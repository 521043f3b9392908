"""The report pipeline: a run directory in, verdict.json, junit.xml and report.html out.

``build_report`` reads ``run.json`` and the history (reports/ingest, one SparkSession per
process), takes the run's facts from its control events (reports/run_facts.py: the fault
windows, how far the run carried out its plan), runs the checks the manifest promises
while it computes the metrics, and writes the three files. Bad input is a ``SetupError``
naming the file (no run.json, no history, nothing in it).

A damaged history is named, not blamed on the system: the reader locates every line that
is not an event, and what each bad line names (a request, a client, or every writer of its
file: reports/ingest/damage.py) is left out of the checks that read client events, which
keep only what still stands without it (Checker.on_damage) and are UNKNOWN otherwise,
rather than counting what is missing (its sends, say) as violations of the system.

A report that replaces an earlier one first marks the old outputs stale (``mark_stale``:
verdict.json, junit.xml, report.html and the results store's row say unknown, stale, and
why), and writes its own aside, putting them in place at its end: a report killed half-way
leaves no PASSED for a history it never finished checking, and no half-written file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.clock import clock_drift_reason
from contract.errors import CannotWrite, SetupError
from contract.history import EVENTS
from contract.payload import RID_PATTERN
from contract.rundir import RunDir, RunMeta, disk_full_reason
from reports.baseline import CHECK as BASELINE
from reports.baseline import DOC as BASELINE_DOC
from reports.baseline import baseline_check
from reports.checkers import HELD, UNKNOWN, CheckContext, Checker, CheckResult, registry
from reports.ingest.damage import Damage, damage_scope
from reports.ingest.read import PARQUET, History, expected_events, read_events, start_conversion
from reports.run_facts import completeness, control_events, fault_rows, fault_windows, process_exits
from reports.store import record_run, store_for_run
from reports.verdict import stale_verdict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from reports.ingest.arrow import Conversion
    from reports.parallel import Tasks


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
    the check (``Checker.on_damage``): a violation of a check of each request stands (found
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
    stands = (result.status == HELD and checker.on_damage.stands == "holds") or (
        result.status != HELD and checker.on_damage.stands == "violations"
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
            control=ctx.control,  # no client's events: left whole
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
            if damage and leave_out and found.on_damage.reads_clients:
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
    checks = [Task(name, functools.partial(check, i, name)) for i, name in enumerate(names)]
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
    """Plan the shared aggregates the checks read (toolkit.shared.prepare) on the context each runs
    with, before any runs: the setting they are planned with is the session's."""
    from reports.checkers import toolkit

    kinds = ctx.event_kinds()
    runnable = [c for c in checks if all(k in kinds for k in c.needs)]
    for target in [ctx] if clean is ctx else [ctx, clean]:
        on_target = [
            c for c in runnable if (clean if leave_out and c.on_damage.reads_clients else ctx) is target
        ]
        names = {name for c in on_target for name in c.shares}
        # A frame that cannot be planned fails again in the check that reads it, which then
        # reports the error as that check's (run_checks); nothing to report here.
        with contextlib.suppress(Exception):
            toolkit.prepare(target, names)


def check_run(
    spark: SparkSession,
    run: RunDir,
    meta: RunMeta,
    say: Callable[[str], None],
    pending: Conversion | None = None,
) -> dict[str, Any]:
    """The verdict of one run: its history read (``pending``: its conversion, see read_events),
    checked and measured."""
    from reports import connect
    from reports.parallel import Task, Tasks, report_threads

    say("reading history")
    shared = connect.history_dir()
    source = run
    if shared is not None:  # the endpoint reads a copy where it can (README: on a Spark cluster)
        if pending is not None:
            pending.wait()
        source = RunDir(connect.stage_history(run.history, shared))
        say(f"history copied to {source.history} for Spark to read")
    history = read_events(spark, source, say, None if shared is not None else pending)
    # The metrics need neither the fault windows nor the checks: they start now, on another
    # thread, while this one reads the run's control events (at demo size the first query of
    # the process, ~1.5 s of planning and warm-up that kept one core busy and the other idle).
    with Tasks(spark, report_threads(spark)) as pool:
        pool.add(Task("metrics", lambda: _metrics(spark, history, meta)))
        return _check_history(spark, run, meta, history, say, pool)


def _metrics(spark: SparkSession, history: History, meta: RunMeta) -> dict[str, Any]:
    from reports.checkers.toolkit import run_time
    from reports.metrics import compute_metrics

    t0 = run_time(CheckContext(spark, history.events, meta, [], profile=history.profile), "load_started_ns")
    return compute_metrics(history.events, t0, history.profile)


def _check_history(
    spark: SparkSession, run: RunDir, meta: RunMeta, history: History, say: Callable[[str], None],
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
    trouble = run.disk_trouble(meta)  # also a run whose runner could not write run.json at the end
    if trouble is not None:
        meta["disk_full"] = completion["disk_full"] = trouble  # the checks read it too (exits)
        incomplete.append(disk_full_reason(trouble, meta, run.root))
    drifted = clock_drift_reason(meta.get("clocks"))
    if drifted is not None:  # the events' times are not one time line: nothing timed can be judged
        incomplete.append(drifted)
        completion["clock_drift"] = drifted  # explore counts no finding of such a run
    ctx = CheckContext(spark, events, meta, faults, run.root, history.profile, control)
    checks = list(meta["manifest"]["promises"]["checks"])
    results, errors, computed = run_checks(ctx, checks, say, damage, pool=pool)
    metrics = computed["metrics"]
    try:
        attach_evidence(ctx, results, metrics.get("t0_ns") or run_time(ctx, "load_started_ns"))
    except Exception as exc:  # a bug here must not cost the verdict: the examples stand without it
        warnings.append(f"the examples' evidence could not be gathered: {type(exc).__name__}: {exc}")
    account["unknown_event_kinds"] = sorted(ev for ev in metrics["events"] if ev not in EVENTS)
    recovery = next((r for r in results if r.name == "recovery"), None)
    times = {k: meta.get(k) for k in ("started_ns", "load_started_ns", "load_stopped_ns", "ended_ns")}
    extra = {
        "completion": completion,
        "run_dir": str(run.root),
        "generated_ns": time.time_ns(),
        "times": times,
        "faults": fault_rows(faults, recovery),
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
    run_dir: Path,
    *,
    progress: Callable[[str], None] | None = None,
    events: int | None = None,
    store: Path | None = None,
) -> dict[str, Any]:
    """Check a run directory's history and write its verdict.json, junit.xml and report.html
    (an earlier verdict marked stale first, in them and in ``store``: default the run's,
    reports/store.py ``store_for_run``).

    Uses the process's Spark session, started here if none runs (sized for ``events`` events,
    by default this run's; a command that reports several runs in one session passes the
    largest), and left running for the next report: whoever owns the process stops it
    (harness/cli.py). Returns the verdict (the content of verdict.json). Raises SetupError,
    naming the file, when the directory is not a run or its history holds no event.
    """
    from reports.spark import FITTED, count_report, fallback_notes, get_spark, start_message

    say = progress or (lambda _message: None)
    run = RunDir(Path(run_dir))
    if not run.root.is_dir():
        raise SetupError("no such run directory", where=run.root)
    meta = run.read_meta()
    mark_stale(run, meta, say, store)
    # The JSON lines go to Parquet (pyarrow, its own threads) while the JVM starts (one core).
    pending = start_conversion(run, say)
    try:
        say(start_message())
        spark = get_spark(events=expected_events(run) if events is None else events)
        while fallback_notes:
            say(fallback_notes.pop(0))
        saved = {key: spark.conf.get(key) for key in FITTED}
        try:
            verdict = check_run(spark, run, meta, say, pending)
            count_report()
        finally:
            for key, value in saved.items():
                spark.conf.set(key, value)  # type: ignore[arg-type]  # pyspark types conf.get str | None; a SQL conf with a default gives a str
    finally:
        if pending is not None:  # Ctrl-C or an error: stopped, no half-written Parquet form left
            pending.abandon()
    say("writing verdict.json, junit.xml, report.html")
    write_outputs(run, verdict, meta)
    return verdict


def write_outputs(run: RunDir, verdict: dict[str, Any], meta: RunMeta) -> None:
    """report.html, junit.xml, then verdict.json, each written aside and put in place whole:
    verdict.json, the file the other readers trust, last, so it never vouches for pages of
    another verdict."""
    from reports.html import write_html
    from reports.junit import write_junit

    outputs: list[tuple[Path, Callable[[Path], object]]] = [
        (run.report_html, lambda tmp: write_html(verdict, meta, run, tmp)),
        (run.junit_xml, lambda tmp: write_junit(verdict, tmp)),
        (run.verdict_json, lambda tmp: tmp.write_text(json.dumps(verdict, indent=2, default=str))),
    ]
    for path, write in outputs:
        try:
            write_whole(path, write)
        except OSError as exc:  # a full disk: named, as an error of its own (exit 4)
            raise CannotWrite(
                path,
                exc,
                "the report could not write its outputs (no half-written file is left). Free "
                f"space and run `zchaos report {run.root}` again",
            ) from None


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """``write`` an output to a file aside (``.NAME.tmp``), then put it in place: never half a
    file, and nothing left aside when the writing fails."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def mark_stale(run: RunDir, meta: RunMeta, say: Callable[[str], None], store: Path | None = None) -> None:
    """Before a report replaces a run's verdict: the verdict there is, and the pages and the
    results store's row made from it, say unknown and stale (reports/verdict.py
    ``stale_verdict``) until the report's own are in place. Before, a report killed
    half-way left verdict.json and the store saying PASSED for a history that might now say
    otherwise. A run without a readable verdict has nothing to mark."""
    try:
        old = run.read_verdict()
    except SetupError:
        return
    say("marking the earlier verdict stale until this report ends")
    stale = stale_verdict(old, since_ns=time.time_ns(), run_root=run.root)
    from reports.html import write_html
    from reports.junit import write_junit

    pages: list[tuple[Path, Callable[[Path], object]]] = [
        (run.report_html, lambda tmp: write_html(stale, meta, run, tmp)),
        (run.junit_xml, lambda tmp: write_junit(stale, tmp)),
    ]
    for path, write in pages:
        try:
            write_whole(path, write)
        except Exception:  # e.g. an old verdict of another version the page cannot show:
            path.unlink(missing_ok=True)  # no page rather than one with the old outcome
    try:
        write_whole(run.verdict_json, lambda tmp: tmp.write_text(json.dumps(stale, indent=2, default=str)))
    except OSError as exc:  # a full disk: no verdict rather than the old one standing unmarked
        run.verdict_json.unlink(missing_ok=True)
        say(f"the earlier verdict.json could not be marked stale ({exc.strerror or exc}): removed")
    try:
        record_run(run.root, store)
    except (SetupError, sqlite3.OperationalError) as exc:  # StoreDamaged among them
        say(f"the results store could not mark it stale: {exc}")
