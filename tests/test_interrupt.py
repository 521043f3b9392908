"""A run interrupted half-way (Ctrl-C or SIGTERM) stops every process it started."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from contract.history import read_events
from tests.procs import jvms_under, nemesis_events, processes_of, report_process, run_process, wait_for

pytestmark = pytest.mark.slow  # whole scenario runs: left out of `./dev quick`

SCENARIO = """
implementation = "paranoid-pirate"
duration_s = 60
[topology]
worker = 2
[load]
users = 4
[[faults]]
kind = "freeze"
target = "worker-1"
at_s = [1]
duration_s = 30
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_nothing_running(tmp_path: Path, sig: int) -> None:
    scenario = tmp_path / "long.toml"
    scenario.write_text(SCENARIO)
    runs = tmp_path / "runs"
    with run_process(scenario, runs) as runner:
        wait_for(lambda: nemesis_events(runs, "fault_start"), 60, "the load to run with a worker frozen")
        assert len(processes_of(runs)) >= 4  # queue, two workers, Locust
        os.kill(runner.pid, sig)
        output, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, output.decode(errors="replace")
    assert b"interrupted" in output
    assert processes_of(runs) == []
    history = next(runs.glob("*/history/runner.jsonl"))
    exits = [e for e in read_events(history) if e["ev"] == "proc_exit"]
    assert len(exits) == 4 and all(e["expected"] for e in exits)


def test_an_interrupted_report_stops_its_checks_and_its_jvm(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while the checks run two
    at a time: the report stops with 130 and its JVM ends with it."""
    import psutil

    from tests.test_report import make_run

    run = make_run(tmp_path / "run")
    env = {**os.environ, "ZCHAOS_REPORT_THREADS": "2"}
    with report_process(run.root, env, wait_s=30) as (report, lines):
        # The first task done: the others are still running or waiting (ten tasks, two threads).
        wait_for(lambda: any(" done in " in line for line in lines), 120, "the first check to end")
        assert any("(2 at a time)" in line for line in lines), lines
        jvms = jvms_under(report.pid)
        assert jvms, "no JVM under the report"
        os.killpg(report.pid, signal.SIGINT)
    output = "".join(lines)
    assert report.returncode == 130, output
    assert "zchaos: interrupted" in output
    assert "writing verdict.json" not in output
    _, alive = psutil.wait_procs(jvms, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert not run.verdict_json.exists()
