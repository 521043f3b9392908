"""The verdict: check results and the run's completeness combined into the run's outcome.

Each check has an outcome (contract/outcomes.py): a check that held passes; one that was
violated is a violation, unless the scenario lists it in ``expect_violated`` (a known
weakness), where it passes, and a known weakness the run did not show is a violation (a
failure of the harness to see it); a check that could not be decided is unknown, with
the reason (what was missing and how to get it). A checker that crashed or does not
exist leaves its check unknown, with the error in ``errors``. A run that did not carry
out its plan (``incomplete``: runner killed, a fault failed to fire) is incomplete. The
run's outcome combines them as violated > incomplete > unknown > passed; ``reasons`` says
in words why a run is not simply passed or violated.

A verdict a report started to replace is stale (``stale_verdict``) until that report ends:
its outcome is unknown, whatever it was, and it says why and what it was.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from contract.calibration import Calibration
from contract.outcomes import INCOMPLETE, PASSED, UNKNOWN, VIOLATED, combine_outcomes, exit_code
from contract.rundir import STALE, RunMeta
from reports.checkers import HELD, CheckResult
from reports.checkers import UNKNOWN as CHECK_UNKNOWN
from reports.checkers import VIOLATED as CHECK_VIOLATED

ORDER = {HELD: 0, CHECK_UNKNOWN: 1, CHECK_VIOLATED: 2}


def combine(statuses: list[str]) -> str:
    """Check statuses combined: violated > unknown > held (held when there is nothing to combine)."""
    return max(statuses, key=ORDER.__getitem__, default=HELD)


def check_outcome(status: str, *, expected: bool) -> str:
    """The outcome of one check (passed, violated or unknown), given whether it is expected to fail."""
    if status == CHECK_UNKNOWN:
        return UNKNOWN
    violated = status == CHECK_VIOLATED
    return PASSED if violated == expected else VIOLATED


def check_entry(result: CheckResult, *, expected: bool, doc: str = "") -> dict[str, Any]:
    """One check of verdict.json."""
    outcome = check_outcome(result.status, expected=expected)
    entry = {
        "status": result.status,
        "outcome": outcome,  # the one field to read (README: verdict.json); no "passed": unknown is neither
        "violations": result.violations,
        "examples": result.examples,
        "summary": result.summary,
        "figures": result.figures,
        "expected": expected,
        "doc": doc,
    }
    if outcome == UNKNOWN:
        entry["reason"] = result.reason or result.summary or "the checker gave no reason"
    if expected and result.status == HELD:
        entry["note"] = "expected to be violated (a known weakness), but the run did not show it"
    elif expected and result.status == CHECK_VIOLATED:
        entry["note"] = "violated, as expected (a known weakness)"
    return entry


def build_verdict(
    meta: RunMeta,
    results: list[CheckResult],
    metrics: dict[str, Any],
    *,
    docs: dict[str, str] | None = None,
    errors: list[str] | None = None,
    incomplete: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """verdict.json: identity of the run, ``outcome`` (with ``passed``, ``exit_code`` and
    ``reasons``), every check, the metrics.

    ``errors``: what went wrong while checking (each leaves the run at least unknown);
    ``incomplete``: how the run fell short of its plan (each makes it incomplete).
    """
    docs = docs or {}
    errors = list(errors or [])
    incomplete = list(incomplete or [])
    scenario = meta.get("scenario") or {}
    expected = set(scenario.get("expect_violated") or [])
    checks = {r.name: check_entry(r, expected=r.name in expected, doc=docs.get(r.name, "")) for r in results}
    for name in sorted(expected - checks.keys()):
        errors.append(f"{name} is expected to be violated but was not checked")
    outcomes = [c["outcome"] for c in checks.values()]
    if incomplete:
        outcomes.append(INCOMPLETE)
    if errors:
        outcomes.append(UNKNOWN)
    outcome = combine_outcomes(outcomes)
    reasons = [f"run incomplete: {text}" for text in incomplete]
    reasons += [f"{name} unknown: {c['reason']}" for name, c in checks.items() if c["outcome"] == UNKNOWN]
    reasons += [f"report error: {text.splitlines()[0]}" for text in errors]
    manifest = meta.get("manifest") or {}
    verdict = {
        "scenario": scenario.get("name", ""),
        "implementation": manifest.get("name", ""),
        "seed": scenario.get("seed"),
        # the commands that run it again (harness/replay.py)
        "reproduce": list((meta.get("replay") or {}).get("commands") or []),
        "outcome": outcome,
        "passed": outcome == PASSED,
        "exit_code": exit_code(outcome),
        "reasons": reasons,
        "status": combine([r.status for r in results]),
        "expect_violated": sorted(expected),
        "notes": list(
            scenario.get("notes") or []
        ),  # e.g. an [expect] about another implementation, set aside
        "warnings": list(scenario.get("warnings") or []),  # e.g. a reply deadline the system's timers outlast
        # the system's own numbers its relative values were resolved against, and what they became
        **_calibration(meta),
        "checks": checks,
        "errors": errors,
        "incomplete": incomplete,
        "metrics": metrics,
    }
    verdict.update(extra or {})
    return verdict


#: How a stale verdict's line in ``reasons`` and ``errors`` begins (one of each, the newest).
STALE_PREFIX = "stale verdict: "


def stale_verdict(verdict: dict[str, Any], *, since_ns: int, run_root: Path) -> dict[str, Any]:
    """``verdict`` as it stands while a report started at ``since_ns`` replaces it: unknown
    (exit 3), with ``stale`` (since_ns, was: the outcome it had, why) and the why first in
    ``reasons`` and in ``errors`` (JUnit's ``report`` error). Its checks stay as they were
    found, under that outcome. A verdict already stale keeps the outcome it had first."""
    was = (verdict.get(STALE) or {}).get("was") or verdict.get("outcome") or UNKNOWN
    since = dt.datetime.fromtimestamp(since_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    why = (
        f"a report of this run started at {since} and did not finish (killed, or still running); "
        f"this verdict ({was}) is from an earlier report and may not match the history: "
        f"`zchaos report {run_root}` rebuilds it"
    )
    marked = dict(verdict)
    marked[STALE] = {"since_ns": since_ns, "was": was, "why": why}
    marked["outcome"], marked["passed"], marked["exit_code"] = UNKNOWN, False, exit_code(UNKNOWN)
    for key in ("reasons", "errors"):
        kept = [r for r in verdict.get(key) or [] if not str(r).startswith(STALE_PREFIX)]
        marked[key] = [STALE_PREFIX + why, *kept]
    return marked


def _calibration(meta: RunMeta) -> dict[str, Any]:
    """``calibration`` (its one-line summary) and ``resolved`` for a run that had one."""
    recorded = meta.get("calibration")
    if not isinstance(recorded, dict):
        return {}
    try:
        summary = Calibration.from_dict(recorded).summary()
    except ValueError as exc:
        summary = f"recorded, but not readable: {exc}"
    return {"calibration": summary, "resolved": list((meta.get("scenario") or {}).get("resolved") or [])}
