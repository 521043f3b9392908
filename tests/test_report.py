"""The report pipeline end to end on a synthetic run directory (real Spark, real files)."""

from __future__ import annotations

import json
import os
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.history import HistoryWriter, history_file
from contract.rundir import RunDir, RunMeta
from reports.checkers import HELD, UNKNOWN, VIOLATED, CheckResult
from reports.history_frame import parquet_is_current
from reports.ingest import read
from reports.junit import junit_tree
from reports.pipeline import build_report
from reports.verdict import build_verdict
from tests.browser import dom, measure, screenshot, shots_dir
from tests.history import GENERIC, T0, t

LOAD_S = 30
EVIL = "<script>alert('x')</script>&"


def make_run(
    root: Path, *, expect_violated: tuple[str, ...] = ("no_duplicate",), completed: bool = True
) -> RunDir:
    """A run of 3 clients for 30 s with worker-2 killed from 10 to 12 s, a duplicate reply,
    a crash of worker-3 (with a log), a truncated history line and HTML in the history;
    ``completed``: its load and drain ended (else the runner died before)."""
    run = RunDir(root)
    for sub in (run.history, run.logs, run.locust):
        sub.mkdir(parents=True)
    rng = random.Random(3)
    writers: dict[str, HistoryWriter] = {}

    def w(src: str) -> HistoryWriter:
        if src not in writers:
            writers[src] = HistoryWriter(history_file(run.history, src), src)
        return writers[src]

    runner = w("runner")
    runner.emit("phase", ts=t(-1), name="load")
    if completed:
        runner.emit("phase_done", ts=t(LOAD_S), name="load")
        runner.emit("phase_done", ts=t(LOAD_S + 2), name="drain")
    for inst in ("queue", "worker-1", "worker-2", "worker-3"):
        runner.emit("proc_start", ts=t(-1), role=inst.split("-")[0], instance=inst, pid=1000 + len(inst))
    nemesis = w("nemesis")
    nemesis.emit("fault_start", ts=t(10), fault="kill", target="worker-2", fault_id=1)
    nemesis.emit("fault_stop", ts=t(12), fault="kill", target="worker-2", fault_id=1)
    runner.emit("proc_exit", ts=t(10), role="worker", instance="worker-2", pid=1008, signal=9, expected=True)
    runner.emit(
        "proc_exit",
        ts=t(20),
        role="worker",
        instance="worker-3",
        pid=1008,
        code=3,
        expected=False,
        detail=EVIL,
    )
    for c in range(1, 4):
        cid = f"client-{c}"
        client = w(cid)
        at, seq = 0.05 * c, 0
        while at < LOAD_S:
            seq += 1
            rid = f"{cid}:{seq}"
            worker = f"worker-{1 + (seq % 2) * (0 if 10 <= at < 12.5 else 1)}"
            client.emit("send", ts=t(at), cid=cid, seq=seq, rid=rid, attempt=1)
            lat = rng.uniform(0.5, 3.0) if not 10 <= at < 12 else rng.uniform(100, 900)
            w(worker).emit("exec", ts=t(at) + 10_000, rid=rid, worker=worker)
            client.emit(
                "reply",
                ts=t(at + lat / 1000),
                cid=cid,
                seq=seq,
                rid=rid,
                ok=True,
                latency_us=int(lat * 1000),
                worker=worker,
            )
            at += 0.1 + lat / 1000
        if c == 1:  # the reply to request 3 arrives a second time, while the last one is in flight
            client.emit("unexpected", ts=t(LOAD_S - 0.01), cid=cid, seq=seq, got_rid=f"{cid}:3", detail=EVIL)
    for writer in writers.values():
        writer.close()
    with history_file(run.history, "worker-1").open("a") as fh:
        fh.write('{"ts": 17637264')  # a writer killed mid-line
    run.log("worker-3").write_text(
        "starting\nready\n" + EVIL + "\nTraceback (most recent call last):\nBoom\n"
    )
    (run.locust / "stats_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Requests/s,99%,Max Response Time\n"
        "zmq,echo,1234,0,1,40.5,3,900\n,Aggregated,1234,0,1,40.5,3,900\n"
    )
    promises = {
        "checks": list(GENERIC),
        "execution": "at_least_once",
        "in_order": True,
        "recovery_bound_s": 5.0,
        "steady_grace_s": 3.0,
        "latency_p99_ms": 50.0,
    }
    run.write_meta(
        {
            "scenario": {
                "name": "synthetic-kill",
                "description": EVIL,
                "seed": 7,
                "duration_s": LOAD_S,
                "topology": {"queue": 1, "worker": 3},
                "load": {"users": 3},
                "implementation": "pp",
            },
            "manifest": {"name": "paranoid-pirate", "promises": promises},
            "expect_violated": list(expect_violated),
            "started_ns": t(-2),
            "load_started_ns": T0,
            "load_stopped_ns": t(LOAD_S),
            "ended_ns": t(LOAD_S + 3),
            "client_budget_s": 5.0,
        }
    )
    return run


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """One report of the synthetic run, checked from its columnar form split by event kind
    (as a large one would be)."""
    run = make_run(tmp_path_factory.mktemp("run") / "run")
    messages: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(read, "SPLIT_MIN_EVENTS", 1)
        verdict = build_report(run.root, progress=messages.append)
    return run, verdict, messages


@pytest.mark.slow
def test_verdict_json(built):
    run, verdict, messages = built
    assert json.loads(run.verdict_json.read_text()) == json.loads(json.dumps(verdict, default=str))
    checks = verdict["checks"]
    assert list(checks) == list(GENERIC)
    assert checks["no_duplicate"] | {"examples": None} == checks["no_duplicate"] | {
        "status": "violated",
        "outcome": "passed",
        "violations": 1,
        "expected": True,
        "examples": None,
    }
    assert checks["no_duplicate"]["examples"][0]["rid"] == "client-1:3"
    exit_check = checks["no_unexpected_exit"]
    assert (exit_check["status"], exit_check["outcome"], exit_check["violations"]) == (
        "violated",
        "violated",
        1,
    )
    assert "passed" not in exit_check  # an unknown check is neither passed nor failed: outcome says which
    assert checks["execution_count"]["outcome"] == "unknown"  # worker-1's file is cut
    assert exit_check["examples"][0]["log_tail"][-1] == "Boom"
    assert checks["no_lost"]["status"] == "held"
    assert checks["recovery"]["status"] == "held"
    assert checks["steady_state"]["status"] == "held", checks["steady_state"]["summary"]
    assert (verdict["outcome"], verdict["passed"], verdict["exit_code"]) == ("violated", False, 1)
    assert verdict["input"]["bad_lines"] == 1
    lines = len(history_file(run.history, "worker-1").read_text().splitlines())
    assert verdict["input"]["bad_examples"] == [
        {"file": "worker-1.jsonl", "line_no": lines, "line": '{"ts": 17637264'}
    ]
    assert verdict["input"]["truncated"] == ["worker-1.jsonl"]
    assert verdict["input"]["damaged_clients"] == {}  # a worker's file: no client's requests left out
    assert verdict["completion"]["phases_done"] == ["drain", "load"] and verdict["incomplete"] == []
    assert verdict["metrics"]["latency_ms"]["count"] > 500
    assert verdict["metrics"]["timeline"][0]["t"] == 0
    assert "reading history" in messages and any(m.startswith("  recovery done in ") for m in messages)
    assert "writing the history's columnar form (events.parquet)" in messages


@pytest.mark.slow  # the built report: a JVM start and a report, about 40 s (the quick tier has none)
def test_junit_xml(built):
    run, _, _ = built
    suite = ET.parse(run.junit_xml).getroot().find("testsuite")
    assert suite.get("tests") == str(len(list(GENERIC))) and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(list(GENERIC))
    assert {c.get("classname") for c in cases.values()} == {"synthetic-kill"}
    assert cases["no_unexpected_exit"].find("failure") is not None
    assert cases["no_duplicate"].find("failure") is None  # violated, as expected
    assert cases["no_lost"].find("failure") is None and cases["no_lost"].find("skipped") is None


@pytest.mark.slow  # the built report: a JVM start and a report, about 40 s (the quick tier has none)
def test_report_html(built):
    run, _, _ = built
    page = run.report_html.read_text()
    assert EVIL not in page and "<script" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;" in page
    assert page.count('class="fault-band"') == 1 and "kill worker-2" in page
    assert 'id="violations-no_unexpected_exit"' in page and 'id="violations-no_duplicate"' in page
    assert "Traceback (most recent call last):" in page
    assert "Aggregated" in page  # Locust's statistics
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


@pytest.mark.slow
def test_rebuild_reads_the_compacted_history(built):
    run, first, _ = built
    assert (run.history / "events.parquet" / "_zchaos_input.json").exists()
    assert (run.history / "events.parquet" / "ev=reply").is_dir()  # split by kind
    # The bad line went aside while the JSON was compacted in one pass, and is gone from it.
    assert not (run.history / "events.parquet" / f"ev={read.NOT_AN_EVENT}").exists()
    assert sorted(p.name for p in run.history.iterdir() if p.name.startswith(".")) == []
    again = build_report(run.root)
    assert again["input"]["source"] == "parquet"
    assert (again["input"]["events"], again["input"]["bad_lines"]) == (first["input"]["events"], 1)
    summary = {n: (c["status"], c["violations"], c["summary"]) for n, c in first["checks"].items()}
    assert {n: (c["status"], c["violations"], c["summary"]) for n, c in again["checks"].items()} == summary
    assert again["metrics"]["events"] == first["metrics"]["events"]


@pytest.mark.slow
@pytest.mark.parametrize("large", [False, True], ids=["cached", "compacted-in-one-pass"])
def test_a_client_history_cut_mid_line_is_named_not_blamed_on_the_system(spark, tmp_path, monkeypatch, large):
    """Before: the sends lost with the cut half of a client's file were counted as thousands of
    "executions of unsent requests"; the file and the line were never named. The same whether
    the parsed lines are cached first (a short run) or the JSON goes straight to the columnar
    form, the bad lines aside (a long one: reports.ingest.read.compact_json)."""
    if large:
        monkeypatch.setattr(read, "SPLIT_MIN_EVENTS", 1)
    run = make_run(tmp_path / "run", expect_violated=())
    client2 = history_file(run.history, "client-2")
    data = client2.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 20  # 20 bytes into a line half-way through the file
    client2.write_bytes(data[:cut])
    client3 = history_file(run.history, "client-3")
    lines3 = client3.read_text().splitlines(keepends=True)
    client3.write_text("".join([*lines3[:9], "garbage, not JSON\n", *lines3[9:]]))
    verdict = build_report(run.root)
    inp = verdict["input"]
    full_lines = data[:cut].count(b"\n")
    # make_run also cut worker-1's file mid-line: a worker's, so no client's requests are left out.
    assert inp["bad_lines"] == 3 and inp["truncated"] == ["client-2.jsonl", "worker-1.jsonl"]
    assert [(b["file"], b["line_no"]) for b in inp["bad_examples"]][:2] == [
        ("client-2.jsonl", full_lines + 1),
        ("client-3.jsonl", 10),
    ]
    assert set(inp["damaged_clients"]) == {"client-2", "client-3"}
    assert (
        "client-2.jsonl: ends mid-line (truncated); 1 unreadable line(s)"
        in inp["damaged_clients"]["client-2"]
    )
    checks = verdict["checks"]
    executions = checks["execution_count"]
    assert executions["status"] == "unknown" and executions["violations"] == 0, executions["summary"]
    assert "client-2" in executions["reason"] and "client-2.jsonl" in executions["reason"]
    assert executions["figures"]["executed_but_never_sent"] == 0
    assert checks["no_lost"]["status"] == "unknown"
    assert checks["no_unexpected_exit"]["status"] == "violated"  # reads no client event: judged whole
    assert verdict["outcome"] == "violated"  # worker-3's crash is real
    assert any("client-2.jsonl ends mid-line" in w for w in inp["warnings"])
    page = run.report_html.read_text()
    assert "client-2.jsonl" in page and "unknown: client-2, client-3 left out" in page


def test_a_compaction_older_than_the_json_lines_is_ignored(tmp_path):
    parquet = tmp_path / "events.parquet"
    parquet.mkdir()
    (parquet / "part-0.parquet").write_bytes(b"")
    line = tmp_path / "client-1.jsonl"
    line.write_text("{}\n")
    os.utime(parquet / "part-0.parquet", (1000, 1000))
    assert not parquet_is_current(parquet, [line])
    os.utime(line, (900, 900))
    assert parquet_is_current(parquet, [line])


def test_expected_violation_that_did_not_happen_fails_the_run():
    meta: RunMeta = {
        "scenario": {"name": "s", "expect_violated": ["no_lost", "recovery"]},
        "manifest": {"name": "m"},
    }
    results = [
        CheckResult("no_lost", HELD, summary="all answered"),
        CheckResult("recovery", VIOLATED, 1, summary="slow"),
        CheckResult("in_order", UNKNOWN, summary="no reply", reason="no reply arrived: run a longer load"),
    ]
    verdict = build_verdict(meta, results, {})
    assert (verdict["outcome"], verdict["passed"], verdict["exit_code"], verdict["status"]) == (
        "violated",
        False,
        1,
        VIOLATED,
    )
    checks = verdict["checks"]
    assert [checks[n]["outcome"] for n in ("no_lost", "recovery", "in_order")] == [
        "violated",
        "passed",
        "unknown",
    ]
    assert "did not show it" in checks["no_lost"]["note"]
    suite = junit_tree(verdict).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["no_lost"].find("failure") is not None
    assert cases["recovery"].find("failure") is None
    assert cases["in_order"].find("skipped").get("message") == "no reply arrived: run a longer load"
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"


def test_an_undecided_check_makes_the_run_unknown_never_passed():
    results = [CheckResult("no_lost", HELD), CheckResult("in_order", UNKNOWN, reason="needs replies")]
    verdict = build_verdict({"scenario": {"name": "s"}}, results, {})
    assert (verdict["outcome"], verdict["passed"], verdict["exit_code"], verdict["status"]) == (
        "unknown",
        False,
        3,
        UNKNOWN,
    )
    assert verdict["reasons"] == ["in_order unknown: needs replies"]
    assert verdict["checks"]["in_order"]["reason"] == "needs replies"
    everything_held = build_verdict({}, [CheckResult("no_lost", HELD)], {})
    assert (everything_held["outcome"], everything_held["exit_code"], everything_held["reasons"]) == (
        "passed",
        0,
        [],
    )


def test_outcomes_combine_violated_over_incomplete_over_unknown():
    unknown = CheckResult("in_order", UNKNOWN, reason="needs replies")
    cut_short = build_verdict({}, [CheckResult("no_lost", HELD), unknown], {}, incomplete=["runner killed"])
    assert (cut_short["outcome"], cut_short["exit_code"]) == ("incomplete", 4)
    assert cut_short["reasons"][0] == "run incomplete: runner killed"
    suite = junit_tree(cut_short).getroot().find("testsuite")
    run_case = [c for c in suite.findall("testcase") if c.get("name") == "run"]
    assert run_case[0].find("error").get("message") == "runner killed" and suite.get("errors") == "1"
    seen = build_verdict({}, [CheckResult("no_lost", VIOLATED, 1), unknown], {}, incomplete=["runner killed"])
    assert (seen["outcome"], seen["exit_code"]) == ("violated", 1)
    crashed = build_verdict({}, [CheckResult("no_lost", HELD)], {}, errors=["checker x failed:\nTraceback"])
    assert (crashed["outcome"], crashed["reasons"]) == ("unknown", ["report error: checker x failed:"])


def test_missing_run_json_names_the_file(tmp_path):
    (tmp_path / "history").mkdir()
    with pytest.raises(SetupError) as err:
        build_report(tmp_path)
    assert err.value.where == str(tmp_path / "run.json")


def test_empty_history_names_the_folder(spark, tmp_path):
    run = make_run(tmp_path / "run")
    for f in run.history.glob("*.jsonl"):
        f.write_text("")
    with pytest.raises(SetupError) as err:
        build_report(run.root)
    assert err.value.where == str(run.history)
    assert "no event" in err.value.message


@pytest.mark.slow  # the built report: a JVM start and a report, about 40 s (the quick tier has none)
def test_report_renders_offline_in_chromium(built, tmp_path):
    """The page, opened by a real headless browser with no network, has its SVG bands and table."""
    run, _, _ = built
    text = dom(run.report_html, tmp_path / "profile")
    assert text.count('class="fault-band"') == 1
    assert '<rect class="band"' in text and "kill worker-2" in text
    assert 'id="violations-no_unexpected_exit"' in text
    png = screenshot(run.report_html, tmp_path / "profile", 1100, tmp_path / "report.png", 1600)
    assert len(png) > 50_000  # a blank page of this size is ~10 kB


@pytest.mark.slow  # the built report: a JVM start and a report, about 40 s (the quick tier has none)
@pytest.mark.parametrize("width", [1400, 800])
def test_every_table_fits_its_card(built, tmp_path, width):
    """At 1400 and 800 px nothing scrolls the page sideways: a wide table scrolls inside its card."""
    run, _, _ = built
    figures, text = measure(run.report_html, tmp_path / "profile", width)
    assert figures["viewport"] == width
    assert figures["page_overflow"] == 0 and figures["overflowing_tables"] == []
    assert '<a href="logs/worker-3.log"><code>worker-3</code></a>' in text
    assert "Locust counted 1,234 requests, the history" in text
    assert "221.36872" not in text
    screenshot(
        run.report_html, tmp_path / "profile", width, shots_dir(tmp_path) / f"report-{width}.png", 3000
    )


def test_the_process_logs_name_each_role_and_the_history_follower(tmp_path: Path) -> None:
    from contract.rundir import RunDir
    from reports.html import FOLLOWER_ROLE, process_logs

    run = RunDir(tmp_path)
    run.logs.mkdir()
    for log in (run.log("worker-1"), run.follower_log, run.log("stray")):
        log.write_text("a line\n")
    verdict = {"processes": [{"instance": "worker-1", "role": "worker"}]}
    roles = {row["instance"]: row["role"] for row in process_logs(run, verdict)}
    assert roles == {"follower": FOLLOWER_ROLE, "stray": "", "worker-1": "worker"}
