"""The history converted while the run goes on (reports/ingest/follow.py): the report's Parquet
form from the parts and the lines after them is the whole conversion's (events, account,
profile); a damaged line, written during the run or into lines already converted, is never
hidden (the report converts the history whole, which declines it to Spark); the follower
process runs at low priority and does not outlive whoever started it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contract.rundir import RunDir
from reports.ingest import arrow, follow, read
from tests.procs import ROOT, wait_for
from tests.test_ingest import clean_run

GARBAGE = b"\x00\x00garbage, not an event\n"


def grown(root: Path) -> tuple[RunDir, follow.Follower]:
    """clean_run's history written again in three steps, the follower looking after the first
    two (each cut mid-line: it takes whole lines only); the last lines are left to the report."""
    run = clean_run(root)
    full = {f: f.read_bytes() for f in sorted(run.history.glob("*.jsonl"))}
    for f in full:
        f.write_bytes(b"")
    follower = follow.Follower(run.history, min_part_bytes=1)
    for share in (0.3, 0.7):
        for f, data in full.items():
            f.write_bytes(data[: int(len(data) * share)])
        follower.step()
    for f, data in full.items():
        f.write_bytes(data)
    return run, follower


def convert(run: RunDir, split_min_events: int, using=follow.convert) -> arrow.Outcome:
    return using(
        run.history,
        sorted(run.history.glob("*.jsonl")),
        parquet=read.PARQUET,
        account_file=read.ACCOUNT_FILE,
        split_min_events=split_min_events,
        bytes_per_event=read.BYTES_PER_EVENT,
    )


def rows(run: RunDir) -> list[str]:
    """The Parquet form's events, in a comparable order (the split form's ``ev`` from its folders)."""
    import pyarrow.dataset as ds

    table = ds.dataset(run.history / read.PARQUET, format="parquet", partitioning="hive").to_table()
    return sorted(
        json.dumps({k: v for k, v in r.items()}, sort_keys=True, default=str) for r in table.to_pylist()
    )


def account(run: RunDir) -> dict:
    return json.loads((run.history / read.PARQUET / read.ACCOUNT_FILE).read_text())


@pytest.mark.parametrize("split_min_events", [1, read.SPLIT_MIN_EVENTS], ids=["split by kind", "one file"])
def test_parts_and_the_lines_after_them_give_the_whole_conversion(tmp_path, split_min_events):
    run, follower = grown(tmp_path / "run")
    whole = RunDir(tmp_path / "whole")
    shutil.copytree(run.root, whole.root, ignore=shutil.ignore_patterns(follow.PARTS))

    by_parts = convert(run, split_min_events)
    by_whole = convert(whole, split_min_events, using=arrow.convert)

    assert by_parts.declined is None and by_parts.parts_refused is None
    in_parts = sum(p["rows"] for f in follower.files.values() for p in f.parts)
    assert 0 < by_parts.from_parts == in_parts < by_parts.events == by_whole.events
    assert rows(run) == rows(whole)
    assert account(run) == account(whole)
    if split_min_events == 1:  # the parts' files are in the Parquet form as they were written
        linked = list((run.history / read.PARQUET).glob("ev=*/*.jsonl.*.parquet"))
        assert linked and all(p.stat().st_nlink == 2 for p in linked)


def test_the_report_says_how_much_came_from_parts(tmp_path):
    run, _ = grown(tmp_path / "run")
    said: list[str] = []
    outcome = read.start_conversion(run, said.append).wait()
    now = outcome.events - outcome.from_parts
    assert (
        f"history: {outcome.from_parts:,} events from parts written during the run, {now:,} converted now"
        in ("\n".join(said))
    )


def _damage_converted_line(run: RunDir, follower: follow.Follower) -> None:
    """A line the follower converted overwritten, the file's size unchanged."""
    name = max(follower.files, key=lambda n: follower.files[n].end)
    path = run.history / name
    data = bytearray(path.read_bytes())
    start = data.index(b"\n") + 1  # the second line
    end = data.index(b"\n", start)
    data[start:end] = b"x" * (end - start)
    path.write_bytes(bytes(data))


def _garbage_after_the_parts(run: RunDir, follower: follow.Follower) -> None:
    """A line that is not an event written during the run, the follower looking after it."""
    path = run.history / max(follower.files, key=lambda n: follower.files[n].end)
    with path.open("ab") as fh:
        fh.write(GARBAGE + b'{"ts":1,"src":"a","ev":"send"}\n')
    follower.step()


def _cut_at_the_end(run: RunDir, follower: follow.Follower) -> None:
    """A file cut mid-line by its killed writer, after its parts."""
    path = run.history / max(follower.files, key=lambda n: follower.files[n].end)
    with path.open("ab") as fh:
        fh.write(b'{"ts":1,"src"')


@pytest.mark.parametrize(
    ("damage", "refused"),
    [
        (_damage_converted_line, "changed after its parts were written"),
        (_garbage_after_the_parts, "the follower declined history/"),
        (_cut_at_the_end, "the lines after them: history/"),
    ],
)
def test_parts_never_hide_damage(tmp_path, damage, refused):
    """The report then converts the history whole, which declines it: Spark's permissive reader
    reads it, and accounts for the damaged line (tests/test_ingest.py, test_damaged_history.py)."""
    run, follower = grown(tmp_path / "run")
    damage(run, follower)
    outcome = convert(run, read.SPLIT_MIN_EVENTS)
    assert refused in (outcome.parts_refused or "")
    assert outcome.declined and outcome.from_parts == 0
    assert not (run.history / read.PARQUET).exists()


def test_a_declining_follower_writes_no_more_parts(tmp_path):
    run, follower = grown(tmp_path / "run")
    _garbage_after_the_parts(run, follower)
    parts = {n: len(f.parts) for n, f in follower.files.items()}
    for path in run.history.glob("*.jsonl"):
        with path.open("ab") as fh:
            fh.write(b'{"ts":1,"src":"a","ev":"send"}\n' * 100)
    assert follower.step() == 0
    assert {n: len(f.parts) for n, f in follower.files.items()} == parts
    record = json.loads((run.history / follow.PARTS / follow.RECORD).read_text())
    assert "not one JSON object" in record["declined"]


@pytest.mark.slow  # a process importing pyarrow at nice 19: seconds on a loaded machine
def test_the_follower_process_is_niced_and_ends_with_its_starter(tmp_path):
    """Started by a process that is then killed (SIGKILL: no teardown), it writes parts of a
    growing file at nice 19 and ends by itself."""
    import psutil

    hist = tmp_path / "history"
    hist.mkdir()
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-m', 'reports.ingest.follow', sys.argv[1],"
            " '--every', '0.1', '--min-part-bytes', '1'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(600)\n",
            str(hist),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        follower = psutil.Process(int(starter.stdout.readline()))
        record = hist / follow.PARTS / follow.RECORD

        def parts() -> int:
            try:
                files = json.loads(record.read_text())["files"]
            except (OSError, ValueError):
                return 0
            return sum(len(f["parts"]) for f in files.values())

        with (hist / "client.jsonl").open("ab") as fh:
            for i in range(3):
                fh.write(b'{"ts":%d,"src":"c","ev":"send"}\n' % i)
                fh.flush()
                wait_for(lambda i=i: parts() > i, 60, f"part {i + 1}")
        assert follower.nice() == 19
        starter.send_signal(signal.SIGKILL)
        starter.wait(30)
        follower.wait(30)  # psutil.TimeoutExpired fails the test
    finally:
        starter.kill()
        starter.wait()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_into_a_relative_runs_folder_is_followed(tmp_path: Path) -> None:
    """``--runs-dir runs`` from the user's own folder: the follower, which runs in the
    project's folder, once died at once ("No such file or directory: 'runs/.../parts'") and
    the run said only "the history's follower ended with code 1"."""
    scenario = tmp_path / "short.toml"
    scenario.write_text('implementation = "lazy-pirate"\nduration_s = 3\ndrain_s = 1\n[load]\nusers = 1\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "short.toml", "--runs-dir", "runs", "--no-report"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "follower ended" not in done.stdout + done.stderr
    [run] = [p.parent for p in (tmp_path / "runs").glob("*/run.json")]
    assert (run / "history" / follow.PARTS).is_dir(), (run / "logs" / "follower.log").read_text()
