"""A user's own client program as the load (the ``external`` adapter, JSON lines).

First the adapter alone against small programs that misbehave (real processes, no
Locust): bad lines, protocol mistakes and early exits are recorded as client errors,
never raised, and the program is started again. Then whole runs with the standalone
Lazy Pirate clients of tests/external_clients/ (they import only zmq and json): the
correct one passes a kill-workers scenario, the one that takes late replies fails it on
correct_reply, and one that writes a bad line and dies mid-run still gives a complete
run with the errors in the report and nothing left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import zmq

from contract.errors import SetupError
from contract.history import HistoryWriter, read_events
from harness.runner import run_scenario
from harness.scenario import load_scenario
from loadtests.adapters.base import Abandoned, Lost, Reply, RequestLog
from loadtests.adapters.external import MESSAGES, NO_REQUEST, PROTOCOL, ExternalClient
from tests.procs import ROOT

CLIENTS = ROOT / "tests" / "external_clients"

# An echo "client" that needs no server: it answers each request with its own body.
ECHO = """
import json
init = json.loads(input())
print(json.dumps({"type": "init_ok"}), flush=True)
n = 0
while True:
    try:
        m = json.loads(input())
    except EOFError:
        break
    if m["type"] == "stop":
        break
    n += 1
    %s
    print(json.dumps({"type": "reply", "rid": m["rid"], "body": m["body"]}), flush=True)
"""


def program(tmp_path: Path, body: str = "pass") -> list[str]:
    path = tmp_path / "client.py"
    path.write_text(ECHO % body)
    return [sys.executable, str(path)]


def drive(client: ExternalClient, writer: HistoryWriter, n: int) -> list[tuple[RequestLog, object]]:
    """Send n requests one at a time; what each ended in."""
    outcomes = []
    for seq in range(1, n + 1):
        log = RequestLog(writer, client.cid, seq, f"{client.cid}:{seq}", "mine")
        client.submit([f"{client.cid}:{seq}|abc".encode()], log)
        done: list = []
        for _ in range(100):
            done += client.poll(0.1)
            if done:
                break
        outcomes += done
    return outcomes


@pytest.fixture
def history(tmp_path: Path):
    writer = HistoryWriter(tmp_path / "h.jsonl", "locust")
    yield writer
    writer.close()


def make(tmp_path: Path, command: list[str], writer: HistoryWriter, **options) -> ExternalClient:
    ctx = zmq.Context.instance()
    return ExternalClient(
        ["tcp://127.0.0.1:1"], options, "client-1", ctx,
        command=command, log_path=str(tmp_path / "client-1.log"), writer=writer, kind="mine",
    )  # fmt: skip


def errors(tmp_path: Path) -> list[dict]:
    return [e for e in read_events(tmp_path / "h.jsonl") if e["ev"] == "client_error"]


def test_requests_and_replies_go_through_the_program(tmp_path: Path, history: HistoryWriter) -> None:
    client = make(tmp_path, program(tmp_path), history)
    outcomes = drive(client, history, 3)
    client.close()
    assert [type(o) for _, o in outcomes] == [Reply] * 3
    assert [o.frames for _, o in outcomes] == [[f"client-1:{i}|abc".encode()] for i in (1, 2, 3)]
    assert errors(tmp_path) == [] and client.proc is None


def test_a_window_of_requests_outstanding_at_once(tmp_path: Path, history: HistoryWriter) -> None:
    # The program answers only once it holds two requests, in reverse: both must be out together.
    body = """held.append(m)
    if len(held) < 2:
        continue
    for h in reversed(held):
        print(json.dumps({"type": "reply", "rid": h["rid"], "body": h["body"]}), flush=True)
    held.clear()
    continue"""
    command = program(tmp_path, body)
    Path(command[1]).write_text(Path(command[1]).read_text().replace("n = 0", "n = 0\nheld = []"))
    client = make(tmp_path, command, history, window=2)
    logs = [RequestLog(history, "client-1", i, f"client-1:{i}", "mine") for i in (1, 2)]
    for log in logs:
        client.submit([f"{log.rid}|abc".encode()], log)
    assert client.in_flight() == 2
    done: list = []
    for _ in range(100):
        done += client.poll(0.1)
        if len(done) == 2:
            break
    client.close()
    assert [log.rid for log, _ in done] == ["client-1:2", "client-1:1"]
    assert all(isinstance(o, Reply) and o.frames == [f"{log.rid}|abc".encode()] for log, o in done)


def test_a_bad_line_is_recorded_and_the_request_goes_on(tmp_path: Path, history: HistoryWriter) -> None:
    body = 'print("garbage {" if n == 1 else json.dumps({"type": "bogus"}) if n == 2 else "[]", flush=True)'
    client = make(tmp_path, program(tmp_path, body), history)
    outcomes = drive(client, history, 3)
    client.close()
    assert [type(o) for _, o in outcomes] == [Reply] * 3  # the replies after the bad lines still count
    found = errors(tmp_path)
    assert [e["reason"] for e in found] == ["malformed", "protocol", "protocol"]
    assert found[0]["detail"].startswith("not a JSON line: garbage { (") and found[0]["cid"] == "client-1"
    assert found[0]["kind"] == "mine" and "bogus" in found[1]["detail"]


def test_a_program_that_exits_early_is_recorded_and_started_again(
    tmp_path: Path, history: HistoryWriter
) -> None:
    marker = tmp_path / "died-once"
    body = f"""
    import os, sys
    if n == 2 and not os.path.exists({str(marker)!r}):
        open({str(marker)!r}, "w").close()
        sys.stderr.write("dying now\\n")
        raise SystemExit(7)"""
    client = make(tmp_path, program(tmp_path, body), history)
    outcomes = drive(client, history, 4)
    client.close()
    kinds = [type(o) for _, o in outcomes]
    assert kinds == [Reply, Abandoned, Reply, Reply], outcomes
    assert "client program exited (code 7)" in outcomes[1][1].reason
    (exit_error,) = errors(tmp_path)
    assert exit_error["reason"] == "exit" and exit_error["code"] == 7
    assert client.starts == 2
    assert "dying now" in (tmp_path / "client-1.log").read_text()  # its stderr, in the run's logs


def test_a_program_that_never_says_init_ok(tmp_path: Path, history: HistoryWriter) -> None:
    path = tmp_path / "silent.py"
    path.write_text("import time\ntime.sleep(30)\n")
    client = make(tmp_path, [sys.executable, str(path)], history, init_timeout_ms=500)
    outcomes = drive(client, history, 1)
    assert [type(o) for _, o in outcomes] == [Abandoned]
    found = errors(tmp_path)
    assert [e["reason"] for e in found] == ["init", "init"]  # at the user's start, and again for the request
    assert "no init_ok within 500 ms" in found[0]["detail"]
    assert client.proc is None  # killed, not left behind


class _Cut(Exception):
    """What Locust's kill of a user is to the adapter: an exception in the middle of close()."""


def test_a_program_that_ignores_stop_is_recorded_also_when_the_wait_for_it_is_cut_short(
    tmp_path: Path, history: HistoryWriter
) -> None:
    """Locust kills a user whose on_stop outlasts the stop timeout, and the kill can land in
    close()'s wait for the program. Before: the program was killed but not recorded (the
    hung-program run below failed about once in twenty). Here a signal cuts that wait."""
    client = make(tmp_path, program(tmp_path, "__import__('time').sleep(600 if n == 2 else 0)"), history)
    assert [type(o) for _, o in drive(client, history, 1)] == [Reply]
    client.submit([b"client-1:2|abc"], RequestLog(history, client.cid, 2, "client-1:2", "mine"))
    proc = client.proc
    assert proc is not None and proc.stdin is not None

    def cut(*_: object) -> None:
        raise _Cut

    def once_asked_to_stop() -> None:
        deadline = time.monotonic() + 30
        while not proc.stdin.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, cut)
    try:
        threading.Thread(target=once_asked_to_stop, daemon=True).start()
        with pytest.raises(_Cut):
            client.close()  # waits up to 3 s for the program, which never exits
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert proc.poll() is not None  # killed, not left behind
    (error,) = errors(tmp_path)
    assert error["reason"] == "exit" and re.search(r"still ran \d+\.\d s after stop", error["detail"]), error
    assert "1 requests in flight it never answered" in error["detail"]


# Under gevent, as in Locust: a program that ignores stop and leaves a child holding its stdout,
# so that the adapter's reader still waits on that stream when the program is killed.
UNDER_GEVENT = """
import gevent.monkey
gevent.monkey.patch_all()
import json, sys
import zmq.green as zmq
from contract.history import HistoryWriter
from loadtests.adapters import external
external.STOP_GRACE_S = 0.5
writer = HistoryWriter(sys.argv[2], "locust")
client = external.ExternalClient(["tcp://127.0.0.1:1"], {}, "client-1", zmq.Context(),
                                 command=[sys.executable, sys.argv[1]], writer=writer)
try:
    client.close()
    print(json.dumps({"raised": None}))
except BaseException as exc:
    print(json.dumps({"raised": repr(exc)}))
writer.close()
"""
HOLDS_STDOUT = """
import json, subprocess, time
json.loads(input())
subprocess.Popen(["sleep", "600"])  # inherits stdout
print(json.dumps({"type": "init_ok"}), flush=True)
time.sleep(600)
"""


def test_a_hung_program_whose_output_stays_open_is_recorded_under_gevent(tmp_path: Path) -> None:
    """Before: the kill closed the program's stdout while the adapter's reader waited on it,
    gevent raised "reentrant call inside BufferedReader" in close(), and the program's
    failure to stop was not recorded (the hung-program run below, once in about eight)."""
    client = tmp_path / "client.py"
    client.write_text(HOLDS_STDOUT)
    # Its own session: the program and the child holding its stdout are in it, and go with it.
    proc = subprocess.Popen(
        [sys.executable, "-c", UNDER_GEVENT, str(client), str(tmp_path / "h.jsonl")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out.splitlines()[-1]) == {"raised": None}, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    found = errors(tmp_path)
    assert [e["reason"] for e in found] == ["exit", NO_REQUEST], found  # it never got a request
    assert re.search(r"still ran \d+\.\d s after stop", found[0]["detail"]), found


def test_a_program_that_keeps_crashing_is_started_again_with_back_off(
    tmp_path: Path, history: HistoryWriter
) -> None:
    """Before: started again at once for every request (178 starts in 8 s)."""
    path = tmp_path / "crash.py"
    path.write_text("raise SystemExit('crashed at start')\n")
    client = make(tmp_path, [sys.executable, str(path)], history)
    outcomes = drive(client, history, 4)
    assert [type(o) for _, o in outcomes] == [Abandoned] * 4
    assert client.starts == 5 and client.failures == 5
    # The next start waits 0.1 s x 2^4 = 1.6 s (at most 5 s), a reply resets it.
    assert 1.0 < client.next_start - time.monotonic() <= 5.0
    assert "crashed at start" in (tmp_path / "client-1.log").read_text()


def test_a_reply_to_a_request_never_sent_and_a_second_reply(tmp_path: Path, history: HistoryWriter) -> None:
    body = """print(json.dumps({"type": "reply", "rid": "nobody:1", "body": "x"}), flush=True)
    if n == 2:
        print(json.dumps({"type": "reply", "rid": "client-1:1", "body": "again"}), flush=True)"""
    client = make(tmp_path, program(tmp_path, body), history)
    drive(client, history, 2)
    client.close()
    events = list(read_events(tmp_path / "h.jsonl"))
    assert [e["reason"] for e in events if e["ev"] == "client_error"] == ["protocol", "protocol"]
    (late,) = [e for e in events if e["ev"] == "unexpected"]
    assert late["rid"] == "client-1:1" and late["kind"] == "mine"
    assert late["body"] == "again" and late["body_len"] == 5


def test_a_lost_line_records_the_request_lost_not_abandoned(tmp_path: Path, history: HistoryWriter) -> None:
    """Before: a client that never resends could only say abandon, which no_lost does not count."""
    body = """if n == 1:
        lost = {"type": "lost", "rid": m["rid"], "reason": "no reply in 5 s", "endpoint": "tcp://127.0.0.1:1"}
        print(json.dumps(lost), flush=True)
        continue
    if n == 2:
        print(json.dumps({"type": "lost", "rid": "client-1:1"}), flush=True)"""
    client = make(tmp_path, program(tmp_path, body), history)
    outcomes = drive(client, history, 2)
    client.close()
    assert [type(o) for _, o in outcomes] == [Lost, Reply]
    assert outcomes[0][1].reason == "no reply in 5 s"
    # where it waited: a driven program's send has no endpoint (no_lost's passive-server rule)
    assert outcomes[0][1].endpoint == "tcp://127.0.0.1:1"
    (error,) = errors(tmp_path)  # a lost for a request no longer in flight is a protocol error
    assert error["reason"] == "protocol" and error["detail"].startswith("lost of a request not in flight")


def test_the_protocol_is_declared_once_and_every_message_is_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    for kind, (fields, _) in MESSAGES.items():
        assert f'"type": "{kind}"' in PROTOCOL, kind
        assert f'`{{"type": "{kind}"' in readme, f"README's external client protocol lacks {kind}"
        for field in fields:
            assert f'"{field}"' in PROTOCOL.split(f'"type": "{kind}"')[1].split("\n")[0], (kind, field)


def test_a_program_that_crashes_at_start_is_recorded_as_completing_no_request(
    tmp_path: Path, history: HistoryWriter
) -> None:
    """The runner makes such a load bad input (reason no_request); one that replied is not."""
    crash = tmp_path / "crash.py"
    crash.write_text("raise SystemExit('crashed at start')\n")
    client = make(tmp_path, [sys.executable, str(crash)], history)
    drive(client, history, 2)
    client.close()
    (never,) = [e for e in errors(tmp_path) if e["reason"] == NO_REQUEST]
    assert "completed no request (3 starts" in never["detail"] and never["cid"] == "client-1"
    fine = make(tmp_path, program(tmp_path, "if n == 2:\n        print('junk', flush=True)"), history)
    drive(fine, history, 2)
    fine.close()
    assert [e["reason"] for e in errors(tmp_path)].count(NO_REQUEST) == 1


@pytest.mark.parametrize("own_fd", [0, 1])
def test_a_library_printing_to_stdout_and_the_protocol_on_its_own_descriptor(
    tmp_path: Path, history: HistoryWriter, own_fd: int
) -> None:
    """lazy_pirate.py with chatty = 1 says "I: connecting to ..." on stdout, as the guide's
    flcliapi does: each such line is a client error, named with the fix; with own_fd = 1
    the program keeps the protocol on a copy of stdout and its stdout goes to its log."""
    ctx = zmq.Context.instance()
    echo = ctx.socket(zmq.REP)
    echo.linger = 0
    port = echo.bind_to_random_port("tcp://127.0.0.1")
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            if echo.poll(50):
                echo.send(echo.recv())

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        client = ExternalClient(
            [f"tcp://127.0.0.1:{port}"], {"window": 1, "init_timeout_ms": 10000, "request_timeout_ms": 10000,
            "timeout_ms": 2000, "retries": 1, "chatty": 1, "own_fd": own_fd}, "client-1", ctx,
            command=[sys.executable, str(CLIENTS / "lazy_pirate.py")],
            log_path=str(tmp_path / "client-1.log"), writer=history, kind="mine",
        )  # fmt: skip
        outcomes = drive(client, history, 3)
        client.close()
    finally:
        stop.set()
        server.join(5)
        echo.close()
    assert [type(o) for _, o in outcomes] == [Reply] * 3  # the requests themselves went through
    found = errors(tmp_path)
    if own_fd:
        assert found == []
        assert "I: connecting to tcp://127.0.0.1:" in (tmp_path / "client-1.log").read_text()
    else:
        (chatter,) = found  # one socket opened, one line
        assert chatter["reason"] == "malformed" and "I: connecting to" in chatter["detail"]
        assert "keep the protocol on a descriptor of its own" in chatter["detail"]


# --- whole runs ---------------------------------------------------------------------------

KILL_WORKERS = """
implementation = "{manifest}"
seed = 4
duration_s = {duration}
drain_s = 6
[topology]
worker = 2
[load]
users = 4
spawn_rate = 4
wait_ms = 20
{load}
[[faults]]
kind = "kill"
target = "worker:all"
at_s = [5]
restart_after_s = 2
"""


def run(tmp_path: Path, manifest: Path, load: str = "", faults: bool = True):
    text = KILL_WORKERS.format(manifest=manifest, load=load, duration=15 if faults else 10)
    if not faults:
        text = text.split("[[faults]]")[0]
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")


def statuses(verdict: dict) -> dict[str, str]:
    return {name: c["status"] for name, c in verdict["checks"].items()}


@pytest.mark.slow
def test_a_users_lazy_pirate_program_passes_a_kill_workers_scenario(tmp_path: Path, spark) -> None:
    result = run(tmp_path, CLIENTS / "manifest.toml")
    assert result.exit_code == 0, json.dumps(result.verdict["checks"], indent=1)[:3000]
    assert set(statuses(result.verdict).values()) == {"held"}
    mine = result.verdict["metrics"]["client_kinds"]["mine"]
    assert mine["clients"] == 4 and mine["replies"] > 100 and mine["retries"] >= 1  # the kill was felt
    assert result.verdict["metrics"]["client_errors"]["count"] == 0
    events = list(read_events(result.run.history))
    assert {e.get("kind") for e in events if e["ev"] in ("send", "reply", "retry")} == {"mine"}


# A soak: the same bug (late replies taken for later requests) in a user's program through
# the same adapter fails correct_reply with the same problem in test_freelance's
# test_the_program_with_its_bugs_on_fails_the_checks_that_name_them.
@pytest.mark.soak
def test_a_program_that_takes_late_replies_fails_correct_reply(tmp_path: Path, spark) -> None:
    result = run(tmp_path, CLIENTS / "manifest-late-replies.toml")
    assert result.exit_code == 1
    status = statuses(result.verdict)
    assert status["correct_reply"] == "violated", status
    failing = result.verdict["checks"]["correct_reply"]
    assert failing["examples"] and failing["examples"][0]["problem"] == "reply not as expected (ok=false)"
    # The requests themselves were answered, once each and in order: only the bodies are wrong.
    assert status["no_lost"] == status["no_duplicate"] == status["in_order"] == "held"


@pytest.mark.slow
def test_a_bad_line_and_a_program_dying_mid_run_show_in_the_report(tmp_path: Path, spark) -> None:
    result = run(
        tmp_path, CLIENTS / "manifest.toml", load="client = { garbage_at = 5, exit_at = 40 }", faults=False
    )
    assert result.verdict is not None and result.verdict["outcome"] in (
        "passed",
        "violated",
        "unknown",
    )  # judged
    assert any("client program error(s)" in r for r in result.verdict["reasons"])  # said, not silent
    errors = result.verdict["metrics"]["client_errors"]
    assert errors["by_reason"].get("malformed", 0) >= 4  # each of the 4 programs wrote one
    assert errors["by_reason"].get("exit", 0) >= 4
    shown = {e["reason"]: e for e in errors["first"]}
    assert shown["malformed"]["detail"].startswith("not a JSON line: this is not JSON (does something")
    assert shown["exit"]["code"] == 3 and shown["exit"]["cid"].startswith("client-")
    mine = result.verdict["metrics"]["client_kinds"]["mine"]
    assert mine["abandons"] >= 4 and mine["replies"] > 4 * 40  # started again after each exit
    report = result.run.report_html.read_text()
    assert "Client program errors" in report and "not a JSON line: this is not JSON" in report
    assert "client program exited early (code 3)" in report
    assert programs_left(result.run.root) == []


HUNG = """
implementation = "{manifest}"
seed = 4
duration_s = 6
drain_s = 3
[topology]
worker = 2
[load]
users = 3
spawn_rate = 3
wait_ms = 400
client = {{ hang_at = 4 }}
"""


@pytest.mark.slow
def test_a_program_that_hangs_and_ignores_stop_is_killed_and_the_run_judged(tmp_path: Path, spark) -> None:
    """Before: Locust waited a minute for the hung program (its request_timeout_ms) and the
    run ended with "Locust did not stop within 39 s", exit 2, no verdict.json."""
    path = tmp_path / "scenario.toml"
    path.write_text(HUNG.format(manifest=CLIENTS / "manifest.toml"))
    result = run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")
    assert result.verdict is not None and result.run.verdict_json.exists()
    meta = json.loads(result.run.run_json.read_text())
    drained_s = (meta["phases_done"]["drain"] - meta["load_stopped_ns"]) / 1e9
    assert drained_s < 30  # the drain (3 s) and the stop's grace, not the program's minute
    errors = result.verdict["metrics"]["client_errors"]
    assert errors["count"] >= 3, errors  # each of the 3 programs: still running after stop
    assert any(re.search(r"still ran \d+\.\d s after stop", e["detail"]) for e in errors["first"]), errors
    assert programs_left(result.run.root) == []


CRASHING = """
implementation = "{manifest}"
seed = 4
duration_s = 4
drain_s = 2
[load]
users = 2
spawn_rate = 2
client = {{ crash_at_start = 1 }}
"""


@pytest.mark.slow
def test_a_program_that_crashes_at_start_is_bad_input_with_its_own_log(tmp_path: Path) -> None:
    """Before: UNKNOWN (exit 3) with reasons pointing at logs/locust.log, the traceback being
    in logs/client-1.log; restarted at every request."""
    path = tmp_path / "scenario.toml"
    path.write_text(CRASHING.format(manifest=CLIENTS / "manifest.toml"))
    with pytest.raises(SetupError) as info:
        run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")
    message = str(info.value)
    assert "completed no request" in message and "(and 1 more of its clients)" in message
    assert "/logs/client-" in message and "RuntimeError: crashed at start" in message  # its own log's tail
    (run,) = (tmp_path / "runs").iterdir()
    assert not (run / "verdict.json").exists()
    starts = [e for e in read_events(run / "history") if e["ev"] == "client_error" and e["reason"] == "init"]
    assert 2 <= len(starts) <= 2 * 8  # backing off: a few starts in 4 s, not one per request


def programs_left(root: Path) -> list[psutil.Process]:
    """The client programs of the run in ``root`` still alive: those holding a file of it open
    (a program's stderr is its run's logs/client-N.log). Other tests run the same program at
    the same time (pytest -n), so the program's name alone is not enough."""
    program = str(CLIENTS / "lazy_pirate.py")
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        if program not in (proc.info["cmdline"] or []):
            continue
        try:
            if any(Path(f.path).is_relative_to(root) for f in proc.open_files()):
                left.append(proc)
        except psutil.Error:
            continue
    return left
