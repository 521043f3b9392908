"""run.json stores every value once, and a run.json of an older zchaos still reads.

``tests/format1/`` is a whole run made by zchaos before format 2 (main at 721fdf2, the
scenario beside it): its run.json held the seed three times, each fault's parameters three
times, the client kinds, expected violations, notes and warnings twice. It must read into
today's shape (contract/rundir.py ``upgrade_meta``), give what today's runner writes for the
same scenario, replay, and report the same verdict it was given then.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from contract.rundir import FORMAT, RunDir
from harness.replay import replay_record, scenario_of_run
from harness.runner import planned_meta
from harness.scenario import fault_plan, load_scenario, with_seed
from tests.procs import ROOT

FORMAT1 = ROOT / "tests" / "format1"

_spec = importlib.util.spec_from_file_location("compare_verdicts", ROOT / "bench" / "compare_verdicts.py")
assert _spec is not None and _spec.loader is not None
compare_verdicts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_verdicts)


def places(data: Any, key: str, where: str = "") -> list[str]:
    """Every path in ``data`` at which ``key`` is stored."""
    found = []
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{where}.{k}" if where else str(k)
            if k == key:
                found.append(here)
            found += places(v, key, here)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += places(v, key, f"{where}[{i}]")
    return found


def new_run_json(tmp_path: Path, scenario_path: Path, seed: int | None = None) -> dict[str, Any]:
    """The run.json today's runner starts a run with, as JSON."""
    scenario = load_scenario(scenario_path)
    if seed is not None:
        scenario = with_seed(scenario, seed)
    run = RunDir.create(tmp_path / "runs", scenario.name)
    run.write_meta({**planned_meta(scenario, fault_plan(scenario)), "replay": replay_record(scenario, run)})
    return dict(json.loads(run.run_json.read_text()))


def test_every_value_is_stored_once(tmp_path: Path) -> None:
    """The seed (given with --seed too) and the run's facts in one place each; a fault's
    parameters in its plan entry and, as written, in the replay's TOML data only."""
    old = json.loads((FORMAT1 / "run.json").read_text())
    assert places(old, "seed") == ["replay.scenario_data.seed", "replay.seed", "scenario.seed"]
    assert len(places(old, "restart_after_s")) == 3 and len(places(old, "expect_violated")) == 2

    new = new_run_json(tmp_path, FORMAT1 / "scenario.toml", seed=9)
    assert new["format"] == FORMAT
    assert places(new, "seed") == ["scenario.seed"] and new["scenario"]["seed"] == 9
    assert places(new, "restart_after_s") == [
        "plan[0].params.restart_after_s",
        "replay.scenario_data.faults[0].restart_after_s",
    ]
    for key in ("expect_violated", "notes", "warnings", "implementation", "scenario_path", "manifest_path"):
        assert len(places(new, key)) <= 1, (key, places(new, key))
    assert places(new, "clients") == ["manifest.clients"]
    assert [p for p in places(new, "path") if not p.startswith("manifest.roles")] == [
        "manifest.path",
        "scenario.path",
    ]


def test_a_format1_run_json_reads_as_today_writes_it(tmp_path: Path) -> None:
    """Read by the one reader, the old run.json is what today's runner writes for its
    scenario (but for the checkout's paths and the run's own facts)."""
    meta = RunDir(FORMAT1).read_meta()
    now = new_run_json(tmp_path, FORMAT1 / "scenario.toml")
    assert meta["format"] == FORMAT
    assert places(meta, "seed") == ["scenario.seed"] and meta["scenario"]["seed"] == 4
    for key in ("expect_violated", "notes", "warnings"):
        assert key not in meta  # in the scenario's record only
    assert meta["plan"] == now["plan"] and meta["client_budget_s"] == now["client_budget_s"]
    assert {**meta["scenario"], "path": ""} == {**now["scenario"], "path": ""}
    assert meta["manifest"]["clients"] == now["manifest"]["clients"]
    assert meta["manifest"]["promises"] == now["manifest"]["promises"]
    assert meta["replay"]["scenario_data"] == now["replay"]["scenario_data"]
    assert set(meta["replay"]) == set(now["replay"])


def test_a_format1_run_replays_its_plan() -> None:
    scenario, _ = scenario_of_run(FORMAT1)
    old = json.loads((FORMAT1 / "run.json").read_text())
    # the plan as recorded, and each fault's class today's cards add (fault_stops, since)
    plan = [{k: v for k, v in f.as_dict().items() if k != "fault_stops"} for f in fault_plan(scenario)]
    assert scenario.seed == 4 and plan == old["plan"]
    assert [f.as_dict() for f in fault_plan(scenario)] == RunDir(FORMAT1).read_meta()["plan"]


def test_the_comparison_names_what_differs(tmp_path: Path) -> None:
    """bench/compare_verdicts.py: identical verdicts pass, a changed check is named."""
    verdict = json.loads((FORMAT1 / "verdict.json").read_text())
    for side in ("old", "new"):
        (tmp_path / side / "run-1").mkdir(parents=True)
        (tmp_path / side / "run-1" / "verdict.json").write_text(json.dumps(verdict))
    out = io.StringIO()
    assert compare_verdicts.compare(tmp_path / "old", tmp_path / "new", out) == 0
    verdict["checks"]["no_lost"]["summary"] = "1 lost"
    verdict["checks"]["no_lost"]["status"] = "VIOLATED"
    (tmp_path / "new" / "run-1" / "verdict.json").write_text(json.dumps(verdict))
    assert compare_verdicts.compare(tmp_path / "old", tmp_path / "new", out) == 1
    assert "no_lost.status" in out.getvalue() and "no_lost.summary" in out.getvalue()


@pytest.mark.slow  # a Spark report
def test_a_format1_run_reports_the_verdict_it_was_given(tmp_path: Path, spark) -> None:
    """Today's report of the old run folder, its run.json as written then and as rewritten
    now: the verdict of every check is the one zchaos gave it then."""
    from reports.pipeline import build_report

    for upgrade in (False, True):
        run = tmp_path / f"upgraded-{upgrade}" / "run"
        shutil.copytree(FORMAT1, run, ignore=shutil.ignore_patterns("verdict.json", "scenario.toml"))
        if upgrade:
            RunDir(run).write_meta(RunDir(run).read_meta())
            assert json.loads((run / "run.json").read_text())["format"] == FORMAT
        build_report(run)
        then = json.loads((FORMAT1 / "verdict.json").read_text())
        assert compare_verdicts.differences(then, json.loads((run / "verdict.json").read_text())) == []
