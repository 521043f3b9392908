"""Every scenario of the CI suite (scenarios/ci/) runs and ends in the verdict it expects:
its invariants hold, or fail exactly where its [expect] section names a known weakness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.runner import run_scenario
from harness.scenario import load_scenario
from tests.procs import ROOT

pytestmark = pytest.mark.slow  # whole scenario runs: left out of `./dev quick`

# test_end_to_end runs paranoid-pirate-kills with closer checks of the verdict and report.
CI_SCENARIOS = sorted(
    p for p in (ROOT / "scenarios" / "ci").glob("*.toml") if p.stem != "paranoid-pirate-kills"
)


@pytest.mark.parametrize("path", CI_SCENARIOS, ids=[p.stem for p in CI_SCENARIOS])
def test_ci_scenario_verdict(path: Path, tmp_path: Path, spark) -> None:
    scenario = load_scenario(path)
    result = run_scenario(scenario, runs_dir=tmp_path)
    checks = result.verdict["checks"]
    summary = {name: (c["status"], c["summary"]) for name, c in checks.items()}
    assert result.exit_code == 0, json.dumps(summary, indent=1)
    violated = {name for name, c in checks.items() if c["status"] == "violated"}
    assert violated == set(scenario.expect_violated)
