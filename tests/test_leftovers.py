"""When ``zchaos report`` and ``zchaos suite`` return, no process they started is alive: the
Spark JVM is stopped and waited for (PySpark alone leaves it to exit after the Python
process), and several reports share that one JVM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.seeds import derive_seeds
from tests.procs import ROOT

pytestmark = pytest.mark.slow  # Spark started in a child process, and a suite of two runs

#: Every process a command starts inherits this variable, with a value of its own.
MARK = "ZCHAOS_LEFTOVER_TEST"

# What the suite test asks is bookkeeping, not latency: a loaded CI machine once gave p99
# 309 ms against the default 250 ms bound, so the bound here is generous.
SCENARIO = """
implementation = "paranoid-pirate"
seed = {seed}
duration_s = 6
drain_s = 2
[topology]
worker = 1
[load]
users = 2
spawn_rate = 2
wait_ms = 20
[promises]
latency_p99_ms = 5000
"""


def alive_with(mark: str) -> list[str]:
    """The processes (command lines) alive now that carry ``mark``; a zombie is dead already."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
        except (psutil.Error, OSError):
            continue
    return found


def zchaos(tmp_path: Path, *args: str, timeout: float) -> tuple[int, str, list[str], str]:
    """Run ``zchaos ARGS`` to its end; its exit code, output, the processes of its own still
    alive the moment it returned, and its Spark log."""
    mark = uuid.uuid4().hex
    log = tmp_path / f"spark-{mark}.log"
    env = {**os.environ, MARK: mark, "ZCHAOS_SPARK_LOG": str(log), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        text=True,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
        left = alive_with(mark)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for line in alive_with(mark):  # a failed test leaves nothing either
        os.kill(int(line.split()[0]), signal.SIGKILL)
    return proc.returncode, output, left, log.read_text() if log.exists() else ""


# The suite below reports its runs in one JVM the same way (60 s each): a soak.
@pytest.mark.soak
def test_report_of_several_runs_uses_one_jvm_and_leaves_nothing(tmp_path: Path) -> None:
    from tests.test_report import make_run

    runs = [make_run(tmp_path / name) for name in ("a", "b")]
    code, output, left, spark_log = zchaos(tmp_path, "report", *(str(r.root) for r in runs), timeout=300)
    assert code == 1, output  # each run has its duplicate reply
    assert left == [], output
    assert spark_log.count("driver JVM started") == 1, spark_log[-3000:]
    assert output.count("starting Spark") == 1 and output.count("reusing this process's session") == 1
    assert output.count("report built in") == 2
    assert all(r.verdict_json.exists() for r in runs)


# A soak: the report of several runs above is the same command, and asserts the same and more.
@pytest.mark.soak
def test_report_of_one_run_leaves_nothing(tmp_path: Path) -> None:
    from tests.test_report import make_run

    run = make_run(tmp_path / "a")
    code, output, left, _ = zchaos(tmp_path, "report", str(run.root), timeout=300)
    assert code == 1, output
    assert left == [], output


def test_suite_on_two_seeds_reports_every_run_in_one_jvm_and_leaves_nothing(tmp_path: Path) -> None:
    """One scenario on two seeds: two runs, each reported in the suite's one JVM, and the
    per-seed bookkeeping (harness/seeds.py): the seeds derived from the scenario's, the
    matrix's cell, a JUnit suite per seed, the per-check summary."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tiny.toml").write_text(SCENARIO.format(seed=9))
    runs = tmp_path / "runs"
    code, output, left, spark_log = zchaos(
        tmp_path, "suite", str(suite), "--seeds", "2", "--runs-dir", str(runs), timeout=600
    )
    assert code == 0, output
    assert left == [], output
    assert spark_log.count("driver JVM started") == 1, spark_log[-3000:]
    assert output.count("starting Spark") == 1 and output.count("report built in") == 2, output
    (folder,) = runs.glob("suite-*")
    (group,) = folder.glob("seeds-*-tiny")
    seeded = json.loads((group / "seeds.json").read_text())["runs"]
    assert [r["seed"] for r in seeded] == derive_seeds(9, 2)
    assert "passed in 2 of 2 seeds" in (folder / "index.html").read_text()  # the matrix's cell
    assert (folder / "junit.xml").read_text().count("<testsuite ") == 2
    assert "no_lost: held on all 2 seeds" in output
