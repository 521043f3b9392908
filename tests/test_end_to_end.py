"""End to end: a short chaos scenario passes on Paranoid Pirate, and the same load on a
deliberately faulty implementation (outside the package) fails with the right invariant."""

from __future__ import annotations

import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from contract.history import read_events
from harness.progress import Progress
from harness.runner import Runner, RunResult, run_scenario
from harness.scenario import load_scenario
from loadtests.config import read_origin
from reports.ingest.follow import PARTS, RECORD
from reports.ingest.read import PARQUET
from reports.pipeline import build_report
from tests.procs import ROOT

pytestmark = pytest.mark.slow  # whole scenario runs: left out of `./dev quick`

FAULTY = ROOT / "tests" / "faulty_impl" / "manifest.toml"
PP_KILLS = ROOT / "scenarios" / "ci" / "paranoid-pirate-kills.toml"  # one kill, one freeze

FAULTY_LOAD = """
implementation = "{implementation}"
seed = 5
duration_s = 15
drain_s = 10
[topology]
worker = {workers}
[options]
{option} = {every}
[load]
users = {users}
spawn_rate = 4
wait_ms = 20
"""


def checks(verdict: dict) -> dict[str, str]:
    return {name: check["status"] for name, check in verdict["checks"].items()}


@pytest.fixture(scope="module")
def pp_kills(tmp_path_factory, spark) -> tuple[RunResult, str]:
    """The CI scenario run once, with what it said while it ran and reported."""
    said = io.StringIO()
    runner = Runner(
        load_scenario(PP_KILLS), runs_dir=tmp_path_factory.mktemp("pp-kills"), progress=Progress(said, said)
    )
    return runner.execute(), said.getvalue()


def test_paranoid_pirate_survives_worker_kills_and_freezes(pp_kills) -> None:
    result, _ = pp_kills

    assert result.exit_code == 0, json.dumps(result.verdict["checks"], indent=1)[:3000]
    assert set(checks(result.verdict).values()) == {"held"}
    assert len(checks(result.verdict)) == 9
    # The kill and the freeze each hit one worker of three: promised survivable, and survived.
    rows = result.verdict["checks"]["availability"]["figures"]["faults"]
    assert [r["verdict"] for r in rows] == ["held", "held"]
    assert result.verdict["checks"]["steady_state"]["figures"]["judged_fraction"] >= 0.2
    recovery = result.verdict["checks"]["recovery"]
    assert "2 healed faults" in recovery["summary"]
    junit = ET.parse(result.run.junit_xml).getroot()
    assert len(junit.findall(".//testcase")) == 9 and not junit.findall(".//failure")
    report = result.run.report_html.read_text()
    assert "kill worker-" in report and "freeze worker-" in report  # fault bands are labelled
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", report)  # no external resource: works offline
    # The load's time zero is Locust's own start of its users, not the runner's start of
    # Locust (seconds earlier on a loaded machine): faults are timed from it.
    meta = json.loads(result.run.run_json.read_text())
    assert meta["load_started_ns"] == read_origin(result.run.load_origin)
    events = list(read_events(result.run.history))
    first_send = min(e["ts"] for e in events if e["ev"] == "send")
    faults = sorted(e["ts"] for e in events if e["ev"] == "fault_start")
    assert meta["load_started_ns"] <= first_send < faults[0]


def test_the_history_is_converted_while_the_run_goes_on(pp_kills, tmp_path: Path) -> None:
    """The report took what the follower wrote while the run went on and converted only the
    lines after it, and gives the verdict a report of the JSON lines alone gives. The
    follower did not outlive the run.

    How much the follower converts depends on the CPU the run leaves it (it runs at nice 19):
    on a machine as busy as CI's, seen once, it wrote one part, after the load. That it writes
    parts while a file grows is tests/test_follow.py's
    test_the_follower_process_is_niced_and_ends_with_its_starter, which waits for them."""
    import psutil

    result, said = pp_kills
    run = result.run
    record = json.loads((run.history / PARTS / RECORD).read_text())
    assert record["declined"] is None
    in_parts = sum(p["rows"] for f in record["files"].values() for p in f["parts"])
    if in_parts:
        line = re.search(
            r"history: ([\d,]+) events from parts written during the run, ([\d,]+) converted now", said
        )
        assert line, said
        from_parts, now = (int(n.replace(",", "")) for n in line.groups())
        assert from_parts == in_parts and from_parts + now == result.verdict["input"]["events"]
    else:  # the follower had no CPU before the run's end: the report converted it all
        assert f"{result.verdict['input']['events']:,} events written to history/" in said, said

    log = run.log("follower").read_text()
    pid = int(re.search(r"as pid (\d+)", log)[1])
    assert "stopped after" in log and not psutil.pid_exists(pid), log

    copy = tmp_path / "without-parts"
    shutil.copytree(
        run.root, copy, ignore=shutil.ignore_patterns(PARTS, PARQUET, "verdict.json", "report.html")
    )
    again = build_report(copy)
    assert again["input"]["events"] == result.verdict["input"]["events"]
    outcome = {name: (c["status"], c.get("violations")) for name, c in result.verdict["checks"].items()}
    assert {name: (c["status"], c.get("violations")) for name, c in again["checks"].items()} == outcome


@pytest.mark.parametrize(
    ("option", "every", "workers", "users", "violated"),
    [
        # Dropped requests: clients time out and retry with no fault to excuse it.
        ("drop_every", 60, 2, 4, "steady_state"),
        # One client, one worker: a stale reply is the client's own earlier reply, again.
        ("stale_every", 40, 1, 1, "no_duplicate"),
    ],
)
def test_a_faulty_implementation_fails_with_the_invariant_named(
    tmp_path: Path, spark, option: str, every: int, workers: int, users: int, violated: str
) -> None:
    path = tmp_path / "faulty.toml"
    path.write_text(
        FAULTY_LOAD.format(implementation=FAULTY, option=option, every=every, workers=workers, users=users)
    )
    result = run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")

    assert result.exit_code == 1
    verdict = result.verdict
    assert verdict["passed"] is False
    status = checks(verdict)
    assert status[violated] == "violated"
    failing = verdict["checks"][violated]
    assert failing["violations"] >= 1 and failing["examples"]
    # Nothing else is blamed: the replies that did arrive were meant for their client,
    # in order, and none was lost.
    for fine in ("no_lost", "correct_reply", "in_order", "no_unexpected_exit"):
        assert status[fine] == "held", (fine, verdict["checks"][fine]["summary"])
    junit = ET.parse(result.run.junit_xml).getroot()
    failed = [c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None]
    assert violated in failed
