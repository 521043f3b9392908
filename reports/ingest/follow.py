"""The history converted to Parquet while the run goes on, so that its report converts only the
lines written last.

The follower (``python -m reports.ingest.follow HISTORY``; harness/runner.py starts it in the
run's process group and stops it at the end of the run) runs at nice 19 once it has started, on
one thread, so that it takes only CPU the system under test leaves idle. Every few seconds it
takes the whole lines each ``history/*.jsonl`` gained since its last part, once they are enough
to be worth a file (PART_MIN_BYTES, growing with the file so that a long run does not leave
thousands of small files), and converts them with the report's own reader (arrow.read_lines:
the same schema, the same rules for what Spark would read otherwise) into
``history/parts/<file>/<n>/``, split by kind as arrow.Writer splits a large history
(``ev=<kind>/part-00000.parquet``). After each part it rewrites ``history/parts/_parts.json``
(RECORD): per file, the bytes converted, their CRC-32 and each part's rows, kinds and profile
rows. The JSON lines stay the record: the parts are only a faster way to read them.

The first lines it declines stop it, the reason recorded: parts never hold or hide a line that
is not an event, and such a history's report reads it whole with Spark's permissive reader, as
it always has (which locates and attributes every damaged line).

At report time, ``convert`` reuses the parts when the record is whole and not declined, and
every file still begins with the bytes converted (its size, and the CRC-32 of those bytes read
again: 0.9 s at 10M events, in the thread that runs while the JVM starts), and converts only
what follows. Split by kind (a large history), the parts' files are hard-linked into
events.parquet as they are (bench/ingest_follow.py, 10M events: 2.8 s against 26.7 s for the
whole conversion); in one file (a smaller one), they are read back and written with the rest,
which costs about what converting it whole does (200k events: 0.7-0.9 s either way), hidden
behind the JVM's start either way. Any doubt (no record, a declined
line, a file changed after its parts were written, lines after them that pyarrow declines) and
the history is converted whole as before (arrow.convert).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.history import FIELD_TYPES
from reports.ingest.arrow import (
    Cancelled,
    Declined,
    Outcome,
    Writer,
    arrow_schema,
    profile_rows,
    put_in_place,
    read_lines,
)
from reports.ingest.arrow import convert as convert_whole

if TYPE_CHECKING:
    import threading

    import pyarrow as pa

#: The parts' folder, inside the history folder, and the record of what they hold.
PARTS = "parts"
RECORD = "_parts.json"
#: The record's format; a record of another one is not used.
VERSION = 1
#: How often the follower looks at the history files (seconds).
EVERY_S = 2.0
#: The least a file must have gained for a part, and the most a part's threshold grows to: a
#: file's threshold is a sixteenth of what was converted of it, within these bounds (at 10M
#: events in a few files: parts of tens of MB; the lines left to the report, a few percent).
PART_MIN_BYTES = 256 << 10
PART_MAX_BYTES = 48 << 20
_PR_SET_PDEATHSIG = 1
#: The bytes read at once to check a file's CRC-32.
CHUNK_BYTES = 8 << 20


@dataclass
class _File:
    """What the follower converted of one history file."""

    end: int = 0  # bytes converted (always the end of a line)
    crc: int = 0  # CRC-32 of those bytes
    parts: list[dict[str, Any]] = field(default_factory=list)


class Follower:
    """Converts what the history files gained into parts (``step``), keeping the record."""

    def __init__(self, hist: Path, min_part_bytes: int = PART_MIN_BYTES) -> None:
        self.hist, self.folder = hist, hist / PARTS
        self.min_part_bytes = min_part_bytes
        self.files: dict[str, _File] = {}
        self.declined: str | None = None
        self.schema = arrow_schema()
        # A run folder is new, so anything here is not this follower's.
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir()
        self._save()

    def step(self, stop: Callable[[], bool] = lambda: False) -> int:
        """Convert the whole lines each file gained, where they are enough for a part; the
        number of parts written. Stops between files when ``stop()``."""
        written = 0
        for path in sorted(self.hist.glob("*.jsonl")):
            if self.declined is not None or stop():
                break
            state = self.files.setdefault(path.name, _File())
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size < state.end:
                self._decline(f"history/{path.name} shrank after its parts were written")
                break
            if size - state.end < max(self.min_part_bytes, min(state.end // 16, PART_MAX_BYTES)):
                continue
            with path.open("rb") as fh:
                fh.seek(state.end)
                data = fh.read(size - state.end)
            data = data[: data.rfind(b"\n") + 1]  # whole lines: a writer may be in the middle of one
            if data:
                self._part(path.name, state, data)
                written += 1
        return written

    def _part(self, name: str, state: _File, data: bytes) -> None:
        n = len(state.parts)
        tmp, final = self.folder / name / f".{n}.tmp", self.folder / name / str(n)
        tmp.mkdir(parents=True)
        try:  # the writer's first file may be what fills the disk: no folder of a part left then either
            writer = Writer(tmp, self.schema, split=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            table = read_lines(data, name, self.schema, use_threads=False)
            writer.write(table, name)
        except Declined as exc:
            writer.close()
            shutil.rmtree(tmp, ignore_errors=True)
            self._decline(str(exc))
            return
        except BaseException:  # a full disk (main says why it stops): no part half-written
            with contextlib.suppress(Exception):
                writer.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            writer.close()
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp.rename(final)
        state.parts.append(
            {
                "start": state.end,
                "end": state.end + len(data),
                "rows": table.num_rows,
                "kinds": sorted(p.name.removeprefix("ev=") for p in final.iterdir()),
                "profile": profile_rows(table),
            }
        )
        state.crc = zlib.crc32(data, state.crc)
        state.end += len(data)
        self._save()

    def _decline(self, why: str) -> None:
        self.declined = why
        self._save()

    def _save(self) -> None:
        record = {
            "version": VERSION,
            "fields": FIELD_TYPES,
            "declined": self.declined,
            "files": {
                n: {"end": s.end, "crc": s.crc, "parts": s.parts} for n, s in self.files.items() if s.parts
            },
        }
        tmp = self.folder / f".{RECORD}.tmp"
        try:
            tmp.write_text(json.dumps(record))
            tmp.replace(self.folder / RECORD)  # a report never sees half a record
        except OSError:
            tmp.unlink(missing_ok=True)
            raise


def _crc(path: Path, end: int) -> int:
    crc = 0
    with path.open("rb") as fh:
        while end > 0 and (chunk := fh.read(min(CHUNK_BYTES, end))):
            crc = zlib.crc32(chunk, crc)
            end -= len(chunk)
    return crc


def reusable(hist: Path, files: list[Path]) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Per history file, the record of its parts, when every file still begins with the bytes
    its parts were converted from; else nothing, and why (None when there are no parts)."""
    try:
        record = json.loads((hist / PARTS / RECORD).read_text())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"history/{PARTS}/{RECORD} cannot be read ({exc})"
    try:
        if record["version"] != VERSION or record["fields"] != FIELD_TYPES:
            return {}, f"history/{PARTS}/{RECORD} is of another format"
        if record["declined"] is not None:
            return {}, f"the follower declined {record['declined']}"
        by_name = {f.name: f for f in files}
        kept: dict[str, dict[str, Any]] = {}
        for name, state in record["files"].items():
            path = by_name.get(name)
            if path is None:
                return {}, f"history/{name} is gone"
            if path.stat().st_size < state["end"] or _crc(path, state["end"]) != state["crc"]:
                return {}, f"history/{name} changed after its parts were written"
            for n, part in enumerate(state["parts"]):
                for kind in part["kinds"]:
                    if not _part_file(hist, name, n, kind).is_file():
                        return {}, f"a part of history/{name} is missing"
            kept[name] = state
    except (KeyError, TypeError, AttributeError) as exc:
        return {}, f"history/{PARTS}/{RECORD} is damaged ({type(exc).__name__}: {exc})"
    except OSError as exc:
        return {}, str(exc)
    return kept, None


def _part_file(hist: Path, name: str, n: int, kind: str) -> Path:
    return hist / PARTS / name / str(n) / f"ev={kind}" / "part-00000.parquet"


def _read_part(hist: Path, name: str, n: int, part: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """A part's events in one table of the history's schema (kind by kind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for kind in part["kinds"]:
        t = pq.read_table(_part_file(hist, name, n, kind))
        tables.append(t.append_column("ev", pa.repeat(pa.scalar(kind, pa.string()), t.num_rows)))
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(exist_ok=True)
    try:
        os.link(source, target)  # the part's bytes as they are, without a copy
    except OSError:
        shutil.copyfile(source, target)


def convert(
    hist: Path,
    files: list[Path],
    *,
    outcome: Outcome | None = None,
    cancel: threading.Event | None = None,
    **options: Any,
) -> Outcome:
    """arrow.convert's result, reusing the parts written during the run where they can be
    (see the module's docstring); arrow.convert itself when there are none, or at any doubt.
    ``options`` are arrow.convert's own (the Parquet form's name and layout), passed on."""
    out = outcome or Outcome()
    t0 = time.monotonic()
    parts, out.parts_refused = reusable(hist, files)
    if parts:
        try:
            _convert_rest(hist, files, parts, out, cancel, **options)
            out.seconds = time.monotonic() - t0
            return out
        except (Declined, OSError) as exc:
            out.parts_refused = f"the lines after them: {exc}"
            out.events = out.from_parts = out.files_done = 0
    return convert_whole(hist, files, outcome=out, cancel=cancel, **options)


def _convert_rest(
    hist: Path,
    files: list[Path],
    parts: dict[str, dict[str, Any]],
    out: Outcome,
    cancel: threading.Event | None,
    *,
    parquet: str,
    account_file: str,
    split_min_events: int,
    bytes_per_event: int,
) -> None:
    """events.parquet from ``parts`` and the lines after them, as arrow.convert lays it out."""
    import pyarrow as pa

    schema = arrow_schema()
    tmp, target = hist / f".{parquet}.tmp", hist / parquet
    shutil.rmtree(tmp, ignore_errors=True)
    done = sum(p["rows"] for s in parts.values() for p in s["parts"])
    rest = sum(f.stat().st_size - parts.get(f.name, {}).get("end", 0) for f in files)
    split = done + rest // bytes_per_event >= split_min_events
    rows: list[dict[str, Any]] = [r for s in parts.values() for p in s["parts"] for r in p["profile"]]
    held: list[pa.Table] = []  # not split: every table, in the files' order, written at the end
    writer: Writer | None = None
    now = 0  # events converted here
    try:
        tmp.mkdir()
        writer = Writer(tmp, schema, split)
        for path in files:
            if cancel is not None and cancel.is_set():
                raise Cancelled
            state = parts.get(path.name, {"end": 0, "parts": []})
            for n, part in enumerate(state["parts"]):
                if split:
                    for kind in part["kinds"]:
                        linked = tmp / f"ev={kind}" / f"{path.name}.{n}.parquet"
                        _link(_part_file(hist, path.name, n, kind), linked)
                else:
                    held.append(_read_part(hist, path.name, n, part, schema))
                out.from_parts += part["rows"]
            with path.open("rb") as fh:
                fh.seek(state["end"])
                table = read_lines(fh.read(), path.name, schema)
            rows += profile_rows(table)
            if split:
                writer.write(table, path.name)
            else:
                held.append(table)
            out.events = out.from_parts + (now := now + table.num_rows)
            out.files_done += 1
        if out.events == 0:
            raise Declined("the history holds no event")
        if held:
            writer.split = out.events >= split_min_events
            if writer.split:
                for table in held:
                    writer.write(table, "")
            else:
                writer.write(pa.concat_tables(held), "")
            held.clear()
        writer.close()
        put_in_place(tmp, target, account_file, len(files), rows)
    finally:
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reports.ingest.follow",
        description="Convert a running history's new lines to Parquet parts every few seconds, at low "
        "priority, until SIGTERM or SIGINT, or until the process that started it is gone.",
    )
    parser.add_argument("history", type=Path, help="the run's history folder")
    parser.add_argument("--every", type=float, default=EVERY_S, help="seconds between looks")
    parser.add_argument(
        "--min-part-bytes", type=int, default=PART_MIN_BYTES, help="least new bytes for a part"
    )
    args = parser.parse_args(argv)
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    parent = os.getppid()
    with contextlib.suppress(Exception):  # Linux: SIGTERM when the starter dies, without a look
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    def stop() -> bool:
        # Its starter gone (killed without its teardown): nothing would stop this process.
        return bool(stopping) or os.getppid() != parent

    # pyarrow's import and the empty record at normal priority, while the system under test
    # starts: at nice 19 on a machine as busy as CI's, one part took the whole load (seen), and
    # the start alone could take the run, leaving neither record nor pid in the log.
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    follower = Follower(args.history, args.min_part_bytes)
    print(f"following {args.history} as pid {os.getpid()}", flush=True)
    os.nice(19)
    while not stop():
        try:
            follower.step(stop)
        except OSError as exc:  # a full disk: the parts so far stand, the report converts the rest
            print(f"stopped: {exc.strerror or exc}; the report converts what has no part", flush=True)
            return 0
        if follower.declined is not None:
            print(f"stopped: {follower.declined}; the report reads this history whole", flush=True)
            return 0
        deadline = time.monotonic() + args.every
        while not stop() and time.monotonic() < deadline:
            time.sleep(0.1)
    written = sum(len(s.parts) for s in follower.files.values())
    print(f"stopped after {written} parts", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
