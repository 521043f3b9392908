"""A stranger's system in C (tests/c_subject/: an LRU queue and echo workers on Debian's
libzmq that print their readiness with plain printf and take endpoints from argv), built
here from source and run through its manifest with no wrapper in the commands: it gets
ready, reaches a verdict, and a planted bug's "What broke" shows the queue's log lines,
timed by the supervisor's stamps."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from contract.logstamp import stamp_time
from harness.config import load_toml
from harness.runner import run_scenario
from harness.scenario import parse_scenario
from tests.procs import ROOT

SUBJECT = ROOT / "tests" / "c_subject"
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # whole scenario runs


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    """The subject's programs, compiled with cc against libzmq (``./dev tests`` installs both)."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc): ./dev tests installs gcc")
    out = tmp_path_factory.mktemp("c-subject")
    probe = subprocess.run(
        ["cc", "-x", "c", "-E", "-", "-o", str(out / "probe.i")], input="#include <zmq.h>\n",
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip("no zmq.h: ./dev tests installs Debian's libzmq3-dev")
    for program in ("lru_queue", "echo_worker"):
        subprocess.run(
            ["cc", "-Wall", "-O1", "-o", str(out / program), str(SUBJECT / f"{program}.c"), "-lzmq"],
            check=True,
        )
    return out


def run(tmp_path: Path, bin_dir: Path, corrupt_every: int):
    path = SUBJECT / "kill-worker.toml"
    data = load_toml(path, "scenario")
    data["options"] = {"bin_dir": str(bin_dir), "corrupt_every": corrupt_every}
    result = run_scenario(parse_scenario(data, path, where=str(path)), runs_dir=tmp_path / "runs")
    checks = result.verdict["checks"]
    summary = json.dumps({n: (c["status"], c["summary"]) for n, c in checks.items()}, indent=1)
    return result, checks, summary


def test_the_c_system_passes_with_every_log_line_timed(tmp_path: Path, spark, bin_dir: Path) -> None:
    result, checks, summary = run(tmp_path, bin_dir, 0)
    assert result.exit_code == 0, summary
    assert {c["status"] for c in checks.values()} == {"held"}, summary
    assert checks["correct_reply"]["figures"], summary
    for name in ("queue", "worker-1", "worker-2"):
        lines = result.run.log(name).read_text().splitlines()
        assert lines and all(stamp_time(line) for line in lines), (name, lines[:5])
    # The killed worker's restart said it was ready again, unflushed, into the same log.
    assert result.run.log("worker-1").read_text().count("worker worker-1 ready") == 2


def test_a_planted_bug_shows_the_queues_timed_lines_in_what_broke(
    tmp_path: Path, spark, bin_dir: Path
) -> None:
    result, checks, summary = run(tmp_path, bin_dir, 7)
    assert result.exit_code == 1, summary
    assert {n for n, c in checks.items() if c["status"] == "violated"} == {"correct_reply"}, summary
    example = checks["correct_reply"]["examples"][0]
    queue = example["evidence"]["logs"]["queue"]
    assert "note" not in queue, queue  # not "its lines carry no time"
    texts = [line["text"] for line in queue["lines"]]
    assert any(text.endswith("changed on its way back") for text in texts), texts
    assert all(queue["from_s"] <= line["t_s"] <= queue["to_s"] for line in queue["lines"]), queue
    page = result.run.report_html.read_text()
    changed = next(line for line in queue["lines"] if line["text"].endswith("changed on its way back"))
    assert f"{changed['t_s']:.3f} s  {changed['line_no']}: {changed['text']}" in page
