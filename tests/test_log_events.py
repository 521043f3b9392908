"""A role's output lines become history events (issue 33 part 5): ``[roles.X.events]`` in a
manifest maps an event kind to a regex whose named groups give its fields; the supervisor's
output capture matches each whole line as it arrives (harness/output.py ``LineEvents``) and
writes the event, stamped with the line's arrival, to ``history/<instance>.lines.jsonl``.
So ``execution_count`` judges a user's own workers, which print ``exec <rid>`` and write no
history, without probe workers (tests/witness/)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.history import HistoryWriter
from harness.config import load_toml
from harness.manifest import parse_manifest
from harness.output import MAX_MATCHED_LINE, Captured, LineEvents
from harness.supervisor import ProcSpec, Supervisor
from tests.procs import ROOT

WITNESS = ROOT / "tests" / "witness"

pytestmark = pytest.mark.timeout(60)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def line_events(tmp_path: Path, patterns: dict[str, str]) -> tuple[LineEvents, Path]:
    path = tmp_path / "worker-1.lines.jsonl"
    compiled = [(kind, re.compile(text)) for kind, text in patterns.items()]
    return LineEvents(compiled, HistoryWriter(path, "worker-1"), "worker-1"), path


def test_a_matching_line_is_an_event_at_its_first_bytes_arrival(tmp_path: Path) -> None:
    made, path = line_events(tmp_path, {"exec": r"exec (?P<rid>\S+)", "done": r"done (?P<rid>\S+)"})
    t1, t2, t3 = 1_000, 2_000, 3_000
    made.feed(b"hello\nexec c-1:", t1)
    made.feed(b"7 now\r\ndone c-1:7\n", t2)  # a line begun in one read ends in the next
    made.feed(b"exec c-2:1\nexec c-2:", t3)  # the last line never ends: killed mid-line
    made.close()
    got = [(e["ev"], e["rid"], e["ts"], e["src"], e["worker"]) for e in events(path)]
    assert got == [
        ("exec", "c-1:7", t1, "worker-1", "worker-1"),
        ("done", "c-1:7", t2, "worker-1", "worker-1"),
        ("exec", "c-2:1", t3, "worker-1", "worker-1"),
    ]  # not "c-2:": a cut line could name another request


def test_a_huge_or_torn_line_is_skipped_and_nothing_raises(tmp_path: Path) -> None:
    made, path = line_events(tmp_path, {"exec": r"exec (?P<rid>\S+)(?: (?P<service>\S+))?"})
    made.feed(b"exec big " + b"x" * (MAX_MATCHED_LINE + 10), 1)
    made.feed(b"y" * MAX_MATCHED_LINE, 2)
    made.feed(b" still the same line\nexec c-1:1\n", 3)
    made.feed(b"\xff\xfe exec c-1:2 \x00\n", 4)  # not UTF-8: replaced, still matched
    made.feed(b"", 5)
    made.close()
    assert [(e["rid"], e["ts"]) for e in events(path)] == [("c-1:1", 3), ("c-1:2", 4)]
    assert "service" not in events(path)[0]  # an optional group left out is no field
    assert made.made == 2 and made.dropped == 0


def test_an_event_the_history_refuses_is_dropped_not_raised(tmp_path: Path) -> None:
    # rid is required; a pattern whose rid group is optional can match without it
    made, path = line_events(tmp_path, {"exec": r"exec(?: (?P<rid>\S+))?$"})
    made.feed(b"exec\nexec c-1:1\n", 1)
    made.close()
    assert [e["rid"] for e in events(path)] == ["c-1:1"] and made.dropped == 1


def test_the_log_keeps_every_line_with_events_alongside(tmp_path: Path) -> None:
    made, path = line_events(tmp_path, {"exec": r"exec (?P<rid>\S+)"})
    read_end, write_end = os.pipe()
    os.close(write_end)
    captured = Captured(read_end, tmp_path / "worker-1.log", tty=False, events=made)
    captured.write(b"exec a:1\n", 10)
    captured.close()
    assert (tmp_path / "worker-1.log").read_text().endswith("| exec a:1\n")
    assert [e["rid"] for e in events(path)] == ["a:1"]


MANIFEST = """
name = "m"
[client]
adapter = "lazy_pirate"
endpoint = "frontend"
[endpoints]
frontend = "queue"
[roles.queue]
command = ["{python}", "-m", "implementations.simple_pirate.queue", "--frontend", "{bind.frontend}"]
[roles.worker]
command = ["/bin/true"]
EVENTS
[promises]
checks = ["no_lost"]
"""


def manifest(tmp_path: Path, events: str):
    path = tmp_path / "manifest.toml"
    path.write_text(MANIFEST.replace("EVENTS", events))
    return parse_manifest(load_toml(path, "manifest"), path)


def test_declared_patterns_are_recorded_with_the_role(tmp_path: Path) -> None:
    m = manifest(tmp_path, "[roles.worker.events]\nexec = 'exec (?P<rid>\\S+)'\ndone = 'done (?P<rid>\\S+)'")
    worker = m.roles["worker"]
    assert [(e.kind, e.pattern) for e in worker.events] == [
        ("exec", r"exec (?P<rid>\S+)"),
        ("done", r"done (?P<rid>\S+)"),
    ]
    assert worker.records == ("exec", "done")  # what zchaos check foresees from
    assert m.as_dict()["roles"]["worker"]["events"] == {
        "exec": r"exec (?P<rid>\S+)",
        "done": r"done (?P<rid>\S+)",
    }


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ("exec = 'exec (?P<rid>\\S+'", "bad regular expression"),
        ("exec = 'exec \\S+'", "needs (?P<rid>...)"),
        ("exec = 'exec (?P<rid>\\S+) (?P<cid>\\S+)'", "group 'cid' is not a field of 'exec'"),
        ("exce = 'exec (?P<rid>\\S+)'", "did you mean 'exec'?"),
        ("send = 'sent (?P<cid>\\S+)'", "'send' is not an event a role's output may make"),
        ("exec = 3", "exec"),
    ],
)
def test_a_wrong_pattern_is_named_with_its_file_and_key(tmp_path: Path, events: str, message: str) -> None:
    with pytest.raises(SetupError) as err:
        manifest(tmp_path, "[roles.worker.events]\n" + events)
    text = str(err.value)
    assert message in text and "manifest.toml" in text and "roles.worker.events" in text


def test_a_real_process_printing_exec_lines_makes_exec_events(supervisor: Supervisor, tmp_path: Path) -> None:
    program = "import time\nfor i in range(3): print(f'exec c-1:{i}')\nprint('ready')\ntime.sleep(3600)\n"
    out = tmp_path / "history" / "worker-1.lines.jsonl"
    spec = ProcSpec(
        instance="worker-1",
        role="worker",
        argv=[sys.executable, "-c", program],
        log=tmp_path / "worker-1.log",
        ready_line="^ready",
        captured=True,
        events=(("exec", r"exec (?P<rid>\S+)"),),
        events_history=out,
    )
    before = time.time_ns()
    supervisor.start(spec, ready_timeout=20.0)
    got = events(out)
    assert [e["rid"] for e in got] == ["c-1:0", "c-1:1", "c-1:2"]
    assert all(before <= e["ts"] <= time.time_ns() and e["worker"] == "worker-1" for e in got)


def witness_run(tmp_path: Path, twice_every: int):
    from harness.runner import run_scenario
    from harness.scenario import parse_scenario

    path = WITNESS / "log-witness.toml"
    data = load_toml(path, "scenario")
    data["options"] = {"twice_every": twice_every}
    result = run_scenario(parse_scenario(data, path, where=str(path)), runs_dir=tmp_path / "runs")
    checks = result.verdict["checks"]
    summary = json.dumps({n: (c["status"], c["summary"]) for n, c in checks.items()}, indent=1)
    # the workers wrote no history: every exec came from their printed lines
    assert not list(result.run.history.glob("worker-?.jsonl")), summary
    assert sorted(p.name for p in result.run.history.glob("*.lines.jsonl")) == [
        "worker-1.lines.jsonl",
        "worker-2.lines.jsonl",
    ]
    return result, checks, summary


# A soak: test_self_driven's test_a_self_driven_client_program_is_judged_like_zchaos_own runs
# the same worker (log_worker.py, its exec pattern) with every check held; a start stagger is
# test_start_timing's.
@pytest.mark.soak
@pytest.mark.timeout(600)
def test_a_users_worker_that_prints_exec_is_judged_by_execution_count(tmp_path: Path, spark) -> None:
    result, checks, summary = witness_run(tmp_path, 0)
    counted = checks["execution_count"]
    assert result.exit_code == 0, summary
    assert {c["status"] for c in checks.values()} == {"held"}, summary
    assert counted["figures"]["exec_events"] > 20, summary
    assert counted["figures"]["histogram"]["1"] == counted["figures"]["requests"], summary
    assert checks["stale_execution"]["figures"]["exec_events"] == counted["figures"]["exec_events"]
    # the scenario staggers its workers' starts by 0.5 s (issue 33 part 6): the runner did
    starts = [
        e["ts"] / 1e9
        for e in events(result.run.history / "runner.jsonl")
        if e["ev"] == "proc_start" and e["role"] == "worker"
    ]
    assert len(starts) == 2 and 0.5 <= starts[1] - starts[0] < 1.5, starts


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_users_worker_that_runs_requests_twice_is_violated(tmp_path: Path, spark) -> None:
    result, checks, summary = witness_run(tmp_path, 5)
    counted = checks["execution_count"]
    assert result.exit_code == 1, summary
    assert {n for n, c in checks.items() if c["status"] == "violated"} == {"execution_count"}, summary
    assert counted["figures"]["executed_more_than_once"] > 2, summary
    runs = counted["examples"][0]["executions"]
    assert len(runs) == 2 and runs[0]["worker"] == runs[1]["worker"]
    assert runs[0]["worker"].startswith("worker-")
