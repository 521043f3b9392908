"""The planted bugs of explore's subjects in families of their own are real
(tests/explore_subject/): each subject's shortest scenario, a few seconds of load and the
one fault that shows its bug, violates the check the bug breaks, and the same scenario on
the family's built-in keeps that check.

- ``ping-guard`` (Freelance): server1 frozen 3 s; it reads its clients' queued pings in
  one burst after the thaw and drops their requests for good (``steady_state``);
- ``tag-ring`` (PING/PONG): a worker frozen 1.5 s (three times) under load; the job it
  held comes back with a one-byte number another client's job has taken since
  (``correct_reply``);
- ``stall-hold-star`` (Binary Star): the active primary frozen 2 s, too short for a
  failover; it holds every request for good after, no server answers again, and the
  requests resent across the outage are abandoned (``bstar_no_lost_failover``).

How explore finds them is tests/test_explore_subjects.py (soak)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import load_toml
from harness.runner import run_scenario
from harness.scenario import parse_scenario
from tests.procs import ROOT, processes_of

SUBJECTS = ROOT / "tests" / "explore_subject"

CASES = [
    pytest.param("ping-guard-freeze.toml", "freelance", "steady_state", id="ping-guard"),
    pytest.param("tag-ring-freeze-worker.toml", "pingpong", "correct_reply", id="tag-ring"),
    pytest.param(
        "stall-hold-star-freeze.toml", "binary-star", "bstar_no_lost_failover", id="stall-hold-star"
    ),
]


# A soak (3.5 min of scenario runs): these subjects serve explore's power figures
# (bench/explore_power.py) and the soak explorations alone, which run where this does
# (./dev chaos); the default tier keeps the five subjects that explore finds with every kind
# (tests/test_explore_runs.py, tests/test_blackbox_loss.py).
@pytest.mark.soak
@pytest.mark.parametrize(("scenario", "built_in", "check"), CASES)
def test_the_planted_bug_breaks_its_check_and_the_built_in_keeps_it(
    scenario: str, built_in: str, check: str, tmp_path: Path, spark
) -> None:
    path = SUBJECTS / scenario
    data = load_toml(path, "scenario")
    subject = run_scenario(parse_scenario(data, path), runs_dir=tmp_path / "subject")
    checks = subject.verdict["checks"]
    assert checks[check]["status"] == "violated", {k: v["summary"] for k, v in checks.items()}
    data["implementation"] = built_in
    correct = run_scenario(parse_scenario(data, path), runs_dir=tmp_path / "built-in")
    checks = correct.verdict["checks"]
    assert checks[check]["status"] == "held", {k: v["summary"] for k, v in checks.items()}
    assert processes_of(tmp_path) == []


# explore's false alarms on stall-hold-star's correct twin (bug = "none" in each scenario):
# what any correct Binary Star pair does, which a check once called a violation.
TWIN_CASES = [
    pytest.param(
        "stall-hold-star-late-joiners.toml", "steady_state", "first_request_failovers", id="late-joiners"
    ),
    pytest.param(
        "stall-hold-star-idle-failover.toml",
        "bstar_failover_time",
        "timed_from_first_request",
        id="idle-failover",
    ),
]


@pytest.mark.soak
@pytest.mark.parametrize(("scenario", "check", "figure"), TWIN_CASES)
def test_the_correct_twin_keeps_the_check_a_false_alarm_broke(
    scenario: str, check: str, figure: str, tmp_path: Path, spark
) -> None:
    """Clients joining after a failover pay one timeout at the passive primary (steady_state
    counts their first requests apart); an idle client's takeover waits for its next request
    (bstar_failover_time times service from it). Both held, for the reason the figure names."""
    path = SUBJECTS / scenario
    twin = run_scenario(parse_scenario(load_toml(path, "scenario"), path), runs_dir=tmp_path)
    result = twin.verdict["checks"][check]
    assert result["status"] == "held", {k: v["summary"] for k, v in twin.verdict["checks"].items()}
    assert result["figures"][figure] >= 1, result
    assert processes_of(tmp_path) == []
