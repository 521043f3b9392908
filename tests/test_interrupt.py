"""A command interrupted half-way (Ctrl-C or SIGTERM) stops every process it started, exits
130, writes what finished (a seeds summary, a shrink report that names the candidate it
cut short) and prints no traceback, not even the JVM bridge's. A report killed outright
(SIGKILL) leaves the verdict it was replacing marked stale."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from contract.history import read_events
from tests.procs import (
    jvms_under,
    nemesis_events,
    processes_of,
    report_process,
    run_process,
    wait_for,
    zchaos_process,
)

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


# SIGTERM is a soak: test_interrupted_seeds_write_the_summary_of_the_seeds_that_finished
# (below) and test_explore_runs' test_an_interrupted_exploration_exits_130_leaves_nothing_
# running_and_resumes send it to a process running a scenario and ask the same: exit 130,
# "interrupted", nothing left.
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.soak)])
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
    assert "zchaos: interrupted" in output and "Traceback" not in output
    assert "writing verdict.json" not in output
    _, alive = psutil.wait_procs(jvms, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert not run.verdict_json.exists()


def test_an_interrupt_as_the_report_reads_the_history_prints_no_bridge_traceback(tmp_path: Path) -> None:
    """py4j logs its broken calls with their tracebacks on the root logger: four of them
    reached the terminal when Ctrl-C came while Spark read the history."""
    from tests.test_report import make_run

    run = make_run(tmp_path / "run")
    with report_process(run.root, wait_s=60) as (report, lines):
        wait_for(lambda: any("reading history" in line for line in lines), 120, "the history to be read")
        os.killpg(report.pid, signal.SIGINT)
    output = "".join(lines)
    assert report.returncode == 130, output
    assert "Traceback" not in output and "py4j" not in output, output


# 6 s of load: with 3 s, the 2 s warm-up left too little to judge steady_state on a
# loaded CI machine (unknown: "every request was excused by a fault or the warm-up").
SHORT = """
implementation = "lazy-pirate"
duration_s = 6
drain_s = 2
[load]
users = 2
wait_ms = 20
"""


def _interrupt(proc, sig: int) -> None:
    """SIGINT as a terminal sends it (to the group), SIGTERM as `kill PID` does (to zchaos)."""
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)


# SIGINT and SIGTERM reach the same handler (the SIGTERM one was the broken case, exit 143):
# the SIGINT variant is a soak (test_an_interrupted_run_leaves_nothing_running shows it on a run),
# and this SIGTERM one is why that test's SIGTERM variant is.
@pytest.mark.parametrize(
    "sig",
    [pytest.param(signal.SIGINT, marks=pytest.mark.soak), signal.SIGTERM],
    ids=["SIGINT", "SIGTERM"],
)
def test_interrupted_seeds_write_the_summary_of_the_seeds_that_finished(tmp_path: Path, sig: int) -> None:
    import psutil

    scenario = tmp_path / "short.toml"
    scenario.write_text(SHORT)
    runs = tmp_path / "runs"
    with zchaos_process("run", str(scenario), "--seeds", "3", "--runs-dir", str(runs), wait_s=90) as (
        proc,
        lines,
    ):
        # The second seed's report: the first seed has finished.
        wait_for(lambda: sum("checking " in line for line in lines) == 2, 240, "the second seed's report")
        jvms = jvms_under(proc.pid)
        _interrupt(proc, sig)
    output = "".join(lines)
    assert proc.returncode == 130, output
    assert "Traceback" not in output, output
    [summary] = runs.glob("seeds-*/seeds.json")
    seeds = json.loads(summary.read_text())
    assert seeds["interrupted"] and seeds["exit_code"] == 130 and seeds["outcome"] == "interrupted"
    assert seeds["finished"] == 1 and seeds["finished_outcome"] == "passed"
    assert [r["outcome"] for r in seeds["runs"]] == ["passed", "interrupted"]
    assert "interrupted after 1 of 3 seeds (passed on those)" in output
    assert "interrupted: 1 of 3 finished" in (summary.parent / "index.html").read_text()
    assert processes_of(runs) == []
    _, alive = psutil.wait_procs(jvms, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


SHRINKABLE = """
implementation = "lazy-pirate"
duration_s = 10
drain_s = 2
[load]
users = 2
wait_ms = 20
[[faults]]
kind = "freeze"
target = "server"
at_s = [1]
duration_s = 1
"""


def test_an_interrupted_shrink_marks_the_candidate_it_ran_as_interrupted(tmp_path: Path) -> None:
    """Its shrink.md said "no" for the candidate cut short, as if it had not reproduced."""
    scenario = tmp_path / "shrinkable.toml"
    scenario.write_text(SHRINKABLE)
    runs = tmp_path / "runs"
    with run_process(scenario, runs, "--no-report") as runner:
        runner.communicate(timeout=120)
    assert runner.returncode == 0
    [run] = [p.parent for p in runs.glob("*/run.json")]
    # What shrink reads of the report: which check to keep violated.
    (run / "verdict.json").write_text(
        json.dumps({"outcome": "violated", "checks": {"no_lost": {"status": "violated"}}})
    )
    args = ("shrink", str(run), "--budget", "3", "--seeds-per-candidate", "1", "--check", "no_lost")
    with zchaos_process(*args, wait_s=90) as (proc, lines):
        wait_for(lambda: any("[load]" in line for line in lines), 120, "the first candidate's load")
        _interrupt(proc, signal.SIGTERM)
    output = "".join(lines)
    assert proc.returncode == 130, output
    assert "Traceback" not in output, output
    [report] = runs.glob("shrink-*/shrink.md")
    text = report.read_text()
    assert "ended early: interrupted" in text
    [row] = [line for line in text.splitlines() if line.startswith("| 1 |")]
    assert row.endswith("| interrupted (on seed 1): not known |"), text
    assert processes_of(runs) == []


def test_a_killed_report_leaves_the_verdict_it_was_replacing_marked_stale(tmp_path: Path, spark) -> None:
    """SIGKILL (no handler of ours runs) once the report's JVM runs: verdict.json and the
    results store kept saying the old outcome for a history the report never finished
    checking (issue 34 part 5). Now both say unknown and stale, with what it was; the next
    report that ends leaves no mark and nothing aside."""
    import psutil

    from reports.pipeline import build_report
    from reports.store import read_runs, record_run, store_path
    from tests.test_report import make_run

    runs = tmp_path / "runs"
    run = make_run(runs / "run")
    first = build_report(run.root)
    record_run(run.root)
    # PySpark's folder for the JVM's address (tempfile.mkdtemp, removed once the JVM answers)
    # stays behind a SIGKILL: in the test's folder, not /tmp.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    with report_process(run.root, env=env, wait_s=30) as (report, lines):
        jvms = wait_for(lambda: jvms_under(report.pid), 120, "the report's JVM")
        os.killpg(report.pid, signal.SIGKILL)
    assert report.returncode == -signal.SIGKILL, "".join(lines)
    _, alive = psutil.wait_procs(jvms, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    verdict = json.loads(run.verdict_json.read_text())
    assert verdict["outcome"] == "unknown" and verdict["exit_code"] == 3
    assert verdict["stale"]["was"] == first["outcome"] != "unknown"
    assert "stale verdict" in run.junit_xml.read_text() and 'id="stale"' in run.report_html.read_text()
    (row,) = read_runs(store_path(runs))
    assert row["outcome"] == "unknown" and "did not finish" in row["stale"]

    again = build_report(run.root)
    record_run(run.root)
    assert again["outcome"] == first["outcome"] and "stale" not in json.loads(run.verdict_json.read_text())
    (row,) = read_runs(store_path(runs))
    assert row["outcome"] == first["outcome"] and row["stale"] is None
    assert [p.name for p in run.root.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")] == []


def test_an_error_raised_while_an_interrupt_was_handled_is_an_interrupt() -> None:
    """py4j's own error when Ctrl-C broke a call to the JVM (seen under load: exit 1 and a
    traceback instead of 130): the interrupt is only its context."""
    from harness.cli import _raised_by_an_interrupt

    def broken_call() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Gateway must be connected to send cancel cmd.")  # noqa: B904

    with pytest.raises(RuntimeError) as during:
        broken_call()
    assert _raised_by_an_interrupt(during.value)
    assert not _raised_by_an_interrupt(RuntimeError("a bug of ours"))
    try:
        raise ValueError("bad input")
    except ValueError as cause:
        chained = RuntimeError("while reading")
        chained.__cause__ = cause
    assert not _raised_by_an_interrupt(chained)


def test_a_signal_during_teardown_is_raised_once_teardown_is_done() -> None:
    """A SIGTERM as a run tears down (its load over) was ignored: an exploration went on to
    its next run. It is held until the teardown is done, then raised as an interrupt; one
    during a teardown that an error or an earlier interrupt began adds nothing to it."""
    from harness.runner import Interrupted, interrupts_deferred

    torn = []
    with pytest.raises(Interrupted) as raised, interrupts_deferred():
        os.kill(os.getpid(), signal.SIGTERM)  # delivered at once: to this, the main thread
        torn.append("the rest of the teardown")
    assert torn == ["the rest of the teardown"] and raised.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is not None  # the handlers before it are back
    with pytest.raises(ValueError):
        try:
            raise ValueError("a setup error")
        finally:
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
    with interrupts_deferred():
        pass  # no signal: nothing raised
