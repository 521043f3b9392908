"""Many seeds (harness/seeds.py): the seeds derived from a scenario's, the per-check summary,
and a racy bug found on some of 10 seeds while its correct twin is clean on all 10.

The subject is a user's MDP broker (tests/blackbox/mdp_broker.py, pyzmq only, run by path
through its manifest) with ``--bug misroute-racing-reply``: the reply to a re-queued request
goes to another client only when that client's request waits on the frontend as the reply
comes in, so some seeds catch it and others do not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.rundir import RunDir
from harness.cli import main
from harness.config import dump_toml, load_toml
from harness.scenario import load_scenario
from harness.seeds import SeedRun, SeedsResult, derive_seeds, write_summary
from tests.procs import ROOT

RACY = ROOT / "tests" / "blackbox" / "mdp-racy-requeue.toml"


def test_the_seeds_start_with_the_scenarios_own_and_are_the_same_every_time() -> None:
    seeds = derive_seeds(7, 10)
    assert seeds[0] == 7
    assert len(set(seeds)) == 10
    assert seeds == derive_seeds(7, 10)
    assert derive_seeds(7, 4) == seeds[:4]  # more seeds extend the list, they do not change it
    assert derive_seeds(8, 10)[1:] != seeds[1:]


def _run(seed: int, **statuses: str) -> SeedRun:
    checks = {name: {"status": status} for name, status in statuses.items()}
    outcome = "violated" if "violated" in statuses.values() else "passed"
    return SeedRun(seed, exit_code=0, verdict={"outcome": outcome, "checks": checks})


def test_the_summary_says_per_check_in_how_many_seeds_it_broke_and_which(tmp_path: Path) -> None:
    result = SeedsResult(load_scenario(RACY), tmp_path, [5, 11, 12])
    result.runs = [
        _run(5, no_lost="held", correct_reply="held"),
        _run(11, no_lost="violated", correct_reply="violated"),
        _run(12, no_lost="held", correct_reply="violated"),
    ]
    assert result.lines() == [
        "no_lost: violated in 1 of 3 seeds: 11",
        "correct_reply: violated in 2 of 3 seeds: 11, 12",
    ]
    assert result.outcome == "violated" and result.exit_code == 1
    result.runs = [_run(5, no_lost="held"), _run(11, no_lost="held")]
    assert result.lines() == ["no_lost: held on all 2 seeds"]
    assert result.exit_code == 0


def test_the_summary_page_has_a_row_per_seed_with_the_command_that_reproduces_it(tmp_path: Path) -> None:
    result = SeedsResult(load_scenario(RACY), tmp_path, [5, 11])
    result.runs = [_run(5, correct_reply="held"), _run(11, correct_reply="violated")]
    for run in result.runs:
        run.run_dir = RunDir.create(tmp_path, f"seed-{run.seed}").root
        RunDir(run.run_dir).write_meta(
            {
                "manifest": {"promises": {"checks": ["correct_reply"]}},
                "replay": {"commands": [f"zchaos run --replay {run.run_dir}"]},
            }
        )
    write_summary(result)
    page = (tmp_path / "index.html").read_text()
    assert "correct_reply: violated in 1 of 2 seeds: 11" in page
    assert page.count("<code>zchaos run --replay ") == 2
    assert json.loads((tmp_path / "seeds.json").read_text())["checks"]["correct_reply"] == {
        "held": [5],
        "violated": [11],
    }


def _violated_seeds(summary: dict, check: str) -> list[int]:
    return summary["checks"].get(check, {}).get("violated", [])


# 20 runs with their reports (4-10 minutes): a soak. test_leftovers' suite on two seeds and
# the summary tests show the per-seed summary on the default run.
@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_a_racy_bug_is_found_on_some_of_10_seeds_and_its_twin_on_none(
    tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", str(RACY), "--seeds", "10", "--runs-dir", str(tmp_path / "bug")])
    out = capsys.readouterr().out
    (folder,) = (tmp_path / "bug").glob("seeds-*")
    summary = json.loads((folder / "seeds.json").read_text())
    assert summary["seeds"] == derive_seeds(5, 10)
    assert [r["seed"] for r in summary["runs"]] == summary["seeds"]
    broke = _violated_seeds(summary, "correct_reply")
    assert code == 1, out
    assert broke, out
    # the seeds named are those whose runs broke it, each run recorded with its seed
    for run in summary["runs"]:
        verdict = json.loads((Path(run["run_dir"]) / "verdict.json").read_text())
        assert verdict["seed"] == run["seed"]
        assert (verdict["checks"]["correct_reply"]["status"] == "violated") == (run["seed"] in broke)
        meta = json.loads((Path(run["run_dir"]) / "run.json").read_text())
        assert meta["seeds"]["base"] == 5 and meta["scenario"]["seed"] == run["seed"]
    line = f"correct_reply: violated in {len(broke)} of 10 seeds: {', '.join(map(str, broke))}"
    assert line in out
    page = (folder / "index.html").read_text()
    assert line in page
    assert f"<code>zchaos run --replay {summary['runs'][0]['run_dir']}</code>" in page

    twin = load_toml(RACY, "scenario")
    twin["implementation"] = str(RACY.parent / twin["implementation"])
    twin["options"]["bug"] = "none"
    twin_path = tmp_path / "mdp-racy-requeue-twin.toml"
    twin_path.write_text(dump_toml(twin))
    code = main(["run", str(twin_path), "--seeds", "10", "--runs-dir", str(tmp_path / "twin")])
    out = capsys.readouterr().out
    (folder,) = (tmp_path / "twin").glob("seeds-*")
    summary = json.loads((folder / "seeds.json").read_text())
    assert code == 0, out
    assert summary["outcome"] == "passed"
    assert len(summary["runs"]) == 10
    assert "correct_reply: held on all 10 seeds" in out
