"""A full disk is zchaos's trouble, never the system's (issue 34 part 1): a writer of ours
that cannot write stops recording (whole lines, a marker saying when and why, one line on
stderr) instead of raising into the subject it records for; a role's log stops while its
output goes on being read; a run whose disk fills is INCOMPLETE with "disk full at t = ..."
and stays so when reported later on a free disk; an exit after the disk filled is not
blamed on the subject; a report that cannot write its outputs exits 4 naming the file, with
nothing half-written left. Each test mounts a small tmpfs (root only; skipped otherwise)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.errors import CannotWrite
from contract.history import HistoryWriter, find_stopped, history_file, read_events
from contract.outcomes import EXIT_CODES, INCOMPLETE, UNKNOWN, VIOLATED
from contract.rundir import RunDir, disk_full_reason
from harness.output import OutputReader, output_pair
from tests.history import t
from tests.procs import ROOT, wait_for
from tests.smallfs import fill, free_bytes, small_fs

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Path]:
    with small_fs(tmp_path / "small", "2m") as mounted:
        yield mounted


def _event(writer: HistoryWriter, n: int) -> None:
    writer.emit("send", src=f"client-{n % 7}", cid=f"client-{n % 7}", seq=n, rid=f"client-{n % 7}:{n}",
                attempt=1)  # fmt: skip


def test_a_history_writer_on_a_full_disk_stops_recording_whole_lines(
    fs: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    filler = fill(fs, leave=16 * 1024)
    path = history_file(fs / "history", "worker-1")
    writer = HistoryWriter(path, "worker-1")
    n = 0
    while writer.stopped is None:  # before: OSError ENOSPC raised into the subject
        n += 1
        _event(writer, n)
        assert n < 100_000, "the writer never noticed the disk was full"
    assert writer.stopped == "No space left on device"
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a line cut mid-way"  # a short write taken back, not left torn
    events = [json.loads(line) for line in data.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    marker = find_stopped(path)
    assert marker is not None and marker["error"] == "No space left on device" and marker["ts"] > 0
    # Room again: it still records nothing, so the file shows no gap followed by more lines.
    filler.unlink()
    for m in range(n + 1, n + 50):
        _event(writer, m)
    writer.close()
    assert path.read_bytes() == data
    # A restarted process's writer of the same file records nothing either.
    with HistoryWriter(path, "worker-1") as again:
        _event(again, 1)
        assert again.stopped is not None
    assert path.read_bytes() == data
    err = capfd.readouterr().err
    assert err.count("recording stopped") == 1 and str(path) in err and "Traceback" not in err


def test_a_quiet_writer_says_nothing_and_a_whole_disk_is_recorded_whole(
    fs: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fill(fs, leave=8 * 1024)
    with HistoryWriter(fs / "runner.jsonl", "runner", announce=False) as quiet:
        for n in range(2000):
            _event(quiet, n)
    assert quiet.stopped is not None and capfd.readouterr().err == ""
    with HistoryWriter(fs / "ok.jsonl", "ok") as fine:  # the correct case: nothing stops
        pass
    assert fine.stopped is None and find_stopped(fs / "ok.jsonl") is None


#: Writes 4 MB to its output, as a chatty server does, then exits.
CHATTY = "import sys\nfor i in range(40000): sys.stdout.write('%06d ' % i + 'x' * 93 + '\\n')\n"


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_a_log_on_a_full_disk_stops_but_its_program_is_still_read(fs: Path, tty: bool) -> None:
    """Before, the reading thread died on ENOSPC: the program then blocked on its full
    terminal for ever."""
    fill(fs, leave=64 * 1024)
    reader = OutputReader()
    read_end, write_end, is_tty = output_pair() if tty else (*os.pipe(), False)
    try:
        proc = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=write_end, stderr=write_end)
        os.close(write_end)
        captured = reader.add(read_end, fs / "server.log", is_tty)
        try:
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wait_for(captured.closed.is_set, 30, "the output to be read to its end")
    finally:
        reader.close()
    assert captured.stopped == "No space left on device"
    assert captured.bytes == 40000 * 101
    assert find_stopped(fs / "server.log") is not None


def test_a_run_folder_keeps_room_for_its_last_run_json(fs: Path) -> None:
    run = RunDir.create(fs / "runs", "x")
    run.make_reserve()
    meta = {"started_ns": t(-1), "load_started_ns": t(0), "manifest": {"promises": {"checks": []}}}
    filler = fill(fs)
    with pytest.raises(OSError):
        run.write_meta(meta)  # type: ignore[arg-type]
    assert not list(run.root.glob("*.tmp")) and not run.run_json.exists()
    run.release_reserve()
    run.write_meta(meta)  # type: ignore[arg-type]
    assert run.read_meta()["load_started_ns"] == t(0)
    # What a later report finds: the markers, with or without the runner's own record.
    with HistoryWriter(history_file(run.history, "locust-0"), "locust", announce=False) as w:
        while w.stopped is None:
            _event(w, 1)
    trouble = run.disk_trouble(run.read_meta())
    assert trouble is not None and trouble["stopped"] == {"history/locust-0.jsonl": "No space left on device"}
    reason = disk_full_reason(trouble, {**meta, "disk_full": trouble}, run.root)  # type: ignore[typeddict-item]
    assert reason.startswith("disk full at t = ") and "history/locust-0.jsonl" in reason
    filler.unlink()
    assert RunDir.create(fs / "runs", "y").disk_trouble(meta) is None  # type: ignore[arg-type]
    fill(fs)
    with pytest.raises(OSError):
        RunDir.create(fs / "runs", "z").make_reserve()
    assert not list((fs / "runs").glob("*z/.reserve"))


# --- whole runs and reports ------------------------------------------------------------

SCENARIO = """
implementation = "lazy-pirate"
duration_s = 4
drain_s = 1
[load]
users = 8
wait_ms = 0
"""


@pytest.mark.slow
def test_a_run_whose_disk_fills_is_incomplete_and_stays_so_on_a_free_disk(tmp_path: Path, spark) -> None:
    """Before: four tracebacks, exit 1, the server crashed by its own history writer, lines
    cut mid-way, and a later report said VIOLATED (no_unexpected_exit)."""
    from reports.pipeline import build_report

    scenario = tmp_path / "lp.toml"
    scenario.write_text(SCENARIO)
    with small_fs(tmp_path / "small", "8m") as fs:
        fill(fs, leave=2 * 1024 * 1024)  # the load fills the rest in a second or two
        runs = fs / "runs"
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli", "run", str(scenario), "--runs-dir", str(runs)],
            cwd=ROOT, capture_output=True, text=True, timeout=280,
        )  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == EXIT_CODES[INCOMPLETE], output
        assert "Traceback" not in output, output
        assert "disk full at t = " in output, output
        (root,) = [p for p in runs.iterdir() if p.is_dir()]
        leftovers = [p.name for p in root.rglob("*") if p.name.endswith(".tmp") or p.name == ".reserve"]
        assert leftovers == []
        meta = json.loads((root / "run.json").read_text())
        assert meta["disk_full"]["stopped"], meta["disk_full"]
        for f in (root / "history").glob("*.jsonl"):
            assert f.read_bytes()[-1:] in (b"", b"\n"), f"{f.name} ends mid-line"
        server = [e for e in read_events(root / "history" / "runner.jsonl") if e["ev"] == "proc_exit"]
        assert server and all(e["expected"] for e in server), server  # nothing crashed
        copy = tmp_path / "copy"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("events.parquet", "parts", "verdict.json"))
    verdict = build_report(copy)  # later, on a free disk
    assert verdict["outcome"] == INCOMPLETE, verdict["reasons"]
    assert any(r.startswith("run incomplete: disk full at t = ") or "disk full at t = " in r
               for r in verdict["reasons"]), verdict["reasons"]  # fmt: skip
    assert verdict["checks"]["no_unexpected_exit"]["status"] != VIOLATED


@pytest.mark.slow
@pytest.mark.parametrize(("full_at", "status"), [(15, UNKNOWN), (25, VIOLATED)], ids=["after", "before"])
def test_an_exit_after_the_disk_filled_is_not_blamed_on_the_system(
    tmp_path: Path, spark, full_at: float, status: str
) -> None:
    """The synthetic run's worker-3 crashes at t = 20 s: with the disk full from 15 s its
    exit may be zchaos's doing (unknown, the run incomplete); full from 25 s, it stands."""
    from reports.pipeline import build_report
    from tests.test_report import make_run

    run = make_run(tmp_path / "run", expect_violated=("no_duplicate",))
    meta = run.read_meta()
    stopped = {"history/client-1.jsonl": "No space left on device"}
    meta["disk_full"] = {"at_ns": t(full_at), "stopped": stopped}
    run.write_meta(meta)
    verdict = build_report(run.root)
    exits = verdict["checks"]["no_unexpected_exit"]
    assert exits["status"] == status, exits
    assert verdict["outcome"] == (INCOMPLETE if status == UNKNOWN else VIOLATED), verdict["reasons"]
    assert any("disk full at t = " in r for r in verdict["reasons"]), verdict["reasons"]


@pytest.mark.slow
def test_a_report_into_a_full_disk_exits_4_naming_the_file(
    tmp_path: Path, spark, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main
    from tests.test_report import make_run

    with small_fs(tmp_path / "small", "8m") as fs:
        run = make_run(fs / "run")
        fill(fs)
        assert free_bytes(fs) == 0
        code = main(["report", str(run.root)])
        err = capsys.readouterr().err
        assert code == EXIT_CODES[INCOMPLETE], err
        assert "Traceback" not in err
        # report.html is written first, verdict.json last: a verdict never vouches for pages it lacks
        assert f"zchaos: error: {run.report_html}: no space left on device" in err, err
        assert not run.verdict_json.exists() and not run.report_html.exists()
        assert [p.name for p in run.root.rglob("*") if ".tmp" in p.name] == []


def test_a_file_that_cannot_be_written_is_an_error_of_exit_4(tmp_path: Path) -> None:
    """CannotWrite names the file and what the system said, and exits as incomplete (the
    report's use of it is the test above, which needs root)."""
    import errno

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    error = CannotWrite(tmp_path / "verdict.json", full, "free space")
    assert error.exit_code == EXIT_CODES[INCOMPLETE]
    assert str(error) == f"{tmp_path / 'verdict.json'}: no space left on device: free space"
