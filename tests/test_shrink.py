"""Shrink (harness/shrink.py): delta debugging over a run's fault plan, and a violated
three-fault run of a subject whose bug needs only a worker kill shrunk to that one kill and
a shorter load, whose written scenario violates the same check again.

The subject is a user's MDP broker (tests/blackbox/mdp_broker.py, pyzmq only, by path) with
``--bug drop-dead-workers-request``, behind clients that never resend: a busy worker's kill
loses its request (no_lost); a latency on the clients' link and a short freeze lose nothing.
"""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest

from harness.cli import main
from harness.progress import Progress
from harness.scenario import load_scenario
from harness.shrink import Shrinker, _fault_end, _standalone, ddmin, planned_faults
from tests.procs import ROOT

THREE_FAULTS = ROOT / "tests" / "blackbox" / "mdp-kill-among-faults.toml"


def test_ddmin_finds_the_items_that_matter_and_tries_few_subsets() -> None:
    tried: list[list[int]] = []

    def needs_3_and_6(subset: list[int]) -> bool:
        tried.append(subset)
        return 3 in subset and 6 in subset

    assert ddmin(list(range(1, 9)), needs_3_and_6) == [3, 6]
    assert len(tried) == len({tuple(t) for t in tried}) < 8 * 8  # each subset once, at most n²
    assert ddmin([1, 2, 3], lambda s: 2 in s) == [2]
    assert ddmin([4], lambda s: False) == [4]  # one item stays: ddmin never tries none


def test_the_plan_becomes_one_fault_line_per_injected_fault() -> None:
    meta = {
        "plan": [
            {"fault_id": 1, "at_s": 2.5, "kind": "kill", "target": "worker-2", "selector": "worker:random",
             "params": {"restart_after_s": 1.0}},
            {"fault_id": 2, "at_s": 7.0, "kind": "kill", "target": "worker-1", "selector": "worker:random",
             "params": {"restart_after_s": 1.0}},
        ]
    }  # fmt: skip
    assert planned_faults(meta) == [
        {"kind": "kill", "target": "worker-2", "at_s": [2.5], "restart_after_s": 1.0},
        {"kind": "kill", "target": "worker-1", "at_s": [7.0], "restart_after_s": 1.0},
    ]


def test_every_length_a_fault_card_declares_is_halved_and_ends_the_fault() -> None:
    """The cards say which parameters are lengths (Param.length): restart's delay_s too."""

    class Always:
        changes: list[str] = []

        def reproduces(self, candidate: dict, change: str) -> bool:
            self.changes.append(change)
            return True

    data = {"faults": [{"kind": "restart", "target": "queue", "at_s": [3], "delay_s": 4.0},
                       {"kind": "kill", "target": "worker-1", "at_s": [5], "restart_after_s": 2.0},
                       {"kind": "kill", "target": "worker-2", "at_s": [9]}]}  # fmt: skip
    assert [_fault_end(f) for f in data["faults"]] == [7.0, 7.0, 9.0]
    stub = Always()
    smaller = Shrinker.shorter_faults(stub, data)  # type: ignore[arg-type]
    assert smaller["faults"][0]["delay_s"] == 2.0 and smaller["faults"][1]["restart_after_s"] == 1.0
    assert stub.changes == ["fault 1 (restart): delay_s 4 -> 2", "fault 2 (kill): restart_after_s 2 -> 1"]


def test_a_shrunk_scenario_names_its_manifest_by_absolute_path() -> None:
    scenario = load_scenario(THREE_FAULTS)
    out = _standalone(scenario.source, scenario)
    assert out["implementation"] == str(THREE_FAULTS.parent / "mdp-broker-noresend.toml")
    assert out["name"] == "mdp-kill-among-faults-shrunk"


def violated_run(runs: Path) -> Path:
    """A run of THREE_FAULTS, violated on no_lost."""
    assert main(["run", str(THREE_FAULTS), "--runs-dir", str(runs)]) == 1
    (run,) = [p for p in runs.iterdir() if (p / "verdict.json").exists()]
    assert json.loads((run / "verdict.json").read_text())["checks"]["no_lost"]["status"] == "violated"
    return run


def run_again(written: Path, runs: Path) -> None:
    """The written scenario, run again, violates no_lost and its report says how to replay it."""
    code = main(["run", str(written), "--runs-dir", str(runs)])
    (rerun,) = [p for p in runs.iterdir() if (p / "verdict.json").exists()]
    verdict = json.loads((rerun / "verdict.json").read_text())
    assert code == 1
    assert verdict["checks"]["no_lost"]["status"] == "violated"
    assert f"<code>zchaos run --replay {rerun}</code>" in (rerun / "report.html").read_text()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 3 runs with their reports, on a machine shared with others
def test_shrink_runs_its_candidates_and_writes_the_smaller_scenario_that_still_breaks(
    tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two candidates: no fault at all (not reproduced), then one user (reproduced). The search's
    # whole order is the Recorder tests' below; this shows real runs judge it.
    runs = tmp_path / "runs"
    run = violated_run(runs)
    code = main(["shrink", str(run), "--budget", "2", "--seeds-per-candidate", "1", "--check", "no_lost"])
    out = capsys.readouterr().out
    assert code == 0, out
    (folder,) = runs.glob("shrink-*")
    report = (folder / "shrink.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 and rows[0].endswith("| no |") and "| yes, seed 3 |" in rows[1], report
    data = tomllib.loads((folder / "mdp-kill-among-faults-shrunk.toml").read_text())
    assert data["load"]["users"] == 1 and len(data["faults"]) == 3, report
    # the verdict shown is the last reproducing candidate's, whose data is what was written
    # (the soak below runs the written file again)
    assert "final verdict" in report and "no_lost: violated" in report, report


@pytest.mark.soak
@pytest.mark.timeout(3600)  # 8 runs with their reports, on a machine shared with others
def test_a_three_fault_run_shrinks_to_the_one_kill_that_breaks_it(
    tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    run = violated_run(runs)

    # Six runs: the big cheap steps first (no fault at all: not reproduced; 3 users -> 1:
    # reproduced), then ddmin keeps the first two faults, drops the latency, keeps the kill
    # alone; then the load halved. What follows (shorter faults) is not asserted.
    code = main(["shrink", str(run), "--budget", "6", "--seeds-per-candidate", "1", "--check", "no_lost"])
    out = capsys.readouterr().out
    assert code == 0, out
    (folder,) = runs.glob("shrink-*")
    written = folder / "mdp-kill-among-faults-shrunk.toml"
    report = (folder / "shrink.md").read_text()
    data = tomllib.loads(written.read_text())
    assert [f["kind"] for f in data["faults"]] == ["kill"], report
    assert data["duration_s"] < 14, report
    assert "| 1 |" in report and "reproduced" in report
    run_again(written, tmp_path / "again")


class Recorder(Shrinker):
    """A Shrinker whose candidates reproduce when ``rule`` says so of their data instead of
    by runs: a unit test of ``search``'s order."""

    def __init__(self, rule) -> None:  # no super().__init__: nothing runs
        self.rule = rule
        self.changes: list[str] = []
        self.scenario = load_scenario(THREE_FAULTS)
        self.check = "no_lost"
        self.load_alone = False
        self.progress = Progress(stream=io.StringIO(), out=io.StringIO())
        self.tried: set[str] = set()

    def reproduces(self, data: dict, change: str) -> bool:
        key = json.dumps({k: v for k, v in data.items() if k != "seed"}, sort_keys=True)
        if key in self.tried:
            return False
        self.tried.add(key)
        self.changes.append(change)
        return self.rule(data)


def test_shrink_tries_no_fault_and_one_user_first_and_says_when_the_load_alone_breaks_it() -> None:
    data = load_scenario(THREE_FAULTS).source | {"load": {"users": 8}}
    overload = Recorder(lambda c: c["load"]["users"] >= 4)  # breaks with 4 users or more, faults or not
    smallest = overload.search(data)
    assert overload.changes[:2] == ["no fault at all", "users 8 -> 1"]
    assert overload.load_alone is True
    assert smallest["faults"] == [] and smallest["load"]["users"] == 4


def test_a_bug_that_needs_its_fault_is_not_blamed_on_the_load() -> None:
    data = load_scenario(THREE_FAULTS).source | {"load": {"users": 8}}
    kill = Recorder(lambda c: any(f["kind"] == "kill" for f in c.get("faults", [])))
    smallest = kill.search(data)
    assert kill.changes[:2] == ["no fault at all", "users 8 -> 1"]
    assert kill.load_alone is False
    assert [f["kind"] for f in smallest["faults"]] == ["kill"] and smallest["load"]["users"] == 1
