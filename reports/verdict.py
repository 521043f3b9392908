"""The verdict: check results combined (violated > unknown > held) against what was expected.

A run passes when every check held or was unknown, except those the scenario lists in
``expect_violated`` (a known weakness), which must have been violated: a known weakness
the harness failed to see is a failure of the harness, and fails the run too. A checker
that crashed fails the run (the report is incomplete), with the error in ``errors``.
"""

from __future__ import annotations

from typing import Any

from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckResult

ORDER = {HELD: 0, UNKNOWN: 1, VIOLATED: 2}


def combine(statuses: list[str]) -> str:
    """violated > unknown > held (held when there is nothing to combine)."""
    return max(statuses, key=ORDER.__getitem__, default=HELD)


def check_entry(result: CheckResult, *, expected: bool, doc: str = "") -> dict[str, Any]:
    """One check of verdict.json."""
    violated = result.status == VIOLATED
    entry = {
        "status": result.status,
        "passed": violated if expected else not violated,
        "violations": result.violations,
        "examples": result.examples,
        "summary": result.summary,
        "figures": result.figures,
        "expected": expected,
        "doc": doc,
    }
    if expected and not violated:
        entry["note"] = "expected to be violated (a known weakness), but the run did not show it"
    elif expected:
        entry["note"] = "violated, as expected (a known weakness)"
    return entry


def build_verdict(
    meta: dict[str, Any],
    results: list[CheckResult],
    metrics: dict[str, Any],
    *,
    docs: dict[str, str] | None = None,
    errors: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """verdict.json: identity of the run, ``passed``, ``exit_code``, every check, the metrics."""
    docs = docs or {}
    errors = list(errors or [])
    expected = set(meta.get("expect_violated") or [])
    checks = {r.name: check_entry(r, expected=r.name in expected, doc=docs.get(r.name, "")) for r in results}
    for name in sorted(expected - checks.keys()):
        errors.append(f"{name} is expected to be violated but was not checked")
    passed = all(c["passed"] for c in checks.values()) and not errors
    scenario = meta.get("scenario") or {}
    manifest = meta.get("manifest") or {}
    verdict = {
        "scenario": scenario.get("name", ""),
        "implementation": manifest.get("name") or scenario.get("implementation", ""),
        "seed": scenario.get("seed"),
        "status": combine([r.status for r in results]),
        "passed": passed,
        "exit_code": 0 if passed else 1,
        "expect_violated": sorted(expected),
        "checks": checks,
        "errors": errors,
        "metrics": metrics,
    }
    verdict.update(extra or {})
    return verdict
