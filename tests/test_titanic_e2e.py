"""Titanic end to end: the same kill-the-server scenario run on the real Titanic server and
on tests/faulty_titanic (answers before it stores). The real one passes every check; the
faulty one fails ``titanic_durable`` (acknowledged uuids answered 400 after the restart)
and nothing else is blamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runner import run_scenario
from harness.scenario import load_scenario
from tests.procs import ROOT

pytestmark = pytest.mark.slow  # whole scenario runs

FAULTY = ROOT / "tests" / "faulty_titanic" / "manifest.toml"

# 200 ms of work and two workers keep several acknowledged requests waiting in the store
# whenever the server is killed.
SCENARIO = """
description = "Titanic server killed twice under load"
implementation = "{implementation}"
seed = 31
duration_s = 12
drain_s = 10

[topology]
worker = 2

[options]
work_ms = 200

[load]
users = 6
spawn_rate = 6
wait_ms = 10

[[faults]]
kind = "kill"
target = "titanic"
at_s = [4, 8]
restart_after_s = 1
"""


def run(tmp_path: Path, implementation: str):
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO.format(implementation=implementation))
    return run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")


def test_the_server_that_answers_before_storing_fails_titanic_durable(tmp_path: Path, spark) -> None:
    result = run(tmp_path, str(FAULTY))
    checks = result.verdict["checks"]
    assert result.exit_code == 1, {k: c["summary"] for k, c in checks.items()}
    durable = checks["titanic_durable"]
    assert durable["status"] == "violated" and durable["figures"]["forgotten"] >= 1
    assert durable["examples"][0]["problem"].startswith("forgotten")
    violated = {name for name, c in checks.items() if c["status"] == "violated"}
    assert violated == {"titanic_durable"}, {k: checks[k]["summary"] for k in violated}


def test_the_real_server_passes_the_same_kills(tmp_path: Path, spark) -> None:
    result = run(tmp_path, "titanic")
    checks = result.verdict["checks"]
    assert result.exit_code == 0, {k: (c["status"], c["summary"]) for k, c in checks.items()}
    durable = checks["titanic_durable"]["figures"]
    assert durable["obtained_across_a_fault"] >= 1 and durable["forgotten"] == 0
