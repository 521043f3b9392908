"""recovery: after each fault stops, the system serves an ok reply again within the bound.

A system nobody asks cannot be seen to serve, so recovery is timed from the first request
sent after the fault's stop, unless a reply came before it (one in flight then): an idle
client asks seconds later. A fault with no ok reply after it is held against the system only
where a request was sent after it: clients that never resend, each waiting out the deadline
of a request the fault lost (excused where requeue is not promised), ask nothing (explore,
tag-ring seed 1: a worker restarted and junk on the broker's backend lost the 4 requests in
flight, and nothing was sent for the run's last 14 s). Nor does a request whose loss
``no_lost`` excuses (``delivery.excused_losses``: lost while another fault acted where
requeue is not promised, held by a broker that died, dropped on a cut link, sent once to a
failover pair's passive server).

While an outage takes the whole service down (the only queue frozen; the clients' links
cut), nothing can be served: a fault that stops during one is timed from its end, and one
followed by such an outage before service was back takes that outage's recovery
(``timed_from``, ``carried``); so does a cut link, or a killed process, whose role's other
instance is cut off or killed before service was back: its peer comes back by its own
timers, and meanwhile the spare that would serve is gone (``spare_taken``).

A restart the manifest says the system does not recover from (``unrecovered_restarts``:
Simple Pirate's queue forgets the workers that registered with its predecessor), or a loss
on a link of a role it names in ``unrecovered_link_loss`` (a Simple Pirate worker whose
message was lost waits for good), or junk sent to a role it names in
``unrecovered_malformed`` (a Simple Pirate queue lists every stranger that says READY), is
not judged, nor is anything after it: a fault that healed after it began, or one whose
bound reaches past its start without an ok reply before it (the service was given up then)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from contract.links import target_instance
from contract.promises import UNRECOVERED_KEYS
from reports.checkers.core import delivery
from reports.checkers.toolkit import (
    END_OF_TIME,
    NS,
    SOME_REPLY,
    CheckContext,
    CheckResult,
    FaultWindow,
    Timers,
    checker,
    events_of,
    example,
    has_spare,
    history_end,
    join_rows,
    nothing_to_judge,
    result,
    run_time,
    timers,
)

# --- recovery --------------------------------------------------------------------------


#: Another outage of a fault's target that starts this soon after the fault's stop keeps it
#: down with no gap (the nemesis runs the faults of one target in turn: a freeze of the queue
#: planned during its kill began 8 ms after the restart's fault_stop).
ADJACENT_NS = NS // 10


def timed_from(f: FaultWindow, faults: list[FaultWindow], down: Collection[int] = ()) -> int | None:
    """When ``f``'s recovery is timed from: its stop, or, where another outage of its target
    or one that takes the whole service down (``down``, fault ids: ``service_down``) acts
    then (or starts within ADJACENT_NS), that one's stop, in turn (None: one of them never
    healed). explore (reliable-sketch, seed 1): the queue killed at 5.1 s, restarted, and
    frozen from 8 ms after the restart for 6.9 s; its first ok reply came 1 ms after the thaw,
    and the kill was called 'recovered in 6.94 s > 5 s' (the freeze, timed alone, 0.001 s).
    explore (stall-queue's correct twin, seed 1): the clients' link cut until 6.9 s while the
    only queue was frozen from 6.2 s to 10.4 s; nothing could be served before the thaw, and
    the cut was called 'recovered in 4.22 s > 3 s' (the freeze, timed alone, 0.67 s)."""
    at = f.stop_ns
    moved = True
    while moved and at is not None:
        moved = False
        for g in faults:
            if g is f or not g.outage or g.start_ns > at + ADJACENT_NS:
                continue
            if g.target != f.target and g.fault_id not in down:
                continue
            if g.stop_ns is None or g.stop_ns > at:
                at, moved = g.stop_ns, True
                break
    return at


def service_down(ctx: CheckContext) -> set[int]:
    """The faults that take the whole service down while they act: nothing reaches their
    target (a kill, a freeze, a blackholed link), and no other instance of its role serves
    meanwhile (the only queue; the clients' links)."""
    spans = {f.fault_id: (f.start_ns, END_OF_TIME if f.stop_ns is None else f.stop_ns) for f in ctx.faults}
    return {f.fault_id for f in ctx.faults if f.stops_all and not has_spare(ctx, f, spans)}


@dataclass(frozen=True)
class After:
    """What came first after the time a fault's recovery is timed from: an ok reply, an
    ``exec`` by the fault's target, a request sent (a first send or a resend)."""

    ok: int | None = None
    exec: int | None = None
    asked: int | None = None


def _first_after(
    ctx: CheckContext, healed: list[tuple[FaultWindow, int]], without: DataFrame | None = None
) -> dict[int, After]:
    """fault_id -> what came first at or after the time the fault's recovery is timed from
    (its stop, ``timed_from``): one range join over the faults, literal rows in the plan
    (``join_rows``: no broadcast, a Spark job of its own). The sends of the requests
    ``without`` (cid, seq) ask nothing."""
    ev = F.col("ev")
    found = events_of(ctx, "reply", "exec", "send").filter(ev.isin("exec", "send") | F.col("ok"))
    if without is not None:
        found = found.join(without, ["cid", "seq"], "left_anti")
    found = found.select("ts", "ev", "worker")

    def after(f: Column) -> Column:
        on_target = (F.col("worker") == f["target"]) | F.col("worker").startswith(
            F.concat(f["target"], F.lit("-"))
        )
        return (F.col("ts") >= f["stop_ns"]) & (ev.isin("reply", "send") | on_target)

    rows = (
        join_rows(
            found,
            [(f.fault_id, since, f.target) for f, since in healed],
            {"fault_id": "int", "stop_ns": "long", "target": "string"},
            after,
        )
        .groupBy("fault_id")
        .agg(
            F.min(F.when(ev == "reply", F.col("ts"))).alias("ok"),
            F.min(F.when(ev == "exec", F.col("ts"))).alias("exec"),
            F.min(F.when(ev == "send", F.col("ts"))).alias("asked"),
        )
        .collect()
    )
    return {r["fault_id"]: After(r["ok"], r["exec"], r["asked"]) for r in rows}


def spare_taken(roles: dict[str, str], f: FaultWindow, g: FaultWindow) -> bool:
    """Whether ``f``'s target has to come back after it (a link's peer reconnects, as its
    protocol's timers say; a killed or restarted process starts again: not a thawed one,
    which is back at once) and ``g`` stops all of another instance of its role (it, or its
    link): one of the spares that serve meanwhile."""
    mine, other = target_instance(f.target), target_instance(g.target)
    role = roles.get(mine)
    comes_back = f.on_link or f.lasting is False
    return comes_back and g.stops_all and mine != other and role is not None and roles.get(other) == role


def carried(
    f: FaultWindow,
    faults: list[FaultWindow],
    down: Collection[int],
    since: dict[int, int | None],
    first: dict[int, After],
    bound_ns: int,
    roles: dict[str, str],
) -> int:
    """The fault whose recovery ``f``'s is: ``f`` itself, or an outage that took the whole
    service down (``down``), or one that stopped all of another instance of its target's role
    (``spare_taken``; ``roles``: instance -> role) before its target was seen back (an
    ``exec`` of its own; a link's peer is not told apart), that began after ``f``'s timing
    started, before service came back and within the bound, in turn (explore, stall-queue's
    twin, seed 1: worker-1 thawed at 5.7 s under an idle load, the only queue frozen 0.45 s later for
    4.2 s; nothing could be served before the queue's thaw, and worker-1's freeze was
    'recovered in 4.70 s > 3 s'. Again, 2026-12-04: worker-2's link cut until 9.2 s, a
    Paranoid Pirate worker that came back after its 5 s of silence, and worker-1's link cut
    from 9.5 s to 13.2 s; the first ok reply came 0.005 s after the one asked then, and
    worker-2's cut was 'recovered in 4.88 s > 3 s')."""
    current, seen = f, {f.fault_id}
    outages = sorted((g for g in faults if g.outage), key=lambda g: g.start_ns)
    while True:
        at = since.get(current.fault_id)
        if at is None:
            return current.fault_id
        after = first.get(current.fault_id, After())
        back = after.exec or END_OF_TIME  # its target seen back: an exec of its own
        nxt = next(
            (
                g
                for g in outages
                if g.fault_id not in seen and since.get(g.fault_id) is not None
                and (g.fault_id in down or (spare_taken(roles, current, g) and g.start_ns < back))
                and at < g.start_ns <= at + bound_ns and (after.ok is None or g.start_ns < after.ok)
            ),
            None,
        )  # fmt: skip
        if nxt is None:
            return current.fault_id
        current = nxt
        seen.add(nxt.fault_id)


def _given_up(f: FaultWindow, given_up: int, first_ok: int | None, bound_s: float, t: Timers) -> bool:
    """Whether the fault is not judged: a restart the system does not promise to recover from
    (its manifest's ``unrecovered_restarts``), a fault healed after such a restart began, or
    one whose bound reaches past that start with no ok reply before it."""
    if t.never_healed(f) or f.stop_ns is None or f.stop_ns >= given_up:
        return True
    answered = first_ok is not None and first_ok < given_up
    return not answered and f.stop_ns + bound_s * NS > given_up


def _unserved(first: dict[int, After], since: dict[int, int | None], bound_ns: int) -> bool:
    """Whether a fault was asked after its timing began and not served within the bound."""
    for fault_id, after in first.items():
        at = since.get(fault_id)
        if at is None or after.asked is None:
            continue
        if after.ok is None or after.ok - max(at, after.asked) > bound_ns:
            return True
    return False


@checker(
    "recovery",
    "after each fault stops, the system serves an ok reply again within recovery_bound_s of the first "
    "request asked after it (timed from the end of an outage that took the whole service down "
    "meanwhile, or the spares of a cut link's role; and, as a figure, when the target worker "
    "executes again)",
    on_damage=SOME_REPLY,
)
def recovery(ctx: CheckContext) -> CheckResult:
    bound_s = float(ctx.promises.get("recovery_bound_s", 10.0))
    load_stop = run_time(ctx, "load_stopped_ns")
    end = history_end(ctx)
    healed = [f for f in ctx.faults if f.stop_ns is not None]
    t = timers(ctx)
    given_up = min((f.start_ns for f in ctx.faults if t.never_healed(f)), default=None)
    rows: list[dict[str, Any]] = []
    bound_ns = int(bound_s * NS)
    down = service_down(ctx)
    since = {f.fault_id: timed_from(f, ctx.faults, down) for f in healed}
    timed = [(f, at) for f in healed if (at := since[f.fault_id]) is not None]
    first = _first_after(ctx, timed) if timed else {}
    # A request whose loss no_lost excuses (lost in another fault, held by a broker that
    # died, dropped on a cut link, sent once to a failover pair's passive server) shows
    # nothing of whether the service came back: timed again without them, only where a
    # fault would otherwise be asked and not served within the bound.
    if _unserved(first, since, bound_ns) and (excused := delivery.excused_losses(ctx)) is not None:
        first = _first_after(ctx, timed, without=excused)
    # what each fault's recovery is timed by: its own, or that of an outage that took the
    # whole service down, or its role's spare, before it was back
    roles = ctx.meta.get("processes") or {}
    by = {f.fault_id: carried(f, ctx.faults, down, since, first, bound_ns, roles) for f in healed}
    first_ok = {i: after.ok for i, g in by.items() if (after := first.get(g)) and after.ok is not None}
    violations, undecided, unpromised, not_asked = 0, 0, 0, 0
    found = []
    for f in ctx.faults:
        rec = tgt = None
        within: bool | None = None
        if given_up is not None and _given_up(f, given_up, first_ok.get(f.fault_id), bound_s, t):
            unpromised += 1
            rows.append(
                {"fault_id": f.fault_id, "fault": f.fault, "target": f.target, "start_ns": f.start_ns,
                 "stop_ns": f.stop_ns, "recovery_s": None, "target_recovery_s": None, "within_bound": None,
                 "promised": False}
            )  # fmt: skip
            continue
        chained = since.get(by.get(f.fault_id, f.fault_id))
        start = chained
        if chained is not None and start is not None:
            after = first.get(by[f.fault_id], After())
            if after.ok is not None:
                # Timed from the first request asked after it, unless the reply came first
                # (one in flight at the fault's stop): a system nobody asks cannot be seen to
                # serve, and an idle client asks seconds later (explore's idle phases).
                if after.asked is not None and after.asked < after.ok:
                    start = max(start, after.asked)
                rec = (after.ok - start) / NS
                within = rec <= bound_s
            elif after.asked is not None:
                # asked and never answered: violated once the recording went on a bound past
                # the ask (replies to requests in flight are recorded after the load stops)
                start = max(start, after.asked)
                within = False if start + bound_ns < end else None
            elif start + bound_ns < load_stop:
                not_asked += 1  # nothing asked after it while the load went on
            if after.exec is not None:
                tgt = (after.exec - chained) / NS
        rows.append(
            {
                "fault_id": f.fault_id,
                "fault": f.fault,
                "target": f.target,
                "start_ns": f.start_ns,
                "stop_ns": f.stop_ns,
                "recovery_s": rec,
                "target_recovery_s": tgt,
                "within_bound": within,
                **({"timed_from_ns": chained} if chained is not None and chained != f.stop_ns else {}),
                **({"first_asked_ns": start} if start is not None and start != chained else {}),
                **({"timed_by_fault": g} if (g := by.get(f.fault_id, f.fault_id)) != f.fault_id else {}),
            }
        )
        if within is False:
            violations += 1
            problem = (
                "no ok reply after the fault" if rec is None else f"recovered in {rec:.2f} s > {bound_s:g} s"
            )
            found.append(
                example(
                    {
                        "ts": f.stop_ns,
                        "src": "nemesis",
                        "ev": "fault_stop",
                        "fault_id": f.fault_id,
                        "fault": f.fault,
                        "target": f.target,
                        "recovery_s": rec,
                        "problem": problem,
                    }
                )
            )
        elif f.stop_ns is not None and within is None:
            undecided += 1
    times = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
    figures = {"bound_s": bound_s, "faults": rows, "max_recovery_s": max(times) if times else None}
    if not_asked:
        figures["not_asked"] = not_asked
    worst = f", slowest {max(times):.2f} s" if times else ""
    judged = len([r for r in rows if r["stop_ns"] is not None and r.get("promised", True)])
    summary = (
        f"{judged} healed faults: {judged - violations - undecided} recovered within "
        f"{bound_s:g} s, {violations} not, {undecided} undecided"
        + (f" ({not_asked} with no request sent after them)" if not_asked else "")
        + worst
    )
    if unpromised:
        restarts, lossy, junk = (", ".join(ctx.promises.get(k) or []) for k in UNRECOVERED_KEYS)
        weak = (
            [f"a restart of {restarts}"] * bool(restarts)
            + [f"a loss on a link of {lossy}"] * bool(lossy)
            + [f"junk sent to {junk}"] * bool(junk)
        )
        summary += (
            f"; {unpromised} not judged: at or after {' or '.join(weak)}, which it does not "
            "promise to recover from"
        )
        figures["not_promised"] = unpromised
    if violations:
        return result(summary, figures, violations=violations, examples=found)
    if unpromised and not judged:
        return result(summary, figures)  # nothing it promised to judge, as availability says
    if not healed:
        return nothing_to_judge(
            ctx,
            "no fault healed during the run",
            "no planned fault ended before the run did, so no recovery could be timed; let each fault "
            "end (duration_s, restart_after_s) at least recovery_bound_s before the load stops",
            figures=figures,
        )
    if undecided:
        late = undecided - not_asked
        reasons = [
            f"{late} fault(s) ended less than recovery_bound_s ({bound_s:g} s) before the load stopped "
            "and no ok reply came after them; schedule faults earlier or the load longer"
        ] * bool(late) + [
            f"after {not_asked} fault(s) no request was sent while the load went on: "
            "every client was waiting on a request of its own (clients that never resend wait out its "
            "deadline), so whether the system served again is unknown; a shorter reply_deadline_s, or "
            "clients that resend, ask it"
        ] * bool(not_asked)
        return result(summary, figures, unknown="; ".join(reasons))
    return result(summary, figures)
