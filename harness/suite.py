"""The CI suite: every scenario of a folder, one run each, an index page and one JUnit file.

All scenarios are validated before the first one starts, so a typo in the last file
costs nothing. Each run has an outcome (contract/outcomes.py); the suite's exit code is
130 if it was interrupted, 2 if a scenario could not be run (set-up), else the exit code
of the runs' outcomes combined (violated > incomplete > unknown > passed).
"""

from __future__ import annotations

import html
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from contract.errors import SetupError
from contract.outcomes import BAD_INPUT, EXIT_INTERRUPTED, PASSED, UNKNOWN, combine_outcomes, exit_code
from harness.progress import Progress
from harness.runner import Runner
from harness.scenario import Scenario, load_scenario


@dataclass
class SuiteEntry:
    scenario: Scenario
    run_dir: Path | None = None
    exit_code: int = 2
    verdict: dict | None = None
    error: str = ""

    @property
    def outcome(self) -> str:
        """passed, violated, unknown, incomplete, bad_input (set-up) or interrupted."""
        if self.error:
            return BAD_INPUT
        if self.exit_code == EXIT_INTERRUPTED:
            return "interrupted"
        return (self.verdict or {}).get("outcome") or UNKNOWN

    @property
    def reasons(self) -> list[str]:
        """Why the run is not simply passed: violated checks, or the verdict's reasons."""
        if self.error:
            return [self.error]
        checks = (self.verdict or {}).get("checks", {})
        violated = [f"{n} violated" for n, c in checks.items() if c.get("outcome") == "violated"]
        return violated + list((self.verdict or {}).get("reasons") or [])


def run_suite(directory: Path, *, runs_dir: Path = Path("runs"), progress: Progress | None = None) -> int:
    progress = progress or Progress()
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise SetupError("no scenario files (*.toml) here", where=directory)
    scenarios = [load_scenario(path) for path in files]  # all validated before any runs

    suite_dir = runs_dir / f"suite-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    suite_dir.mkdir(parents=True, exist_ok=True)
    entries: list[SuiteEntry] = []
    interrupted = False
    for n, scenario in enumerate(scenarios, start=1):
        progress.phase(f"scenario {n}/{len(scenarios)}: {scenario.name}")
        entry = SuiteEntry(scenario)
        try:
            runner = Runner(scenario, runs_dir=suite_dir, progress=progress)
            entry.run_dir = runner.run.root
            result = runner.execute()
            entry.exit_code, entry.verdict = result.exit_code, result.verdict
        except SetupError as exc:
            entry.error = str(exc)
            progress.warn(f"{scenario.name}: {exc}")
        entries.append(entry)
        if entry.exit_code == EXIT_INTERRUPTED:
            interrupted = True
            break

    write_index(suite_dir, entries)
    write_junit(suite_dir, entries)
    passed = sum(e.outcome == PASSED for e in entries)
    others = ", ".join(
        f"{n} {o}"
        for o in ("violated", "incomplete", "unknown", BAD_INPUT)
        if (n := sum(e.outcome == o for e in entries))
    )
    print(
        f"suite: {passed}/{len(scenarios)} scenarios passed"
        + (f" ({others})" if others else "")
        + f"; index: {suite_dir / 'index.html'}"
    )
    return suite_exit_code(entries, interrupted=interrupted)


def suite_exit_code(entries: list[SuiteEntry], *, interrupted: bool = False) -> int:
    """130 if interrupted, 2 if a scenario could not be run, else the runs' outcomes combined."""
    if interrupted:
        return EXIT_INTERRUPTED
    if any(e.outcome == BAD_INPUT for e in entries):
        return exit_code(BAD_INPUT)
    return exit_code(combine_outcomes([e.outcome for e in entries]))


def write_index(suite_dir: Path, entries: list[SuiteEntry]) -> None:
    rows = []
    for e in entries:
        link = ""
        if e.run_dir is not None and (e.run_dir / "report.html").exists():
            link = f'<a href="{html.escape(str(e.run_dir.relative_to(suite_dir)))}/report.html">report</a>'
        rows.append(
            f"<tr class={e.outcome}><td>{html.escape(e.scenario.name)}</td>"
            f"<td>{html.escape(e.scenario.manifest.name)}</td><td>{e.outcome}</td>"
            f"<td>{'<br>'.join(html.escape(r) for r in e.reasons)}</td><td>{link}</td></tr>"
        )
    (suite_dir / "index.html").write_text(
        "<!doctype html><meta charset=utf-8><title>zchaos suite</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left}"
        "tr.passed td:nth-child(3){color:#176f2c}tr.violated td:nth-child(3),tr.bad_input td:nth-child(3)"
        "{color:#b00020;font-weight:bold}tr.unknown td:nth-child(3),tr.incomplete td:nth-child(3)"
        "{color:#8a6100;font-weight:bold}</style><h1>zchaos suite</h1><table><tr><th>scenario</th>"
        "<th>implementation</th><th>outcome</th><th>why</th><th></th></tr>" + "".join(rows) + "</table>"
    )


def write_junit(suite_dir: Path, entries: list[SuiteEntry]) -> None:
    """One JUnit file: each run's own test suite, or an error case for a run that failed to start."""
    root = ET.Element("testsuites", name="zchaos")
    for e in entries:
        junit = e.run_dir / "junit.xml" if e.run_dir else None
        if junit is not None and junit.exists():
            parsed = ET.parse(junit).getroot()
            root.extend(parsed if parsed.tag == "testsuites" else [parsed])
            continue
        suite = ET.SubElement(root, "testsuite", name=e.scenario.name, tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname=e.scenario.name, name="run")
        ET.SubElement(case, "error", message=e.error or f"exit code {e.exit_code}")
    ET.ElementTree(root).write(suite_dir / "junit.xml", encoding="utf-8", xml_declaration=True)
