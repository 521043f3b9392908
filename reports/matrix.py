"""The reliability matrix: systems against scenarios, one self-contained page from the results store.

Rows are systems (implementation, and its version when the run was given one), columns are
scenarios grouped by fault kind (a scenario with several kinds under its first, the others
named under it). A cell sums up every run of that system
on that scenario: for each seed its latest run, the outcomes combined (violated >
incomplete > unknown > passed) with "k of N seeds" when several seeds ran, the key figures
(slowest recovery, lowest availability, p99 latency; the worst over the seeds), a mark
when a run regressed against its baseline (reports/baseline.py), a mark when a seed's
verdict is stale (its report did not finish: unknown, never its old outcome), and a link to
the run page of the worst seed (each seed's page is linked too). A small inline script sorts the
rows by a column (worst first) and filters them; the page uses no network.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.outcomes import combine_outcomes
from reports.baseline import CHECK as BASELINE
from reports.pages import page_template

#: Sorting rank of an outcome: worst first.
RANK = {"violated": 4, "bad_input": 3, "incomplete": 3, "unknown": 2, "passed": 1}


@dataclass
class Cell:
    system: str
    scenario: str
    outcome: str
    seeds: list[dict[str, Any]]  # per seed: seed, outcome, href, regressed
    href: str | None  # the worst seed's run page
    figures: list[str]  # the key figures, formatted
    regressed: bool = False  # a run of it violated its baseline check
    stale: int = 0  # seeds whose verdict is stale (outcome unknown: a report did not finish)
    problems: list[str] = field(default_factory=list)  # checks not passed, and why (worst seed)

    @property
    def problem_checks(self) -> str:
        """The checks that did not pass, but the baseline's, which ``regressed`` shows (and
        the stale verdict, which ``stale`` does)."""
        names = [p.split(":", 1)[0] for p in self.problems]
        return ", ".join(n for n in names if not n.startswith(f"{BASELINE} ") and n != "stale verdict")

    @property
    def rank(self) -> int:
        return RANK.get(self.outcome, 2)

    @property
    def seeds_text(self) -> str:
        """ "k of N seeds" when several seeds ran."""
        n = len(self.seeds)
        if n < 2:
            return ""
        k = sum(s["outcome"] == self.outcome for s in self.seeds)
        return f"{self.outcome} in {k} of {n} seeds"


def _figure(run: dict[str, Any], name: str) -> float | None:
    rows = run["figures"].get(name) or []
    return rows[0]["value"] if rows else None


def fmt_seconds(s: float) -> str:
    if s < 0.01:
        return f"{s * 1000:.2g} ms"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def fmt_ms(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else (f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s")


def key_figures(runs: list[dict[str, Any]]) -> list[str]:
    """The worst key figures over ``runs``: slowest recovery, lowest availability, p99."""
    out = []
    recovery = [v for r in runs if (v := _figure(r, "max_recovery_s")) is not None]
    if recovery:
        out.append(f"recovery {fmt_seconds(max(recovery))}")
    availability = [v for r in runs if (v := _figure(r, "min_availability")) is not None]
    if availability:
        out.append(f"availability {min(availability):.2f}")
    p99 = [v for r in runs if (v := _figure(r, "p99_ms")) is not None]
    if p99:
        out.append(f"p99 {fmt_ms(max(p99))}")
    return out


def build_cells(runs: list[dict[str, Any]], link: Any) -> dict[tuple[str, str], Cell]:
    """One cell per (system, scenario) from the store's runs (reports/store.py ``read_runs``);
    ``link(run)``: the href of a run's page, or None."""
    latest: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
    for run in sorted(runs, key=lambda r: r["started_ns"] or 0):  # a later run of a seed replaces it
        latest.setdefault((run["system"], run["scenario"]), {})[run["seed"]] = run
    cells = {}
    for (system, scenario), by_seed in latest.items():
        chosen = [by_seed[s] for s in sorted(by_seed, key=lambda s: (s is None, s))]
        outcome = combine_outcomes([r["outcome"] for r in chosen])
        worst = next(r for r in chosen if r["outcome"] == outcome)
        seeds = [
            {
                "seed": r["seed"],
                "outcome": r["outcome"],
                "href": link(r),
                "regressed": (r["checks"].get(BASELINE) or {}).get("outcome") == "violated",
                "stale": bool(r.get("stale")),
            }
            for r in chosen
        ]
        problems = [f"stale verdict: {worst['stale']}"] if worst.get("stale") else []
        problems += [
            f"{n} {c['outcome']}: {c['detail']}"
            for n, c in worst["checks"].items()
            if c["outcome"] != "passed"
        ]
        cells[(system, scenario)] = Cell(
            system=system,
            scenario=scenario,
            outcome=outcome,
            seeds=seeds,
            href=link(worst),
            figures=key_figures(chosen),
            regressed=any(s["regressed"] for s in seeds),
            problems=problems,
            stale=sum(s["stale"] for s in seeds),
        )
    return cells


def matrix_model(runs: list[dict[str, Any]], page: Path, store_dir: Path) -> dict[str, Any]:
    """What the template shows: the column groups, the rows and their cells."""

    def link(run: dict[str, Any]) -> str | None:
        if not run.get("report"):
            return None
        return Path(os.path.relpath(store_dir / run["report"], page.parent)).as_posix()

    cells = build_cells(runs, link)
    kinds: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: r["started_ns"] or 0):
        kinds[run["scenario"]] = run["fault_kinds"]
    groups: dict[str, list[str]] = {}
    for scenario in sorted(kinds):  # under its first fault kind; the others shown with its name
        groups.setdefault(kinds[scenario].split("+")[0], []).append(scenario)
    ordered = sorted(groups.items(), key=lambda kv: (kv[0] == "none", kv[0]))
    columns = [
        {"scenario": s, "group": g, "also": " + ".join(kinds[s].split("+")[1:])}
        for g, scenarios in ordered
        for s in scenarios
    ]
    systems = sorted({r["system"] for r in runs})
    rows = []
    for system in systems:
        row_cells = [cells.get((system, c["scenario"])) for c in columns]
        present = [c for c in row_cells if c is not None]
        rows.append(
            {
                "system": system,
                "cells": row_cells,
                "outcome": combine_outcomes([c.outcome for c in present]),
                "problems": sum(c.outcome != "passed" for c in present),
            }
        )
    totals: dict[str, int] = {}
    for cell in cells.values():
        totals[cell.outcome] = totals.get(cell.outcome, 0) + 1
    return {
        "groups": [
            {"name": g, "label": g if g != "none" else "no fault", "span": len(s)} for g, s in ordered
        ],
        "columns": columns,
        "rows": rows,
        "totals": dict(sorted(totals.items(), key=lambda kv: -RANK.get(kv[0], 2))),
        "runs": len(runs),
        "regressions": sum(c.regressed for c in cells.values()),
    }


def render_matrix(
    runs: list[dict[str, Any]],
    page: Path,
    store_dir: Path,
    *,
    title: str = "zchaos reliability matrix",
    errors: list[str] | None = None,
) -> str:
    """The matrix page as a string; ``errors``: runs that never started (a suite's set-up errors)."""
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return page_template("matrix.html.j2").render(
        m=matrix_model(runs, page, store_dir),
        title=title,
        generated=generated,
        store=str(store_dir),
        errors=errors or [],
    )


def write_matrix(
    runs: list[dict[str, Any]],
    page: Path,
    store_dir: Path,
    *,
    title: str = "zchaos reliability matrix",
    errors: list[str] | None = None,
) -> Path:
    page.write_text(render_matrix(runs, page, store_dir, title=title, errors=errors), encoding="utf-8")
    return page
