"""What one run showed, reduced to behaviour features, and what counts as the same finding.

A run's signature is a set of short feature strings read from its verdict (verdict.json:
the checks, the metrics, the faults with their recovery, the processes), coarse enough
that two runs that did the same thing share them and a run that did something new has
one nobody had before (a fuzzer's coverage, made of behaviour instead of code):

- ``check:NAME=STATUS`` for every check, and ``problem:NAME:KIND`` for each kind of problem
  a violated check shows (numbers blanked out);
- near the bounds: ``recovery:KIND:BUCKET`` (each fault's recovery time as a share of the
  recovery bound: <10%, <50%, <100%, over, none), ``p99:BUCKET`` (the run's p99 latency
  against its bound);
- per fault kind: ``retries:KIND:N`` and ``abandons:KIND:N`` in its window and the few
  seconds after (N a power-of-four bucket);
- ``lost:N``, ``abandoned:N`` (requests), ``executed:2`` / ``executed:3+``;
- ``exit:ROLE:HOW`` for a process that exited without the plan killing it,
  ``client_error:REASON``, ``event:KIND`` for each family event the history holds
  (expiries, reconnects, requeues, ...);
- ``outcome:OUTCOME``.

A finding is a violated check of a violated run (an unknown or incomplete run is none),
deduplicated by ``(check, kind of problem, fault kinds of the run)``. A run whose host clocks
disagreed (its verdict's ``completion.clock_drift``: incomplete, and violated too when a
check read its broken time line) gives none either: its events' times are not one line, so
nothing it shows is a judgement (``unjudged``); a run that fell short of its plan otherwise
(a fault that failed to fire) still shows what its checks found.
"""

from __future__ import annotations

import math
import re
from typing import Any

from contract.outcomes import VIOLATED

#: Seconds after a fault's stop still counted as its window (retries, abandons).
AFTER_FAULT_S = 3.0
NS = 1_000_000_000
#: Event kinds every run has: their presence tells nothing (what they count is read elsewhere).
EVERYDAY = frozenset(
    {"send", "reply", "exec", "done", "dispatch", "phase", "phase_done", "proc_start", "proc_exit"}
    | {"fault_start", "fault_stop", "worker_ready", "loadgen_lag"}
)


def bucket(n: float) -> str:
    """0, 1, 4, 16 (the power of four at or below ``n``), 64+ above: coarse, so that the
    run-to-run spread of a count is not taken for a new behaviour."""
    if n <= 0:
        return "0"
    if n >= 64:
        return "64+"
    return str(4 ** int(math.log(n, 4) + 1e-9))


def share_bucket(value: float | None, bound: float | None) -> str:
    """``value`` as a share of ``bound``: <10%, <50%, <100%, over (or none)."""
    if value is None:
        return "none"
    if not bound:
        return "unbounded"
    share = value / bound
    return "<10%" if share < 0.1 else "<50%" if share < 0.5 else "<100%" if share <= 1 else "over"


def problem_kind(text: str) -> str:
    """A problem's text with its numbers blanked: 'recovered in 12.3 s > 10 s' and
    'recovered in 11 s > 10 s' are one kind."""
    return re.sub(r"\d+(?:\.\d+)?", "N", text).strip()


def _problems(check: dict[str, Any]) -> list[str]:
    seen = []
    for example in check.get("examples") or []:
        text = example.get("problem") if isinstance(example, dict) else None
        kind = problem_kind(text) if isinstance(text, str) else ""
        if kind not in seen:
            seen.append(kind)
    return seen or [""]


def _window_counts(verdict: dict[str, Any], fault: dict[str, Any], what: str) -> int:
    """How many of the timeline's ``what`` (retries, abandons) fell in the fault's window."""
    metrics = verdict.get("metrics") or {}
    t0 = metrics.get("t0_ns")
    start, stop = fault.get("start_ns"), fault.get("stop_ns") or fault.get("start_ns")
    if t0 is None or start is None:
        return 0
    first = int((start - t0) // NS)
    last = int((stop - t0) / NS + AFTER_FAULT_S)
    return sum(
        int(row.get(what) or 0) for row in metrics.get("timeline") or [] if first <= row.get("t", -1) <= last
    )


def signature(verdict: dict[str, Any]) -> frozenset[str]:
    """The behaviour features of one run, from its verdict."""
    features = {f"outcome:{verdict.get('outcome')}"}
    checks = verdict.get("checks") or {}
    for name, check in checks.items():
        status = check.get("status")
        features.add(f"check:{name}={status}")
        if status == VIOLATED:
            features.update(f"problem:{name}:{kind}" for kind in _problems(check))
    recovery = (checks.get("recovery") or {}).get("figures") or {}
    bound = recovery.get("bound_s")
    for fault in verdict.get("faults") or []:
        kind = fault.get("fault")
        features.add(f"recovery:{kind}:{share_bucket(fault.get('recovery_s'), bound)}")
        for what in ("retries", "abandons"):
            features.add(f"{what}:{kind}:{bucket(_window_counts(verdict, fault, what))}")
    steady = (checks.get("steady_state") or {}).get("figures") or {}
    p99 = ((verdict.get("metrics") or {}).get("latency_ms") or {}).get("p99")
    features.add(f"p99:{share_bucket(p99, steady.get('latency_p99_bound_ms'))}")
    lost = (checks.get("no_lost") or {}).get("figures") or {}
    # (not the requests in flight at the end: how many is chance)
    for key, label in (("lost", "lost"), ("abandoned", "abandoned")):
        if key in lost:
            features.add(f"{label}:{bucket(float(lost[key] or 0))}")
    histogram = ((checks.get("execution_count") or {}).get("figures") or {}).get("histogram") or {}
    features.update(f"executed:{times}" for times in ("2", "3+") if histogram.get(times))
    for proc in verdict.get("processes") or []:
        if proc.get("expected") is False:
            how = f"signal {proc['signal']}" if proc.get("signal") else f"code {proc.get('code')}"
            features.add(f"exit:{proc.get('role')}:{how}")
    metrics = verdict.get("metrics") or {}
    features.update(
        f"client_error:{reason}" for reason in ((metrics.get("client_errors") or {}).get("by_reason") or {})
    )
    features.update(f"event:{kind}" for kind in (metrics.get("events") or {}) if kind not in EVERYDAY)
    return frozenset(features)


def unjudged(verdict: dict[str, Any]) -> str | None:
    """Why the run's checks judged nothing (its host's clocks disagreed over it), else None."""
    reason = (verdict.get("completion") or {}).get("clock_drift")
    return str(reason) if reason else None


def findings(verdict: dict[str, Any], fault_kinds: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The findings of a run: (check, kind of problem, fault kinds) for each violated check
    of a violated run, expected violations left out. None for any other outcome, nor for a
    run whose time line is broken (``unjudged``: a host clock step made a run both
    incomplete and violated, and explore counted it as a finding)."""
    if verdict.get("outcome") != VIOLATED or unjudged(verdict):
        return []
    expected = set(verdict.get("expect_violated") or [])
    kinds = tuple(sorted(set(fault_kinds)))
    found = []
    for name, check in (verdict.get("checks") or {}).items():
        if check.get("status") == VIOLATED and name not in expected:
            found.append((name, _problems(check)[0], kinds))
    return found
