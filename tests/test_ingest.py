"""The history's JSON lines to Parquet with pyarrow (reports/arrow.py): a clean history gives
the same events, profile and account as Spark's path; anything pyarrow would read otherwise
than Spark is declined and read by Spark as before; nothing half-written is ever left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import pytest

from contract.history import FIELD_TYPES, history_file
from contract.rundir import RunDir
from reports.ingest import arrow, damage, read
from reports.ingest.damage import damage_scope
from tests.procs import jvms_under, report_process, wait_for
from tests.test_report import make_run

GOOD = '{"ts":1,"src":"a","ev":"send","cid":"c","seq":1}'
#: Lines pyarrow reads exactly as Spark does (each file: GOOD, the line, GOOD).
SAME = {
    "unknown fields": '{"ts":2,"src":"a","ev":"send","zz":{"a":[1,{"b":2}]},"yy":1e-400,"xx":NaN}',
    "nulls": '{"ts":2,"src":null,"ev":"send","cid":null,"ok":null}',
    "escapes": r'{"ts":2,"src":"a\u00e9\n\"\/\u0000\ud83d\ude00","ev":"send"}',
    "utf-8": '{"ts":2,"src":"h\u00e9llo\u4e2d","ev":"send"}',
    "field names differ in case": '{"ts":3,"TS":2,"src":"a","ev":"send","CID":"x"}',
    "limits": '{"ts":9223372036854775807,"src":"a","ev":"send","attempt":-2147483648,"ok":false}',
    "spaces": '{ "ts" : 2 , "src" : "a" , "ev" : "send" }',
    "a long line": '{"ts":2,"src":"a","ev":"send","detail":"'
    + "x" * 5000
    + '","zz":'
    + "[" * 500
    + "]" * 500
    + "}",
}
#: Lines pyarrow would read otherwise than Spark, or that are not events: declined.
DECLINED = {
    "not JSON": b"garbage, not JSON",
    "no ev": b'{"ts":2,"src":"a"}',
    "null ts": b'{"ts":null,"src":"a","ev":"send"}',
    "null": b"null",
    "a number": b"5",
    "an array": b'[{"ts":2,"src":"a","ev":"send"}]',
    "wrong type": b'{"ts":"2","src":"a","ev":"send"}',
    "number into a text field": b'{"ts":2,"src":"a","ev":"send","cid":5}',
    "float time": b'{"ts":2.0,"src":"a","ev":"send"}',
    "int32 overflow": b'{"ts":2,"src":"a","ev":"send","attempt":3000000000}',
    "field twice": b'{"ts":2,"src":"a","ev":"send","ev":"reply"}',
    "two objects on a line": b'{"ts":2,"src":"a","ev":"send"} {"ts":3,"src":"a","ev":"send"}',
    "an object over two lines": b'{"ts":2,\n"src":"a","ev":"send"}',
    "a carriage return": b'{"ts":2,"src":"a",\r"ev":"send"}',
    "CRLF": b'{"ts":2,"src":"a","ev":"send"}\r',
    "blank line": b"",
    "not UTF-8": b'{"ts":2,"src":"a\xff\xfeb","ev":"send"}',
    "too deep for Jackson": b'{"ts":2,"src":"a","ev":"send","zz":' + b"[" * 1200 + b"]" * 1200 + b"}",
    "number too long for Jackson": b'{"ts":2,"src":"a","ev":"send","zz":' + b"1" * 1100 + b"}",
    "name too long for Jackson": b'{"ts":2,"src":"a","ev":"send","' + b"k" * 60000 + b'":1}',
    "cut mid-line": b'{"ts":2,"src"',
}


def corpus(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    files = {}
    for i, (name, line) in enumerate([*SAME.items(), *DECLINED.items()]):
        data = line.encode() if isinstance(line, str) else line
        body = GOOD.encode() + b"\n" + data + b"\n" + GOOD.encode() + b"\n"
        if name == "cut mid-line":
            body = GOOD.encode() + b"\n" + data
        files[name] = folder / f"case-{i}.jsonl"
        files[name].write_bytes(body)
    return files


def test_pyarrow_reads_a_line_as_spark_does_or_declines_it(spark, tmp_path):
    """Both readers on the same files: every file pyarrow reads, it reads as Spark's permissive
    reader does (same rows, no line Spark would count as not an event); the others it declines."""
    from pyspark.sql import functions as F

    files = corpus(tmp_path / "h")
    lines = read.json_lines(spark, list(files.values())).withColumn("_file", F.input_file_name())
    lines = lines.withColumn("_bad", read.not_an_event()).drop(damage.CORRUPT).collect()
    schema = arrow.arrow_schema()
    for name, path in files.items():
        by_spark = [r.asDict() for r in lines if r["_file"].endswith("/" + path.name)]
        try:
            rows = arrow.read_file(path, schema).to_pylist()
        except arrow.Declined as exc:
            assert name in DECLINED, f"{name}: declined ({exc})"
            assert path.name in str(exc)
            continue
        assert name in SAME, f"{name}: read, but Spark reads it as {by_spark}"
        assert not any(r["_bad"] for r in by_spark)
        assert rows == [{k: r[k] for k in FIELD_TYPES} for r in by_spark], name


def clean_run(root: Path) -> RunDir:
    """tests/test_report.py's synthetic run without its damage (worker-1's file cut mid-line)."""
    run = make_run(root)
    worker1 = history_file(run.history, "worker-1")
    data = worker1.read_bytes()
    worker1.write_bytes(data[: data.rindex(b"\n") + 1])
    return run


def read_both(spark, run: RunDir, tmp: Path) -> tuple[read.History, read.History, list[str]]:
    """The history read by pyarrow's path (in ``run``) and by Spark's (in a copy of it)."""
    copy = RunDir(tmp)
    shutil.copytree(run.root, copy.root)
    messages: list[str] = []
    by_arrow = read.read_events(spark, run, messages.append)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(read, "start_conversion", lambda *_a, **_k: None)
        by_spark = read.read_events(spark, copy)
    return by_arrow, by_spark, messages


def assert_same(by_arrow: read.History, by_spark: read.History) -> None:
    assert by_arrow.account == by_spark.account
    assert by_arrow.profile == by_spark.profile
    a, s = by_arrow.events, by_spark.events
    assert a.count() == s.count() > 0
    assert a.exceptAll(s).count() == 0 and s.exceptAll(a).count() == 0


def test_a_clean_history_goes_the_pyarrow_way_with_spark_s_events_and_account(spark, tmp_path):
    run = clean_run(tmp_path / "run")
    by_arrow, by_spark, messages = read_both(spark, run, tmp_path / "copy")
    assert any(m.startswith("converting the history (") for m in messages)
    assert any("events written to history/events.parquet" in m for m in messages)
    assert not any("writing the history's columnar form" in m for m in messages)  # Spark did not write it
    assert sorted(p.name for p in (run.history / "events.parquet").iterdir()) == [
        "_zchaos_input.json",
        "part-00000.parquet",
    ]
    assert_same(by_arrow, by_spark)
    stored = json.loads((run.history / "events.parquet" / "_zchaos_input.json").read_text())
    assert stored["profile"] == by_spark.profile.as_dict() and stored["events"] == by_spark.profile.events
    assert not [p for p in run.history.iterdir() if p.name.startswith(".")]  # no temporary folder left


@pytest.mark.slow
@pytest.mark.parametrize("at", ["size", "count"])
def test_a_large_history_is_split_by_kind_as_spark_splits_it(spark, tmp_path, monkeypatch, at):
    """From SPLIT_MIN_EVENTS on, one folder per kind (so a check reads only its kinds), as
    Spark's path writes it: known from the files' size (then converted file by file), or
    only once the events are counted."""
    run = clean_run(tmp_path / "run")
    events = sum(1 for f in run.history.glob("*.jsonl") for _ in f.open())
    if at == "count":  # the files' size says "below" (events of 1 MB each), the count "above"
        monkeypatch.setattr(read, "BYTES_PER_EVENT", 1 << 20)
    threshold = 10 if at == "size" else events
    monkeypatch.setattr(read, "SPLIT_MIN_EVENTS", threshold)
    by_arrow, by_spark, messages = read_both(spark, run, tmp_path / "copy")
    assert any("events written to history/events.parquet" in m for m in messages)
    assert_same(by_arrow, by_spark)

    def kinds(run_dir: Path) -> list[str]:
        return sorted(p.name for p in (run_dir / "history" / "events.parquet").iterdir() if p.is_dir())

    assert kinds(run.root) == kinds(tmp_path / "copy")
    assert {"ev=send", "ev=reply", "ev=exec", "ev=fault_start", "ev=proc_exit"} <= set(kinds(run.root))


NO_EV = '{"ts": 1763726401000000000, "src": "client-2", "cid": "client-2"}\n'
WRONG_TYPE = '{"ts": 1763726401000000000, "src": "client-2", "ev": "send", "cid": "client-2", "seq": "x"}\n'
DAMAGE = {
    "a line that is not JSON": lambda lines: [*lines[:5], "garbage, not JSON\n", *lines[5:]],
    "an object without ev": lambda lines: [*lines[:5], NO_EV, *lines[5:]],
    "a wrong type": lambda lines: [*lines[:5], WRONG_TYPE, *lines[5:]],
    "a file cut mid-line": lambda lines: [*lines[:-1], lines[-1][:20]],
}


# One damage in the quick tier; each of the others is 9-12 s of Spark.
@pytest.mark.parametrize(
    "damage",
    [d if d == "a line that is not JSON" else pytest.param(d, marks=pytest.mark.slow) for d in DAMAGE],
)
def test_a_damaged_history_is_read_by_spark_as_before(spark, tmp_path, damage):
    run = clean_run(tmp_path / "run")
    client2 = history_file(run.history, "client-2")
    client2.write_text("".join(DAMAGE[damage](client2.read_text().splitlines(keepends=True))))
    by_arrow, by_spark, messages = read_both(spark, run, tmp_path / "copy")
    assert any("client-2.jsonl" in m and "reading the history with Spark" in m for m in messages), messages
    assert "writing the history's columnar form (events.parquet)" in messages
    assert_same(by_arrow, by_spark)
    assert by_arrow.account["bad_lines"] == 1
    assert list(damage_scope(by_arrow.account, {}).clients) == ["client-2"]


def test_a_failed_write_leaves_nothing_half_written(spark, tmp_path, monkeypatch):
    """The disk fills up half-way (the second file written): no events.parquet, no temporary
    folder; the report then goes Spark's way, as it did on a write error before."""
    import pyarrow.parquet as pq

    run = clean_run(tmp_path / "run")
    writes = 0
    real = pq.ParquetWriter.write_table

    def full_disk(self, table, *args, **kwargs):
        nonlocal writes
        writes += 1
        if writes == 2:
            raise OSError(28, "No space left on device")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    outcome = read.start_conversion(run, lambda _m: None, split_min_events=1).wait()
    assert writes == 2 and "No space left on device" in (outcome.declined or "")
    assert sorted(p.name for p in run.history.iterdir() if not p.name.endswith(".jsonl")) == []
    monkeypatch.undo()
    history = read.read_events(spark, run)  # Spark's path, which writes the form itself
    assert history.account["source"] == "parquet" and history.profile.events > 0


def test_an_interrupted_conversion_leaves_nothing_half_written(tmp_path):
    """Ctrl-C (build_report abandons the conversion) after the first file was written: the
    conversion stops before the next one and removes its temporary folder; an older Parquet
    form stays as it was."""
    run = clean_run(tmp_path / "run")
    older = run.history / "events.parquet"
    older.mkdir()
    (older / "part-0.parquet").write_bytes(b"older")

    class StopAfterFirstFile(threading.Event):
        asked = 0

        def is_set(self) -> bool:
            self.asked += 1
            return self.asked > 1

    cancel = StopAfterFirstFile()
    with pytest.raises(arrow.Cancelled):
        arrow.convert(
            run.history,
            sorted(run.history.glob("*.jsonl")),
            parquet="events.parquet",
            account_file="_zchaos_input.json",
            split_min_events=1,
            bytes_per_event=read.BYTES_PER_EVENT,
            cancel=cancel,
        )
    assert cancel.asked == 2
    assert [p.name for p in older.iterdir()] == ["part-0.parquet"]
    assert not [p for p in run.history.iterdir() if p.name.startswith(".")]


def test_ctrl_c_while_waiting_for_the_conversion_still_waits_for_its_clean_up(tmp_path):
    """Ctrl-C while the report waits for the conversion (build_report then abandons it): the
    conversion, still reading, stops after its file and removes its temporary folder before
    the report goes on. (A Thread.join that Ctrl-C interrupts marks the thread ended while
    it still runs: the report went on, exited under it, and left the folder.)"""
    run = clean_run(tmp_path / "run")
    fifo = run.history / "a-slow.jsonl"  # the first file read: it blocks until the test writes it
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR)  # a writer from the start: the reader's open does not block
    tmp = run.history / ".events.parquet.tmp"
    conversion = read.start_conversion(run, lambda _m: None)
    assert conversion is not None

    def reading() -> bool:  # the conversion opened the slow file too (the test holds it open)
        opened = [
            fd for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == str(fifo)
        ]
        return len(opened) >= 2

    def waiting() -> bool:  # the test's thread is in Conversion.wait
        frame = sys._current_frames().get(threading.main_thread().ident)
        while frame is not None and frame.f_code is not arrow.Conversion.wait.__code__:
            frame = frame.f_back
        return frame is not None

    def ctrl_c() -> None:
        wait_for(
            lambda: reading() and waiting(), 30, "the conversion to read the slow file, the test to wait"
        )
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def then_the_file_ends() -> None:
        wait_for(conversion._cancel.is_set, 30, "the conversion to be abandoned")
        os.write(held, (GOOD + "\n").encode())
        os.close(held)

    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            conversion.wait()
        threading.Thread(target=then_the_file_ends, daemon=True).start()
        conversion.abandon()
    finally:
        signal.signal(signal.SIGINT, saved)
    assert isinstance(conversion.outcome.error, arrow.Cancelled) and conversion.outcome.files_done == 1
    assert not tmp.exists() and not (run.history / "events.parquet").exists()


@pytest.mark.slow  # a whole zchaos process and its JVM
def test_ctrl_c_during_the_conversion_stops_the_report_and_leaves_nothing_half_written(tmp_path):
    """``zchaos report`` interrupted (SIGINT to its process group, as a terminal sends it) while
    it waits for pyarrow's conversion: exit 130, no half-written Parquet form, no temporary
    folder, no JVM left."""
    import psutil

    run = clean_run(tmp_path / "run")
    fifo = run.history / "a-slow.jsonl"  # the conversion blocks on it until the test writes it
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR)
    with report_process(run.root) as (report, lines):
        # The session up (a Ctrl-C while the JVM launches is another story), the report waits
        # for the conversion, which waits for the slow file.
        wait_for(lambda: any("reading history" in line for line in lines), 120, "the JVM to start")
        assert (run.history / ".events.parquet.tmp").is_dir()
        jvms = jvms_under(report.pid)
        assert jvms, "no JVM under the report"
        os.killpg(report.pid, signal.SIGINT)
        os.write(held, (GOOD + "\n").encode())  # the conversion may go on: to its next file's check
        os.close(held)
    output = "".join(lines)
    assert report.returncode == 130 and "zchaos: interrupted" in output, output
    assert not (run.history / ".events.parquet.tmp").exists()
    # The conversion stops at its next file, or ends first (the few files after the slow one
    # take milliseconds): then its Parquet form is whole, with its account.
    parquet = run.history / "events.parquet"
    if parquet.exists():
        events = sum(1 for f in run.history.glob("*.jsonl") if f != fifo for _ in f.open()) + 1
        assert json.loads((parquet / "_zchaos_input.json").read_text())["events"] == events
    _, alive = psutil.wait_procs(jvms, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []


def test_the_schema_is_the_history_s():
    schema = arrow.arrow_schema()
    assert schema.names == list(FIELD_TYPES)
    assert {str(schema.field(n).type) for n, t in FIELD_TYPES.items() if t == "int"} == {"int32"}
