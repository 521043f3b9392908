"""Shrinking a violated run: the smallest scenario found that still violates the same check.

``zchaos shrink RUN`` starts from what the run ran (its replay record, harness/replay.py)
with its fault plan written out: one ``[[faults]]`` line per fault the run injected, at its
time and on the instance the seed chose, so that dropping one fault leaves the others
as they were. It first tries the two big cheap steps, each one run where a step-by-step
search takes many: no fault at all (when that still violates the check, the load alone
breaks the system, and shrink says so plainly: the faults are not to blame), then a single
user. Then it tries smaller candidates, keeping each one that still violates the check, in
passes until a pass changes nothing or the budget is spent:

1. fewer faults: delta debugging (Zeller's ddmin) over the fault lines;
2. a shorter load (halved, never before the last fault's end plus a margin);
3. shorter faults (``duration_s`` and ``restart_after_s`` halved);
4. fewer users, then fewer instances of each scalable role (halved, then one less);
5. no fault at all again (what a smaller load or topology may need none for).

A candidate counts as reproducing if one of its first ``seeds_per_candidate`` seeds (the
seed that last reproduced, then seeds derived from it, harness/seeds.py) violates the
check: a racy bug need not show on every seed. A candidate that is not a valid scenario
(a fault on a worker the smaller topology no longer has) is skipped without a run. The
budget counts runs (``--budget``) and, optionally, seconds (no run starts after it).
The result, in ``shrink-<UTC time>-<scenario>/`` beside the run: ``<scenario>-shrunk.toml``
(standalone: the implementation by absolute path, the seed that reproduced) and
``shrink.md`` (the candidates tried, which reproduced, the final one's verdict), with the
candidates' run folders.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.kinds import FAULT_KINDS
from contract.errors import SetupError
from contract.outcomes import EXIT_INTERRUPTED, VIOLATED
from contract.rundir import RunDir, RunMeta, new_folder
from harness.config import dump_toml
from harness.progress import Progress
from harness.replay import scenario_of_run
from harness.runner import Runner, RunResult
from harness.scenario import Scenario, reparse
from harness.seeds import derive_seeds

#: Seconds of load kept after the last fault ends, for the system to show what it did.
TAIL_S = 4.0
#: Fault lengths are not halved below this (seconds).
MIN_FAULT_S = 0.5


class BudgetSpent(Exception):
    """No more runs (or time) for candidates."""


@dataclass
class Trial:
    """One candidate tried: what changed, the seeds it ran on, and whether it reproduced."""

    number: int
    change: str
    seeds: list[int] = field(default_factory=list)
    reproduced_on: int | None = None
    run_dirs: list[Path] = field(default_factory=list)
    invalid: str = ""  # why the candidate is not a valid scenario (then it did not run)
    cut_short: str = ""  # why it ran on fewer seeds than planned (the budget was spent)
    interrupted: bool = False  # its last run was interrupted: whether it reproduces is not known


@dataclass
class ShrinkResult:
    run: Path
    check: str
    folder: Path
    original: dict[str, Any]
    smallest: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)
    runs_used: int = 0
    stopped: str = ""  # why the search ended early (budget, interrupted), "" when it finished
    final_run: Path | None = None  # the run that last reproduced (the original run if none did)
    exit_code: int = 0
    toml: Path | None = None
    load_alone: bool = False  # the check was violated with no fault at all


def length_params(fault: dict[str, Any]) -> tuple[str, ...]:
    """The parameters of a fault line's kind that say how long it lasts (its card's ``length``)."""
    kind = FAULT_KINDS.get(fault.get("kind", ""))
    return tuple(name for name, spec in kind.params.items() if spec.length) if kind else ()


def _fault_end(fault: dict[str, Any]) -> float:
    at = max(fault.get("at_s") or [0.0])
    return float(at) + max((float(fault.get(p) or 0.0) for p in length_params(fault)), default=0.0)


def planned_faults(meta: RunMeta) -> list[dict[str, Any]]:
    """The run's fault plan as fault lines: one per fault injected, at its time, on its target."""
    return [
        {"kind": f["kind"], "target": f["target"], "at_s": [f["at_s"]], **f.get("params", {})}
        for f in meta.get("plan") or []
    ]


def ddmin(items: list[int], reproduces: Callable[[list[int]], bool]) -> list[int]:
    """Zeller's delta debugging: a 1-minimal sublist of ``items`` that still ``reproduces``
    (``items`` itself is taken to reproduce). Each sublist is tried once: a candidate costs
    runs."""
    known: dict[tuple[int, ...], bool] = {}

    def test(subset: list[int]) -> bool:
        if tuple(subset) not in known:
            known[tuple(subset)] = reproduces(subset)
        return known[tuple(subset)]

    n = 2
    while len(items) >= 2:
        size = math.ceil(len(items) / n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for chunk in chunks:
            if test(chunk):
                items, n = chunk, 2
                break
        else:
            for i in range(len(chunks)):
                rest = [x for j, c in enumerate(chunks) if j != i for x in c]
                if len(chunks) > 2 and test(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), 2 * n)
    return items


class Shrinker:
    def __init__(
        self,
        scenario: Scenario,
        check: str,
        folder: Path,
        *,
        budget_runs: int,
        budget_s: float | None,
        seeds_per_candidate: int,
        progress: Progress,
    ) -> None:
        self.scenario = scenario
        self.check = check
        self.folder = folder
        self.budget_runs = budget_runs
        self.deadline = time.monotonic() + budget_s if budget_s is not None else None
        self.seeds_per_candidate = seeds_per_candidate
        self.progress = progress
        self.trials: list[Trial] = []
        self.runs_used = 0
        self.final_run: Path | None = None
        self.best: dict[str, Any] = {}  # the last candidate that reproduced: the smallest so far
        self.tried: set[str] = set()  # candidates already tried (their data but the seed)
        self.load_alone = False  # a candidate with no fault at all reproduced

    def _spent(self) -> str:
        if self.runs_used >= self.budget_runs:
            return f"the budget of {self.budget_runs} runs is spent"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "the time budget is spent"
        return ""

    def reproduces(self, data: dict[str, Any], change: str) -> bool:
        """Run the candidate on up to ``seeds_per_candidate`` seeds; on success its data
        takes the seed that reproduced. A candidate tried before (in an earlier pass) did not
        reproduce then, or it would be the current one: it is not run again."""
        key = json.dumps({k: v for k, v in data.items() if k != "seed"}, sort_keys=True)
        if key in self.tried:
            return False
        self.tried.add(key)
        trial = Trial(len(self.trials) + 1, change)
        try:
            candidate = reparse(self.scenario, data, where=f"shrink candidate {trial.number}")
        except SetupError as exc:
            trial.invalid = str(exc)
            self.trials.append(trial)
            self.progress.note(f"candidate {trial.number} ({change}): not a valid scenario, skipped")
            return False
        self.trials.append(trial)
        for seed in derive_seeds(candidate.seed, self.seeds_per_candidate):
            if why := self._spent():
                trial.cut_short = why
                raise BudgetSpent(why)
            self.progress.phase(
                f"shrink: candidate {trial.number} ({change}), seed {seed}; "
                f"run {self.runs_used + 1} of at most {self.budget_runs}"
            )
            data["seed"] = seed
            runner = Runner(reparse(self.scenario, data), runs_dir=self.folder, progress=self.progress)
            trial.seeds.append(seed)
            trial.run_dirs.append(runner.run.root)
            self.runs_used += 1
            try:
                result = runner.execute()
            except KeyboardInterrupt:
                result = RunResult(runner.run, EXIT_INTERRUPTED, None)
            if result.exit_code == EXIT_INTERRUPTED:
                trial.interrupted = True
                raise KeyboardInterrupt
            status = ((result.verdict or {}).get("checks", {}).get(self.check) or {}).get("status")
            if status == VIOLATED:
                trial.reproduced_on = seed
                self.final_run = runner.run.root
                self.best = copy.deepcopy(data)
                self.progress.note(f"candidate {trial.number} ({change}): reproduced on seed {seed}")
                return True
        self.progress.note(f"candidate {trial.number} ({change}): not reproduced on {len(trial.seeds)} seeds")
        return False

    # -- the steps: each takes the current data and returns it, smaller where it could --

    def fewer_faults(self, data: dict[str, Any]) -> dict[str, Any]:
        faults = data.get("faults") or []
        if len(faults) < 2:
            return data

        def test(subset: list[int]) -> bool:
            kept = ", ".join(map(str, subset))
            candidate = {**copy.deepcopy(data), "faults": [faults[n - 1] for n in subset]}
            if self.reproduces(candidate, f"faults {kept} of {len(faults)}"):
                data["seed"] = candidate["seed"]
                return True
            return False

        kept = ddmin(list(range(1, len(faults) + 1)), test)
        return {**data, "faults": copy.deepcopy([faults[n - 1] for n in kept])}

    def shorter_load(self, data: dict[str, Any]) -> dict[str, Any]:
        if (data.get("load") or {}).get("phases"):
            return data  # the phases set the load's length; they are left as they are
        duration = float(data.get("duration_s", self.scenario.duration_s))
        needed = max((_fault_end(f) for f in data.get("faults") or []), default=0.0) + TAIL_S
        while (shorter := math.ceil(max(duration / 2, needed))) < duration:
            candidate = {**copy.deepcopy(data), "duration_s": shorter}
            if not self.reproduces(candidate, f"load {duration:g} s -> {shorter:g} s"):
                break
            data, duration = candidate, shorter
        return data

    def shorter_faults(self, data: dict[str, Any]) -> dict[str, Any]:
        for i, fault in enumerate(data.get("faults") or []):
            lengths = {
                p: float(fault[p]) for p in length_params(fault) if (fault.get(p) or 0) >= 2 * MIN_FAULT_S
            }
            if not lengths:
                continue
            candidate = copy.deepcopy(data)
            candidate["faults"][i].update({p: round(v / 2, 3) for p, v in lengths.items()})
            change = ", ".join(f"{p} {v:g} -> {v / 2:g}" for p, v in lengths.items())
            if self.reproduces(candidate, f"fault {i + 1} ({fault['kind']}): {change}"):
                data = candidate
        return data

    def fewer_users(self, data: dict[str, Any]) -> dict[str, Any]:
        load = data.get("load") or {}
        if load.get("phases"):
            return data
        users = int(load.get("users", self.scenario.load.users))
        while users > 1:
            fewer = users // 2
            candidate = copy.deepcopy(data)
            candidate.setdefault("load", {})["users"] = fewer
            candidate["load"]["spawn_rate"] = max(float(load.get("spawn_rate", fewer)), float(fewer))
            if not self.reproduces(candidate, f"users {users} -> {fewer}"):
                break
            data, users = candidate, fewer
        return data

    def fewer_instances(self, data: dict[str, Any]) -> dict[str, Any]:
        for role in self.scenario.manifest.roles.values():
            if not role.scalable:
                continue
            count = int((data.get("topology") or {}).get(role.name, self.scenario.topology[role.name]))
            while count > 1:
                for fewer in dict.fromkeys([max(1, count // 2), count - 1]):  # halved, else one less
                    candidate = copy.deepcopy(data)
                    candidate.setdefault("topology", {})[role.name] = fewer
                    if self.reproduces(candidate, f"{role.name} x{count} -> x{fewer}"):
                        data, count = candidate, fewer
                        break
                else:
                    break
        return data

    def no_faults(self, data: dict[str, Any]) -> dict[str, Any]:
        if not data.get("faults"):
            return data
        candidate = {**copy.deepcopy(data), "faults": []}
        if not self.reproduces(candidate, "no fault at all"):
            return data
        self.load_alone = True
        self.progress.note(f"the load alone breaks {self.check}: it is violated with no fault at all")
        return candidate

    def one_user(self, data: dict[str, Any]) -> dict[str, Any]:
        load = data.get("load") or {}
        users = int(load.get("users", self.scenario.load.users))
        if load.get("phases") or users <= 2:  # halving tries 2 -> 1 as cheaply
            return data
        candidate = copy.deepcopy(data)
        candidate.setdefault("load", {})["users"] = 1
        return candidate if self.reproduces(candidate, f"users {users} -> 1") else data

    def search(self, data: dict[str, Any]) -> dict[str, Any]:
        # The big cheap steps first: each costs one candidate and may save most of the search.
        data = self.one_user(self.no_faults(data))
        steps = (
            self.fewer_faults, self.shorter_load, self.shorter_faults, self.fewer_users,
            self.fewer_instances, self.no_faults,
        )  # fmt: skip
        while True:
            before = copy.deepcopy(data)
            for step in steps:
                data = step(data)
            if data == before:
                return data


def _standalone(data: dict[str, Any], scenario: Scenario) -> dict[str, Any]:
    """The data as a file that works from anywhere: the implementation by absolute path."""
    out = copy.deepcopy(data)
    implementation = str(out.get("implementation", ""))
    if implementation.endswith(".toml") or "/" in implementation:
        manifest = scenario.base_manifest or scenario.manifest
        out["implementation"] = str(manifest.path)
    out["name"] = f"{scenario.name}-shrunk"
    out.pop("expect", None)  # the shrunk scenario is meant to break the check
    return out


def _describe(data: dict[str, Any], scenario: Scenario) -> str:
    load = data.get("load") or {}
    given = {r: n for r, n in (data.get("topology") or {}).items() if isinstance(n, int)}  # not start
    topology = {**scenario.topology, **given}
    return (
        f"{len(data.get('faults') or [])} fault(s), "
        f"{float(data.get('duration_s', scenario.duration_s)):g} s of load, "
        f"{load.get('users', scenario.load.users)} users, "
        + ", ".join(f"{r} x{n}" for r, n in topology.items())
        + f", seed {data.get('seed', scenario.seed)}"
    )


def _verdict_line(run: Path | None, check: str) -> str:
    if run is None:
        return "no verdict"
    try:
        verdict = RunDir(run).read_verdict()
    except SetupError:
        return "no verdict"
    entry = verdict.get("checks", {}).get(check) or {}
    return f"{verdict.get('outcome')}; {check}: {entry.get('status')} ({entry.get('summary', '')})"


def write_report(result: ShrinkResult, scenario: Scenario) -> None:
    """``shrink.md``: the search in a few lines, then every candidate tried."""
    lines = [
        f"# zchaos shrink of {result.run.name}",
        "",
        f"- check kept violated: `{result.check}`",
        f"- from: {_describe(result.original, scenario)}",
        f"- to: {_describe(result.smallest, scenario)}",
        f"- scenario written: `{result.toml.name if result.toml else '-'}`",
        f"- runs used: {result.runs_used}; candidates tried: {len(result.trials)}, "
        f"reproduced: {sum(t.reproduced_on is not None for t in result.trials)}",
        f"- search {'ended early: ' + result.stopped if result.stopped else 'finished'}",
        *(
            [
                f"- **the load alone breaks the system**: `{result.check}` is violated with no fault at all; "
                "the faults are not to blame (fewer users or a slower pace is where to look)"
            ]
            if result.load_alone
            else []
        ),
        f"- final verdict ({result.final_run.name if result.final_run else '-'}): "
        f"{_verdict_line(result.final_run, result.check)}",
        f"- rerun it: `zchaos run {result.toml}`" if result.toml else "",
        "",
        "| # | candidate | seeds | reproduced |",
        "| --- | --- | --- | --- |",
    ]
    for t in result.trials:
        if t.invalid:
            outcome = f"invalid: {t.invalid}"
        elif t.reproduced_on is not None:
            outcome = f"yes, seed {t.reproduced_on}"
        elif t.interrupted:
            outcome = f"interrupted (on seed {t.seeds[-1]}): not known"
        elif t.cut_short:
            outcome = f"{'not run' if not t.seeds else 'no'}: {t.cut_short}"
        else:
            outcome = "no"
        lines.append(f"| {t.number} | {t.change} | {', '.join(map(str, t.seeds))} | {outcome} |")
    (result.folder / "shrink.md").write_text("\n".join(lines) + "\n")


def violated_check(run: RunDir, check: str | None) -> str:
    """The check to keep violated: ``check``, or the run's first violated one (of a verdict
    that stands: a stale one may not be the history's)."""
    checks = run.read_verdict(fresh=True).get("checks") or {}
    violated = [name for name, c in checks.items() if c.get("status") == VIOLATED]
    if check is None:
        if not violated:
            raise SetupError("no check was violated in this run: there is nothing to shrink", where=run.root)
        return violated[0]
    if check not in violated:
        raise SetupError(
            f"{check!r} was not violated in this run (violated: {', '.join(violated) or 'none'})",
            where=run.root,
        )
    return check


def shrink_run(
    run_path: Path,
    *,
    budget_runs: int = 30,
    budget_s: float | None = None,
    seeds_per_candidate: int = 3,
    check: str | None = None,
    out_dir: Path | None = None,
    progress: Progress | None = None,
) -> ShrinkResult:
    """Shrink the violated run at ``run_path``; write the smallest scenario and shrink.md."""
    progress = progress or Progress()
    if budget_runs < 1 or seeds_per_candidate < 1:
        raise SetupError("--budget and --seeds-per-candidate must be at least 1", where="zchaos shrink")
    run = RunDir(run_path)
    scenario, notes = scenario_of_run(run_path)
    for note in notes:
        progress.note(note)
    check = violated_check(run, check)
    data = copy.deepcopy(scenario.source)
    data["seed"] = scenario.seed
    # The candidates' runs go by a name of their own: in the results store (a rebuild indexes
    # shrink-*/RUN too) they must not stand for the scenario they were cut from.
    data["name"] = f"{scenario.name}-shrink"
    data["faults"] = planned_faults(run.read_meta())
    try:
        reparse(scenario, data, where="the run's fault plan")
    except SetupError:
        data["faults"] = copy.deepcopy(scenario.source.get("faults", []))  # as the scenario says
    folder = new_folder(out_dir or run_path.parent, prefix="shrink", name=scenario.name)
    progress.phase(
        f"shrink {run_path.name}: keep {check} violated; from {_describe(data, scenario)}; "
        f"budget {budget_runs} runs" + (f" or {budget_s:g} s" if budget_s is not None else "")
    )
    shrinker = Shrinker(
        scenario,
        check,
        folder,
        budget_runs=budget_runs,
        budget_s=budget_s,
        seeds_per_candidate=seeds_per_candidate,
        progress=progress,
    )
    result = ShrinkResult(run_path, check, folder, copy.deepcopy(data), data)
    shrinker.best = copy.deepcopy(data)  # the run itself reproduced it
    try:
        shrinker.search(copy.deepcopy(data))
    except BudgetSpent as exc:
        result.stopped = str(exc)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
        result.exit_code = EXIT_INTERRUPTED
    # Every candidate that reproduced became the current one: the last is the smallest.
    result.smallest = smallest = shrinker.best

    result.trials, result.runs_used = shrinker.trials, shrinker.runs_used
    result.load_alone = shrinker.load_alone
    result.final_run = shrinker.final_run or run_path
    result.toml = folder / f"{scenario.name}-shrunk.toml"
    header = (
        f"# Shrunk by `zchaos shrink {run_path}`: still violates {check}.\n"
        f"# From {_describe(data, scenario)};\n# to   {_describe(smallest, scenario)}.\n"
    )
    result.toml.write_text(header + dump_toml(_standalone(smallest, scenario)))
    write_report(result, scenario)
    progress.phase(f"shrink done: {_describe(smallest, scenario)}")
    if result.load_alone:
        print(f"the load alone breaks the system: {check} is violated with no fault at all")
    print(f"smallest scenario: {result.toml}\nshrink report: {folder / 'shrink.md'}")
    return result
