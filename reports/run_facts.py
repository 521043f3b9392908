"""Run facts for the verdict, from the run's own few events (phases, faults, process starts
and exits, read in one job): the fault windows, how far the run carried out its plan, the
processes that exited, and the verdict's table of faults. The checks get the same rows
(``CheckContext.control``) for what they ask of the processes (toolkit ``process_events``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reports.checkers import CheckResult, FaultWindow, Profile, control_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from contract.rundir import RunMeta

#: The run's own few events (phases, faults, process starts and exits), read in one job and
#: shared by the fault windows, the completeness, the table of processes and the checks.
CONTROL_EVENTS = ("phase", "phase_done", "fault_start", "fault_stop", "fault_error",
                  "proc_start", "proc_exit")  # fmt: skip


CONTROL_COLUMNS = ("ts", "src", "ev", "name", "fault_id", "fault", "target", "detail",
                   "fault_scope", "fault_lossy", "fault_harm", "fault_lasting", "fault_stops",
                   "instance", "role", "pid", "code", "signal", "expected")  # fmt: skip


def control_events(events: DataFrame, profile: Profile | None = None) -> list[Any]:
    """The CONTROL_EVENTS of the history, in time order (one job; none when the profile has none)."""

    if profile is not None and not profile.has(*CONTROL_EVENTS):
        return []
    return control_rows(events, None, CONTROL_EVENTS, CONTROL_COLUMNS)


def fault_windows(
    events: DataFrame, profile: Profile | None = None, control: list[Any] | None = None
) -> tuple[list[FaultWindow], list[str]]:
    """Faults paired by fault_id from fault_start/fault_stop, and what did not pair."""
    if profile is not None and not profile.has("fault_start", "fault_stop"):
        return [], []
    rows = control_rows(events, control, ("fault_start", "fault_stop"), CONTROL_COLUMNS)
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
            r["fault_stops"],
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
    return [{k: r[k] for k in keys} for r in control_rows(events, control, ("proc_exit",), CONTROL_COLUMNS)]


NS = 1_000_000_000


def completeness(
    events: DataFrame,
    meta: RunMeta,
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

    kinds = ("phase", "phase_done", "fault_start", "fault_error")
    rows = control_rows(events, control, kinds, CONTROL_COLUMNS)
    done = set(meta.get("phases_done") or {}) | {r["name"] for r in rows if r["ev"] == "phase_done"}
    entered = [r["name"] for r in rows if r["ev"] == "phase"]
    started = {r["fault_id"]: r for r in rows if r["ev"] == "fault_start"}
    failed = [r for r in rows if r["ev"] == "fault_error"]
    plan = meta.get("plan") or []
    load_start = meta.get("load_started_ns")
    if load_start is None:  # a run.json written before the load began
        load_start = next((r["ts"] for r in rows if r["ev"] == "phase" and r["name"] == "load"), None)
    if last_ts is None:
        last_ts = events.agg(F.max("ts")).collect()[0][0]
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


def fault_rows(faults: list[FaultWindow], recovery: CheckResult | None) -> list[dict[str, Any]]:
    """The verdict's table of faults: each fault's window, with the ``recovery`` check's timing
    of it (``recovery_s``, ``target_recovery_s``, ``within_bound``) where that check ran."""
    timed = {r["fault_id"]: r for r in (recovery.figures.get("faults") or [])} if recovery else {}
    rows = []
    for f in faults:
        row = {"fault_id": f.fault_id, "fault": f.fault, "target": f.target, "start_ns": f.start_ns}
        row["stop_ns"] = f.stop_ns
        if f.fault_id in timed:
            row |= {k: timed[f.fault_id][k] for k in ("recovery_s", "target_recovery_s", "within_bound")}
        rows.append(row)
    return rows
