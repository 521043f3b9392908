"""Regressions against a baseline run: what got worse, check by check and figure by figure.

A run is compared with another (its baseline: the same scenario on the system as it was,
or on a twin) through their verdicts: each check's outcome, and each key figure of the
results store (reports/store.py ``FIGURES``: recovery per fault, availability, latency,
retries...). ``zchaos compare RUN --baseline RUN|LABEL`` prints and renders that.

A scenario may also promise not to regress (``[baseline]`` in harness/scenario.py): the
``baseline`` check then compares the run with the run stored as that label's baseline for
the scenario, and is violated when the slowest recovery (and each fault's recovery, fault
by fault) exceeds the baseline's × ``recovery_ratio`` + ``recovery_slack_s``, the p99
latency the baseline's × ``p99_ratio`` + ``p99_slack_ms``, or the lowest availability falls
under the baseline's × ``availability_ratio``; unknown when no baseline is stored or it
lacks the figures. The slack keeps a 20 ms recovery from failing against a 10 ms one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from contract.errors import SetupError
from contract.rundir import RunDir, RunMeta
from reports.checkers import CheckResult
from reports.pages import page_template
from reports.store import FIGURES, baseline_run, key_figures, store_for_run

CHECK = "baseline"
DOC = (
    "no regression against the stored baseline run (recovery, p99, availability within the scenario's ratios)"
)
#: +1: a higher value is worse; -1: a lower one is; 0: neither (shown, never "worse").
DIRECTION = {
    "recovery_s": 1,
    "max_recovery_s": 1,
    "availability": -1,
    "min_availability": -1,
    "p50_ms": 1,
    "p99_ms": 1,
    "requests": -1,
    "retries": 1,
    "abandons": 1,
    "duration_s": 0,
}
#: A change smaller than this share of the baseline is noise, not "worse", in the comparison
#: (the promise's bounds are the scenario's own).
NOISE = 0.10
#: The promise's bounds: key of [baseline] -> the figures it bounds.
BOUNDED = {
    "recovery_ratio": ("max_recovery_s", "recovery_s"),
    "p99_ratio": ("p99_ms",),
    "availability_ratio": ("min_availability", "availability"),
}
SLACK = {"recovery_ratio": ("recovery_slack_s", 0.5), "p99_ratio": ("p99_slack_ms", 1.0)}
ORDER = {"passed": 0, "unknown": 1, "incomplete": 1, "violated": 2}


def read_run(run_root: Path) -> tuple[dict[str, Any], RunMeta]:
    """A run folder's verdict and run.json (SetupError naming the file when either is missing,
    or the verdict is stale: a comparison with an old verdict's figures would say nothing)."""
    run = RunDir(run_root)
    meta = run.read_meta()
    return run.read_verdict(fresh=True), meta


def _figures(verdict: dict[str, Any], meta: RunMeta) -> dict[tuple[str, Any], dict[str, Any]]:
    return {(f["name"], f["fault_id"]): f for f in key_figures(verdict, meta)}


def _limit(key: str, base: float, promise: dict[str, Any]) -> float:
    if key in SLACK:
        name, default = SLACK[key]
        return base * promise[key] + float(promise.get(name, default))
    return base * promise[key]


def compare(
    now: tuple[dict[str, Any], RunMeta],
    base: tuple[dict[str, Any], RunMeta],
    promise: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The comparison rows, checks first then figures: ``what``, ``baseline``, ``now``,
    ``change`` (words), ``worse`` (got worse beyond noise), and for a figure the promise
    bounds, ``limit`` and ``regressed`` (beyond the bound)."""
    (verdict, meta), (base_verdict, base_meta) = now, base
    rows: list[dict[str, Any]] = []
    checks, base_checks = verdict.get("checks") or {}, base_verdict.get("checks") or {}
    outcome = {"outcome": verdict.get("outcome")}, {"outcome": base_verdict.get("outcome")}
    for name in ["the run", *base_checks, *(n for n in checks if n not in base_checks)]:
        if name == CHECK:
            continue
        now_entry, base_entry = outcome if name == "the run" else (checks.get(name), base_checks.get(name))
        b, n = (base_entry or {}).get("outcome"), (now_entry or {}).get("outcome")
        worse = b is not None and n is not None and ORDER.get(n, 1) > ORDER.get(b, 1)
        change = "same" if b == n else f"{b or 'not checked'} → {n or 'not checked'}"
        rows.append(
            {"kind": "check", "what": name, "baseline": b, "now": n, "change": change, "worse": worse}
        )
    figures, base_figures = _figures(verdict, meta), _figures(base_verdict, base_meta)
    bounds = {fig: key for key, figs in BOUNDED.items() if (promise or {}).get(key) for fig in figs}
    for key in sorted(set(figures) | set(base_figures), key=lambda k: (list(FIGURES).index(k[0]), k[1] or 0)):
        name, fault_id = key
        n, b = figures.get(key), base_figures.get(key)
        row: dict[str, Any] = {
            "kind": "figure",
            "what": name if fault_id is None else f"{name} ({(n or base_figures[key])['detail']})",
            "name": name,
            "fault_id": fault_id,
            "unit": FIGURES[name],
            "baseline": b and b["value"],
            "now": n and n["value"],
            "worse": False,
        }
        if n and b:
            delta = n["value"] - b["value"]
            sign = DIRECTION[name]
            row["worse"] = sign * delta > NOISE * abs(b["value"]) and sign * delta > 0
            row["change"] = (
                f"{n['value'] / b['value']:.2f}×" if b["value"] else ("same" if not delta else f"{delta:+g}")
            )
            if name in bounds:
                promise_key = bounds[name]
                row["limit"] = _limit(promise_key, b["value"], promise or {})
                row["bound"] = promise_key
                row["regressed"] = n["value"] > row["limit"] if sign > 0 else n["value"] < row["limit"]
        else:
            row["change"] = "only in the baseline" if b else "new"
        rows.append(row)
    return rows


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.3g} s" if value < 10 else f"{value:.1f} s"
    if unit == "ms":
        return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"
    if unit == "ratio":
        return f"{value:.3f}"
    return f"{value:.0f}"


def describe(row: dict[str, Any]) -> str:
    """One line of the comparison, as the terminal prints it."""
    if row["kind"] == "check":
        return f"{'' if row['what'] == 'the run' else 'check '}{row['what']}: {row['change']}"
    then, now = _fmt(row["baseline"], row["unit"]), _fmt(row["now"], row["unit"])
    text = f"{row['what']}: {then} → {now} ({row['change']})"
    if "limit" in row:
        text += f", bound {_fmt(row['limit'], row['unit'])} ({row['bound']})"
    return text


def baseline_check(meta: RunMeta, verdict: dict[str, Any], store: Path) -> CheckResult | None:
    """The ``baseline`` check of a run whose scenario promises one (None when it does not):
    the run's verdict (without this check) against the stored baseline's."""
    promise = (meta.get("scenario") or {}).get("baseline")
    if not promise:
        return None
    from reports.checkers.toolkit import result  # Spark's import: only a report judges

    label, scenario = promise["label"], verdict.get("scenario") or ""
    stored = baseline_run(store, label, scenario)
    if stored is None:
        return _named(
            result(
                f"no baseline {label!r} stored for {scenario}",
                {"label": label},
                unknown=(
                    f"no run is stored as baseline {label!r} for scenario {scenario!r} in {store}: "
                    f"`zchaos baseline RUN --label {label}` makes a run of it the baseline"
                ),
            )
        )
    base_root = (store.parent / stored).resolve()
    try:
        base = read_run(base_root)
    except SetupError as exc:
        return _named(result(f"baseline {label!r} unreadable", unknown=str(exc)))
    rows = [r for r in compare((verdict, meta), base, promise) if "regressed" in r]
    figures = {"label": label, "baseline_run": str(base_root), "compared": rows}
    if not rows:
        return _named(
            result(
                f"nothing to compare with baseline {label!r}",
                figures,
                unknown=(
                    f"the run or its baseline ({base_root}) lacks every figure the scenario bounds "
                    f"({', '.join(k for k in BOUNDED if promise.get(k))}): "
                    "a run without faults has no recovery"
                ),
            )
        )
    bad = [r for r in rows if r["regressed"]]
    examples = [{"problem": describe(r)} for r in bad]
    summary = f"against baseline {label!r}: " + "; ".join(describe(r) for r in (bad or rows)[:3])
    return _named(result(summary, figures, violations=len(bad), examples=examples))


def _named(found: CheckResult) -> CheckResult:
    """``found`` under this check's name: it is not a registered checker, whose name the
    registry would fill in."""
    found.name = CHECK
    return found


def resolve_baseline(run_root: Path, baseline: str) -> Path:
    """``--baseline``: a run folder, or a label stored for the run's scenario (SetupError naming
    what is missing)."""
    folder = Path(baseline)
    if (folder / "run.json").exists():
        return folder
    store = store_for_run(run_root)
    scenario = (RunDir(run_root).read_meta().get("scenario") or {}).get("name") or ""
    stored = baseline_run(store, baseline, scenario)
    if stored is None:
        raise SetupError(
            f"neither a run folder nor a baseline label stored for scenario {scenario!r} "
            f"(`zchaos baseline RUN --label {baseline}` stores one)",
            where=f"{store}: {baseline}" if store.exists() else baseline,
        )
    return store.parent / stored


def compare_runs(run_root: Path, baseline: str) -> tuple[Path, list[dict[str, Any]], Path]:
    """``zchaos compare``: the comparison of a run with its baseline (a folder or a label),
    rendered as ``RUN/compare.html``. Returns the page, the rows and the baseline's folder."""
    base_root = resolve_baseline(run_root, baseline)
    now, base = read_run(run_root), read_run(base_root)
    promise = (now[1].get("scenario") or {}).get("baseline")
    rows = compare(now, base, promise)
    page = run_root / "compare.html"
    base_report = base_root / "report.html"
    page.write_text(
        page_template("compare.html.j2", figure=_fmt).render(
            rows=rows,
            run=now[0],
            base=base[0],
            label=baseline if base_root != Path(baseline) else "",
            run_href="report.html",
            base_href=os.path.relpath(base_report, run_root) if base_report.exists() else None,
            worse=sum(r["worse"] for r in rows),
        ),
        encoding="utf-8",
    )
    return page, rows, base_root
