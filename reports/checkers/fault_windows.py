"""Fault windows: which requests a fault excuses, and how much of the load a check judged.

The rule (harness/manifest.py documents it for users): a fault excuses a request that was
in flight as the fault started, or was first sent between the fault's start and its
stop + ``after`` (the manifest's ``expiry_ms``: how long the system takes to notice a
dead peer; ``steady_grace_s`` where it gives none), with all that request's retries,
abandon and latency, however late they come. A request first sent later is judged, even
while another's retries are still under way, so a fault excuses what it caused and not
the time around it. The first WARMUP_NS of load excuse their requests too.

``excused_spans`` are those send-time spans; the load time outside them is what a check
judged (``coverage``), reported by every check that excuses fault windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from harness.manifest import expiry_s
from reports.checkers import CheckContext, FaultWindow, toolkit

NS = 1_000_000_000
#: Clients connect, brokers learn their workers and sockets warm up during the first
#: seconds of load; a retry or a slow reply then says nothing about steady state.
WARMUP_NS = 2 * NS
#: A steady-state check that judged less than this share of the load time is unknown.
MIN_JUDGED_FRACTION = 0.2
DEFAULT_CLIENT_BUDGET_S = 10.0

Span = tuple[int, int]  # [start, end] in ns


@dataclass(frozen=True)
class Timers:
    """How long after a fault's stop its requests are excused, and where that comes from."""

    after_s: float  # sends up to the fault's stop + after_s are excused
    client_budget_s: float  # a client's timeout x attempts: how late an excused request may end
    source: str  # "expiry_ms = heartbeat_ms * liveness" or "steady_grace_s (no expiry_ms)"

    @property
    def grace_s(self) -> float:
        """How long after a fault's stop its excused requests may still retry or abandon."""
        return self.after_s + self.client_budget_s

    def figures(self) -> dict[str, Any]:
        return {
            "after_stop_s": self.after_s,
            "client_budget_s": self.client_budget_s,
            "grace_s": self.grace_s,
            "grace_from": self.source,
        }


def timers(ctx: CheckContext) -> Timers:
    """The excusing timers of this run, from the manifest's expiry and the client options."""
    budget = float(ctx.meta.get("client_budget_s") or DEFAULT_CLIENT_BUDGET_S)
    expr = ctx.promises.get("expiry_ms")
    try:
        expiry = expiry_s(expr, toolkit.options(ctx))
    except ValueError:
        expiry = None  # the manifest was checked when the run started; a scenario may have changed it
    if expiry is not None:
        return Timers(expiry, budget, f"expiry_ms = {expr}")
    grace = float(ctx.promises.get("steady_grace_s", 10.0))
    return Timers(grace, budget, "steady_grace_s (the manifest gives no expiry_ms)")


def load_span(ctx: CheckContext) -> Span:
    """[load start, load stop] (ns), from run.json, else the first and last events."""
    return toolkit.run_time(ctx, "load_started_ns"), toolkit.run_time(ctx, "load_stopped_ns")


def fault_span(fault: FaultWindow, after_ns: int, end_ns: int) -> Span:
    """The send times a fault excuses: [start, stop + after] (to ``end_ns`` if it never healed)."""
    return fault.start_ns, end_ns if fault.stop_ns is None else fault.stop_ns + after_ns


def excused_spans(ctx: CheckContext, t: Timers) -> list[Span]:
    """The warm-up and each fault's excused send span, merged."""
    load_start, load_stop = load_span(ctx)
    end = max(load_stop, *(f.start_ns for f in ctx.faults)) if ctx.faults else load_stop
    spans = [(load_start, load_start + WARMUP_NS)]
    spans += [fault_span(f, int(t.after_s * NS), end) for f in ctx.faults]
    return toolkit.merge_spans(spans)


def judged_ns(spans: list[Span], lo: int, hi: int) -> int:
    """How much of [lo, hi] lies outside the (merged) spans."""
    covered = sum(max(0, min(end, hi) - max(start, lo)) for start, end in spans)
    return max(0, hi - lo - covered)


def coverage(ctx: CheckContext, spans: list[Span]) -> dict[str, Any]:
    """How much of the load time lies outside the excused spans: figures for a CheckResult."""
    lo, hi = load_span(ctx)
    load = max(0, hi - lo)
    judged = judged_ns(spans, lo, hi)
    return {
        "load_s": round(load / NS, 3),
        "judged_s": round(judged / NS, 3),
        "judged_fraction": round(judged / load, 4) if load else 0.0,
        "excused_spans_ns": [[s, e] for s, e in spans],
    }


def too_little_judged(figures: dict[str, Any], t: Timers) -> str:
    """The reason a steady-state check is unknown for judging under a fifth of the load, or ''."""
    if figures["load_s"] and figures["judged_fraction"] >= MIN_JUDGED_FRACTION:
        return ""
    return (
        f"judged {figures['judged_s']:.1f} s of {figures['load_s']:.1f} s of load "
        f"({100 * figures['judged_fraction']:.0f}%, under the {100 * MIN_JUDGED_FRACTION:.0f}% needed): "
        f"each fault excuses the requests sent from its start to {t.after_s:g} s after its stop "
        f"({t.source}), and the first {WARMUP_NS / NS:g} s are warm-up; schedule fewer or shorter "
        "faults, or a longer load"
    )


def excused_request(first_send: Column, last_ts: Column, spans: list[Span], faults: list[Span]) -> Column:
    """True for a request (its first send and last event times) a fault or the warm-up excuses:
    first sent inside an excused span, or in flight as a fault started."""
    cond = F.lit(False)
    for start, end in spans:
        cond = cond | first_send.between(start, end)
    for start, _ in faults:
        cond = cond | ((first_send < start) & (last_ts >= start))
    return cond
