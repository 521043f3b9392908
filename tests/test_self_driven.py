"""Self-driven client programs (issue 33 part 5): a client program of the user's that makes
its own requests says each one (``send``) and its outcome on stdout, and zchaos records and
judges them like its own clients' (loadtests/adapters/external.py, self-driven mode). Unit
tests drive scripted programs through the adapter; the slow ones run a standalone program
(tests/witness/self_client.py, zmq and json only) against the stock Simple Pirate queue and
a user's workers that print ``exec <rid>`` (tests/witness/log_worker.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter, read_events
from harness.config import load_toml
from loadtests.adapters.base import Abandoned, Reply, RequestLog
from loadtests.adapters.external import ExternalClient
from tests.procs import ROOT

WITNESS = ROOT / "tests" / "witness"

pytestmark = pytest.mark.timeout(60)

#: Says what it does from a script of lines, then waits for stop and exits 0.
SCRIPTED = """
import json, sys
init = json.loads(sys.stdin.readline())
cid = init["client_id"]
print(json.dumps({"type": "init_ok"}), flush=True)
for line in %r:
    print(line.replace("CID", cid), flush=True)
for line in sys.stdin:
    if json.loads(line)["type"] == "stop":
        break
%s
"""


def scripted(tmp_path: Path, lines: list[str], after_stop: str = "") -> list[str]:
    path = tmp_path / "client.py"
    path.write_text(SCRIPTED % (lines, after_stop))
    return [sys.executable, str(path)]


def send(rid: str, body: str | None = None) -> str:
    return json.dumps({"type": "send", "rid": rid, "body": body if body is not None else f"{rid}|abc"})


def reply(rid: str, body: str | None = None) -> str:
    return json.dumps({"type": "reply", "rid": rid, "body": body if body is not None else f"{rid}|abc"})


class Driver:
    """What ZchaosUser does for a self-driven program: numbers each send and keeps outcomes."""

    def __init__(self, tmp_path: Path, command: list[str], **options: object) -> None:
        self.path = tmp_path / "h.jsonl"
        self.writer = HistoryWriter(self.path, "locust")
        self.client = ExternalClient(
            ["tcp://127.0.0.1:1"], {"self_driven": True, **options}, "client-1", zmq.Context.instance(),
            command=command, log_path=str(tmp_path / "client-1.log"), writer=self.writer, kind="mine",
        )  # fmt: skip
        self.seq = 0
        self.bodies: dict[str, str] = {}
        self.client.make_log = self.log_for
        self.outcomes: list[tuple[RequestLog, object]] = []

    def log_for(self, rid: str, body: str) -> RequestLog:
        self.seq += 1
        self.bodies[rid] = body
        return RequestLog(self.writer, "client-1", self.seq, rid, "mine")

    def collect_until(self, n: int, limit_s: float = 20.0) -> None:
        deadline = time.monotonic() + limit_s
        while len(self.outcomes) < n and time.monotonic() < deadline:
            self.outcomes += self.client.poll(0.1)

    def stop(self, limit_s: float = 20.0) -> None:
        self.client.begin_stop()
        deadline = time.monotonic() + limit_s
        while not self.client.stopped() and time.monotonic() < deadline:
            self.outcomes += self.client.poll(0.1)
        self.client.close()
        self.writer.close()

    def events(self, *kinds: str) -> list[dict]:
        return [e for e in read_events(self.path) if e["ev"] in kinds]


def test_a_programs_own_requests_are_numbered_and_recorded(tmp_path: Path) -> None:
    lines = [
        send("CID:a"),
        send("CID:b"),
        reply("CID:b"),
        json.dumps({"type": "retry", "rid": "CID:a", "attempt": 2}),
    ]
    lines += [
        reply("CID:a"),
        send("CID:c"),
        json.dumps({"type": "abandon", "rid": "CID:c", "reason": "gave up"}),
    ]
    d = Driver(tmp_path, scripted(tmp_path, lines))
    d.collect_until(3)
    d.stop()
    assert [(log.seq, log.rid, type(o)) for log, o in d.outcomes] == [
        (2, "client-1:b", Reply),
        (1, "client-1:a", Reply),
        (3, "client-1:c", Abandoned),
    ]
    sends = [(e["seq"], e["rid"], e["attempt"]) for e in d.events("send")]
    assert sends == [(1, "client-1:a", 1), (2, "client-1:b", 1), (1, "client-1:a", 2), (3, "client-1:c", 1)]
    assert [(e["seq"], e["attempt"]) for e in d.events("retry")] == [(1, 2)]
    assert d.events("client_error") == []


def test_lines_outside_the_protocol_are_client_errors(tmp_path: Path) -> None:
    lines = [
        send("other:1"),  # not its client id
        send("CID:"),  # nothing after it
        send("CID:1"),
        send("CID:1"),  # a second send of one id
        reply("CID:1"),
        send("CID:1"),  # an id used again after its reply
        reply("CID:2"),  # never sent
    ]
    d = Driver(tmp_path, scripted(tmp_path, lines))
    deadline = time.monotonic() + 20
    while len(d.events("client_error")) < 5 and time.monotonic() < deadline:
        d.outcomes += d.client.poll(0.1)
    d.stop()
    assert [log.rid for log, _ in d.outcomes] == ["client-1:1"]
    details = [e["detail"] for e in d.events("client_error")]
    assert len(details) == 5, details
    assert "a request id is client-1: then anything" in details[0] and "client-1:" in details[1]
    assert "a second send" in details[2] and "a second send" in details[3]
    assert "never sent" in details[4]


def test_a_send_without_self_driven_mode_is_a_protocol_error(tmp_path: Path) -> None:
    d = Driver(tmp_path, scripted(tmp_path, [send("CID:1")]), self_driven=False)
    deadline = time.monotonic() + 10
    while not d.events("client_error") and time.monotonic() < deadline:
        d.client.poll(0.1)
    d.client.close()
    assert "self-driven" in d.events("client_error")[0]["detail"]


def test_at_stop_it_finishes_what_is_in_flight_and_the_rest_stays_undecided(tmp_path: Path) -> None:
    # It sends two, then on stop answers one and exits 0: the other is no abandon of its.
    after = f"print({reply('CID:x')!r}.replace('CID', cid), flush=True)"
    d = Driver(tmp_path, scripted(tmp_path, [send("CID:x"), send("CID:y")], after))
    deadline = time.monotonic() + 10
    while d.client.in_flight() < 2 and time.monotonic() < deadline:
        d.outcomes += d.client.poll(0.1)
    d.stop()
    assert [log.rid for log, _ in d.outcomes] == ["client-1:x"]
    assert d.events("client_error") == [] and d.events("abandon") == []
    assert d.client.proc is None


def test_what_it_says_after_stop_is_recorded_when_the_wait_is_cut_short(tmp_path: Path) -> None:
    # Nothing is in flight when it is asked to stop; it then sends one more and answers it
    # before it exits. Its send once went unread (the loop ended with nothing in flight) and
    # the worker's execution of that request was judged one of "an unsent request".
    after = f"print({send('CID:z')!r}.replace('CID', cid), flush=True)\n"
    after += f"print({reply('CID:z')!r}.replace('CID', cid), flush=True)"
    d = Driver(tmp_path, scripted(tmp_path, [send("CID:a"), reply("CID:a")], after))
    d.collect_until(1)
    assert d.client.in_flight() == 0
    d.client.begin_stop()
    d.client.close()  # at once, as when Locust's stop timeout ran out
    d.writer.close()
    assert [e["rid"] for e in d.events("send")] == ["client-1:a", "client-1:z"]
    assert d.events("client_error") == []


def test_a_program_that_exits_early_is_started_again_by_itself(tmp_path: Path) -> None:
    marker = tmp_path / "started-once"
    # The first start sends one request and exits 3; the second answers its own.
    program = f"""
import json, os, sys
init = json.loads(sys.stdin.readline())
cid = init["client_id"]
print(json.dumps({{"type": "init_ok"}}), flush=True)
first = not os.path.exists({str(marker)!r})
open({str(marker)!r}, "w").close()
rid = cid + (":1" if first else ":2")
print(json.dumps({{"type": "send", "rid": rid, "body": rid + "|x"}}), flush=True)
if first:
    sys.exit(3)
print(json.dumps({{"type": "reply", "rid": rid, "body": rid + "|x"}}), flush=True)
for line in sys.stdin:
    break
"""
    path = tmp_path / "client.py"
    path.write_text(program)
    d = Driver(tmp_path, [sys.executable, str(path)])
    d.collect_until(2)
    d.stop()
    assert [(log.rid, type(o)) for log, o in d.outcomes] == [("client-1:1", Abandoned), ("client-1:2", Reply)]
    assert [e["reason"] for e in d.events("client_error")] == ["exit"]


@pytest.mark.timeout(120)
def test_zchaos_check_smoke_judges_the_first_requests_a_self_driven_program_makes(tmp_path: Path) -> None:
    from tests.test_manifest_check import smoke

    done = smoke(tmp_path, WITNESS / "self-driven-manifest.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "request 3: answered in" in done.stdout and "request 4" not in done.stdout
    assert "smoke: 3 of 3 requests answered with their own body; every process stopped" in done.stdout


def self_driven_run(tmp_path: Path, bug: str):
    from harness.runner import run_scenario
    from harness.scenario import parse_scenario

    path = WITNESS / "self-driven.toml"
    data = load_toml(path, "scenario")
    data["load"]["client"] = {"bug": bug}
    result = run_scenario(parse_scenario(data, path, where=str(path)), runs_dir=tmp_path / "runs")
    checks = result.verdict["checks"]
    summary = json.dumps({n: (c["status"], c["summary"]) for n, c in checks.items()}, indent=1)
    events = [
        json.loads(line) for f in result.run.history.glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    sends = [e for e in events if e["ev"] == "send"]
    assert len(sends) > 30, summary  # the programs made their own requests
    assert not [e for e in events if e["ev"] == "client_error"], summary
    return result, checks, summary


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_self_driven_client_program_is_judged_like_zchaos_own(tmp_path: Path, spark) -> None:
    result, checks, summary = self_driven_run(tmp_path, "none")
    assert result.exit_code == 0, summary
    assert {c["status"] for c in checks.values()} == {"held"}, summary
    assert checks["correct_reply"]["figures"]["replies"] > 30, summary


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("bug", "check"), [("swap", "correct_reply"), ("phantom", "execution_count")])
def test_a_self_driven_client_that_mixes_up_or_invents_replies_is_violated(
    tmp_path: Path, spark, bug: str, check: str
) -> None:
    result, checks, summary = self_driven_run(tmp_path, bug)
    assert result.exit_code == 1, summary
    assert {n for n, c in checks.items() if c["status"] == "violated"} == {check}, summary
