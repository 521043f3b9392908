"""Loss that retries cannot hide, on a black box: the stock scenario that kills a busy
Majordomo worker under clients that never resend, run on a user's MDP broker
(tests/blackbox/mdp_broker.py: pyzmq only, no history, by path, behind zchaos's Majordomo
probe workers) that drops a dead worker's request. It must fail ``no_lost`` and nothing
else; the same broker without the bug, and ours, pass the same scenario.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config import load_toml
from harness.runner import RunResult, run_scenario
from harness.scenario import parse_scenario
from tests.procs import ROOT

STOCK = ROOT / "scenarios" / "majordomo-noresend-kill-busy-worker.toml"
BLACKBOX_MDP = ROOT / "tests" / "blackbox" / "mdp-broker-noresend.toml"
#: A run is 15-20 s of load, but its Spark report can take minutes on a shared machine.
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # whole scenario runs


def run_on(implementation: str | Path, runs_dir: Path, stock: Path = STOCK, **options: str) -> RunResult:
    """A stock scenario, unchanged but for the implementation it runs on (and ``options``)."""
    data = load_toml(stock, "scenario")
    data["implementation"] = str(implementation)
    data["options"] = {**data.get("options", {}), **options}
    return run_scenario(parse_scenario(data, stock), runs_dir=runs_dir)


def statuses(result: RunResult) -> dict[str, str]:
    return {name: c["status"] for name, c in result.verdict["checks"].items()}


@pytest.fixture(scope="module")
def drop_broker_run(tmp_path_factory, spark) -> RunResult:
    return run_on(BLACKBOX_MDP, tmp_path_factory.mktemp("drop"), bug="drop-dead-workers-request")


def test_a_broker_that_drops_a_dead_workers_request_fails_no_lost(drop_broker_run: RunResult) -> None:
    result = drop_broker_run
    summary = json.dumps({n: c["summary"] for n, c in result.verdict["checks"].items()}, indent=1)
    assert result.exit_code == 1, summary
    assert {n for n, s in statuses(result).items() if s == "violated"} == {"no_lost"}, summary
    no_lost = result.verdict["checks"]["no_lost"]
    assert no_lost["violations"] >= 1
    assert no_lost["figures"]["lost_past_deadline"] == no_lost["violations"]
    assert no_lost["figures"]["requeue_promised"] is True
    example = no_lost["examples"][0]
    assert example["problem"].startswith("lost: no reply within")
    # the lost request was sent around the kill (5 s into the load), not at random
    kill_ns = next(f for f in result.verdict["faults"] if f["fault"] == "kill")["start_ns"]
    assert abs(example["ts"] - kill_ns) < 4e9
    assert not (result.run.history / "broker.jsonl").exists()  # judged from zchaos's side only


def test_the_same_broker_without_the_bug_passes(tmp_path: Path, spark) -> None:
    result = run_on(BLACKBOX_MDP, tmp_path, bug="none")
    summary = json.dumps({n: c["summary"] for n, c in result.verdict["checks"].items()}, indent=1)
    assert result.exit_code == 0, summary
    assert result.verdict["checks"]["no_lost"]["figures"]["lost"] == 0


def test_our_broker_requeues_and_passes_the_same_scenario(tmp_path: Path, spark) -> None:
    result = run_on("majordomo-noresend", tmp_path)
    summary = json.dumps({n: c["summary"] for n, c in result.verdict["checks"].items()}, indent=1)
    assert result.exit_code == 0, summary
    assert statuses(result)["no_lost"] == "held"
    assert result.verdict["checks"]["no_lost"]["figures"]["lost"] == 0
