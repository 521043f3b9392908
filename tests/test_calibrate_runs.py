"""Calibration on real processes: a fast and a slow subject measured, and a run of a scenario
with relative values that calibrates first, records what it used and reports it.

The subject is tests/slow_subject/ (a Paranoid Pirate queue of the user's and standalone
workers that take ``job_ms`` per request, no history). Short ramps keep each calibration
to seconds of load; the parsing and the arithmetic are tested without processes in
tests/test_calibration.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import calibrate as calibrate_module
from harness.calibrate import Setup, calibrate, calibrated, stored
from harness.manifest import load_manifest
from harness.scenario import load_scenario
from tests.procs import ROOT

SUBJECT = ROOT / "tests" / "slow_subject" / "paranoid-pirate.toml"


def _setup(job_ms: int) -> Setup:
    manifest = load_manifest(str(SUBJECT))
    return Setup(manifest, {"queue": 1, "worker": 3}, {**manifest.options, "job_ms": job_ms})


@pytest.mark.slow
def test_a_system_ten_times_slower_calibrates_ten_times_slower(tmp_path: Path) -> None:
    # Three workers of 20 ms and of 200 ms: three workers' worth of capacity each.
    fast = calibrate(_setup(20), tmp_path, users=(1, 2, 4), step_s=2.5)
    slow = calibrate(_setup(200), tmp_path, users=(1, 2, 4), step_s=2.5)
    assert stored(_setup(20), tmp_path) == fast and stored(_setup(200), tmp_path) == slow
    assert fast.key != slow.key  # another option is another set-up
    ratio = fast.capacity_rps / slow.capacity_rps
    assert 5 <= ratio <= 12, (fast.summary(), slow.summary())
    assert 5 <= slow.p50_ms / fast.p50_ms <= 12, (fast.summary(), slow.summary())
    assert 200 <= slow.p50_ms < 400
    # a bound given relative to the p99 scales with it; the users offer the same share of
    # each system's capacity (both are three workers), so the load scales with the rate
    from contract.calibration import parse_relative

    # (each system's own p99, not their ratio: a fast system's tail on a loaded machine once
    # came to 93 ms against the slow one's 208, a ratio of 2.2, and CI failed)
    bound = parse_relative("3x p99", "ms")
    assert bound.resolve(slow, "ms") == pytest.approx(3 * slow.p99_ms)
    assert bound.resolve(fast, "ms") == pytest.approx(3 * fast.p99_ms)
    assert bound.resolve(slow, "ms") >= 3 * 200  # every request of the slow system takes 200 ms
    half = parse_relative("0.5x capacity", "users")
    offered = {
        name: half.resolve(c, "users", wait_ms=0) * 1000 / c.p50_ms
        for name, c in (("fast", fast), ("slow", slow))
    }
    assert 5 <= offered["fast"] / offered["slow"] <= 12, offered
    assert half.resolve(slow, "users") == half.resolve(fast, "users") == 2


SCENARIO = f"""
implementation = "{SUBJECT}"
seed = 2
duration_s = 8
drain_s = 3

[options]
job_ms = 200

[load]
users = "0.5x capacity, at most 10"
wait_ms = 20
client = {{ timeout_ms = "3x p99, at least 1000" }}

[promises]
latency_p99_ms = "3x p99, at least 100"
"""


@pytest.mark.slow
def test_a_run_calibrates_first_records_it_and_its_report_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spark: object
) -> None:
    """(``spark``: the report runs in this process, on the tests' session, stopped with it.)"""
    from harness.runner import run_scenario

    monkeypatch.setattr(calibrate_module, "RAMP_USERS", (1, 2, 4))
    monkeypatch.setattr(calibrate_module, "STEP_S", 2.5)
    path = tmp_path / "relative.toml"
    path.write_text(SCENARIO)
    runs = tmp_path / "runs"
    scenario = calibrated(load_scenario(path), runs)
    assert "calibrating it first" in capsys.readouterr().err
    cal = scenario.calibration
    assert cal is not None and stored(calibrate_module.scenario_setup(scenario), runs) == cal
    result = run_scenario(scenario, runs_dir=runs)
    meta = json.loads((result.run.root / "run.json").read_text())
    assert meta["calibration"] == cal.as_dict()
    resolved = {r["key"]: r["value"] for r in meta["scenario"]["resolved"]}
    assert resolved["load.users"] == scenario.load.users == meta["scenario"]["load"]["users"]
    assert resolved["promises.latency_p99_ms"] == meta["manifest"]["promises"]["latency_p99_ms"] >= 3 * 200
    assert resolved["load.client.timeout_ms"] >= 1000
    verdict = json.loads((result.run.root / "verdict.json").read_text())
    assert verdict["calibration"] == cal.summary()
    # no fault, a load sized for the system: a correct subject passes
    assert verdict["outcome"] == "passed", verdict["reasons"]
    page = (result.run.root / "report.html").read_text()
    assert "Sized from the system&#39;s own numbers" in page or "Sized from the system's own numbers" in page
    assert "0.5x capacity, at most 10" in page
    # the next run finds it stored and measures nothing
    capsys.readouterr()
    again = calibrated(load_scenario(path), runs)
    assert again.calibration == cal and "calibrating it first" not in capsys.readouterr().err
    # the results store leaves the calibration's own run folder out
    from reports.store import run_folders

    assert [p.name for p in run_folders(runs)] == [result.run.root.name]
