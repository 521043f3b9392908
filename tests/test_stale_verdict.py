"""A verdict a report started to replace is stale until that report ends (issue 34 part 5).

Before, a ``zchaos report`` killed half-way left the old verdict.json, junit.xml, report.html
and results-store row saying PASSED for a history that might now say otherwise. Now the
report marks them stale first (reports/pipeline.py ``mark_stale``) and puts its own outputs
in place whole at its end; everything that reads a verdict shows a stale one as unknown and
stale. These tests build the outputs without Spark; tests/test_interrupt.py kills a real
report once its JVM runs.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from contract.errors import SetupError
from contract.rundir import RunDir, RunMeta
from harness.shrink import violated_check
from reports.baseline import compare_runs
from reports.checkers import HELD, VIOLATED, CheckResult
from reports.matrix import render_matrix
from reports.pipeline import mark_stale, write_outputs
from reports.store import SCHEMA, mark_baseline, read_runs, rebuild, record_run, store_path
from reports.verdict import build_verdict


def verdict_of(meta: RunMeta, run: RunDir, status: str) -> dict[str, Any]:
    """A verdict as a report writes it (the fields its pages read), its one check ``status``."""
    extra = {
        "times": {}, "faults": [], "processes": [], "input": {}, "completion": {},
        "run_dir": str(run.root), "generated_ns": time.time_ns(),
    }  # fmt: skip
    return build_verdict(meta, [CheckResult("no_lost", status, summary=status)], {}, extra=extra)


def reported_run(runs: Path) -> tuple[RunDir, RunMeta]:
    """A run folder with a PASSED report, in the results store of ``runs``."""
    run = RunDir(runs / "20261201T000000Z-short")
    for sub in (run.history, run.logs, run.locust):
        sub.mkdir(parents=True)
    meta: RunMeta = {
        "scenario": {"name": "short", "seed": 1},
        "manifest": {"name": "lazy-pirate", "promises": {"checks": ["no_lost"]}},
        "started_ns": time.time_ns(),
    }
    run.write_meta(meta)
    write_outputs(run, verdict_of(meta, run, HELD), meta)
    record_run(run.root)
    return run, meta


def store_row(runs: Path) -> dict[str, Any]:
    (row,) = read_runs(store_path(runs))
    return row


def matrix_pills(runs: Path) -> list[str]:
    page = render_matrix(read_runs(store_path(runs)), runs / "matrix.html", runs)
    return re.findall(r'class="pill [a-z_]+"[^>]*>([A-Z_]+)<', page)


def left_aside(run: RunDir) -> list[str]:
    return sorted(p.name for p in run.root.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


def test_a_verdict_being_replaced_says_stale_wherever_it_is_read(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run, meta = reported_run(runs)
    # The subject as it was: every reader says passed.
    assert run.read_verdict(fresh=True)["outcome"] == "passed"
    assert store_row(runs)["outcome"] == "passed" and store_row(runs)["stale"] is None
    assert matrix_pills(runs) == ["PASSED"]

    said: list[str] = []
    mark_stale(run, meta, said.append)
    assert said == ["marking the earlier verdict stale until this report ends"]
    verdict = json.loads(run.verdict_json.read_text())
    assert verdict["outcome"] == "unknown" and verdict["exit_code"] == 3 and not verdict["passed"]
    assert verdict["stale"]["was"] == "passed"
    assert verdict["reasons"][0].startswith("stale verdict: a report of this run started at ")
    assert f"zchaos report {run.root}" in verdict["stale"]["why"]
    assert verdict["checks"]["no_lost"]["outcome"] == "passed"  # as found, under an unknown run
    junit = run.junit_xml.read_text()
    assert 'name="report"' in junit and '<error message="stale verdict: ' in junit
    page = run.report_html.read_text()
    assert 'id="stale"' in page and ">UNKNOWN<" in page and ">PASSED<" not in page
    row = store_row(runs)
    assert row["outcome"] == "unknown" and "did not finish" in row["stale"]
    assert matrix_pills(runs) == ["UNKNOWN"]
    page = render_matrix(read_runs(store_path(runs)), runs / "matrix.html", runs)
    assert "stale verdict: its report did not finish" in page
    # What must not stand on an old verdict refuses it, naming the file and how to rebuild it.
    for use in (
        lambda: compare_runs(run.root, str(run.root)),
        lambda: mark_baseline(run.root, "v1"),
        lambda: violated_check(run, None),
    ):
        with pytest.raises(SetupError, match=r"verdict\.json is stale: a report of this run started") as err:
            use()
        assert err.value.where == str(run.verdict_json)
    # A store rebuilt from the run folders (zchaos index) keeps it stale; a second killed
    # report keeps what the verdict said first.
    rebuild(runs)
    assert store_row(runs)["outcome"] == "unknown" and store_row(runs)["stale"]
    mark_stale(run, meta, said.append)
    assert json.loads(run.verdict_json.read_text())["stale"]["was"] == "passed"
    assert left_aside(run) == []

    # The report that ends puts its own verdict in place: no mark, nothing aside.
    write_outputs(run, verdict_of(meta, run, VIOLATED), meta)
    record_run(run.root)
    verdict = run.read_verdict(fresh=True)
    assert verdict["outcome"] == "violated" and "stale" not in verdict
    assert not any(r.startswith("stale") for r in verdict["reasons"] + verdict["errors"])
    assert 'id="stale"' not in run.report_html.read_text() and "stale" not in run.junit_xml.read_text()
    assert store_row(runs)["outcome"] == "violated" and store_row(runs)["stale"] is None
    assert matrix_pills(runs) == ["VIOLATED"]
    assert left_aside(run) == []


def test_a_run_without_a_verdict_has_nothing_to_mark(tmp_path: Path) -> None:
    run, meta = reported_run(tmp_path / "runs")
    for path in (run.verdict_json, run.junit_xml, run.report_html):
        path.unlink()
    mark_stale(run, meta, pytest.fail)
    assert sorted(p.name for p in run.root.iterdir()) == ["history", "locust", "logs", "run.json"]


def test_a_page_that_cannot_show_the_old_verdict_goes_rather_than_say_its_outcome(tmp_path: Path) -> None:
    """An old verdict without the fields today's page reads (another version's): no page
    is left showing its outcome; verdict.json still says stale."""
    run, meta = reported_run(tmp_path / "runs")
    run.verdict_json.write_text(json.dumps({"outcome": "passed", "checks": {}}))
    mark_stale(run, meta, lambda _: None)
    assert not run.report_html.exists()
    assert json.loads(run.verdict_json.read_text())["outcome"] == "unknown"
    assert left_aside(run) == []


def test_a_store_of_the_first_schema_gets_the_stale_column(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    first = re.sub(r"report TEXT,(.*)\n\s*stale TEXT[^\n]*", r"report TEXT\1", SCHEMA)
    assert "stale" not in first
    with sqlite3.connect(store_path(runs)) as db:  # a store made before the column was
        db.executescript(first + "PRAGMA user_version = 1;")
        db.execute("INSERT INTO baselines VALUES ('v0', 'other', 'elsewhere')")
    run, meta = reported_run(runs)
    mark_stale(run, meta, lambda _: None)
    row = store_row(runs)
    assert row["outcome"] == "unknown" and row["stale"]
    with sqlite3.connect(store_path(runs)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        assert db.execute("SELECT label FROM baselines").fetchall() == [("v0",)]  # kept
