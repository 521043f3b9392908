"""The evidence of each violation example: what a person needs to believe it.

Checkers report their first offending events (examples); they name the request (its
``rid``, or ``cid`` and ``seq``) and nothing more. After the checks ran, ``attach_evidence``
gives every example an ``evidence`` entry, for all examples of all checks at once, in one
query over the history:

- ``request``: the request the example is about, with its own events in order (sends,
  retries, dispatch/exec/requeue where recorded, replies, abandon, unexpected messages that
  carried its id), each with its time since the load started (``t_s``);
- ``body`` / ``body_len``: for a reply or message that was not as expected, what arrived
  (its first bytes, as the client recorded them) and its length;
- ``belongs_to``: the request whose id that body carries, when it is another one (whose
  request it was), with that request's events;
- ``faults``: the faults active over the request's life (or at the example's time);
- ``processes`` and ``logs``: the processes involved (the client, the workers that ran it,
  the processes that bind the clients' endpoints, a fault's target, the process a check
  names) and, for the EXAMPLES_WITH_LOGS examples of each check shown first (``shown_first``:
  the first of each kind of problem, then the earliest), their log lines within
  LOG_WINDOW_S of the example, copied from ``logs/<instance>.log``.

A log line's time is read from its start: the arrival stamp the supervisor puts on every
line of a role's log (``contract/logstamp.py``, taken off the copied text), else the
program's own (an ISO date and time, or a time of day as the built-in implementations
write, taken in the report machine's time zone); a line without one (a traceback's) goes
with the line before. A log whose lines carry no time is named, not copied.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.links import target_instance
from contract.logstamp import stamp_time, unstamped
from contract.payload import owner_of, request_id
from reports.checkers import shown_first

if TYPE_CHECKING:
    from reports.checkers import CheckContext, CheckResult, FaultWindow

NS = 1_000_000_000
#: Events of one request kept in its evidence (a request resent many times has more).
MAX_REQUEST_EVENTS = 40
#: Examples of each check shown first, whose processes' log lines are copied (shown_first).
EXAMPLES_WITH_LOGS = 3
#: Log lines are copied from this long before the example to this long after it.
LOG_WINDOW_S = 1.0
#: Lines copied from one log for one example, at most (around the example's time).
MAX_LOG_LINES = 30
#: Of a log line, what is copied.
LOG_LINE_CHARS = 300
#: Fields of an event the evidence keeps, besides its time, source and kind.
EVENT_FIELDS = (
    "cid", "seq", "rid", "kind", "attempt", "ok", "worker", "reason", "got_rid", "endpoint", "service",
    "latency_us", "body", "body_len", "detail",
)  # fmt: skip


def example_request(ex: dict[str, Any]) -> str | None:
    """The id of the request an example is about: its ``rid``, else its ``cid`` and ``seq``."""
    rid = ex.get("rid")
    if isinstance(rid, str) and rid:
        return rid
    if ex.get("cid") is not None and isinstance(ex.get("seq"), int):
        return request_id(str(ex["cid"]), ex["seq"])
    return None


def attach_evidence(ctx: CheckContext, results: list[CheckResult], t0_ns: int) -> None:
    """Give every example of ``results`` its ``evidence`` (see the module doc), in place."""
    from pyspark.sql import functions as F

    from reports.checkers.toolkit import broker_instances

    examples = [(r, i, ex) for r in results for i, ex in enumerate(r.examples)]
    if not examples:
        return
    wanted: set[str] = set()
    for _, _, ex in examples:
        for rid in (example_request(ex), ex.get("got_rid")):
            if isinstance(rid, str) and rid:
                wanted.add(rid)
    by_request: dict[str, list[dict[str, Any]]] = {}
    if wanted:
        # One scan for every example's requests: an event is about a request by its rid, or
        # (a retry has none) by its client's cid and seq, or by the id a wrong body carried.
        key = F.coalesce(
            F.col("rid"),
            F.when(F.col("cid").isNotNull() & F.col("seq").isNotNull(), F.concat_ws(":", "cid", "seq")),
        )
        found = (
            ctx.events.filter(key.isin(*wanted) | F.col("got_rid").isin(*wanted))
            .select(F.col("ts"), "src", "ev", *EVENT_FIELDS, key.alias("_key"))
            .orderBy("ts", "src")
            .collect()
        )
        for row in found:
            event = {k: v for k, v in row.asDict().items() if v is not None and k != "_key"}
            for rid in {row["_key"], row["got_rid"]}:
                if rid in wanted:
                    by_request.setdefault(rid, []).append(event)
    servers = broker_instances(ctx)
    instances = set((ctx.meta.get("processes") or {}).keys())
    logs_dir = ctx.run_dir / "logs" if ctx.run_dir is not None else None
    windows: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    first = {id(r): set(shown_first(r.examples, EXAMPLES_WITH_LOGS)) for r in results}
    for result, index, ex in examples:
        evidence = _evidence(ex, by_request, ctx.faults, t0_ns, servers, instances)
        ex["evidence"] = evidence
        if logs_dir is not None and index in first[id(result)] and isinstance(ex.get("ts"), int):
            for name in evidence["processes"]:
                log = logs_dir / f"{name}.log"
                if log.is_file() and log.stat().st_size:
                    evidence.setdefault("logs", {})[name] = entry = {"path": f"logs/{name}.log"}
                    windows.setdefault(name, []).append((ex["ts"], entry))
    if logs_dir is not None:
        for name, wanted_windows in windows.items():
            _copy_log_lines(logs_dir / f"{name}.log", wanted_windows, t0_ns)


def _evidence(
    ex: dict[str, Any],
    by_request: dict[str, list[dict[str, Any]]],
    faults: list[FaultWindow],
    t0_ns: int,
    servers: set[str],
    instances: set[str],
) -> dict[str, Any]:
    ts = ex.get("ts") if isinstance(ex.get("ts"), int) else None
    evidence: dict[str, Any] = {}
    if ts is not None:
        evidence["t_s"] = _rel(ts, t0_ns)
    rid = example_request(ex)
    own = by_request.get(rid or "", []) if rid else []
    involved: list[str] = []
    if rid is not None:
        evidence["request"] = _request(rid, own, t0_ns)
    # What arrived, from the example's own event (the checker may not have selected it).
    mine = next(
        (e for e in own if e["ts"] == ts and e["src"] == ex.get("src") and e["ev"] == ex.get("ev")), None
    )
    for key in ("kind", "body", "body_len"):
        value = ex.get(key, (mine or {}).get(key))
        if value is not None:
            evidence[key] = value
    got = ex.get("got_rid") or (mine or {}).get("got_rid")
    if isinstance(got, str) and got and got != rid:
        evidence["belongs_to"] = _request(got, by_request.get(got, []), t0_ns)
    # The faults active over the request's life (its first to its last event), else at the
    # example's time.
    times = [e["ts"] for e in own] + ([ts] if ts is not None else [])
    if times:
        lo, hi = min(times), max(times)
        evidence["faults"] = [
            _fault(f, t0_ns) for f in faults if f.start_ns <= hi and (f.stop_ns is None or f.stop_ns >= lo)
        ]
    # The processes involved: who wrote the example and the request's events, the workers
    # that served it, a process the check names, and (for a request) the servers the
    # clients reach, which a black box's own events never name.
    for event in [ex, *own, *by_request.get(got or "", [])]:
        involved += [str(event[k]) for k in ("src", "instance", "worker") if event.get(k)]
    if rid is not None:
        involved += sorted(servers)
    involved += [target_instance(str(f["target"])) for f in evidence.get("faults", [])]
    evidence["processes"] = _instances(involved, instances)
    return evidence


def _request(rid: str, events: list[dict[str, Any]], t0_ns: int) -> dict[str, Any]:
    """A request's identity and its events in order (at most MAX_REQUEST_EVENTS)."""
    out: dict[str, Any] = {"rid": rid}
    owner = owner_of(rid)
    if owner is not None:
        out["cid"], out["seq"] = owner
    # Each event without what the request already says (its id, client and seq).
    same = {"rid": rid, "cid": out.get("cid"), "seq": out.get("seq")}
    out["events"] = [
        {"t_s": _rel(e["ts"], t0_ns), **{k: v for k, v in e.items() if same.get(k) != v}}
        for e in events[:MAX_REQUEST_EVENTS]
    ]
    if len(events) > MAX_REQUEST_EVENTS:
        out["more_events"] = len(events) - MAX_REQUEST_EVENTS
    return out


def _fault(f: FaultWindow, t0_ns: int) -> dict[str, Any]:
    return {
        "fault_id": f.fault_id,
        "fault": f.fault,
        "target": f.target,
        "start_s": _rel(f.start_ns, t0_ns),
        "stop_s": None if f.stop_ns is None else _rel(f.stop_ns, t0_ns),
    }


def _instances(names: Iterable[str], instances: set[str]) -> list[str]:
    """The process names among ``names``, once each in first-seen order: a connection identity
    (``worker-2-ab12``) as its instance; other names of no process of the run (a client's)
    kept, as a log of that name may exist (an external client program's)."""
    seen: dict[str, None] = {}
    for name in names:
        if name in ("nemesis", "runner", "locust"):
            continue
        owner = next((i for i in sorted(instances, key=len, reverse=True) if name.startswith(i + "-")), None)
        seen.setdefault(name if name in instances or owner is None else owner)
    return list(seen)


def _rel(ts: int, t0_ns: int) -> float:
    return round((ts - t0_ns) / NS, 6)


# --- log lines ---------------------------------------------------------------------------

_ISO = re.compile(
    r"^\[?(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?"
)
_CLOCK = re.compile(r"^\[?(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\b")


def line_time(line: str, near_ns: int) -> int | None:
    """The time (ns) a log line starts with, or None: its arrival stamp, else the program's
    own. A time of day alone is taken on the day (local time zone) that puts it nearest
    ``near_ns``."""
    stamped = stamp_time(line)
    if stamped is not None:
        return stamped
    m = _ISO.match(line)
    if m:
        date, hh, mm, ss, frac, zone = m.groups()
        when = dt.datetime.fromisoformat(f"{date}T{hh}:{mm}:{ss}")
        if zone:
            offset = dt.datetime.strptime(zone.replace(":", "").replace("Z", "+0000"), "%z").tzinfo
            when = when.replace(tzinfo=offset)
        else:
            when = when.astimezone()  # naive: the local time zone
        return _ns(when, frac)
    m = _CLOCK.match(line)
    if not m:
        return None
    hh, mm, ss, frac = m.groups()
    if int(hh) > 23 or int(mm) > 59 or int(ss) > 60:
        return None
    near = dt.datetime.fromtimestamp(near_ns / NS).astimezone()
    candidates = []
    for days in (-1, 0, 1):
        day = (near + dt.timedelta(days=days)).date()
        when = dt.datetime(day.year, day.month, day.day, int(hh), int(mm), min(int(ss), 59)).astimezone()
        candidates.append(_ns(when, frac))
    return min(candidates, key=lambda t: abs(t - near_ns))


def _ns(when: dt.datetime, frac: str | None) -> int:
    return int(when.timestamp()) * NS + (int((frac or "0").ljust(9, "0")[:9]))


def _copy_log_lines(path: Path, windows: list[tuple[int, dict[str, Any]]], t0_ns: int) -> None:
    """Copy into each window's entry the lines of ``path`` within LOG_WINDOW_S of its time
    (one pass over the file for all windows); say so when the lines carry no time."""
    half = int(LOG_WINDOW_S * NS)
    spans = [(ts - half, ts + half, ts, entry) for ts, entry in windows]
    picked: list[list[tuple[int, int, str]]] = [[] for _ in spans]
    near = windows[0][0]
    timed = False
    current: int | None = None
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.rstrip("\n")
                t = line_time(line, near)
                if t is not None:
                    current, timed = t, True
                if current is None:
                    continue
                for k, (lo, hi, _, _) in enumerate(spans):
                    if lo <= current <= hi:
                        picked[k].append((current, number, unstamped(line)[:LOG_LINE_CHARS]))
    except OSError as exc:
        for _, _, _, entry in spans:
            entry["note"] = f"could not read it: {exc}"
        return
    for (lo, hi, ts, entry), lines in zip(spans, picked, strict=True):
        entry["from_s"], entry["to_s"] = _rel(lo, t0_ns), _rel(hi, t0_ns)
        if not timed:
            entry["note"] = "its lines carry no time: see the whole log"
            entry["lines"] = []
            continue
        if len(lines) > MAX_LOG_LINES:  # keep those around the example's time
            at = next((i for i, (t, _, _) in enumerate(lines) if t >= ts), len(lines))
            start = max(0, min(at - MAX_LOG_LINES // 2, len(lines) - MAX_LOG_LINES))
            entry["more_lines"] = len(lines) - MAX_LOG_LINES
            lines = lines[start : start + MAX_LOG_LINES]
        entry["lines"] = [{"t_s": _rel(t, t0_ns), "line_no": n, "text": text} for t, n, text in lines]
