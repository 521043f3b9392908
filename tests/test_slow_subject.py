"""The stock Paranoid Pirate, Simple Pirate and Majordomo scenarios on a system ten to a
hundred times slower than ours (tests/slow_subject/: standalone workers of 1 s per request
behind a user's queue or broker, no history), sized by its own calibration: no violation
that the load alone causes, no check unknown for want of attempts, and a planted bug still
found (issue 33).

Every stock scenario of three families, each with a calibration first (shared by the
scenarios of one set-up): about half an hour, a soak.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.calibrate import calibrated
from harness.runner import RunResult, run_scenario
from harness.scenario import load_scenario
from tests.procs import ROOT

SLOW = ROOT / "tests" / "slow_subject"
SUBJECTS = {
    "paranoid-pirate": SLOW / "paranoid-pirate.toml",
    "simple-pirate": SLOW / "simple-pirate.toml",
    "majordomo": SLOW / "majordomo.toml",
}
STOCK = [
    (family, path) for family in SUBJECTS for path in sorted((ROOT / "scenarios").glob(f"{family}-*.toml"))
]
#: What a stock scenario finds in the subject, measured 2026-12-01 (one seed each): a broker
#: killed while a slow worker holds a no-resend client's request loses it (the restarted
#: broker knows neither the worker nor the request; a resending client would send it again).
#: A fault's doing, not the load's; whether a check should excuse it for no-resend clients
#: is an open question (see the note of issue 33's calibration work).
FOUND = {
    "majordomo-restart-broker": {"no_lost"},
    "majordomo-restart-broker-clean": {"no_lost"},
}

pytestmark = [pytest.mark.soak, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One runs folder for the module: each set-up is calibrated once."""
    return tmp_path_factory.mktemp("slow-subject-runs")


def run_on_slow(path: Path, subject: Path, runs: Path, *sets: str) -> RunResult:
    scenario = load_scenario(path, sets=[f"implementation={subject}", *sets])
    return run_scenario(calibrated(scenario, runs), runs_dir=runs)


def figures(result: RunResult) -> str:
    assert result.verdict is not None
    return json.dumps({n: (c["status"], c["summary"]) for n, c in result.verdict["checks"].items()}, indent=1)


@pytest.mark.parametrize(("family", "path"), STOCK, ids=[p.stem for _, p in STOCK])
def test_a_stock_scenario_judges_a_slow_system_by_its_own_numbers(
    family: str, path: Path, runs: Path, spark: object
) -> None:
    result = run_on_slow(path, SUBJECTS[family], runs)
    assert result.verdict is not None
    statuses = {name: c["status"] for name, c in result.verdict["checks"].items()}
    assert "unknown" not in statuses.values(), figures(result)
    violated = {name for name, status in statuses.items() if status == "violated"}
    assert violated == FOUND.get(path.stem, set()), figures(result)


def test_a_planted_bug_is_still_found_on_the_slow_system(runs: Path, spark: object) -> None:
    """The guide's queue forgets what a dead worker held: with clients that never resend,
    the stock scenario loses requests on it, slow workers or not."""
    stock = ROOT / "scenarios" / "paranoid-pirate-noresend-kill-worker.toml"
    result = run_on_slow(stock, SUBJECTS["paranoid-pirate"], runs, "options.bug=forget-dead-workers-request")
    assert result.verdict is not None
    assert result.verdict["checks"]["no_lost"]["status"] == "violated", figures(result)
