"""The CI suite: every scenario of a folder, one run each (or one per seed with ``--seeds
N``, harness/seeds.py), its reliability matrix and one JUnit file.

All scenarios are validated before the first one starts, so a typo in the last file
costs nothing. Each run has an outcome (contract/outcomes.py); the suite's exit code is
130 if it was interrupted, 2 if a scenario could not be run (set-up), else the exit code
of the runs' outcomes combined (violated > incomplete > unknown > passed).

Each run is reported as soon as it ends, and every report of the suite is checked in the
one Spark session of the ``zchaos`` process: the first report starts the JVM (about 3 s,
then several seconds of JIT warm-up), the others reuse it warm, and the command stops it at
the end (harness/cli.py), so no JVM outlives the suite. Why this shape:

- reporting right after each run, rather than all runs at the end (``--no-report`` then
  one pass), prints each verdict next to its run's progress and leaves the finished runs
  reported when a suite is interrupted or a later run breaks; the cost is a JVM idle
  through the next runs (measured: 0.5% of a core and 430 MB resident; its heap is sized for
  the first run's history);
- the runs stay separate from the session: each is its own processes, under the runner's
  supervisor, and the session lives in the driver process only while zchaos does;
- not Spark Connect: a server outliving the command is what this must not leave behind, its
  client would need gRPC packages zchaos does not otherwise install, and the checks use the
  classic API (caching, the JVM's own settings per report) that Connect only partly offers;
- not a standalone master: it saves nothing here, since the driver JVM (where the start and
  the JIT warm-up are paid) is still the zchaos process's own; it is for a history too large
  for one machine (README, "Checking a history on a Spark cluster").
"""

from __future__ import annotations

import contextlib
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.errors import SetupError
from contract.outcomes import BAD_INPUT, EXIT_INTERRUPTED, PASSED, UNKNOWN, combine_outcomes, exit_code
from contract.rundir import new_folder
from harness.calibrate import calibrated
from harness.progress import Progress
from harness.runner import Runner
from harness.scenario import Scenario, load_scenario
from harness.seeds import SeedsResult, print_summary, run_seeds
from reports.matrix import write_matrix
from reports.store import read_runs, store_path


@dataclass
class SuiteEntry:
    scenario: Scenario
    run_dir: Path | None = None
    exit_code: int = 2
    verdict: dict | None = None
    error: str = ""
    seeds: SeedsResult | None = None  # with --seeds N: the scenario's runs, one per seed

    @property
    def outcome(self) -> str:
        """passed, violated, unknown, incomplete, bad_input (set-up) or interrupted."""
        if self.error:
            return BAD_INPUT
        if self.exit_code == EXIT_INTERRUPTED:
            return "interrupted"
        if self.seeds is not None:
            return self.seeds.outcome
        return (self.verdict or {}).get("outcome") or UNKNOWN

    def run_dirs(self) -> list[Path]:
        """The folders of its runs: one, or one per seed."""
        if self.seeds is not None:
            return [r.run_dir for r in self.seeds.runs if r.run_dir is not None]
        return [self.run_dir] if self.run_dir is not None else []

    @property
    def reasons(self) -> list[str]:
        """Why the run is not simply passed: violated checks, or the verdict's reasons."""
        if self.error:
            return [self.error]
        if self.seeds is not None:
            return self.seeds.lines(broken_only=True)
        checks = (self.verdict or {}).get("checks", {})
        violated = [f"{n} violated" for n, c in checks.items() if c.get("outcome") == "violated"]
        return violated + list((self.verdict or {}).get("reasons") or [])


def run_suite(
    directory: Path,
    *,
    runs_dir: Path = Path("runs"),
    progress: Progress | None = None,
    subject_version: str | None = None,
    seeds: int = 1,
    until_violated: bool = False,
    sets: Sequence[str] = (),
    junit_xml: Path | None = None,
) -> int:
    """Run every scenario of ``directory`` (on ``seeds`` seeds each, with the ``--set``
    overrides ``sets``); the suite's exit code. The JUnit file is the suite folder's
    ``junit.xml``, and also ``junit_xml`` when given (``--junit-xml``, for CI)."""
    progress = progress or Progress()
    store = store_path(runs_dir)
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise SetupError("no scenario files (*.toml) here", where=directory)
    scenarios = [load_scenario(path, sets=sets) for path in files]  # all validated before any runs

    suite_dir = new_folder(runs_dir, prefix="suite")  # its own, also beside a suite of the same second
    entries: list[SuiteEntry] = []
    interrupted = False
    for n, scenario in enumerate(scenarios, start=1):
        progress.phase(f"scenario {n}/{len(scenarios)}: {scenario.name}")
        entry = SuiteEntry(scenario)
        try:
            scenario = entry.scenario = calibrated(scenario, runs_dir, progress)
        except KeyboardInterrupt:  # while it calibrated: the index still says what ran
            entry.exit_code = EXIT_INTERRUPTED
            entries.append(entry)
            interrupted = True
            break
        except SetupError as exc:
            entry.error = str(exc)
            progress.warn(f"{scenario.name}: {exc}")
            entries.append(entry)
            continue
        if seeds > 1:
            entry.seeds = run_seeds(
                scenario, seeds, runs_dir=suite_dir, until_violated=until_violated, progress=progress,
                store=store, subject_version=subject_version,
            )  # fmt: skip
            entry.run_dir, entry.exit_code = entry.seeds.folder, entry.seeds.exit_code
            entries.append(entry)
            print_summary(entry.seeds)
            if entry.seeds.interrupted:
                interrupted = True
                break
            continue
        try:
            runner = Runner(
                scenario, runs_dir=suite_dir, progress=progress, store=store, subject_version=subject_version
            )
            entry.run_dir = runner.run.root
            result = runner.execute()
            entry.exit_code, entry.verdict = result.exit_code, result.verdict
        except KeyboardInterrupt:  # outside the run's own handling: the index still says what ran
            entry.exit_code = EXIT_INTERRUPTED
        except SetupError as exc:
            entry.error = str(exc)
            progress.warn(f"{scenario.name}: {exc}")
        entries.append(entry)
        if entry.exit_code == EXIT_INTERRUPTED:
            interrupted = True
            break

    write_index(suite_dir, entries, store)
    write_junit(suite_dir, entries)
    junit_error = None
    if junit_xml is not None:
        try:
            copy_junit(suite_dir / "junit.xml", junit_xml)
        except SetupError as exc:  # said after the summary; the suite folder's copy stands
            junit_error = exc
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
        + (f"; JUnit: {junit_xml}" if junit_xml is not None and junit_error is None else "")
    )
    with contextlib.suppress(SetupError):  # a damaged store was named when the runs were added
        print(f"reliability matrix of every run in {runs_dir}: {write_store_matrix(runs_dir)}")
    if junit_error is not None:
        print(f"zchaos: error: {junit_error}", file=sys.stderr)
        if not interrupted:  # CI reads that file: a suite whose JUnit is not there is no pass
            return exit_code(BAD_INPUT)
    return suite_exit_code(entries, interrupted=interrupted)


def suite_exit_code(entries: list[SuiteEntry], *, interrupted: bool = False) -> int:
    """130 if interrupted, 2 if a scenario could not be run, else the runs' outcomes combined."""
    if interrupted:
        return EXIT_INTERRUPTED
    if any(e.outcome == BAD_INPUT for e in entries):
        return exit_code(BAD_INPUT)
    return exit_code(combine_outcomes([e.outcome for e in entries]))


def copy_junit(source: Path, target: Path) -> None:
    """The suite's JUnit file at ``target`` too, whole or not at all: a CI job that reads it
    never sees half a file (written beside it, then renamed over it)."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(source.read_bytes())
        temporary.replace(target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise SetupError(f"cannot write the suite's JUnit file: {exc.strerror}", where=target) from None


def write_index(suite_dir: Path, entries: list[SuiteEntry], store: Path) -> None:
    """index.html: the reliability matrix of this suite's runs (reports/matrix.py), from the
    results store, with the scenarios that could not be run listed above it."""
    errors = [f"{e.scenario.name}: {e.error}" for e in entries if e.error]
    ours = {d.resolve() for e in entries for d in e.run_dirs()}
    try:
        runs = [r for r in read_runs(store) if (store.parent / r["run"]).resolve() in ours]
    except SetupError as exc:
        runs, errors = [], [*errors, str(exc)]
    title = f"zchaos suite {suite_dir.name}"
    write_matrix(runs, suite_dir / "index.html", store.parent, title=title, errors=errors)


def write_store_matrix(runs_dir: Path) -> Path:
    """RUNS_DIR/matrix.html: every run of the store (SetupError when it is damaged)."""
    store = store_path(runs_dir)
    return write_matrix(read_runs(store), runs_dir / "matrix.html", runs_dir)


def write_junit(suite_dir: Path, entries: list[SuiteEntry]) -> None:
    """One JUnit file: each run's own test suite, or an error case for a run that failed to start."""
    root = ET.Element("testsuites", name="zchaos")
    for e in entries:
        if e.seeds is not None:
            for run in e.seeds.runs:
                junit = run.run_dir / "junit.xml" if run.run_dir else None
                if junit is not None and junit.exists():
                    parsed = ET.parse(junit).getroot()
                    root.extend(parsed if parsed.tag == "testsuites" else [parsed])
            continue
        junit = e.run_dir / "junit.xml" if e.run_dir else None
        if junit is not None and junit.exists():
            parsed = ET.parse(junit).getroot()
            root.extend(parsed if parsed.tag == "testsuites" else [parsed])
            continue
        suite = ET.SubElement(root, "testsuite", name=e.scenario.name, tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname=e.scenario.name, name="run")
        ET.SubElement(case, "error", message=e.error or f"exit code {e.exit_code}")
    ET.ElementTree(root).write(suite_dir / "junit.xml", encoding="utf-8", xml_declaration=True)
