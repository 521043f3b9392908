"""Black-box subjects (tests/blackbox/: standalone pyzmq programs that write no history) run
through their manifests with zchaos's probe workers: each bug is caught by the check that
names it, and the same program without the bug passes the same scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config import load_toml
from harness.runner import run_scenario
from harness.scenario import load_scenario, parse_scenario
from tests.procs import ROOT

BLACKBOX = ROOT / "tests" / "blackbox"
#: A run is 10-20 s of load, but its Spark report can take minutes on a machine shared with
#: other test sessions (seen: 5 min at a load average of 38 on 2 cores).
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # whole scenario runs


def run(tmp_path: Path, scenario: str, bug: str):
    """Run a scenario of tests/blackbox/ with the subject's --bug option set to ``bug``."""
    path = BLACKBOX / scenario
    data = load_toml(path, "scenario")
    data["options"] = {"bug": bug}
    result = run_scenario(parse_scenario(data, path, where=str(path)), runs_dir=tmp_path / "runs")
    checks = result.verdict["checks"]
    status = {name: c["status"] for name, c in checks.items()}
    return result, checks, status


def no_history_of_its_own(result, subject: str) -> None:
    """The subject wrote nothing: everything judged came from zchaos's side."""
    assert not (result.run.history / f"{subject}.jsonl").exists()
    assert list(result.run.history.glob("worker-*.jsonl"))  # the probe workers did


@pytest.mark.parametrize("bug", ["none", "mmi-always-200"])
def test_an_mdp_broker_is_judged_on_mmi_from_the_outside(tmp_path: Path, spark, bug: str) -> None:
    result, checks, status = run(tmp_path, "mdp-kill-all-workers.toml", bug)
    no_history_of_its_own(result, "broker")
    mmi = checks["mmi_service"]
    summary = json.dumps({n: (c["status"], c["summary"]) for n, c in checks.items()}, indent=1)
    assert mmi["figures"]["answers"] > 5, summary
    if bug == "none":
        assert result.exit_code == 0, summary
        assert set(status.values()) == {"held"}, summary
        assert "404" in mmi["figures"]["codes"]  # it did say so while the workers were dead
    else:
        assert result.exit_code == 1, summary
        assert {n for n, s in status.items() if s == "violated"} == {"mmi_service"}, summary
        example = mmi["examples"][0]
        assert example["code"] == 200 and example["problem"].startswith("200 while no worker")
        assert example["src"].startswith("client-")


@pytest.mark.parametrize("bug", ["none", "resend-executes-again"])
def test_a_front_server_promising_exactly_once_is_judged_by_its_probe_workers(
    tmp_path: Path, spark, bug: str
) -> None:
    result, checks, status = run(tmp_path, "front-server-slow-workers.toml", bug)
    no_history_of_its_own(result, "server")
    counted = checks["execution_count"]
    summary = json.dumps({n: (c["status"], c["summary"]) for n, c in checks.items()}, indent=1)
    resent = sum(1 for e in _events(result, "retry"))
    assert resent > 3, summary  # the clients did resend slow requests
    if bug == "none":
        assert result.exit_code == 0, summary
        assert set(status.values()) == {"held"}, summary
        assert counted["figures"]["executed_more_than_once"] == 0
    else:
        assert result.exit_code == 1, summary
        assert {n for n, s in status.items() if s == "violated"} == {"execution_count"}, summary
        example = counted["examples"][0]
        assert example["problem"].startswith("executed ")
        runs = example["executions"]
        assert len(runs) >= 2 and runs[0]["ts"] < runs[1]["ts"]
        assert all(r["worker"].startswith("worker-") for r in runs)


def _events(result, kind: str):
    for path in result.run.history.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["ev"] == kind:
                yield event


def test_without_probe_workers_the_execution_checks_are_unknown_and_say_why(tmp_path: Path, spark) -> None:
    """The same front server with the user's own workers, which record nothing: the checks
    that count executions cannot be decided, and never pass."""
    manifest = (BLACKBOX / "front-server.toml").read_text()
    manifest = manifest.replace("{manifest_dir}", str(BLACKBOX)).replace(
        'probe = "rep"                # work_ms follows [options]',
        f'command = ["{{python}}", "{BLACKBOX}/rep_worker.py", "--connect", "{{connect.backend}}"]\n'
        'ready = "log:ready"',
    )
    (tmp_path / "own-workers.toml").write_text(manifest.replace("work_ms = 500", "work_ms = 0"))
    scenario = tmp_path / "scenario.toml"
    scenario.write_text('implementation = "own-workers.toml"\nseed = 1\nduration_s = 4\ndrain_s = 2\n'
                        "[load]\nusers = 2\nspawn_rate = 2\nwait_ms = 20\n")  # fmt: skip
    result = run_scenario(load_scenario(scenario), runs_dir=tmp_path / "runs")
    checks = result.verdict["checks"]
    counted = checks["execution_count"]
    assert counted["status"] == "unknown", counted
    assert "exec" in counted["reason"] and 'probe = "' in counted["reason"]
    assert checks["no_lost"]["status"] == "held"  # what zchaos sees itself is still judged
    assert (result.verdict["outcome"], result.exit_code) == ("unknown", 3)  # never passed
    assert any(r.startswith("execution_count unknown: needs exec") for r in result.verdict["reasons"])
