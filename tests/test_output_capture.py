"""A role's output reaches its log line by line, each line stamped with its arrival time
(harness/output.py, contract/logstamp.py): a program that prints its readiness without
flushing is ready through the supervisor's pseudo-terminal, where a plain file holds the
line in the program's buffer and the readiness error names that cause."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.history import HistoryWriter
from contract.logstamp import stamp, stamp_time, unstamped
from harness.output import Captured
from harness.supervisor import ProcSpec, Supervisor
from reports.evidence import line_time

pytestmark = pytest.mark.timeout(60)

#: Prints its readiness with no flush and waits: on a file or pipe Python's stdout (as C's
#: stdio) holds the line in its buffer; on a terminal it writes each line out. Stopped, it
#: says goodbye on a line it does not end, as it exits.
QUIET = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (print('bye', end=''), sys.exit(0)))\n"
    "print('ready', sys.stdout.isatty())\n"
    "time.sleep(3600)\n"
)


def test_each_line_is_stamped_with_the_arrival_of_its_first_byte(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    read_end, write_end = os.pipe()
    os.close(write_end)
    captured = Captured(read_end, log, tty=False)
    t1, t2 = 1_764_350_527_123_456_000, 1_764_350_528_000_001_000
    captured.write(b"first\nsec", t1)
    captured.write(b"ond\n\nthird", t2)  # a line begun in one read ends in the next
    captured.close()
    lines = log.read_text().split("\n")
    assert [unstamped(line) for line in lines] == ["first", "second", "", "third"]
    assert [stamp_time(line) for line in lines] == [t1, t1, t2, t2]
    assert lines[0] == "2025-11-28T17:22:07.123456Z | first"
    assert stamp(t2 + 999) == stamp(t2)  # microseconds: the rest is below what a line's arrival means
    assert captured.bytes == len(b"first\nsecond\n\nthird")


def test_a_stamp_is_the_time_the_report_reads_from_a_log_line() -> None:
    ts = time.time_ns() // 1000 * 1000  # a stamp keeps microseconds
    line = stamp(ts).decode() + "12:00:00 the program's own clock, which the stamp outranks"
    assert line_time(line, ts) == ts
    assert stamp_time("12:00:00 no stamp") is None and unstamped("no stamp") == "no stamp"
    # A time the program writes itself, even in the stamp's own form, is its text.
    own = "2025-11-28T17:22:07.123456Z requeued"
    assert stamp_time(own) is None and unstamped(own) == own


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    history = HistoryWriter(tmp_path / "runner.jsonl", "runner")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    sup = Supervisor(history, env)
    try:
        yield sup
    finally:
        sup.stop_all()
        history.close()


def quiet(tmp_path: Path, *, captured: bool) -> ProcSpec:
    return ProcSpec(
        instance="worker",
        role="worker",
        argv=[sys.executable, "-c", QUIET],
        log=tmp_path / "worker.log",
        ready_line=r"^ready",
        captured=captured,
    )


def test_an_unflushed_ready_line_reaches_a_captured_log_stamped(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    before = time.time_ns()
    managed = supervisor.start(quiet(tmp_path, captured=True), ready_timeout=20.0)
    first = managed.spec.log.read_text().split("\n")[0]
    assert unstamped(first) == "ready True"  # the subject sees a terminal, and "\n" stays "\n"
    assert before <= stamp_time(first) <= time.time_ns()
    supervisor.stop("worker")
    # Its last words, written as it exited, without an end of line, are kept too.
    assert managed.output is not None and managed.output.closed.wait(10)
    assert unstamped(managed.spec.log.read_text().split("\n")[-1]) == "bye"


def test_a_silent_program_is_named_as_likely_buffered(supervisor: Supervisor, tmp_path: Path) -> None:
    # The same program writing to a plain file, as every role did before: its line stays in
    # its buffer, and the error says what probably happened and what to do.
    with pytest.raises(SetupError, match=r"wrote nothing at all.*buffered.*stdbuf.*-oL"):
        supervisor.start(quiet(tmp_path, captured=False), ready_timeout=2.0)


def test_stopping_twice_is_stopping_once(tmp_path: Path) -> None:
    history = HistoryWriter(tmp_path / "runner.jsonl", "runner")
    sup = Supervisor(history, dict(os.environ))
    sup.start(quiet(tmp_path, captured=True), ready_timeout=20.0)
    sup.stop_all()
    sup.stop_all()  # as a test's cleanup may, after the test stopped it
    history.close()
    assert unstamped((tmp_path / "worker.log").read_text().split("\n")[-1]) == "bye"
