"""The exploration: generated runs one after the other, a corpus of the ones that showed
something new, and the findings, each written as a scenario that replays it.

``explore`` makes ``runs/explore-<UTC time>-<name>/`` and, until the budget (runs, time)
is spent, runs one generated scenario after another in it, each through the runner like
any scenario (its own processes, ports and teardown; its report in this process's one
Spark session, which the command stops at its end, harness/cli.py). After each run:

- its signature (signature.py) is compared with every behaviour seen; a run with a
  feature never seen before enters the corpus;
- each violated check is a finding, deduplicated by (check, kind of problem, fault
  kinds); a new one is written as ``findings/<n>-<check>.toml``, the scenario that ran
  (standalone: the implementation by name or absolute path, its seed), with the command
  that runs it again;
- with ``--confirm K``, a new finding's scenario is run on K more seeds ("reproduced in k
  of K+1", the finding's own run counted), and with ``--shrink RUNS`` the run is shrunk
  (harness/shrink.py, one seed per candidate) to the smallest scenario found in that budget;
- ``explore.json`` is written again (the budget, the corpus, the findings, each run's
  signature and outcome), so an interrupted exploration keeps what it learnt, and
  ``explore.html`` (the findings first, with their scenarios and reports, then behaviours
  and findings over the runs as a plot, then every run).

``--strategy guided`` mutates a corpus entry (generate.py ``mutate``) once the corpus holds
one, with probability GUIDED_MUTATE times the share of the pairs of fault kind and role or
link it has tried (``mutate_share``: breadth first, then depth), and draws a fresh scenario
otherwise; ``random`` always draws fresh ones, the baseline guided is measured against.
Which entry: by its energy, more for one whose mutations showed new behaviours, less for
one whose did not. An entry with several faults first runs each of its faults in focus
alone, once (``to_isolate``, generate.py ``isolate``; the entry's ``isolated`` pairs), then
is mutated: a trigger's bug hid beside two or three other faults (mdp-idle-disconnect: a
worker restarted while idle, with a link cut that made ``no_lost`` excuse the lost
request). A run whose ``no_lost`` excused losses as dropped by a link fault is a near miss:
guided's next run is the same scenario without its faults that lose data (``followups``,
generate.py ``unmask``), before any draw or mutation. A pair of a pause (a freeze) run for
the first time is run next alone below and above the system's expiry (generate.py
``bracket``), where the manifest gives one. (With GUIDED_MUTATE from its first
runs on, its corpus kept what those drew: of tag-ring's 11 first runs, 6 mutated 3 entries
with link faults, and 8 of its 44 pairs had been tried.)

The exploration counts how often each pair of a fault kind and a role or link ran
(``coverage``, generate.py ``pair_of``; in explore.json, so ``--resume`` keeps it), and each
pair with the context its fault started in (``coverage_keys``: while the load was quiet or
busy; a pair's next fresh draw starts in the one it ran in less). Guided's
draws and mutations take the pairs drawn least often first (every pair once before any
twice), and a run that tried a pair for the first time shows the feature
``pair:KIND:ROLE-OR-LINK``, so it enters the corpus and its mutations change that fault
first (``focus_of``). ``random`` draws as it always did, uniformly and without memory (1 to
4 faults alike, on any targets, where guided has three or four more often, each on a role or
link of its own: generate.py GUIDED_FAULT_COUNT_WEIGHTS):
it is the baseline of a random nemesis, so guided's lead over it is the coverage, the fault
counts and the corpus together.

``--resume DIR`` goes on with an exploration from its explore.json (an interrupted one, or
one whose budget ran out): its corpus, behaviours and findings, its target and settings;
the runs after it are drawn from a generator seeded with its seed and its count of runs.
``--seed`` and ``--kinds`` given with it change those for the runs to come (recorded in
explore.json's ``resumes``); the corpus keeps its scenarios as they are.

Exit: 1 with a finding, 0 without ("explored N runs, M behaviours, no violation", never
"passed": an exploration shows what it tried, not that nothing is wrong), 2 for bad
input, 130 when interrupted (Ctrl-C, SIGTERM: the run in progress is torn down by the
runner, explore.json written with what finished). A run whose load generator crashed
(Locust dead of a signal: ours, not the system's) is counted incomplete, with the crash in
its record, and the exploration goes on; CRASHES_IN_A_ROW of them end it with exit 2.
"""

from __future__ import annotations

import html
import json
import random
import re
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.kinds import FAULT_KINDS
from contract.errors import LoadGeneratorCrashed, SetupError
from contract.outcomes import EXIT_INTERRUPTED, INCOMPLETE, UNKNOWN, VIOLATED
from contract.rundir import new_folder
from harness.config import dump_toml
from harness.explore.generate import (
    RUN_S,
    Space,
    bracket,
    coverage_keys,
    fault_kinds_of,
    fault_pair,
    generate,
    isolate,
    lossless_and_lossy,
    make_space,
    mutate,
    pair_of,
    pairs,
    pauses,
    sides_to_bracket,
    to_scenario,
    unmask,
    with_room_to_judge,
)
from harness.explore.signature import findings, signature, unjudged
from harness.manifest import load_manifest
from harness.progress import Progress
from harness.runner import Runner
from harness.scenario import load_scenario, reparse, with_seed
from harness.seeds import derive_seeds
from reports.store import store_path

STRATEGIES = ("guided", "random")
#: The chance a guided step mutates a corpus entry rather than drawing a fresh scenario, once
#: every pair has been tried. Half: with 0.75, a pair was drawn in fewer of 30 runs than by
#: random (bench/explore_draws.py), the corpus's mutations keeping the faults drawn first.
GUIDED_MUTATE = 0.5
#: The signature features that name a fault kind (signature.py): a new one points at the fault.
FAULT_FEATURES = ("recovery", "retries", "abandons", "pair")
#: explore.json's format.
FORMAT = 1
#: Crashes of the load generator in a row that end an exploration (exit 2): one is a run
#: counted incomplete (ping-guard, 2026-12-04: Locust aborted in libzmq under a cut link, and
#: the exploration stopped at its run 12); three are the set-up.
CRASHES_IN_A_ROW = 3


@dataclass
class Finding:
    """A violated check not seen before: what broke, in which run, and its scenario file."""

    number: int
    check: str
    problem: str
    fault_kinds: tuple[str, ...]
    run_index: int
    run_dir: str
    scenario: str  # the written TOML
    summary: str = ""
    #: runs of the written scenario on other seeds that violated the check, and runs in
    #: all, the finding's own run included (None: not tried, --confirm 0)
    reproduced: tuple[int, int] | None = None
    minimal: str = ""  # the shrunk scenario (--shrink), when a shrink ran

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "check": self.check,
            "problem": self.problem,
            "fault_kinds": list(self.fault_kinds),
            "run": self.run_index,
            "run_dir": self.run_dir,
            "scenario": self.scenario,
            "replay": f"zchaos run {shlex.quote(self.scenario)}",
            "summary": self.summary,
            "minimal": self.minimal or None,
            "reproduced": None
            if self.reproduced is None
            else {"violated": self.reproduced[0], "runs": self.reproduced[1]},
        }


@dataclass
class Exploration:
    """An exploration's state: every run's record, the corpus, the findings."""

    folder: Path
    space: Space
    seed: int
    strategy: str
    runs_budget: int | None
    time_budget_s: float | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    corpus: list[dict[str, Any]] = field(default_factory=list)  # {"run": i, "scenario": data, "new": [...]}
    seen: set[str] = field(default_factory=set)
    found: dict[tuple[str, str, tuple[str, ...]], Finding] = field(default_factory=dict)
    interrupted: bool = False
    #: each --resume that changed the draws: {"after_run": n, "seed": s, "kinds": [...]}
    resumes: list[dict[str, Any]] = field(default_factory=list)
    #: how many runs had a fault of each pair (kind, role or link): generate.py ``pair_of``
    coverage: Counter[str] = field(default_factory=Counter)
    #: guided's next runs, before any draw, each from a run's scenario: without the faults
    #: that excused its losses ({"run": i, "scenario": data}; generate.py ``unmask``), or
    #: its pause ``fault`` (index) alone on a ``side`` of the expiry (``"step":
    #: "bracket"``; generate.py ``bracket``)
    followups: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return 1 if self.found else 0

    def summary(self) -> str:
        n, m = len(self.runs), len(self.seen)
        head = f"explored {n} run{'s' * (n != 1)}, {m} behaviours"
        if self.interrupted:
            head = "interrupted: " + head
        if not self.found:
            return f"{head}, no violation"
        return f"{head}, {len(self.found)} finding{'s' * (len(self.found) != 1)}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "implementation": self.space.manifest.name,
            "manifest": str(self.space.manifest.path),
            "seed": self.seed,
            "strategy": self.strategy,
            "kinds": list(self.space.kinds),
            "run_s": self.space.duration_s,
            "calibrated": self.space.calibrated,
            "network": self.space.network,
            "budget": {"runs": self.runs_budget, "time_s": self.time_budget_s},
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "interrupted": self.interrupted,
            "summary": self.summary(),
            "behaviours": sorted(self.seen),
            "findings": [f.as_dict() for f in self.found.values()],
            "corpus": self.corpus,
            "resumes": self.resumes,
            "coverage": dict(sorted(self.coverage.items())),
            "followups": self.followups,
            "runs": self.runs,
        }

    def write(self) -> Path:
        """explore.json and explore.html, written again whole."""
        path = self.folder / "explore.json"
        record = self.as_dict()
        path.write_text(json.dumps(record, indent=2))
        (self.folder / "explore.html").write_text(explore_page(record, self.folder))
        return path


def _link(target: str, folder: Path, text: str) -> str:
    """A relative link from the exploration's folder when ``target`` lies in it."""
    where = Path(target)
    href = where.relative_to(folder) if where.is_relative_to(folder) else where
    return f'<a href="{html.escape(str(href))}">{html.escape(text)}</a>'


def _plot(runs: list[dict[str, Any]]) -> str:
    """Behaviours and findings seen after each run, as an inline SVG of two step lines."""
    behaviours, findings, seen, found = [], [], set(), set()
    for run in runs:
        seen |= set(run.get("signature") or [])
        found |= set(run.get("findings") or [])
        behaviours.append(len(seen))
        findings.append(len(found))
    if not runs:
        return "<p>no run yet</p>"
    width, height, top = 600, 200, max(max(behaviours), 1)

    def points(values: list[int]) -> str:
        step = width / max(len(values), 1)
        return " ".join(f"{(i + 1) * step:.0f},{height - v * height / top:.0f}" for i, v in enumerate(values))

    return (
        f'<svg id=plot width="{width + 40}" height="{height + 30}" '
        f'viewBox="-30 -10 {width + 40} {height + 30}">'
        f'<polyline fill="none" stroke="#1f5fbf" stroke-width="2" points="0,{height} {points(behaviours)}"/>'
        f'<polyline fill="none" stroke="#b00020" stroke-width="2" points="0,{height} {points(findings)}"/>'
        f'<text x="-25" y="5">{top}</text><text x="-25" y="{height}">0</text>'
        f'<text x="{width - 40}" y="{height + 18}">run {len(runs)}</text></svg>'
        '<p><span style="color:#1f5fbf">behaviours seen</span>, '
        '<span style="color:#b00020">findings</span>, after each run</p>'
    )


def explore_page(record: dict[str, Any], folder: Path) -> str:
    """explore.html: the findings first (what broke, the scenario that replays it, its run's
    report), then behaviours and findings over the runs, then every run."""
    items = []
    for f in record["findings"]:
        again = (
            f" (reproduced in {f['reproduced']['violated']} of {f['reproduced']['runs']} seeds)"
            if f.get("reproduced")
            else ""
        )
        minimal = (
            f", shrunk: {_link(f['minimal'], folder, Path(f['minimal']).name)}" if f.get("minimal") else ""
        )
        items.append(
            f"<li><b>{html.escape(f['check'])}</b> violated: "
            f"{html.escape(f.get('summary') or f['problem'])}; "
            f"faults {html.escape(', '.join(f['fault_kinds']) or 'none')}, "
            f"run {f['run']}{html.escape(again)}. "
            f"Scenario: {_link(f['scenario'], folder, Path(f['scenario']).name)}{minimal}; "
            f"{_link(str(Path(f['run_dir']) / 'report.html'), folder, 'report')}; "
            f"<code>{html.escape(f['replay'])}</code></li>"
        )
    rows = "".join(
        f"<tr><td>{r['run']}</td><td class={html.escape(r['outcome'])}>{html.escape(r['outcome'])}"
        + (f"<br><small>{html.escape(r['error'])}</small>" if r.get("error") else "")
        + "</td>"
        f"<td>{html.escape(r.get('origin', ''))}</td><td>{html.escape('; '.join(r.get('faults') or []))}</td>"
        f"<td>{len(r.get('new') or [])}</td>"
        f"<td>{_link(str(Path(r['run_dir']) / 'report.html'), folder, 'report')}</td></tr>"
        for r in record["runs"]
    )
    title = html.escape(f"explore {record['implementation']}: {record['summary']}")
    return (
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left}"
        ".passed{color:#176f2c}.violated{color:#b00020;font-weight:bold}"
        ".unknown,.incomplete,.interrupted{color:#8a6100}</style>"
        f"<h1>{title}</h1><p>{html.escape(record['strategy'])}, seed {record['seed']}, kinds "
        f"{html.escape(', '.join(record['kinds']))}, {record['run_s']:g} s of load a run</p>"
        f"<h2>Findings</h2><ol id=findings>{''.join(items) or '<li>none: no violation</li>'}</ol>"
        f"<h2>Behaviours and findings over the runs</h2>{_plot(record['runs'])}"
        "<h2>Runs</h2><table id=runs><tr><th>run</th><th>outcome</th><th>from</th><th>faults</th>"
        f"<th>new behaviours</th><th></th></tr>{rows}</table>"
    )


def parse_duration(text: str) -> float:
    """``30m``, ``2h``, ``90s`` or ``600`` (seconds) as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise SetupError(f"expected a time such as 30m, 2h, 90s or 600, got {text!r}", where="--time")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def energy(entry: dict[str, Any]) -> float:
    """How much a corpus entry is mutated (AFL's energy, simply): the more of its mutations
    showed something new, the more; the more of them showed nothing, the less. A new entry
    starts at 1; one whose four mutations all showed nothing is at 1/5."""
    return (1 + entry.get("fruitful", 0)) / (1 + entry.get("tried", 0))


def _pick(corpus: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    return rng.choices(corpus, weights=[energy(e) for e in corpus])[0]


def focus_of(features: list[str]) -> set[str]:
    """The fault kinds a run's new features name (``recovery:KIND:..``, ``retries:KIND:..``,
    ``abandons:KIND:..``, ``pair:KIND:..``): the faults that showed something new or were
    tried where none had been before, which its mutations change."""
    return {f.split(":")[1] for f in features if f.split(":")[0] in FAULT_FEATURES and f.count(":") >= 2}


def mutate_share(state: Exploration) -> float:
    """Guided's chance to mutate a corpus entry rather than draw afresh: GUIDED_MUTATE times
    the share of the space's pairs (generate.py ``pairs``) its runs have tried. Fresh draws
    take the pairs not tried yet; once every pair has been, the corpus steers."""
    every = pairs(state.space)
    if not every:
        return GUIDED_MUTATE
    return GUIDED_MUTATE * sum(1 for p in every if state.coverage[p]) / len(every)


def to_isolate(space: Space, entry: dict[str, Any], focus: set[str]) -> int | None:
    """The fault of a corpus entry to try alone next (generate.py ``isolate``): the first of
    its faults in focus whose pair it has not tried alone yet, where it has other faults
    (None: none left, it is mutated). Each such fault once, before the entry's mutations."""
    faults = entry["scenario"].get("faults") or []
    if len(faults) < 2:
        return None
    done = set(entry.get("isolated") or [])
    return next(
        (i for i, f in enumerate(faults) if f["kind"] in focus and fault_pair(space, f) not in done), None
    )


def next_scenario(state: Exploration, rng: random.Random, name: str) -> tuple[dict[str, Any], str]:
    """The next run's scenario data and how it came about (fresh, or a mutation of which
    run, changing most often a fault that showed something new); a mutated entry counts the
    try (``_learn`` counts what it showed). Guided draws the pairs of its coverage least
    drawn first; random draws without memory."""
    drawn = Counter(state.coverage) if state.strategy == "guided" else None
    while drawn is not None and state.followups:
        step = state.followups.pop(0)
        if step.get("step") == "bracket":
            made = bracket(state.space, step["scenario"], step["fault"], step["side"], rng, name=name)
        else:
            made = unmask(state.space, step["scenario"], name=name)
        if made is not None:
            return made[0], f"run {step['run']}: {made[1]}"
    if drawn is not None and state.corpus and rng.random() < mutate_share(state):
        parent = _pick(state.corpus, rng)
        parent["tried"] = parent.get("tried", 0) + 1
        focus = focus_of(parent.get("new") or [])
        alone = to_isolate(state.space, parent, focus)
        if alone is not None:
            data, change = isolate(state.space, parent["scenario"], alone, rng, name=name, drawn=drawn)
            kept = parent["scenario"]["faults"][alone]
            parent.setdefault("isolated", []).append(fault_pair(state.space, kept))
        else:
            data, change = mutate(state.space, parent["scenario"], rng, name=name, focus=focus, drawn=drawn)
        return data, f"run {parent['run']}: {change}"
    return generate(state.space, rng, name=name, drawn=drawn), "fresh"


def _write_finding(state: Exploration, finding: Finding, data: dict[str, Any]) -> None:
    folder = state.folder / "findings"
    folder.mkdir(exist_ok=True)
    path = folder / f"{finding.number}-{finding.check}.toml"
    kinds = ", ".join(finding.fault_kinds) or "no fault"
    text = (
        f"# zchaos explore finding {finding.number}: {finding.check} violated"
        + (f" ({finding.problem})" if finding.problem else "")
        + f"\n# in run {finding.run_index} ({finding.run_dir}), with {kinds}"
        + f"\n# run it again: zchaos run {shlex.quote(str(path))}\n"
        + dump_toml({**data, "name": data["name"].replace("explore-", f"finding-{finding.check}-", 1)})
    )
    path.write_text(text)
    finding.scenario = str(path)


def explore(
    target: str | None,
    *,
    runs: int | None = None,
    time_s: float | None = None,
    seed: int | None = None,
    strategy: str = "guided",
    kinds: tuple[str, ...] = (),
    run_s: float = RUN_S,
    network: str | None = None,
    runs_dir: Path = Path("runs"),
    calibrate: bool = True,
    confirm: int = 0,
    shrink: int = 0,
    until_finding: bool = False,
    resume: Path | None = None,
    progress: Progress | None = None,
) -> Exploration:
    """Explore ``target`` (a manifest: a built-in's name or a path) within the budget;
    ``until_finding``: stop after the run that gave the first finding. ``resume``: an
    exploration's folder to go on with, its corpus, behaviours and findings as its
    explore.json left them (its target, seed, strategy, kinds and run length too; the
    budget given is for the runs to come; a ``seed`` or ``kinds`` given steer the runs to
    come, and explore.json's ``resumes`` says from which run on). ``network``: "proxy" or
    "hosts" for every run (default: the manifest's own)."""
    if strategy not in STRATEGIES:
        raise SetupError(f"expected one of {', '.join(STRATEGIES)}, got {strategy!r}", where="--strategy")
    if runs is not None and runs < 1:
        raise SetupError(f"must be at least 1, got {runs}", where="--runs")
    for flag, value in (("--confirm", confirm), ("--shrink", shrink)):
        if value < 0:
            raise SetupError(f"must be 0 or more, got {value}", where=flag)
    if runs is None and time_s is None:
        raise SetupError("give a budget: --runs N, --time 30m, or both", where="zchaos explore")
    if (target is None) == (resume is None):
        raise SetupError("give a target (a manifest) or --resume DIR, one of them", where="zchaos explore")
    progress = progress or Progress()
    if resume is not None:
        state = resumed(resume, runs, time_s)
        # A seed or kinds given with --resume steer the runs to come (the corpus keeps its
        # scenarios, whatever their kinds); explore.json records from which run on.
        draws = state.resumes[-1]["seed"] if state.resumes else state.seed
        if seed is not None or kinds:
            old = state.space
            if kinds:
                state.space = make_space(
                    old.manifest, kinds=kinds, duration_s=old.duration_s, calibrated=old.calibrated,
                    network=old.network,
                )  # fmt: skip
            draws = draws if seed is None else seed
            kinds_now = list(state.space.kinds)
            state.resumes.append({"after_run": len(state.runs), "seed": draws, "kinds": kinds_now})
        rng = random.Random(f"zchaos-explore:{draws}:{len(state.runs)}")
        progress.note(
            f"resuming {resume}: {len(state.runs)} runs, {len(state.seen)} behaviours, "
            f"{len(state.corpus)} in the corpus, {len(state.found)} findings"
        )
    else:
        assert target is not None
        manifest = load_manifest(target)
        space = make_space(manifest, kinds=kinds, duration_s=run_s, calibrated=calibrate, network=network)
        seed = 1 if seed is None else seed
        rng = random.Random(f"zchaos-explore:{seed}")
        folder = new_folder(runs_dir, prefix="explore", name=re.sub(r"[^A-Za-z0-9_.-]", "-", manifest.name))
        state = Exploration(folder, space, seed, strategy, runs, time_s)
    space = state.space
    calibration = None
    if space.calibrated:
        from harness.calibrate import calibrated

        first = to_scenario(space, generate(space, random.Random(state.seed), name="explore-calibration"))
        calibration = calibrated(
            first, runs_dir if resume is None else state.folder.parent, progress
        ).calibration
    store = store_path(state.folder.parent)
    progress.note(
        f"exploring {space.manifest.name} ({state.strategy}, seed {state.seed}, "
        f"kinds {', '.join(space.kinds)}) into {state.folder}"
    )
    state.write()
    done = crashes = 0
    try:
        while runs is None or done < runs:
            elapsed = time.monotonic() - state.started
            if time_s is not None and elapsed >= time_s:
                break
            done += 1
            index = len(state.runs) + 1
            data, origin = next_scenario(state, rng, "explore")
            data = with_room_to_judge(space, data, calibration)
            scenario = to_scenario(space, data, calibration)
            progress.phase(f"explore run {index} ({origin}): {data['description']}")
            runner = Runner(scenario, runs_dir=state.folder, progress=progress, store=store)
            try:
                result = runner.execute()
            except LoadGeneratorCrashed as exc:
                crashes += 1
                if crashes >= CRASHES_IN_A_ROW:
                    raise
                _learn(state, index, data, origin, str(runner.run.root), None)
                said = exc.message.splitlines()
                state.runs[-1].update(outcome=INCOMPLETE, error=" ".join(said[:1] + said[-1:]))
                progress.warn(
                    f"explore run {index}: zchaos's load generator crashed, not the system ({said[-1]}): "
                    "counted incomplete, the exploration goes on"
                )
                state.write()
                continue
            crashes = 0
            if result.exit_code == EXIT_INTERRUPTED:
                state.interrupted = True
                state.runs.append({"run": index, "run_dir": str(result.run.root), "outcome": "interrupted"})
                break
            before = len(state.found)
            _learn(state, index, data, origin, str(result.run.root), result.verdict)
            state.write()
            for finding in list(state.found.values())[before:]:
                if confirm and not _confirm(state, finding, calibration, confirm, progress, store):
                    break
                if shrink and not _shrink(state, finding, shrink, progress):
                    break
            progress.note(_progress_line(state, done, runs, time_s))
            state.write()
            if state.interrupted or (until_finding and state.found):
                break
    except KeyboardInterrupt:  # between runs, or in a report: the runs done are kept
        state.interrupted = True
    finally:  # also when a run could not be set up (SetupError, exit 2): what finished is kept
        state.write()
    return state


def resumed(folder: Path, runs: int | None, time_s: float | None) -> Exploration:
    """The exploration of ``folder`` as its explore.json left it, to go on with."""
    path = folder / "explore.json"
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise SetupError("not an exploration's folder (it has no explore.json)", where=folder) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise SetupError(f"cannot read it: {exc}", where=path) from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise SetupError(f"not an explore.json of format {FORMAT}", where=path)
    try:
        space = make_space(
            load_manifest(record["manifest"]),
            kinds=tuple(record["kinds"]),
            duration_s=float(record["run_s"]),
            calibrated=bool(record["calibrated"]),
            network=str(record.get("network") or "proxy"),  # explorations before hosts ran through the proxy
        )
        state = Exploration(folder, space, int(record["seed"]), record["strategy"], runs, time_s)
        state.runs = list(record["runs"])
        state.corpus = list(record["corpus"])
        state.seen = set(record["behaviours"])
        state.resumes = list(record.get("resumes") or [])
        state.followups = list(
            record.get("followups") or record.get("unmasking") or []
        )  # (its name before brackets)
        state.coverage = (
            Counter(record["coverage"]) if "coverage" in record else _coverage_of(space, state.runs)
        )
        for f in record["findings"]:
            finding = Finding(
                f["number"], f["check"], f["problem"], tuple(f["fault_kinds"]), f["run"], f["run_dir"],
                f["scenario"], f.get("summary", ""), None, f.get("minimal") or "",
            )  # fmt: skip
            if f.get("reproduced"):
                finding.reproduced = (f["reproduced"]["violated"], f["reproduced"]["runs"])
            state.found[(finding.check, finding.problem, finding.fault_kinds)] = finding
    except (KeyError, TypeError, ValueError) as exc:
        raise SetupError(f"is damaged ({exc!r} missing or wrong)", where=path) from None
    return state


def _coverage_of(space: Space, runs: list[dict[str, Any]]) -> Counter[str]:
    """The coverage of an explore.json written before it kept one, from its runs' faults
    (``KIND TARGET at T s``)."""
    coverage: Counter[str] = Counter()
    for run in runs:
        for fault in run.get("faults") or []:
            kind, target = fault.split()[:2]
            if kind in FAULT_KINDS and (
                target in space.links or any(target in i for i in space.processes.values())
            ):
                coverage[pair_of(space, kind, target)] += 1
    return coverage


def _confirm(
    state: Exploration,
    finding: Finding,
    calibration: Any,
    count: int,
    progress: Progress,
    store: Path,
) -> bool:
    """Run a new finding's written scenario file, read back as ``zchaos run`` reads it, on
    ``count`` more seeds (harness/seeds.py's, derived from its own) and record in how many
    the check broke again: a racy bug shows on some. False when interrupted."""
    scenario = load_scenario(finding.scenario)
    if calibration is not None:
        scenario = reparse(scenario, scenario.source, calibration=calibration)
    violated = 1  # the finding's own run
    for n, seed in enumerate(derive_seeds(scenario.seed, count + 1)[1:], start=2):
        progress.phase(f"finding {finding.number}: {finding.check} again, seed {seed} ({n} of {count + 1})")
        result = Runner(
            with_seed(scenario, seed), runs_dir=state.folder, progress=progress, store=store
        ).execute()
        if result.exit_code == EXIT_INTERRUPTED:
            state.interrupted = True
            return False
        checks = (result.verdict or {}).get("checks") or {}
        violated += (checks.get(finding.check) or {}).get("status") == VIOLATED
        finding.reproduced = (violated, n)
    return True


def _shrink(state: Exploration, finding: Finding, budget: int, progress: Progress) -> bool:
    """Shrink a new finding's run (harness/shrink.py, one seed a candidate, ``budget`` runs)
    into findings/; False when interrupted."""
    from harness.shrink import shrink_run

    result = shrink_run(
        Path(finding.run_dir),
        budget_runs=budget,
        seeds_per_candidate=1,
        check=finding.check,
        out_dir=state.folder / "findings",
        progress=progress,
    )
    if result.exit_code == EXIT_INTERRUPTED:
        state.interrupted = True
        return False
    finding.minimal = str(result.toml) if result.toml else ""
    return True


def _learn(
    state: Exploration,
    index: int,
    data: dict[str, Any],
    origin: str,
    run_dir: str,
    verdict: dict[str, Any] | None,
) -> None:
    """What a run adds: its record, a corpus entry if it showed something new, its findings."""
    outcome = (verdict or {}).get("outcome") or UNKNOWN
    pairs = [fault_pair(state.space, f) for f in data.get("faults") or []]
    features = (
        signature(verdict) | {f"pair:{p.replace(' ', ':', 1)}" for p in pairs} if verdict else frozenset()
    )
    bracketed = bracket_later(state, index, data)
    state.coverage.update(coverage_keys(state.space, data))
    new = sorted(features - state.seen)
    state.seen |= features
    record: dict[str, Any] = {
        "run": index,
        "origin": origin,
        "run_dir": run_dir,
        "outcome": outcome,
        "faults": [f"{f['kind']} {f['target']} at {f['at_s'][0]:g} s" for f in data.get("faults") or []],
        "signature": sorted(features),
        "new": new,
        "findings": [],
    }
    why = unjudged(verdict or {})
    if why:
        record["unjudged"] = why  # not a finding, whatever it violated: it may be run again
    excused = (((verdict or {}).get("checks") or {}).get("no_lost") or {}).get("figures") or {}
    if (
        state.strategy == "guided"
        and excused.get("lost_in_transit")
        and lossless_and_lossy(data)[0]
        and not why
    ):
        state.followups.append({"run": index, "scenario": data})
    if new:
        # a pause it brackets runs alone there: not isolated again (``to_isolate``)
        state.corpus.append(
            {"run": index, "scenario": data, "new": new, **({"isolated": bracketed} if bracketed else {})}
        )
        parent = next((e for e in state.corpus if origin.startswith(f"run {e['run']}:")), None)
        if parent is not None:
            parent["fruitful"] = parent.get("fruitful", 0) + 1
    checks = (verdict or {}).get("checks") or {}
    for key in findings(verdict or {}, fault_kinds_of(data)):
        check, problem, kinds = key
        if key in state.found:
            record["findings"].append(state.found[key].number)
            continue
        finding = Finding(
            len(state.found) + 1, check, problem, kinds, index, run_dir, "", checks[check].get("summary", "")
        )
        _write_finding(state, finding, data)
        state.found[key] = finding
        record["findings"].append(finding.number)
    state.runs.append(record)


def bracket_later(state: Exploration, index: int, data: dict[str, Any]) -> list[str]:
    """Guided's brackets of run ``index`` (``data``), called before its coverage is
    counted: each pause (generate.py ``pauses``) whose pair no run had before is run alone
    below and above the system's expiry (``sides_to_bracket``: where it ran alone, on the
    other side only), after the follow-ups already due. The pairs so
    bracketed (none by random, nor without an expiry)."""
    if state.strategy != "guided" or not state.space.expiry_s:
        return []
    bracketed: dict[str, int] = {}
    for i, fault in enumerate(data.get("faults") or []):
        pair = fault_pair(state.space, fault)
        if pauses(FAULT_KINDS[fault["kind"]]) and not state.coverage[pair]:
            bracketed.setdefault(pair, i)
    expiry = state.space.expiry_s
    state.followups += [
        {"run": index, "scenario": data, "step": "bracket", "fault": i, "side": side}
        for i in bracketed.values()
        for side in sides_to_bracket(data, i, expiry)
    ]
    return list(bracketed)


def _progress_line(state: Exploration, done: int, runs: int | None, time_s: float | None) -> str:
    left = []
    if runs is not None:
        left.append(f"{runs - done} runs")
    if time_s is not None:
        left.append(f"{max(0.0, time_s - (time.monotonic() - state.started)) / 60:.1f} min")
    record = state.runs[-1]
    return (
        f"explore: run {record['run']} {record['outcome']}, {len(record['new'])} new behaviours; "
        f"{len(state.runs)} runs, {len(state.seen)} behaviours, {len(state.corpus)} in the corpus, "
        f"{len(state.found)} findings; left: {' or '.join(left)}"
    )


def print_result(state: Exploration) -> None:
    """The terminal's end of an exploration: the summary line, then each finding."""
    print(f"\n{state.space.manifest.name}: {state.summary()} ({state.folder / 'explore.json'})")
    for f in state.found.values():
        kinds = ", ".join(f.fault_kinds) or "no fault"
        again = f"; reproduced in {f.reproduced[0]} of {f.reproduced[1]} seeds" if f.reproduced else ""
        print(f"  finding {f.number}: {f.check} violated ({f.summary})")
        print(f"    in run {f.run_index}, faults: {kinds}{again}")
        print(f"    replay: zchaos run {shlex.quote(f.scenario)}")
        if f.minimal:
            print(f"    shrunk: zchaos run {shlex.quote(f.minimal)}")
