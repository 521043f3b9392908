"""The ``availability`` check: a system keeps serving through the faults it promises to survive.

Decided from the clients' history and the fault plan alone (a black box). For each fault
the manifest's ``survives`` promise covers (docs/manifest.md; what a fault does is its
``harm``, recorded in its ``fault_start`` from its kind's card), the share of request
attempts sent while the fault acts (from its start to its stop + the manifest's expiry,
see toolkit.timers) that were answered ok (each ok reply counted with the attempt it
answered, so a share never exceeds 1) must stay at least ``availability_floor`` times the
share just before it: the last ``availability_window_s`` (promises, 5 s by default) of load
time before it that no other fault excuses, taken back past the spans other faults excuse
where the stretch right before it is shorter (a slow system's few attempts per second need
the whole window; a calibrated scenario sizes it from the measured rate), never before the
warm-up.

The faults of one line of the plan (``server:all``: each server's link slowed) are applied
one after the other; each is judged while all of them act (``in_force``), since a spare not
yet slowed serves at its full rate and its many quick answers would stand for the fault.

While another fault the manifest does not promise to survive takes the service down (the
only queue restarted), nothing is answered whatever the promised one does: a promised
fault's window is judged outside the spans of those outages (from one client attempt's
timeout before their start, the attempts in flight as they began, to their stop + expiry),
and a fault that acted only inside them is unknown (explore, reliable-sketch seed 1: a
slicer on a server's link and a clock strobe on that server, both inside a restart of the
queue, "violated" with 0% and 40% answered). Only an outage that loses requests takes the
service down: junk sent to it (``malformed``, which stops none of its good traffic by its
card) does not, since a correct system serves through it. The lead was once a client's whole
budget (timeout x attempts): the junk on a Paranoid Pirate queue at 14 s reached back 10 s
over a worker's partition at 6-13 s, which was then "judged inside an outage" and unknown.

Why a share of attempts and not replies per second: the load's users are closed loops (a
user sends its next request when the last is answered), so a link 200 ms slower makes
every correct system answer fewer requests per second; a share of ok replies falls only
when the system drops or refuses what it was asked. Both rates are in the figures.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from contract.promises import (
    DEFAULT_AVAILABILITY_WINDOW_S,
    DEFAULT_SURVIVES,
    MIN_WINDOW_ATTEMPTS,
    survive_rule,
)
from reports.checkers.toolkit import (
    NS,
    WARMUP_NS,
    CheckContext,
    CheckResult,
    FaultWindow,
    checker,
    client_attempt_ns,
    client_budget_ns,
    events_of,
    has_spare,
    join_rows,
    load_span,
    result,
    send_span,
    timers,
)

#: How much time before a fault gives its baseline (less when another fault or the warm-up is
#: nearer), unless the promises give ``availability_window_s``.
BEFORE_NS = int(DEFAULT_AVAILABILITY_WINDOW_S * NS)
#: A baseline shorter than this, or with fewer attempts, cannot judge a fault.
MIN_BEFORE_NS = NS // 2
MIN_BEFORE_ATTEMPTS = MIN_WINDOW_ATTEMPTS
#: Faults that start this close together (one line with ``worker:all``) are one blow: the
#: baseline of each ends where the first began.
TOGETHER_NS = NS


def survivable(ctx: CheckContext, fault: FaultWindow, spans: dict[int, tuple[int, int]]) -> str:
    """The ``survives`` entry that covers ``fault`` ('' when none does)."""
    spare = has_spare(ctx, fault, spans)
    for entry in ctx.promises.get("survives", DEFAULT_SURVIVES):
        head, scope = survive_rule(entry)
        if head in (fault.harm, fault.fault) and (scope == "" or spare):
            return entry
    return ""


def baseline(
    fault: FaultWindow,
    faults: list[FaultWindow],
    spans: dict[int, tuple[int, int]],
    load_start: int,
    before_ns: int = BEFORE_NS,
) -> list[tuple[int, int]]:
    """The stretches [lo, hi] before the fault (and those that struck with it, TOGETHER_NS
    apart: ``worker:all``), latest first, that no other fault nor the warm-up excuses: up to
    ``before_ns`` of time in all, going back past other faults' excused spans. Empty when
    there is none."""
    together = [o for o in faults if fault.start_ns - TOGETHER_NS <= o.start_ns <= fault.start_ns]
    hi = min(o.start_ns for o in together)
    floor = load_start + WARMUP_NS
    excused = sorted(spans[o.fault_id] for o in faults if o not in together and spans[o.fault_id][0] < hi)
    pieces: list[tuple[int, int]] = []
    need, end = before_ns, hi
    for start, stop in reversed(_merged(excused)):
        if stop < end:  # a clean stretch [stop, end] after this excused span
            lo = max(stop, end - need, floor)
            if lo < end:
                pieces.append((lo, end))
                need -= end - lo
        end = min(end, start)
        if need <= 0 or end <= floor:
            break
    if need > 0 and end > floor:
        pieces.append((max(floor, end - need), end))
    return pieces


def in_force(
    fault: FaultWindow, faults: list[FaultWindow], spans: dict[int, tuple[int, int]]
) -> tuple[int, int]:
    """The part of a lasting fault's span in which every fault of its line acts too: those of
    its kind that struck with it (TOGETHER_NS apart) and lasted as long (TOGETHER_NS again),
    like ``server:all``'s links slowed one by one. The proxy applies them one after the other,
    and while the last is not yet applied (or the first already healed) a spare serves at its
    full closed-loop rate: beside a five-process test run, 24 ms between them gave the first
    two faults 2 ok attempts against the livelock's 12 failed in 4 s, so a gap of about 100 ms
    passes the floor (tests/test_availability_e2e.py's livelock, "held" for two of three).
    Its own span when it stands alone or the line has no common part."""
    lo, hi = spans[fault.fault_id]
    if not fault.lasting or fault.stop_ns is None:
        return lo, hi
    lasted = fault.stop_ns - fault.start_ns
    line = [
        spans[o.fault_id]
        for o in faults
        if o.fault == fault.fault
        and o.lasting
        and o.stop_ns is not None
        and abs(o.start_ns - fault.start_ns) <= TOGETHER_NS
        and abs(o.stop_ns - o.start_ns - lasted) <= TOGETHER_NS
    ]
    common = max(a for a, _ in line), min(b for _, b in line)
    return common if common[0] < common[1] else (lo, hi)


def _without(lo: int, hi: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi] outside the spans; [] when they cover it."""
    parts: list[tuple[int, int]] = []
    start = lo
    for a, b in _merged(sorted(spans)):
        if b < start or a > hi:
            continue
        if a > start:
            parts.append((start, a))
        start = max(start, b)
    if start < hi:
        parts.append((start, hi))
    return parts


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans with the overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for start, stop in spans:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


def answered_attempts(ctx: CheckContext, windows: list[tuple[int, int]]) -> DataFrame:
    """One row per attempt (``sent`` 1 at its send's time) and one per request answered ok
    (``ok`` 1 at the time of the attempt that reply answered: the request's last send
    before it). A window counts an ok with its own attempt, never an attempt sent before
    it (once 1219 ok of 1217 attempts: a share above 1).

    Only the events near the ``windows`` (ns) are read: a request sends, resends and is
    answered within its client's budget, so one with an attempt in a window has all of
    them within a budget of it, and one without counts nowhere. Twice the budget, for a
    reply the client took late. (30M events, one fault: the whole history grouped by
    request was 99 of the report's 170 s of CPU.)"""
    margin = 2 * client_budget_ns(ctx)
    near = _merged(sorted((lo - margin, hi + margin) for lo, hi in windows))
    events = events_of(ctx, "send", "reply").filter(
        reduce(operator.or_, (F.col("ts").between(lo, hi) for lo, hi in near))
    )
    ev, ts = F.col("ev"), F.col("ts")
    sends = events.filter(ev == "send").select("ts", F.lit(1).alias("sent"), F.lit(0).alias("ok"))
    answered = (
        events.groupBy("rid")
        .agg(
            F.min(F.when((ev == "reply") & F.coalesce("ok", F.lit(False)), ts)).alias("ok_ts"),
            F.collect_list(F.when(ev == "send", ts)).alias("sends"),
        )
        .filter(F.col("ok_ts").isNotNull())
        .select(F.array_max(F.filter("sends", lambda s: s <= F.col("ok_ts"))).alias("ts"))
        .filter(F.col("ts").isNotNull())  # a reply whose send is not in the history counts nowhere
    )
    return sends.unionByName(answered.select("ts", F.lit(0).alias("sent"), F.lit(1).alias("ok")))


@checker(
    "availability",
    "through each fault the manifest promises to survive (survives, e.g. one worker of several "
    "killed, a slow link), the share of attempts answered ok stays at least availability_floor "
    "times the share just before the fault",
)
def availability(ctx: CheckContext) -> CheckResult:
    floor = float(ctx.promises.get("availability_floor", 0.5))
    t = timers(ctx)
    load_start, load_stop = load_span(ctx)
    end = max(load_stop, *(f.start_ns for f in ctx.faults)) if ctx.faults else load_stop
    spans = {f.fault_id: send_span(f, t, end) for f in ctx.faults}
    rows: list[dict[str, Any]] = []
    windows: list[tuple[int, str, int, int]] = []  # fault_id, "before"/"during", lo, hi
    rules = {f.fault_id: survivable(ctx, f, spans) for f in ctx.faults}
    # Outages not promised that take the service down (module doc): no promised fault is
    # judged inside them, nor on the attempts in flight as one began (sent up to one
    # attempt's timeout before it).
    lead = client_attempt_ns(ctx)
    downs = [
        (spans[f.fault_id][0] - lead, spans[f.fault_id][1])
        for f in ctx.faults
        if f.loses_service and not rules[f.fault_id]
    ]
    for f in ctx.faults:
        rule = rules[f.fault_id]
        lo, hi = spans[f.fault_id]
        row: dict[str, Any] = {
            "fault_id": f.fault_id,
            "fault": f.fault,
            "target": f.target,
            "survives": rule or None,
            "during_ns": [lo, min(hi, load_stop)],
        }
        rows.append(row)
        if not rule:
            row["verdict"] = "not promised"
            continue
        before_ns = int(float(ctx.promises.get("availability_window_s", DEFAULT_AVAILABILITY_WINDOW_S)) * NS)
        pieces = baseline(f, ctx.faults, spans, load_start, before_ns)
        clean_ns = sum(b - a for a, b in pieces)
        # one stretch as [lo, hi]; several (taken back past other faults) as a list of them
        row["before_ns"] = list(pieces[0]) if len(pieces) == 1 else [list(p) for p in pieces]
        row["before_s"] = round(clean_ns / NS, 3)
        if clean_ns < MIN_BEFORE_NS:
            row["verdict"] = "unknown"
            row["reason"] = (
                f"only {clean_ns / NS:.2f} s before it that no other fault or the warm-up excuses "
                f"(needs {MIN_BEFORE_NS / NS:g} s): space the faults further apart"
            )
            continue
        start, stop = in_force(f, ctx.faults, spans)
        during = _without(start, min(stop, load_stop), downs)
        if not during:
            row["verdict"] = "unknown"
            row["reason"] = (
                "it acted only while an outage the manifest does not promise to survive took the service down"
            )
            continue
        if during != [(lo, min(hi, load_stop))]:
            row["judged_during_ns"] = [list(p) for p in during]
        row["during_s"] = round(sum(b - a for a, b in during) / NS, 3)
        windows += [(f.fault_id, "before", a, b) for a, b in pieces]
        windows += [(f.fault_id, "during", a, b) for a, b in during]
    counts: dict[tuple[int, str], tuple[int, int]] = {}
    if windows:
        # Literal rows in the plan (toolkit.join_rows): no broadcast, which is a job of its own.
        columns = {"fault_id": "int", "part": "string", "lo": "long", "hi": "long"}
        attempts = answered_attempts(ctx, [(lo, hi) for *_, lo, hi in windows])
        joined = join_rows(attempts, windows, columns, lambda w: F.col("ts").between(w["lo"], w["hi"]))
        for r in (
            joined.groupBy("fault_id", "part")
            .agg(F.sum("sent").alias("sent"), F.sum("ok").alias("ok"))
            .collect()
        ):
            counts[(r["fault_id"], r["part"])] = (int(r["sent"] or 0), int(r["ok"] or 0))
    found: list[dict[str, Any]] = []
    for row, f in zip(rows, ctx.faults, strict=True):
        if "verdict" in row:
            continue
        sent_b, ok_b = counts.get((f.fault_id, "before"), (0, 0))
        sent_d, ok_d = counts.get((f.fault_id, "during"), (0, 0))
        before_s, during_s = row["before_s"], row.pop("during_s")
        row.update(
            {
                "attempts_before": sent_b,
                "ok_before": ok_b,
                "attempts_during": sent_d,
                "ok_during": ok_d,
                "ok_per_s_before": round(ok_b / before_s, 2),
                "ok_per_s_during": round(ok_d / during_s, 2) if during_s > 0 else None,
            }
        )
        if sent_b < MIN_BEFORE_ATTEMPTS or ok_b == 0:
            row["verdict"] = "unknown"
            row["reason"] = (
                f"{sent_b} attempts and {ok_b} ok replies in the {before_s:.1f} s before it "
                f"(needs {MIN_BEFORE_ATTEMPTS} attempts and an ok reply): more load before the fault"
            )
            continue
        if sent_d == 0:
            row["verdict"] = "unknown"
            row["reason"] = "no request was sent while it acted: a load that keeps sending through the fault"
            continue
        share_b, share_d = ok_b / sent_b, ok_d / sent_d
        row["ok_share_before"], row["ok_share_during"] = round(share_b, 4), round(share_d, 4)
        row["ratio"] = round(share_d / share_b, 4)
        if share_d < floor * share_b:
            row["verdict"] = "violated"
            found.append(
                {
                    "ts": f.start_ns,
                    "src": "nemesis",
                    "ev": "fault_start",
                    "fault_id": f.fault_id,
                    "fault": f.fault,
                    "target": f.target,
                    "attempts_during": sent_d,
                    "ok_during": ok_d,
                    "problem": (
                        f"{ok_d} of {sent_d} attempts answered ok while it acted ({100 * share_d:.1f}%), "
                        f"under {floor:g} x the {100 * share_b:.1f}% before it"
                    ),
                }
            )
        else:
            row["verdict"] = "held"
    judged = [r for r in rows if r.get("verdict") in ("held", "violated")]
    undecided = [r for r in rows if r.get("verdict") == "unknown"]
    promised = [r for r in rows if r.get("verdict") != "not promised"]
    figures = {
        "floor": floor,
        "survives": list(ctx.promises.get("survives", DEFAULT_SURVIVES)),
        **t.figures(),
        "lead_s": lead / NS,
        "faults": rows,
    }
    worst = min((r["ratio"] for r in judged), default=None)
    summary = (
        f"{len(promised)} of {len(rows)} faults promised survivable: {len(judged) - len(found)} held "
        f"the floor ({floor:g}), {len(found)} did not, {len(undecided)} undecided"
        + (f"; lowest ratio {worst:.2f}" if worst is not None else "")
    )
    if found:
        return result(summary, figures, violations=len(found), examples=found)
    if not promised:
        # As for every check about faults (toolkit.nothing_to_judge): a plan that gave
        # it nothing to judge leaves no doubt about the system.
        summary = (
            f"no fault of the plan is one the manifest promises to survive (survives = {figures['survives']})"
        )
        return result(summary, figures)
    if undecided:
        reason = "; ".join(
            f"fault {r['fault_id']} ({r['fault']} {r['target']}): {r['reason']}" for r in undecided
        )
        return result(summary, figures, unknown=reason)
    return result(summary, figures)
