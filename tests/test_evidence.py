"""The evidence of a violation: what the history keeps of a wrong reply, whose request it
was, and what the verdict and the report show of it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from contract.history import BODY_SHOWN, FRAME_SEPARATOR, owner_of, request_id, rid_in, shown_body
from loadtests.adapters.base import received
from reports.checkers import VIOLATED, CheckContext, FaultWindow, registry
from reports.evidence import attach_evidence, line_time
from reports.history_frame import events_frame


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

NS = 1_000_000_000
T0 = 1_700_000_000 * NS  # load start


def t(seconds: float) -> int:
    return T0 + int(seconds * NS)


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
