"""The history's JSON lines to its Parquet form with pyarrow, on a run's first report, while
Spark starts.

pyarrow's JSON reader (multi-threaded C++, the explicit schema of contract.history.FIELD_TYPES)
parses a history several times faster than Spark's, and it needs no JVM, so it runs in a
thread while the JVM starts (``Conversion``). It writes history/events.parquet exactly as
reports/ingest/read.py does from Spark: one file below ``SPLIT_MIN_EVENTS``, split by event kind
(``ev=<kind>/``) from there on, with the account and the profile in its account file, all in a
temporary folder renamed into place when complete (an interrupted or failed conversion leaves
no half-written events.parquet). The same reader and writer convert the history while the run
goes on (reports/ingest/follow.py), so that the report has only the last lines left to convert.

Only a history that pyarrow reads *exactly* as Spark's permissive JSON reader would is
converted here: every file whole lines, each one JSON object with a time and a kind. Anything
else is declined, and reports.ingest.read.read_events reads that history with Spark as before,
which locates every line that is not an event, flags files cut mid-line and names the damaged
clients. Doing that account here too would be a second implementation of it to keep equal to
the first; a damaged history is rare, and its report only costs what it cost before.

Where the two readers part (each found by feeding both the same lines, see
tests/test_ingest.py): pyarrow reads a stream of JSON values, Spark one per line, so two
objects on a line, an object over two lines or a lone carriage return (Spark's reader ends a
line at one) would be read differently; pyarrow does not check UTF-8 in strings; Jackson, under
Spark, refuses a document nested deeper than 1000, a number longer than 1000 characters or a
name longer than 50,000. A wrong type, a line that is not JSON or a repeated field make pyarrow
fail (declined); an object without ``ts`` or ``ev`` (or a ``null`` line) is read as a row with
nulls (declined).
"""

from __future__ import annotations

import codecs
import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.history import FIELD_TYPES
from reports.checkers import Profile

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

#: pyarrow's type for each type name of contract.history.FIELD_TYPES.
ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "bool": "bool_", "double": "float64"}
#: The reader's block (pyarrow parses blocks in parallel; a line must fit in one).
BLOCK_BYTES = 4 << 20
#: A line this long or longer could reach one of Jackson's limits (depth 1000, number 1000
#: characters, name 50,000): it is looked at (``_jackson_takes``); a shorter one cannot.
LONG_LINE = 900
#: An event kind that names its folder of the split form as it is (Spark escapes some
#: characters in a folder name and reads an empty kind back as null: such a kind is declined).
PLAIN_KIND = re.compile(r"[A-Za-z0-9_.-]+")


class Declined(Exception):
    """This history needs Spark's permissive reader; the message says why, naming the file."""


class Cancelled(BaseException):
    """The report stopped (Ctrl-C, an error) while the conversion ran."""


def arrow_schema() -> pa.Schema:
    """The history's schema for pyarrow, from contract.history.FIELD_TYPES."""
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, ARROW_TYPES[t])()) for name, t in FIELD_TYPES.items()])


def _jackson_takes(line: bytes) -> bool:
    """A long line Spark's parser surely reads: shorter than any name it refuses, fewer
    brackets than its depth limit, no run of number characters as long as its number limit."""
    return (
        len(line) < 40_000
        and line.count(b"[") + line.count(b"{") < LONG_LINE
        and re.search(rb"[-+.0-9eE]{%d}" % LONG_LINE, line) is None
    )


def whole_lines(data: bytes, name: str) -> int:
    """The number of lines of a file's bytes, when each is one JSON object that pyarrow reads
    as Spark does (see the module's docstring); raises Declined saying what is not."""
    import numpy as np

    if not data:
        return 0
    if data[-1:] != b"\n":
        raise Declined(f"history/{name} ends mid-line")
    if b"\r" in data:
        raise Declined(f"history/{name} holds a carriage return")
    if not data.isascii():  # (zchaos's own writer writes ASCII: json.dumps escapes the rest)
        decoder, step = codecs.getincrementaldecoder("utf-8")(), 1 << 20
        for at in range(0, len(data), step):
            try:
                decoder.decode(data[at : at + step], final=at + step >= len(data))
            except UnicodeDecodeError as exc:
                raise Declined(f"history/{name} is not UTF-8 near byte {at + exc.start}") from None
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    # Each line starts with "{" and ends with "}": then no value can span two lines (inside one
    # JSON value "}" and "{" are never separated by whitespace only), and a line with two
    # objects shows as more rows than lines.
    if raw[0] != ord("{") or (raw[ends[:-1] + 1] != ord("{")).any() or (raw[ends - 1] != ord("}")).any():
        raise Declined(f"history/{name} has a line that is not one JSON object")
    starts = np.concatenate(([0], ends[:-1] + 1))
    for i in np.flatnonzero(ends - starts >= LONG_LINE):
        if not _jackson_takes(data[starts[i] : ends[i]]):
            raise Declined(f"history/{name} line {i + 1} is too long or too deep for Spark's JSON parser")
    return len(ends)


def read_file(path: Path, schema: pa.Schema) -> pa.Table:
    """One history file's events, when pyarrow reads it exactly as Spark would (else Declined)."""
    return read_lines(path.read_bytes(), path.name, schema)


def read_lines(data: bytes, name: str, schema: pa.Schema, use_threads: bool = True) -> pa.Table:
    """The events of whole lines of the history file ``name`` (all of it, or a run of its lines
    from a line's start: every rule here is one line's), when pyarrow reads them exactly as
    Spark would (else Declined)."""
    import pyarrow as pa
    import pyarrow.json as pj

    lines = whole_lines(data, name)
    if not lines:
        return schema.empty_table()
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(block_size=BLOCK_BYTES, use_threads=use_threads),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowException as exc:  # not JSON, a wrong type, a field twice, a line over a block
        raise Declined(f"history/{name}: {str(exc).splitlines()[0]}") from None
    if table.num_rows != lines:
        raise Declined(f"history/{name} has a line of several JSON values")
    for col in ("ts", "ev"):
        if table.column(col).null_count:
            raise Declined(f"history/{name} has an object without {col}")
    return table


class Writer:
    """Where the events go: one file, or one file per kind (``ev=<kind>/``, without the ev
    column, as Spark's partitioned write lays them out)."""

    def __init__(self, folder: Path, schema: pa.Schema, split: bool) -> None:
        self.folder, self.schema, self.split = folder, schema, split
        self.writers: dict[str, pq.ParquetWriter] = {}

    def _writer(self, kind: str | None) -> pq.ParquetWriter:
        import pyarrow.parquet as pq

        if (kind or "") not in self.writers:
            if kind is None:
                path, schema = self.folder / "part-00000.parquet", self.schema
            else:
                path = self.folder / f"ev={kind}" / "part-00000.parquet"
                path.parent.mkdir(exist_ok=True)  # (it may hold a part already: ingest/follow.py)
                schema = self.schema.remove(self.schema.get_field_index("ev"))
            # No dictionary for the time: unique per event, it only grows the file (demo run:
            # 1.34 -> 1.12 MB; Spark's writer leaves it out too). Checks read either as fast.
            dictionary = [n for n in schema.names if n != "ts"]
            self.writers[kind or ""] = pq.ParquetWriter(
                path, schema, compression="snappy", use_dictionary=dictionary
            )
        return self.writers[kind or ""]

    def write(self, table: pa.Table, name: str) -> None:
        import pyarrow.compute as pc

        if not self.split:
            self._writer(None).write_table(table)
            return
        for kind in pc.unique(table.column("ev")).to_pylist():
            if not PLAIN_KIND.fullmatch(kind):
                raise Declined(f"history/{name}: the event kind {kind!r} cannot name a folder as it is")
            rows = table.filter(pc.equal(table.column("ev"), kind)).drop_columns(["ev"])
            self._writer(kind).write_table(rows)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()


@dataclass
class Outcome:
    """What a conversion did: the events written (0 when declined), why it declined, its time."""

    events: int = 0
    declined: str | None = None
    files_done: int = 0
    seconds: float = 0.0
    #: Of ``events``, those taken from parts written during the run (reports/ingest/follow.py).
    from_parts: int = 0
    #: Why parts written during the run were not used, when there were some.
    parts_refused: str | None = None
    error: BaseException | None = field(default=None, repr=False)


def convert(
    hist: Path,
    files: list[Path],
    *,
    parquet: str,
    account_file: str,
    split_min_events: int,
    bytes_per_event: int,
    outcome: Outcome | None = None,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Write ``hist/<parquet>`` from ``files`` with pyarrow, with its account file; split by
    kind when the files' size (at ``bytes_per_event``) or, below that, the count of events
    reaches ``split_min_events`` (as reports.pipeline does). File by file: in memory at once,
    one file's bytes and table (and below ``split_min_events``, every file's table).

    Returns the outcome (``declined`` says why the history was left to Spark, and nothing
    was written). Raises Cancelled when ``cancel`` is set; whatever happens, no
    half-written folder is left.
    """
    import pyarrow as pa

    out = outcome or Outcome()
    t0 = time.monotonic()
    tmp, target = hist / f".{parquet}.tmp", hist / parquet
    shutil.rmtree(tmp, ignore_errors=True)
    schema = arrow_schema()
    split = sum(f.stat().st_size for f in files) // bytes_per_event >= split_min_events
    held: list[pa.Table] = []  # below split_min_events: written at the end, when counted
    rows: list[dict[str, Any]] = []
    parts: Writer | None = None
    # A split history's files are written on a thread of their own while the next one is
    # read: the writing and the line check (one core each) no longer leave the second core
    # idle between two parses (10M events, the conversion alone, 3 pairs alternating:
    # 16.7-17.3 -> 13.1-14.5 s; the same bytes written).
    writing = ThreadPoolExecutor(1, thread_name_prefix="zchaos-ingest-write")
    written: Future[None] | None = None
    try:
        tmp.mkdir()
        parts = Writer(tmp, schema, split)
        for path in files:
            if cancel is not None and cancel.is_set():
                raise Cancelled
            table = read_file(path, schema)
            rows += profile_rows(table)
            if split:
                if written is not None:
                    written.result()  # its Declined, or a full disk, is raised here
                written = writing.submit(parts.write, table, path.name)
            else:
                held.append(table)
            out.events += table.num_rows
            out.files_done += 1
        if written is not None:
            written.result()
        if out.events == 0:
            raise Declined("the history holds no event")
        if held:  # counted now: one file, or split when there are many events after all
            parts.split = out.events >= split_min_events
            if parts.split:
                for path, table in zip(files, held, strict=True):
                    parts.write(table, path.name)
            else:
                parts.write(pa.concat_tables(held), "")
            held.clear()
        parts.close()
        put_in_place(tmp, target, account_file, len(files), rows)
    except Declined as exc:
        out.declined, out.events = str(exc), 0
    except OSError as exc:  # a file that cannot be read, a full disk: Spark's path says what it says today
        out.declined, out.events = f"{type(exc).__name__}: {exc}", 0
    finally:
        writing.shutdown(wait=True)  # no write left running into the folder removed below
        if parts is not None:
            parts.close()
        shutil.rmtree(tmp, ignore_errors=True)
        out.seconds = time.monotonic() - t0
    return out


def put_in_place(tmp: Path, target: Path, account_file: str, files: int, rows: list[dict[str, Any]]) -> None:
    """The account of a clean history (``rows``: profile_rows of every event) written beside
    its events in ``tmp``, and ``tmp`` renamed to ``target``."""
    profile = Profile.from_rows(rows)
    account = {
        "files": files,
        "events": profile.events,
        "bad_lines": 0,
        "bad_examples": [],
        "truncated": [],
        "damaged_files": {},
        "attributed_requests": {},
        "attributed_clients": {},
        "unattributed": [],
        "stopped": {},
        "file_writers": {},
    }
    (tmp / account_file).write_text(json.dumps({**account, "profile": profile.as_dict()}))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def profile_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Events per (src, ev), first and last time, of one file (rows for Profile.from_rows)."""
    if table.num_rows == 0:
        return []
    groups = table.group_by(["src", "ev"]).aggregate([("ts", "count"), ("ts", "min"), ("ts", "max")])
    return [
        {"src": r["src"], "ev": r["ev"], "n": r["ts_count"], "first": r["ts_min"], "last": r["ts_max"]}
        for r in groups.to_pylist()
    ]


def size_text(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


class Conversion:
    """``convert`` in a thread, started while the JVM starts. Its progress is said by the
    caller's thread (``wait``): while the JVM starts, this process's stdout is the JVM's log."""

    def __init__(
        self,
        hist: Path,
        files: list[Path],
        say: Callable[[str], None],
        using: Callable[..., Outcome] = convert,
        **options: Any,
    ) -> None:
        """``using``: the conversion (``convert``, or reports/ingest/follow.py's, which reuses
        the parts written during the run), called with ``options``."""
        self.files = files
        self._using = using
        self.parquet = options["parquet"]
        self.outcome = Outcome()
        self._cancel = threading.Event()
        # Waited on instead of Thread.join: a join that Ctrl-C interrupts can mark the thread
        # ended while it still runs (Python 3.11), and then nothing waits for its clean-up.
        self._done = threading.Event()
        self._say = say
        size = sum(f.stat().st_size for f in files)
        say(f"converting the history ({len(files)} files, {size_text(size)}) to Parquet with pyarrow")
        self._thread = threading.Thread(
            target=self._run, args=(hist, files, options), name="zchaos-ingest", daemon=True
        )
        self._thread.start()

    def _run(self, hist: Path, files: list[Path], options: dict[str, Any]) -> None:
        try:
            self._using(hist, files, outcome=self.outcome, cancel=self._cancel, **options)
        except BaseException as exc:  # a bug, or Cancelled: raised again in the caller's thread
            self.outcome.error = exc
        finally:
            self._done.set()

    def wait(self, every_s: float = 10.0) -> Outcome:
        """The outcome, once the conversion ended (saying how far it is every ``every_s``)."""
        while not self._done.wait(every_s):
            done = self.outcome
            self._say(f"  converting: {done.files_done} of {len(self.files)} files, {done.events:,} events")
        out = self.outcome
        if out.error is not None and not isinstance(out.error, Cancelled):
            raise out.error
        if out.parts_refused:
            self._say(f"  parts written during the run not used: {out.parts_refused}")
        if out.declined:
            self._say(f"  {out.declined}: reading the history with Spark, which accounts for every line")
        elif out.from_parts:
            now = out.events - out.from_parts
            self._say(
                f"  history: {out.from_parts:,} events from parts written during the run, {now:,} converted "
                f"now; history/{self.parquet} in {out.seconds:.1f} s"
            )
        else:
            self._say(f"  {out.events:,} events written to history/{self.parquet} in {out.seconds:.1f} s")
        return out

    def abandon(self) -> None:
        """Stop the conversion (between files) and wait for it: no temporary folder is left."""
        self._cancel.set()
        self._done.wait()
