"""A run that did not carry out its plan is never PASSED: a runner SIGKILLed mid-run, a fault
that fails when it fires. Both end INCOMPLETE (exit 4), saying how far the run got."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from chaos.nemesis import Nemesis, PlannedFault
from contract.history import HistoryWriter, read_events
from contract.rundir import RunDir
from harness.cli import main
from harness.progress import Progress
from harness.scenario import load_scenario
from harness.suite import SuiteEntry, suite_exit_code, write_index
from reports.history_frame import events_frame
from reports.run_facts import completeness
from reports.store import record_run, store_path
from tests.doubles import FailingControl
from tests.procs import ROOT, nemesis_events, processes_of, run_process, wait_for

# 20 s of load, a worker killed at 3 s (restarted) and another at 15 s; the runner is
# killed between the two.
SHORT = """
implementation = "paranoid-pirate"
seed = 4
duration_s = 20
drain_s = 5
[topology]
worker = 2
[load]
users = 3
wait_ms = 20
[[faults]]
kind = "kill"
target = "worker-1"
at_s = [3]
restart_after_s = 1
[[faults]]
kind = "freeze"
target = "worker-2"
at_s = [15]
duration_s = 2
"""


@pytest.mark.slow  # a scenario run, then its report
def test_a_runner_killed_mid_run_is_reported_incomplete(tmp_path: Path, spark, capsys) -> None:
    """Before: `zchaos report` on the folder of a SIGKILLed run said PASSED, exit 0."""
    scenario = tmp_path / "short.toml"
    scenario.write_text(SHORT)
    runs = tmp_path / "runs"
    with run_process(scenario, runs, output=False) as runner:
        wait_for(lambda: nemesis_events(runs, "fault_stop"), 90, "the first fault to end under load")
        wait_for(lambda: processes_of(runs), 10, "the run's processes")
        runner.send_signal(signal.SIGKILL)  # no teardown, no report: as if the machine were lost
        runner.wait(30)
    # The processes die with their runner (PDEATHSIG), whatever it was doing.
    wait_for(lambda: not processes_of(runs), 30, "every process of the run to end with its runner")
    (run_dir,) = runs.iterdir()
    assert not (run_dir / "verdict.json").exists()

    assert main(["report", str(run_dir)]) == 4
    out = capsys.readouterr().out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert (verdict["outcome"], verdict["exit_code"], verdict["passed"]) == ("incomplete", 4, False)
    (why,) = verdict["incomplete"]
    assert "before its load and drain ended" in why and "1 of 2 planned faults ran (kill worker-1)" in why
    assert verdict["completion"]["phases_done"] == [] and verdict["completion"]["last_phase"] == "load"
    assert 3 < verdict["completion"]["reached_s"] < 20
    # The checks still say what they found.
    assert verdict["checks"]["no_lost"]["figures"]["replied"] > 0
    assert "INCOMPLETE" in out and "1 of 2 planned faults ran" in out
    assert "run incomplete" in (run_dir / "report.html").read_text()


def test_a_fault_that_fails_when_it_fires_is_recorded_and_shown_without_a_traceback(tmp_path: Path) -> None:
    history = HistoryWriter(tmp_path / "nemesis.jsonl", "nemesis")
    plan = [PlannedFault(1, 0.0, "kill", "worker-1", "worker-1", {})]
    nemesis = Nemesis(plan, FailingControl(), history)
    stream = io.StringIO()
    progress = Progress(stream=stream, out=io.StringIO())
    progress.start_load(10, tmp_path, nemesis)
    nemesis.start()
    wait_for(lambda: nemesis.errors, 10, "the fault to fail")
    progress.tick(1.0)
    assert nemesis.stop() == ["0.0s  kill     worker-1: OSError: cannot signal worker-1"]
    history.close()
    (event,) = read_events(tmp_path / "nemesis.jsonl")
    assert (event["ev"], event["fault_id"], event["detail"]) == (
        "fault_error",
        1,
        "OSError: cannot signal worker-1",
    )
    shown = stream.getvalue()
    assert "! fault failed: 0.0s  kill     worker-1: OSError: cannot signal worker-1" in shown
    assert "Traceback" not in shown
    progress.end_load()
    assert stream.getvalue().count("fault failed") == 1  # shown once


def _ev(ts: int, src: str, ev: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "src": src, "ev": ev, **fields}


@pytest.mark.slow
def test_completeness_of_a_run_from_its_history(spark) -> None:
    s = 1_000_000_000
    meta = {
        "load_started_ns": 0,
        "scenario": {"duration_s": 20},
        "plan": [
            {"fault_id": 1, "kind": "kill", "target": "w-1"},
            {"fault_id": 2, "kind": "freeze", "target": "w-2"},
        ],
    }
    base = [
        _ev(0, "runner", "phase", name="load"),
        _ev(3 * s, "nemesis", "fault_start", fault="kill", target="w-1", fault_id=1),
        _ev(20 * s, "runner", "phase_done", name="load"),
        _ev(21 * s, "runner", "phase_done", name="drain"),
    ]
    reasons, figures = completeness(events_frame(spark, base), meta)
    assert reasons == ["fault 2 (freeze w-2) never fired"] and figures["phases_done"] == ["drain", "load"]
    failed = [
        *base,
        _ev(15 * s, "nemesis", "fault_error", fault="freeze", target="w-2", fault_id=2, detail="boom"),
    ]
    reasons, _ = completeness(events_frame(spark, failed), meta)
    assert reasons == ["fault 2 (freeze w-2) failed when it fired: boom"]
    complete = [*base, _ev(15 * s, "nemesis", "fault_start", fault="freeze", target="w-2", fault_id=2)]
    assert completeness(events_frame(spark, complete), meta)[0] == []
    cut_short = completeness(events_frame(spark, base[:2]), meta)[0]
    assert len(cut_short) == 1 and "stopped during its load phase, 3.0 s into 20 s of load" in cut_short[0]
    done_in_run_json = completeness(
        events_frame(spark, base[:2]), {**meta, "phases_done": {"load": 1, "drain": 2}}
    )
    assert done_in_run_json[0] == ["fault 2 (freeze w-2) never fired"]


UNDECIDED = {
    "outcome": "unknown",
    "exit_code": 3,
    "reasons": ["mmi_service unknown: no MMI answer was recorded; set the client's mmi_every"],
    "checks": {
        "no_lost": {"status": "held", "outcome": "passed", "summary": "10 requests: 10 replied"},
        "mmi_service": {
            "status": "unknown",
            "outcome": "unknown",
            "summary": "no MMI answers",
            "reason": "no MMI answer was recorded; set the client's mmi_every",
        },
    },
}


def test_an_unknown_run_is_shown_as_unknown_in_the_terminal_and_the_suite(tmp_path: Path) -> None:
    out = io.StringIO()
    Progress(stream=io.StringIO(), out=out).verdict(UNDECIDED, RunDir(tmp_path / "run"))
    text = out.getvalue()
    assert "??   mmi_service" in text and "unknown: no MMI answer was recorded" in text
    assert "UNKNOWN: not every promised check could be decided (exit 3)" in text and "PASSED" not in text

    scenario = load_scenario(ROOT / "scenarios" / "ci" / "pingpong-kills.toml")
    passed = SuiteEntry(scenario, exit_code=0, verdict={"outcome": "passed", "checks": {}})
    unknown = SuiteEntry(scenario, exit_code=3, verdict=UNDECIDED)
    assert suite_exit_code([passed, unknown]) == 3 and suite_exit_code([passed]) == 0
    violated = SuiteEntry(scenario, exit_code=1, verdict={"outcome": "violated", "checks": {}})
    incomplete = SuiteEntry(scenario, exit_code=4, verdict={"outcome": "incomplete", "checks": {}})
    assert suite_exit_code([unknown, incomplete]) == 4 and suite_exit_code([incomplete, violated]) == 1
    assert suite_exit_code([passed, SuiteEntry(scenario, error="port taken")]) == 2
    assert suite_exit_code([passed], interrupted=True) == 130
    store = store_path(tmp_path)
    for seed, entry in enumerate((passed, unknown)):
        run = RunDir.create(tmp_path / "suite", scenario.name)
        run.write_meta(
            {"scenario": {**scenario.as_dict(), "seed": seed}, "manifest": scenario.manifest.as_dict()}
        )
        run.verdict_json.write_text(json.dumps({"scenario": scenario.name, **entry.verdict}))
        record_run(run.root, store)
        entry.run_dir = run.root
    write_index(tmp_path / "suite", [passed, unknown], store)
    page = (tmp_path / "suite" / "index.html").read_text()
    assert page.count('<td class="cell unknown"') == 1 and "unknown in 1 of 2 seeds" in page
    assert "mmi_service unknown: no MMI answer was recorded" in page
