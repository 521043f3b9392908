"""One scenario on many seeds: a racy bug is judged as "violated in k of N seeds".

``zchaos run SCENARIO --seeds N`` (and ``zchaos suite --seeds N``) runs the scenario once
per seed, one after the other, each with its own run folder inside one group folder
(``seeds-<UTC time>-<scenario>/``), its own ports (from the OS, released at its end) and
its own cgroups (made and removed by its run): no two runs share any. The seeds come from
the scenario's own: the first is the scenario's seed itself (so ``--seeds 1`` is the plain
run), the others are drawn from a generator seeded with it, so the same scenario always
gets the same N seeds. Each run records its place (``seeds`` in run.json: base seed,
index, count) and prints its seed; the group writes ``index.html`` and ``seeds.json`` and
prints, per check, how many seeds broke it and which. An interrupted group (Ctrl-C, SIGTERM)
still writes its summary: the seeds that finished, the group marked interrupted (exit 130).
"""

from __future__ import annotations

import html
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.errors import SetupError
from contract.outcomes import BAD_INPUT, EXIT_INTERRUPTED, UNKNOWN, VIOLATED, combine_outcomes, exit_code
from contract.rundir import RunDir, RunMeta, new_folder
from harness.progress import Progress
from harness.runner import Runner
from harness.scenario import Scenario, with_seed
from reports.store import store_path

#: Seeds drawn for the runs after the first lie in [1, SEED_RANGE).
SEED_RANGE = 1_000_000


def derive_seeds(base: int, count: int) -> list[int]:
    """``count`` distinct seeds: ``base`` first, then ones drawn from a generator seeded with it."""
    rng = random.Random(f"zchaos-seeds:{base}")
    seeds = [base]
    while len(seeds) < count:
        seed = rng.randrange(1, SEED_RANGE)
        if seed not in seeds:
            seeds.append(seed)
    return seeds[:count]


@dataclass
class SeedRun:
    """One run of the group: its seed, folder and verdict (or why it did not run)."""

    seed: int
    run_dir: Path | None = None
    exit_code: int = 2
    verdict: dict[str, Any] | None = None
    error: str = ""

    @property
    def outcome(self) -> str:
        """passed, violated, unknown, incomplete, bad_input (set-up) or interrupted."""
        if self.error:
            return BAD_INPUT
        if self.exit_code == EXIT_INTERRUPTED:
            return "interrupted"
        return (self.verdict or {}).get("outcome") or UNKNOWN

    def replay_command(self) -> str:
        """The command that runs this seed's run again, as its run.json records it."""
        if self.run_dir is None:
            return ""
        try:
            commands = RunDir(self.run_dir).read_meta().get("replay", {}).get("commands") or [""]
        except SetupError:
            return ""
        return commands[0]

    def check_status(self, name: str) -> str | None:
        check = (self.verdict or {}).get("checks", {}).get(name)
        return check.get("status") if check else None


@dataclass
class SeedsResult:
    scenario: Scenario
    folder: Path
    seeds: list[int]  # all the seeds planned
    runs: list[SeedRun] = field(default_factory=list)  # those that ran, in order
    interrupted: bool = False

    @property
    def outcome(self) -> str:
        """The runs' outcomes combined (bad input if a run could not be set up, interrupted
        if the group was: its finished seeds are ``finished_outcome``)."""
        if BAD_INPUT in (r.outcome for r in self.runs):
            return BAD_INPUT
        return "interrupted" if self.interrupted else self.finished_outcome

    @property
    def finished_outcome(self) -> str:
        """The outcomes of the runs that finished, combined."""
        return combine_outcomes([r.outcome for r in self.runs if r.outcome != "interrupted"])

    @property
    def finished(self) -> int:
        return sum(r.outcome != "interrupted" for r in self.runs)

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED if self.interrupted else exit_code(self.outcome)

    def checks(self) -> dict[str, dict[str, list[int]]]:
        """check -> status (violated, unknown, held) -> the seeds of the runs with that status."""
        table: dict[str, dict[str, list[int]]] = {}
        for run in self.runs:
            for name, check in ((run.verdict or {}).get("checks") or {}).items():
                table.setdefault(name, {}).setdefault(check.get("status", UNKNOWN), []).append(run.seed)
        return table

    def expected(self) -> set[str]:
        return set(self.scenario.expect_violated)

    def lines(self, *, broken_only: bool = False) -> list[str]:
        """One line per check: "violated in k of N seeds: s1, s2" (or held on all of them,
        left out with ``broken_only``), then the seeds whose run could not be set up."""
        n = len(self.runs)
        lines = []
        for name, by_status in self.checks().items():
            parts = []
            for status in (VIOLATED, UNKNOWN):
                if seeds := by_status.get(status):
                    parts.append(f"{status} in {len(seeds)} of {n} seeds: {', '.join(map(str, seeds))}")
            if not parts and broken_only:
                continue
            if not parts:
                parts.append(f"held on all {n} seeds" if n > 1 else "held")
            expected = " (expected)" if name in self.expected() and by_status.get(VIOLATED) else ""
            lines.append(f"{name}: {'; '.join(parts)}{expected}")
        lines += [f"seed {r.seed}: {r.error}" for r in self.runs if r.error]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "implementation": self.scenario.manifest.name,
            "base_seed": self.scenario.seed,
            "seeds": self.seeds,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "finished": self.finished,  # runs that ended with a verdict (or a set-up error)
            "finished_outcome": self.finished_outcome if self.finished else None,
            "checks": self.checks(),
            "runs": [
                {
                    "seed": r.seed,
                    "outcome": r.outcome,
                    "run_dir": str(r.run_dir) if r.run_dir else None,
                    "error": r.error,
                }
                for r in self.runs
            ],
        }


def run_seeds(
    scenario: Scenario,
    count: int,
    *,
    runs_dir: Path,
    until_violated: bool = False,
    report: bool = True,
    progress: Progress | None = None,
    store: Path | None = None,
    subject_version: str | None = None,
) -> SeedsResult:
    """Run ``scenario`` on ``count`` seeds derived from its own (stopping at the first
    violated one with ``until_violated``); write the group's summary page. Each run is
    added to ``store`` (default: the results store of ``runs_dir``, not of the group's
    folder), where the matrix shows the scenario's cell as "k of N seeds"."""
    progress = progress or Progress()
    store = store or store_path(runs_dir)
    folder = new_folder(runs_dir, prefix="seeds", name=scenario.name)
    result = SeedsResult(scenario, folder, derive_seeds(scenario.seed, count))
    for index, seed in enumerate(result.seeds, start=1):
        progress.phase(f"seed {index}/{count}: {seed} ({scenario.name})")
        entry = SeedRun(seed)
        result.runs.append(entry)
        meta: RunMeta = {
            "seeds": {"base": scenario.seed, "index": index, "count": count, "folder": str(folder)}
        }
        try:
            runner = Runner(
                with_seed(scenario, seed), runs_dir=folder, progress=progress, meta=meta, store=store,
                subject_version=subject_version,
            )  # fmt: skip
            entry.run_dir = runner.run.root
            run = runner.execute(report=report)
            entry.exit_code, entry.verdict = run.exit_code, run.verdict
        except KeyboardInterrupt:  # outside a run's own handling: the seeds done are still summarised
            entry.exit_code = EXIT_INTERRUPTED
        except SetupError as exc:
            # The set-up of every seed is the same: the next would fail alike.
            entry.error = str(exc)
            progress.warn(f"seed {seed}: {exc}")
            break
        if entry.exit_code == EXIT_INTERRUPTED:
            result.interrupted = True
            break
        if until_violated and entry.outcome == VIOLATED:
            progress.note(f"seed {seed} violated; stopping (--until-violated)")
            break
    write_summary(result)
    return result


def print_summary(result: SeedsResult, out: Any = None) -> None:
    """The terminal's summary: the outcome over the seeds, then one line per check."""
    n, planned = len(result.runs), len(result.seeds)
    broke = [r.seed for r in result.runs if r.outcome == VIOLATED]
    ran = f"{n} of {planned} seeds run" if n < planned else f"{n} seeds"
    if result.interrupted:
        ran = f"interrupted after {result.finished} of {planned} seeds"
        ran += f" ({result.finished_outcome} on those)" if result.finished else ""
    print(
        f"\n{result.scenario.name}: {result.outcome} ({ran}, violated on {len(broke)}), "
        f"exit {result.exit_code}; summary: {result.folder / 'index.html'}",
        file=out,
    )
    for line in result.lines():
        print(f"  {line}", file=out)


def write_summary(result: SeedsResult) -> None:
    """``seeds.json`` and ``index.html`` in the group folder."""
    (result.folder / "seeds.json").write_text(json.dumps(result.as_dict(), indent=2))
    checks = result.checks()
    names = list(checks)
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    rows = []
    for run in result.runs:
        link = ""
        if run.run_dir is not None and (run.run_dir / "report.html").exists():
            link = f'<a href="{html.escape(run.run_dir.name)}/report.html">report</a>'
        statuses = [run.check_status(n) or "" for n in names]
        cells = "".join(f"<td class={s or 'none'}>{s}</td>" for s in statuses)
        why = html.escape(run.error)
        again = f"<code>{html.escape(command)}</code>" if (command := run.replay_command()) else ""
        rows.append(
            f"<tr><td>{run.seed}</td><td class={run.outcome}>{run.outcome}</td>{cells}<td>{why}</td>"
            f"<td>{link}</td><td>{again}</td></tr>"
        )
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in result.lines())
    title = html.escape(f"{result.scenario.name}: {len(result.runs)} seeds")
    if result.interrupted:
        title += html.escape(f" (interrupted: {result.finished} of {len(result.seeds)} finished)")
    (result.folder / "index.html").write_text(
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left}"
        ".passed,.held{color:#176f2c}.violated,.bad_input{color:#b00020;font-weight:bold}"
        ".unknown,.incomplete{color:#8a6100;font-weight:bold}</style>"
        f"<h1>{title}</h1><p>implementation {html.escape(result.scenario.manifest.name)}, "
        f"seeds derived from {result.scenario.seed}; outcome <span class={result.outcome}>"
        f"{result.outcome}</span></p><ul id=checks>{lines}</ul>"
        f"<table id=runs><tr><th>seed</th><th>outcome</th>{head}<th>why</th><th></th><th>reproduce</th></tr>"
        + "".join(rows)
        + "</table>"
    )
