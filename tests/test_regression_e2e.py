"""A performance-only regression is caught against a baseline: a worker that sleeps 5 s before
rejoining its queue after a restart passes its scenario on every absolute bound, and is
VIOLATED against the stored run of its fast twin (tests/faulty_impl/rejoin-*.toml, run
through their manifest by path). The two runs start at the same moment into one runs folder,
and both land in its results store."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contract.rundir import RunDir
from harness.progress import Progress
from harness.reporting import build_report_for
from reports.store import read_runs, store_path
from tests.procs import ROOT

# Two whole scenario runs, a report and four zchaos commands (over a minute): a soak. Each
# part is shown on the default run by a faster test: the baseline check and `zchaos compare`
# (tests/test_results_store.py: test_the_regression_check_against_a_stored_baseline,
# test_compare_says_what_got_worse_check_by_check_and_figure_by_figure), runs landing in one
# store at once (test_concurrent_writers_all_land), the matrix's regressed cell
# (tests/test_matrix.py), a recovery figure from a real run (the CI scenarios).
pytestmark = pytest.mark.soak

FAST = ROOT / "tests" / "faulty_impl" / "rejoin-fast.toml"
SLOW = ROOT / "tests" / "faulty_impl" / "rejoin-slow.toml"
#: A run of 20 s of load takes about a minute with its report; two at once on two busy cores more.
RUN_LIMIT_S = 600


def zchaos(*args: str, timeout: float = RUN_LIMIT_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_slower_recovery_is_violated_against_the_fast_twins_baseline(tmp_path: Path, spark) -> None:
    runs = tmp_path / "runs"
    started = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "run",
                str(scenario),
                "--runs-dir",
                str(runs),
                "--subject-version",
                version,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for scenario, version in ((FAST, "fast"), (SLOW, "slow"))
    ]
    try:
        outputs = [p.communicate(timeout=RUN_LIMIT_S)[0] for p in started]
    finally:
        for p in started:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    fast_code, slow_code = (p.returncode for p in started)
    assert fast_code == 0, outputs[0][-3000:]
    # The slow twin holds every absolute bound; only its baseline is not stored yet: unknown.
    assert slow_code == 3, outputs[1][-3000:]

    stored = {r["subject_version"]: r for r in read_runs(store_path(runs))}
    assert set(stored) == {"fast", "slow"}, "both runs landed in the store"
    fast, slow = (runs / stored[v]["run"] for v in ("fast", "slow"))
    slow_checks = stored["slow"]["checks"]
    assert {n: c["outcome"] for n, c in slow_checks.items() if n != "baseline"} == dict.fromkeys(
        [n for n in slow_checks if n != "baseline"], "passed"
    )
    assert slow_checks["baseline"]["outcome"] == "unknown"
    fast_recovery = stored["fast"]["figures"]["max_recovery_s"][0]["value"]
    slow_recovery = stored["slow"]["figures"]["max_recovery_s"][0]["value"]
    assert slow_recovery > 1.5 * fast_recovery + 0.5, (fast_recovery, slow_recovery)

    marked = zchaos("baseline", str(fast), "--label", "fast")
    assert marked.returncode == 0, marked.stderr
    # Reported again in this process's Spark session, as `zchaos report` does (its own
    # command-line end to end is tests/test_leftovers.py's): a cold JVM less.
    said = io.StringIO()
    rebuilt = build_report_for(RunDir(slow), Progress(said, said))
    assert rebuilt["exit_code"] == 1, said.getvalue()[-3000:]
    verdict = json.loads((slow / "verdict.json").read_text())
    baseline = verdict["checks"]["baseline"]
    assert baseline["outcome"] == "violated" and baseline["violations"] >= 1
    assert (
        "max_recovery_s" in baseline["examples"][0]["problem"]
        or "recovery_s" in baseline["examples"][0]["problem"]
    )
    assert verdict["checks"]["recovery"]["outcome"] == "passed"  # within recovery_bound_s
    assert [n for n, c in verdict["checks"].items() if c["outcome"] != "passed"] == ["baseline"]
    page = (slow / "report.html").read_text()
    assert (
        "no regression against the stored baseline run" in page and "against baseline &#39;fast&#39;" in page
    )

    compared = zchaos("compare", str(slow), "--baseline", "fast")
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "WORSE max_recovery_s" in compared.stdout and (slow / "compare.html").exists()

    matrix = zchaos("matrix", str(runs))
    assert matrix.returncode == 0, matrix.stderr
    html = (runs / "matrix.html").read_text()
    assert "faulty-paranoid-pirate slow" in html and "faulty-paranoid-pirate fast" in html
    assert html.count('class="regressed"') == 1
