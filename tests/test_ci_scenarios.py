"""Every scenario of the CI suite (scenarios/ci/) runs and ends in the verdict it expects:
its invariants hold, or fail exactly where its [expect] section names a known weakness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.runner import run_scenario
from harness.scenario import load_scenario
from tests.doubles import as_our_system
from tests.procs import ROOT

pytestmark = pytest.mark.slow  # whole scenario runs: left out of `./dev quick`

# test_end_to_end runs paranoid-pirate-kills with closer checks of the verdict and report.
CI_SCENARIOS = sorted(
    p for p in (ROOT / "scenarios" / "ci").glob("*.toml") if p.stem != "paranoid-pirate-kills"
)
#: A family's second and third CI scenarios (40-50 s each), and those of families whose
#: implementation passes other whole runs of the default tier (test_titanic_e2e's kills,
#: test_binary_star's freeze, test_client_kinds' Majordomo, test_detach's and
#: test_client_endpoints' Lazy Pirate): the default tier runs one per family otherwise,
#: `./dev chaos` (`zchaos suite scenarios/ci` among the soaks) runs them all.
#: paranoid-pirate-partition-worker (36 s of the default run's time): its family's run there is
#: test_end_to_end's paranoid-pirate-kills; a partition that a peer survives is
#: test_client_endpoints' test_a_partitioned_endpoint_moves_the_replies_to_the_other, the
#: queue served after junk on both endpoints test_fuzz_brokers' paranoid-pirate case.
#: majordomo-kill-busy-worker (42 s): our broker passes test_client_kinds' whole run of
#: majordomo-mixed-kill-busy-worker; a dead busy worker's request handed on is
#: test_majordomo_broker's test_busy_worker_that_dies_gives_its_request_to_another, the broker
#: served after junk on both endpoints test_fuzz_brokers' majordomo case.
#: lazy-pirate-kill-server (37 s): our Lazy Pirate server is killed, restarted and passes in
#: test_detach's test_a_run_kills_restarts_and_stops_a_daemonized_server (started through a
#: daemon), and passes the promises of its stock manifest under a partition in
#: test_client_endpoints' test_a_partitioned_endpoint_moves_the_replies_to_the_other.
#: simple-pirate-restart-queue (78 s, the longest of the tier): the same queue and workers,
#: run by path as a stranger's (tests/standard_expiry/simple-queue.toml), go through this
#: very scenario in test_travel_runs' test_a_stock_expectation_is_set_aside_and_a_broken_
#: stranger_is_violated (recovery violated after the queue's restart); an [expect] that
#: turns a named weakness into exit 0 is test_report's test_verdict_json and
#: test_expected_violation_that_did_not_happen_fails_the_run.
SECOND_OF_A_FAMILY = {
    "majordomo-kill-all-workers",
    "majordomo-restart-broker",
    "paranoid-pirate-partition-worker",
    "paranoid-pirate-queue-restart",
}
SOAKED = SECOND_OF_A_FAMILY | {
    "titanic-kills",
    "binary-star-failover",
    "majordomo-kill-busy-worker",
    "lazy-pirate-kill-server",
    "simple-pirate-restart-queue",
}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.soak) if p.stem in SOAKED else p for p in CI_SCENARIOS],
    ids=[p.stem for p in CI_SCENARIOS],
)
def test_ci_scenario_verdict(path: Path, tmp_path: Path, spark) -> None:
    scenario = load_scenario(path)
    result = run_scenario(scenario, runs_dir=tmp_path)
    checks = result.verdict["checks"]
    summary = {name: (c["status"], c["summary"]) for name, c in checks.items()}
    assert result.exit_code == 0, json.dumps(summary, indent=1)
    violated = {name for name, c in checks.items() if c["status"] == "violated"}
    assert violated == set(scenario.expect_violated)


BASELINES = sorted((ROOT / "scenarios").glob("*-baseline.toml"))


# One no-fault run per family (tests/test_families.py asks that every family has one): ten
# runs, a soak; the CI suite above already runs the families' faulty scenarios.
@pytest.mark.soak
@pytest.mark.parametrize("path", BASELINES, ids=[p.stem for p in BASELINES])
def test_a_family_baseline_passes_on_our_implementation(path: Path, tmp_path: Path, spark) -> None:
    result = run_scenario(as_our_system(load_scenario(path)), runs_dir=tmp_path)
    summary = {name: (c["status"], c["summary"]) for name, c in result.verdict["checks"].items()}
    assert result.exit_code == 0, json.dumps(summary, indent=1)
