"""The evidence of a violation: what the history keeps of a wrong reply, whose request it
was, and what the verdict and the report show of it."""

from __future__ import annotations

import datetime as dt
from html import escape as html_escape
from typing import Any

import pytest

from contract.payload import BODY_SHOWN, FRAME_SEPARATOR, owner_of, request_id, rid_in, shown_body
from loadtests.adapters.base import received
from reports.checkers import VIOLATED, CheckContext, FaultWindow, registry
from reports.evidence import attach_evidence, line_time
from reports.history_frame import events_frame
from tests.browser import measure, screenshot, shots_dir
from tests.history import NS, T0, t


def test_a_body_is_kept_bounded_and_escaped() -> None:
    body, length = shown_body([b"client-2:9|ab\\\x00\xff", b"x" * 500])
    assert length == 16 + 500
    assert body.startswith("client-2:9|ab\\\\\\x00\\xff" + FRAME_SEPARATOR + "xxx")
    assert body.count("x") == BODY_SHOWN - 16 + 2  # two from the escapes, the rest from frame 2
    assert shown_body([]) == ("", 0)


def test_whose_request_a_body_carries() -> None:
    assert rid_in([b"MDPC01", b"echo", b"client-1.3:17|qq"]) == "client-1.3:17"
    assert owner_of(request_id("client-1.3", 17)) == ("client-1.3", 17)
    assert owner_of("no-id") is None and owner_of("client-1:x") is None and owner_of(None) is None
    assert received([b"client-4:2|zz"]) == {"body": "client-4:2|zz", "body_len": 13, "got_rid": "client-4:2"}
    assert "got_rid" not in received([b"garbage"])


# --- the evidence attached to examples (real Spark) ----------------------------------------


def clock(seconds: float) -> str:
    """A log line's time as the built-in implementations write it (local time of day)."""
    return dt.datetime.fromtimestamp(t(seconds) / NS).strftime("%H:%M:%S.%f")[:-3]


def mixed_up_history() -> list[dict[str, Any]]:
    """client-1's request 5 gets client-2's request 3 back, after a retry, in a freeze of worker-1."""
    c1 = {"src": "client-1", "cid": "client-1", "seq": 5}
    c2 = {"src": "client-2", "cid": "client-2", "seq": 3}
    return [
        {"ts": t(1.0), "ev": "send", **c1, "rid": "client-1:5", "attempt": 1},
        {"ts": t(1.2), "ev": "send", **c2, "rid": "client-2:3", "attempt": 1},
        {"ts": t(1.21), "src": "worker-1", "ev": "exec", "rid": "client-2:3", "worker": "worker-1"},
        {"ts": t(1.3), "ev": "reply", **c2, "rid": "client-2:3", "ok": True, "latency_us": 100_000},
        {"ts": t(1.5), "ev": "retry", **c1, "attempt": 2, "reason": "timeout"},
        {"ts": t(1.5) + 1, "ev": "send", **c1, "rid": "client-1:5", "attempt": 2},
        {"ts": t(1.6), "ev": "reply", **c1, "rid": "client-1:5", "ok": False, "latency_us": 600_000,
         "body": "client-2:3|qwerty", "body_len": 17, "got_rid": "client-2:3"},
        {"ts": t(9.0), "ev": "send", **c1, "seq": 6, "rid": "client-1:6", "attempt": 1},
        {"ts": t(9.1), "ev": "reply", **c1, "seq": 6, "rid": "client-1:6", "ok": True, "latency_us": 100},
    ]  # fmt: skip


def test_a_wrong_reply_shows_its_body_whose_request_it_was_the_faults_and_the_logs(spark, tmp_path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "worker-1.log").write_text(
        f"{clock(0.1)} worker-1 INFO ready\n{clock(1.55)} worker-1 ERROR sent the wrong job\n"
        "Traceback (most recent call last):\n"
        f"{clock(5.0)} worker-1 INFO later\n"
    )
    stamp = dt.datetime.fromtimestamp(t(1.7) / NS, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (tmp_path / "logs" / "broker.log").write_text(f"{stamp} requeued a job\nno time on this line\n")
    (tmp_path / "logs" / "plain.log").write_text("a log without times\n")
    meta = {
        "manifest": {"promises": {"checks": ["correct_reply"]}, "endpoints": {"frontend": "broker"}},
        "processes": {"broker": "broker", "worker-1": "worker"},
        "load_started_ns": T0,
    }
    freeze = FaultWindow(1, "freeze", "worker-1", t(1.4), t(1.7))
    later = FaultWindow(2, "kill", "broker", t(8.0), t(8.5))
    ctx = CheckContext(spark, events_frame(spark, mixed_up_history()), meta, [freeze, later], tmp_path)
    result = registry()["correct_reply"].run(ctx)
    assert result.status == VIOLATED and len(result.examples) == 1
    attach_evidence(ctx, [result], T0)
    evidence = result.examples[0]["evidence"]
    assert evidence["t_s"] == 1.6
    assert evidence["body"] == "client-2:3|qwerty" and evidence["body_len"] == 17
    own = evidence["request"]
    assert (own["rid"], own["cid"], own["seq"]) == ("client-1:5", "client-1", 5)
    assert [(e["ev"], e["t_s"]) for e in own["events"]] == [
        ("send", 1.0), ("retry", 1.5), ("send", 1.5), ("reply", 1.6)
    ]  # fmt: skip
    whose = evidence["belongs_to"]
    assert (whose["rid"], whose["cid"], whose["seq"]) == ("client-2:3", "client-2", 3)
    # Its own events, and the wrong reply that carried its id.
    assert [e["ev"] for e in whose["events"]] == ["send", "exec", "reply", "reply"]
    assert [f["fault_id"] for f in evidence["faults"]] == [1]  # the kill came later
    assert evidence["processes"] == ["client-1", "client-2", "worker-1", "broker"]
    logs = evidence["logs"]
    assert set(logs) == {"worker-1", "broker"}  # the clients have no log of their own here
    worker = logs["worker-1"]
    assert worker["path"] == "logs/worker-1.log" and (worker["from_s"], worker["to_s"]) == (0.6, 2.6)
    assert [line["text"] for line in worker["lines"]] == [
        f"{clock(1.55)} worker-1 ERROR sent the wrong job", "Traceback (most recent call last):"
    ]  # fmt: skip
    assert [line["line_no"] for line in worker["lines"]] == [2, 3]
    assert [line["text"] for line in logs["broker"]["lines"]] == [
        f"{stamp} requeued a job",
        "no time on this line",
    ]


def test_a_log_without_times_is_named_not_copied(tmp_path) -> None:
    from reports.evidence import _copy_log_lines

    (tmp_path / "plain.log").write_text("a log without times\nanother line\n")
    entry: dict[str, Any] = {}
    _copy_log_lines(tmp_path / "plain.log", [(t(2.0), entry)], T0)
    assert entry["lines"] == [] and "no time" in entry["note"]
    assert line_time("12:34:56.789 x", t(0)) is not None and line_time("99:99:99 x", t(0)) is None


# --- a whole run: a broker that sends replies to the wrong client --------------------------

#: What "what broke" looks like as laid out (tests/browser.py's probe adds it to its figures).
MEASURE = """
var top = function (el) { return el.getBoundingClientRect().top + window.scrollY; };
var broke = document.getElementById("what-broke");
out.broke_top = broke ? top(broke) : null;
out.checks_top = top(document.getElementById("checks"));
out.examples = [];
document.querySelectorAll("article.example").forEach(function (a) {
  var widest = 0;
  a.querySelectorAll("code.body, table, pre").forEach(function (el) {
    widest = Math.max(widest, el.getBoundingClientRect().right);
  });
  out.examples.push({id: a.id, right: a.getBoundingClientRect().right, widest: widest,
                     mark: !!document.getElementById("mark-" + a.id.slice(3))});
});
"""


@pytest.fixture(scope="module")
def mixup(tmp_path_factory, spark):
    """One run of the misrouting broker (tests/blackbox/mixup_broker.py), loaded by a built-in
    Lazy Pirate client and a user's client program at once."""
    from harness.runner import run_scenario
    from harness.scenario import load_scenario
    from tests.procs import ROOT

    scenario = load_scenario(ROOT / "tests" / "blackbox" / "mixup-misroute.toml")
    return run_scenario(scenario, runs_dir=tmp_path_factory.mktemp("mixup") / "runs")


def _wrong(examples: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(ex for ex in examples if (ex.get("evidence") or {}).get("kind") == kind)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_misrouted_reply_shows_what_came_back_and_whose_request_it_was(mixup) -> None:
    check = mixup.verdict["checks"]["correct_reply"]
    assert mixup.exit_code == 1 and check["status"] == VIOLATED, check["summary"]
    for kind, problem in (
        ("builtin", "reply meant for another client"),
        ("program", "reply not as expected"),
    ):
        ex = _wrong(check["examples"], kind)
        evidence = ex["evidence"]
        assert ex["problem"].startswith(problem)
        owner = evidence["belongs_to"]
        # The body is another client's request, and the evidence says whose.
        assert owner["cid"] != ex["cid"] and evidence["body"].startswith(owner["rid"] + "|")
        assert evidence["body_len"] == 32  # the payload's size, all of it shown
        # The client's first event is its send (a worker's exec may carry an earlier time:
        # the client records its send once the socket call returned).
        client_events = [e["ev"] for e in evidence["request"]["events"] if e["src"] == ex["cid"]]
        assert client_events[0] == "send"
        assert "reply" in [e["ev"] for e in owner["events"]]  # its owner got it at last, by a resend
        assert "broker" in evidence["processes"]
    # The broker's own log says when it misrouted, and the report copied those lines.
    logged = [
        line["text"]
        for ex in check["examples"]
        for line in (ex["evidence"].get("logs") or {}).get("broker", {}).get("lines", [])
    ]
    assert any("sent to" in text for text in logged), logged


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("width", [1400, 800])
def test_what_broke_opens_the_report_in_a_browser(mixup, tmp_path, width: int) -> None:
    """Headless Chromium at two widths: "what broke" comes before the checks, within the first
    screen; each example shows the body and its owner, links to its timeline marker, and
    nothing sticks out of the page."""
    report, profile = mixup.run.report_html, tmp_path / "profile"
    figures, text = measure(report, profile, width, MEASURE)
    assert text.index('id="what-broke"') < text.index('id="checks"')
    examples = mixup.verdict["checks"]["correct_reply"]["examples"]
    for kind in ("builtin", "program"):
        ex = _wrong(examples, kind)
        at = text.index(f'<article class="example" id="ex-correct_reply-{examples.index(ex) + 1}"')
        article = text[at : text.index("</article>", at)]
        assert html_escape(ex["evidence"]["body"]) in article and f"client kind {kind}" in article
        assert f'<strong class="owner">{ex["evidence"]["belongs_to"]["cid"]}</strong>' in article
    assert text.count('class="example-mark"') == text.count('<article class="example"') >= 2
    assert figures["page_overflow"] == 0 and figures["overflowing_tables"] == [], figures
    assert figures["broke_top"] < min(figures["checks_top"], 600), figures  # on the first screen
    for example in figures["examples"]:
        assert example["mark"] and example["widest"] <= example["right"] + 1, example
    png = screenshot(report, profile, width, shots_dir(tmp_path) / f"what-broke-{width}.png", 2400)
    assert len(png) > 50_000  # a blank page of this size is ~10 kB
