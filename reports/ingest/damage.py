"""What is wrong with a damaged history and what it leaves in doubt: its lines that are not
events located (file, line number, text) and attributed to the request or client their text
names, its files cut mid-line with their writers (``history_damage``, at reading); then the
clients, requests and other sources whose events may be missing (``damage_scope``), which
the checks leave out or are unknown for (reports/pipeline.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from contract.history import find_stopped

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from contract.rundir import RunMeta
    from reports.checkers import Checker, Profile

MAX_BAD_LINES_LOCATED = 100  # unreadable lines listed (file, line number) in verdict.json


CORRUPT = "_corrupt_record"


def _file_name(uri: str) -> str:
    """The file name of Spark's input_file_name() (a file:// URI)."""
    return Path(unquote(urlparse(uri).path)).name


def _ends_mid_line(path: Path) -> bool:
    """The file is not empty and its last byte is not a newline: its writer was cut off."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False


def _is_event_line(text: str) -> bool:
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("ts") is not None and obj.get("ev") is not None


def locate_bad_lines(path: Path, corrupt: set[str], check_json: bool, limit: int) -> list[dict[str, Any]]:
    """Line numbers (from 1) of the lines of ``path`` that are not events: those Spark could not
    parse (``corrupt``, their text), and with ``check_json`` also objects without ts or ev."""
    found: list[dict[str, Any]] = []
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as fh:
        for number, line in enumerate(fh, start=1):
            text = line.rstrip("\r\n")
            if text in corrupt or (check_json and text.strip() and not _is_event_line(text)):
                found.append({"file": path.name, "line_no": number, "line": text[:200]})
                if len(found) >= limit:
                    break
    return found


#: Unreadable lines attributed one by one (to the request or client their text names); past
#: this many distinct ones, a file's damage is taken as naming nobody (its writers left out whole).
MAX_ATTRIBUTED = 10_000


def _text_field(name: str) -> Column:
    """The value of ``"name": "..."`` in an unreadable line's text (a cut line keeps its start)."""
    from pyspark.sql import functions as F

    pattern = rf'"{name}"\s*:\s*"([^"\\]+)"'
    return F.nullif(F.regexp_extract(F.col(CORRUPT), pattern, 1), F.lit(""))


def history_damage(
    bad_rows: DataFrame | None,
    writers: Callable[[list[str]], DataFrame],
    files: list[Path],
    n_bad: int,
) -> dict[str, Any]:
    """What is wrong with the history files: unreadable lines located (``bad_examples``: file,
    line number, text), files that end mid-line (``truncated``), and whose events may be
    missing. Each unreadable line is attributed to what its text names: a request
    (``attributed_requests``: rid -> what) or else a client (``attributed_clients``); a line
    that names neither leaves its whole file in doubt (``unattributed``), as does a file
    cut mid-line, whose writers may have lost more than that line (``file_writers``: name ->
    its clients, its other sources and its last event's time; ``damage_scope`` decides).
    ``bad_rows``: the ``n_bad`` lines that are not events (``_file``, CORRUPT, the parsed
    columns); ``writers(names)``: (``_file``, ``src``, ``cid``, ``last``) of those files'
    events. Only damaged files are read again."""
    from pyspark.sql import functions as F

    truncated = sorted(f.name for f in files if _ends_mid_line(f))
    located: list[dict[str, Any]] = []
    damaged: dict[str, str] = {name: "ends mid-line (truncated)" for name in truncated}
    stopped = stopped_writers(files)
    for name, why in stopped.items():
        damaged[name] = f"{damaged[name]}; {why}" if name in damaged else why
    requests: dict[str, str] = {}
    clients: dict[str, str] = {}
    unattributed: set[str] = set()
    if n_bad and bad_rows is not None:
        per_file = (
            bad_rows.groupBy("_file")
            .agg(
                F.count("*").alias("n"),
                F.sum(F.col(CORRUPT).isNull().cast("int")).alias("objects"),
                F.slice(F.collect_set(F.col(CORRUPT)), 1, MAX_BAD_LINES_LOCATED).alias("texts"),
            )
            .collect()
        )
        by_name = {f.name: f for f in files}
        for r in sorted(per_file, key=lambda r: _file_name(r["_file"])):
            name = _file_name(r["_file"])
            if name in by_name and len(located) < MAX_BAD_LINES_LOCATED:
                located += locate_bad_lines(
                    by_name[name], set(r["texts"]), bool(r["objects"]), MAX_BAD_LINES_LOCATED - len(located)
                )
            lines = [b["line_no"] for b in located if b["file"] == name]
            where = (
                f" (line {', '.join(map(str, lines[:5]))}{', ...' if len(lines) > 5 else ''})"
                if lines
                else ""
            )
            what = f"{r['n']} unreadable line(s){where}"
            damaged[name] = f"{damaged[name]}; {what}" if name in damaged else what
        whose = (
            bad_rows.select(
                "_file",
                F.coalesce(F.col("rid"), _text_field("rid")).alias("rid"),
                F.coalesce(F.col("cid"), _text_field("cid")).alias("cid"),
            )
            .distinct()
            .limit(MAX_ATTRIBUTED + 1)
            .collect()
        )
        if len(whose) > MAX_ATTRIBUTED:
            unattributed = {_file_name(r["_file"]) for r in per_file}
        else:
            for r in whose:
                name = _file_name(r["_file"])
                if r["rid"]:
                    requests[r["rid"]] = f"history/{name}: an unreadable line of it"
                elif r["cid"]:
                    clients[r["cid"]] = f"history/{name}: an unreadable line of it"
                else:
                    unattributed.add(name)
    file_writers: dict[str, dict[str, Any]] = {}
    doubtful = sorted(unattributed | set(truncated) | set(stopped))
    if doubtful:
        for r in writers(doubtful).collect():
            name = _file_name(r["_file"])
            entry = file_writers.setdefault(name, {"clients": [], "sources": [], "last_ns": None})
            if r["cid"] is not None:
                entry["clients"].append(r["cid"])
            elif r["src"] is not None:
                entry["sources"].append(r["src"])
            if r["last"] is not None:
                entry["last_ns"] = max(entry["last_ns"] or 0, int(r["last"]))
        for entry in file_writers.values():
            entry["clients"] = sorted(set(entry["clients"]))
            entry["sources"] = sorted(set(entry["sources"]))
    return {
        "bad_examples": located,
        "truncated": truncated,
        "damaged_files": damaged,
        "attributed_requests": dict(sorted(requests.items())),
        "attributed_clients": dict(sorted(clients.items())),
        "unattributed": sorted(unattributed),
        "stopped": stopped,
        "file_writers": file_writers,
    }


def stopped_writers(files: list[Path]) -> dict[str, str]:
    """The files whose writer stopped recording (a full disk: contract/history.py leaves a
    marker), by name, with what it said: whatever came after the stop is missing."""
    found = {}
    for f in files:
        record = find_stopped(f)
        if record is not None:
            found[f.name] = f"its writer stopped recording ({record['error']})"
    return found


#: Sources whose events every check reads (the fault windows, the process starts and exits).
HARNESS_SOURCES = ("nemesis", "runner")


@dataclass
class Damage:
    """What a damaged history leaves in doubt (see damage_scope): the requests of ``clients``
    (cid -> what is wrong) and the ``requests`` (rid -> what), left out of the checks that
    read client events; and ``sources`` (src -> what), non-client writers whose events may
    be missing, which make the checks that read them unknown."""

    clients: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.clients or self.requests or self.sources)

    def left_out(self) -> str:
        """``client-2, request client-1:7`` (at most a few named)."""
        names = [*sorted(self.clients), *(f"request {rid}" for rid in sorted(self.requests))]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        return ", ".join(names[:6]) + more

    def why(self) -> str:
        whats = sorted({*self.clients.values(), *self.requests.values()})
        return "; ".join(whats[:3]) + ("; ..." if len(whats) > 3 else "")

    def sources_read_by(self, checker: Checker, profile: Profile | None) -> list[str]:
        """The damaged sources whose events ``checker`` reads: a harness source's (fault
        windows, process exits) are read by every check; another's when the check needs
        or reads a kind it wrote (every kind, when the history was not profiled)."""

        def reads(src: str) -> bool:
            if src in HARNESS_SOURCES or src == "?" or profile is None:
                return True
            return bool(set(checker.needs + checker.reads) & set(profile.sources.get(src, {})))

        return [src for src in sorted(self.sources) if reads(src)]


#: A file cut mid-line whose last event came this long before the load stopped had its writer
#: cut off early (a whole file's last events come within half a second of it, measured on the
#: CI runs: Locust stops its users first).
CUT_OFF_SLACK_NS = 2_000_000_000


def damage_scope(account: dict[str, Any], meta: RunMeta) -> Damage:
    """What the damage ``account`` (history_damage's) leaves in doubt. A line naming a request
    leaves that request out; one naming only a client, that client; one naming neither, every
    writer of its file. A file cut mid-line lost its last line (attributed as any other), and
    more when its last event came well before the load stopped (CUT_OFF_SLACK_NS): its writer
    was cut off, and every writer of the file is in doubt."""
    damage = Damage(
        dict(account.get("attributed_clients") or {}), dict(account.get("attributed_requests") or {})
    )
    if "file_writers" not in account:  # compacted by an older zchaos: its clients as it named them
        damage.clients.update(account.get("damaged_clients") or {})
        return damage
    files = account.get("damaged_files") or {}
    stopped = meta.get("load_stopped_ns")
    for name, writers in (account.get("file_writers") or {}).items():
        what = f"history/{name}: {files.get(name, 'damaged')}"
        if name in (account.get("unattributed") or []):
            what += " naming no request"
        elif name in (account.get("stopped") or {}):
            pass  # whatever it would have written after its stop is missing, at any time
        elif stopped is not None and (writers.get("last_ns") or 0) >= stopped - CUT_OFF_SLACK_NS:
            continue  # cut at the very end: only its last line is lost, attributed above
        else:
            what += ", its writer cut off before the load ended"
        for cid in writers.get("clients", []):
            damage.clients[cid] = what
        for src in writers.get("sources", []):
            damage.sources[src] = what
    # A client left out whole needs none of its requests named.
    owner = {rid: rid.rpartition(":")[0] for rid in damage.requests}
    damage.requests = {rid: w for rid, w in damage.requests.items() if owner[rid] not in damage.clients}
    return damage
