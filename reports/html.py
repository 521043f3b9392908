"""report.html: the reliability report of one run, one self-contained file.

Everything is inline (CSS, an SVG timeline drawn here, no script, no external URL), so
the page works offline and from a CI artefact. The template autoescapes every value;
the SVG is built from numbers and escaped labels only.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from pathlib import Path
from typing import Any

from contract.rundir import FOLLOWER, RunDir, RunMeta
from reports.checkers import shown_first
from reports.evidence import EXAMPLES_WITH_LOGS
from reports.pages import page_template

NS = 1_000_000_000
#: The columns of Locust's stats_stats.csv shown, with the report's heading and the number's kind.
LOCUST_COLUMNS = (
    ("Request Count", "requests", "count"),
    ("Failure Count", "failures", "count"),
    ("Requests/s", "req/s", "rate"),
    ("Failures/s", "fail/s", "rate"),
    ("Median Response Time", "median (ms)", "ms"),
    ("Average Response Time", "mean (ms)", "ms"),
    ("95%", "p95 (ms)", "ms"),
    ("99%", "p99 (ms)", "ms"),
    ("99.9%", "p99.9 (ms)", "ms"),
    ("Max Response Time", "max (ms)", "ms"),
)
EXAMPLE_COLUMNS = ("src", "ev", "cid", "seq", "rid", "problem")

# Timeline geometry (SVG user units).
WIDTH, LEFT, RIGHT = 960, 58, 16
TOP1, H1 = 58, 150  # throughput panel; fault labels in three rows above it
TOP2, H2 = TOP1 + H1 + 34, 150  # latency panel
HEIGHT = TOP2 + H2 + 40
# The band per server below the panels: which endpoint answered, in which state it was.
LANES_TOP, LANE_H, LANE_GAP = HEIGHT + 6, 16, 6
#: The classes the template colours a server's recorded state with (others: "state-other").
STATES = ("active", "passive", "primary", "backup")


def _nice_step(span: float, ticks: int) -> float:
    raw = span / max(1, ticks)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ms_label(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms"


def timeline_chart(
    timeline: list[dict[str, Any]],
    faults: list[dict[str, Any]],
    t0_ns: int,
    grace_s: float,
    load_s: float | None,
    servers: dict[str, Any] | None = None,
    marks: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """Coordinates of the timeline SVG: throughput and latency per second, fault bands, a
    band per server (which endpoint answered, in which state it was) when ``servers`` (the
    metrics' ``servers``) has any, and a marker for each of ``marks`` (``id``, ``t`` in
    seconds, ``label``, ``title``: the examples of "what broke")."""
    if not timeline:
        return None
    t_min = min(0.0, timeline[0]["t"])
    t_max = timeline[-1]["t"] + 1.0
    for f in faults:
        t_max = max(t_max, (f["start_ns"] - t0_ns) / NS)
    if load_s is not None:
        t_max = max(t_max, load_s)
    span = max(t_max - t_min, 1.0)
    plot_w = WIDTH - LEFT - RIGHT

    def x(t: float) -> float:
        return round(LEFT + (t - t_min) / span * plot_w, 1)

    step = _nice_step(span, 12)
    xticks = [{"x": x(t), "label": f"{t:g}"} for t in _frange(math.ceil(t_min / step) * step, t_max, step)]

    # Throughput: replies per second, with retries and abandons as bars on the same axis.
    top_rate = max(
        max(r["replies"] for r in timeline), max(r["retries"] + r["abandons"] for r in timeline), 1
    )
    rstep = _nice_step(top_rate, 4)
    rmax = rstep * math.ceil(top_rate / rstep)

    def y1(v: float) -> float:
        return round(TOP1 + H1 - v / rmax * H1, 1)

    replies = " ".join(f"{x(r['t'] + 0.5)},{y1(r['replies'])}" for r in timeline)
    area = f"{x(timeline[0]['t'] + 0.5)},{y1(0)} {replies} {x(timeline[-1]['t'] + 0.5)},{y1(0)}"
    bar_w = max(1.0, plot_w / span * 0.7)
    bars = [
        {
            "x": round(x(r["t"] + 0.15), 1),
            "y": min(y1(r["retries"] + r["abandons"]), TOP1 + H1 - 2),
            "w": round(bar_w, 1),
            "h": round(max(2.0, (r["retries"] + r["abandons"]) / rmax * H1), 1),
            "title": f"t={r['t']} s: {r['retries']} retries, {r['abandons']} abandons",
        }
        for r in timeline
        if r["retries"] or r["abandons"]
    ]
    yticks1 = [{"y": y1(v), "label": f"{v:g}"} for v in _frange(0, rmax, rstep)]

    # Latency: p50/p90/p99 on a log scale, a gap where a second had no reply.
    values = [r[k] for r in timeline for k in ("p50_ms", "p90_ms", "p99_ms") if r[k]]
    lat_lines: list[dict[str, Any]] = []
    yticks2: list[dict[str, Any]] = []
    if values:
        lo = math.floor(math.log10(max(min(values), 0.001)))
        hi = max(math.ceil(math.log10(max(values))), lo + 1)

        def y2(ms: float) -> float:
            v = math.log10(max(ms, 10**lo))
            return round(TOP2 + H2 - (v - lo) / (hi - lo) * H2, 1)

        for key, cls in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99")):
            segment: list[str] = []
            for r in timeline:
                if r[key] is None:
                    if segment:
                        lat_lines.append({"cls": cls, "points": " ".join(segment)})
                    segment = []
                else:
                    segment.append(f"{x(r['t'] + 0.5)},{y2(r[key])}")
            if segment:
                lat_lines.append({"cls": cls, "points": " ".join(segment)})
        yticks2 = [{"y": y2(10**e), "label": _ms_label(10**e)} for e in range(lo, hi + 1)]

    bands = []
    for i, f in enumerate(faults):
        start = (f["start_ns"] - t0_ns) / NS
        stop = None if f.get("stop_ns") is None else (f["stop_ns"] - t0_ns) / NS
        end = t_max if stop is None else stop
        x0, x1 = x(max(start, t_min)), x(min(end, t_max))
        grace_end = x(min(end + grace_s, t_max)) if stop is not None else x1
        label = f"{f.get('fault')} {f.get('target')}"
        healed = "never healed" if stop is None else f"{start:.1f} to {stop:.1f} s"
        bands.append(
            {
                "id": f.get("fault_id"),
                "x": x0,
                "w": max(round(x1 - x0, 1), 2.0),
                "gx": max(x1, x0 + 2.0),
                "gw": round(max(grace_end - max(x1, x0 + 2.0), 0.0), 1),
                "label": label,
                "label_x": x0 + 3,
                "label_y": TOP1 - 30 + 11 * (i % 3),
                "title": f"fault {f.get('fault_id')}: {label}, {healed}",
            }
        )
    shown_marks = [
        {**m, "x": x(m["t"])} for m in marks or [] if m.get("t") is not None and t_min <= m["t"] <= t_max
    ]
    lanes = server_lanes(servers or {}, x, t_min, t_max)
    bottom = HEIGHT if not lanes else LANES_TOP + 14 + len(lanes) * (LANE_H + LANE_GAP) + 30
    legend_y = bottom - 8
    return {
        "width": WIDTH,
        "height": bottom,
        "lanes": lanes,
        "lanes_top": LANES_TOP,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top1": TOP1,
        "bottom1": TOP1 + H1,
        "top2": TOP2,
        "bottom2": TOP2 + H2,
        "xticks": xticks,
        "yticks1": yticks1,
        "yticks2": yticks2,
        "replies": replies,
        "area": area,
        "bars": bars,
        "lat_lines": lat_lines,
        "bands": bands,
        "load_stop_x": x(load_s) if load_s is not None and t_min <= load_s <= t_max else None,
        "marks": shown_marks,
        "legend_y": legend_y,
    }


def server_lanes(servers: dict[str, Any], x: Any, t_min: float, t_max: float) -> list[dict[str, Any]]:
    """One lane per server or endpoint: a mark for each second it answered (darker for more
    replies) over segments of its recorded state. Generic: ``answered`` comes from any
    failover client's replies, ``states`` only from servers that record them."""
    answered = servers.get("answered") or {}
    states = servers.get("states") or {}
    top = max((n for seconds in answered.values() for _, n in seconds), default=1)
    lanes = []
    for i, name in enumerate(sorted(set(answered) | set(states))):
        y = LANES_TOP + 14 + i * (LANE_H + LANE_GAP)
        marks = [
            {
                "x": x(t),
                "w": max(round(x(t + 1) - x(t), 1), 1.0),
                "opacity": round(0.3 + 0.7 * n / top, 2),
                "title": f"{name}: {n} replies at t={t} s",
            }
            for t, n in answered.get(name, [])
            if t_min <= t <= t_max
        ]
        changes = states.get(name, [])
        segments = []
        for j, (t, state) in enumerate(changes):
            end = changes[j + 1][0] if j + 1 < len(changes) else t_max
            lo, hi = max(t, t_min), min(end, t_max)
            if hi <= lo:
                continue
            segments.append(
                {
                    "x": x(lo),
                    "w": max(round(x(hi) - x(lo), 1), 1.0),
                    "cls": f"state-{state}" if state in STATES else "state-other",
                    "title": f"{name} {state} from {t:.1f} s",
                }
            )
        served = sum(n for _, n in answered.get(name, []))
        title = f"{name}: {served} replies" + (f", {len(changes)} state changes" if changes else "")
        lanes.append(
            {"name": name, "y": y, "h": LANE_H, "marks": marks, "segments": segments, "title": title}
        )
    return lanes


def _frange(start: float, stop: float, step: float) -> list[float]:
    """start, start+step, ... up to stop (included, give or take rounding)."""
    count = math.floor((stop - start) / step + 1e-9) + 1
    return [round(start + k * step, 9) for k in range(max(0, min(count, 1000)))]


def locust_stats(run: RunDir) -> dict[str, Any] | None:
    """Locust's stats_stats.csv as the report shows it (``columns``: headings; ``rows``: each
    with its ``name`` and formatted ``cells``; ``requests``: the Aggregated request count),
    or None when there is none."""
    path = run.locust / "stats_stats.csv"
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return None
    shown = [c for c in LOCUST_COLUMNS if rows and c[0] in rows[0]]
    out, total = [], None
    for r in rows:
        name = " ".join(x for x in (r.get("Type"), r.get("Name")) if x)
        if r.get("Name") == "Aggregated":
            total = _number(r.get("Request Count"))
        out.append({"name": name, "cells": [_locust_value(r.get(c), kind) for c, _, kind in shown]})
    return {"columns": [label for _, label, _ in shown], "rows": out, "requests": total}


def _number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _locust_value(text: Any, kind: str) -> str:
    """A figure of Locust's CSV with the precision it deserves (Locust writes 221.36872105454904)."""
    value = _number(text)
    if value is None:
        return str(text or "")
    if kind == "count":
        return _count(value)
    if kind == "rate":
        return f"{value:,.1f}"
    return f"{value:,.0f}" if value.is_integer() else _ms(value)  # Locust's percentiles are whole ms


def _count(value: Any) -> str:
    """A count with thousands separators (9,747)."""
    return f"{value:,.0f}" if isinstance(value, int | float) and not isinstance(value, bool) else _fmt(value)


def _ms(value: Any) -> str:
    """Milliseconds to three significant digits or to the millisecond, whichever is coarser."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return _fmt(value)
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def count_difference(verdict: dict[str, Any], locust: dict[str, Any] | None) -> str:
    """One line on why Locust's request count differs from the history's, when it does."""
    kinds = ((verdict.get("metrics") or {}).get("client_kinds") or {}).values()
    if not locust or locust.get("requests") is None or not kinds:
        return ""
    ended = sum((k.get("replies") or 0) + (k.get("abandons") or 0) + (k.get("lost") or 0) for k in kinds)
    sent = sum(k.get("requests") or 0 for k in kinds)
    counted = int(locust["requests"])
    if counted == ended:
        return ""
    return (
        f"Locust counted {counted:,} requests, the history {ended:,} that ended (replied, abandoned or "
        f"lost) of {sent:,} sent: Locust writes its CSV every few seconds and its last write misses "
        "the final stretch of the load and the drain, and counts nothing still in flight at shutdown. "
        "The checks and the figures above come from the history."
    )


#: The role shown for the history follower's log, zchaos's own process.
FOLLOWER_ROLE = "zchaos: history to Parquet"


def process_logs(run: RunDir, verdict: dict[str, Any]) -> list[dict[str, Any]]:
    """Each process's log (``logs/<instance>.log``, linked from the report) with its role and exits."""
    roles = {p.get("instance"): p.get("role") for p in verdict.get("processes") or []}
    exits: dict[str, int] = {}
    for p in verdict.get("processes") or []:
        exits[p.get("instance")] = exits.get(p.get("instance"), 0) + 1
    logs = sorted(run.logs.glob("*.log")) if run.logs.is_dir() else []
    return [
        {
            "instance": log.stem,
            "href": f"logs/{log.name}",
            "role": roles.get(log.stem) or (FOLLOWER_ROLE if log.stem == FOLLOWER else ""),
            "size": _size(log.stat().st_size),
            "exits": exits.get(log.stem, 0),
        }
        for log in logs
    ]


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} kB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"


def _rel_s(ts: Any, t0: int) -> str:
    if not isinstance(ts, int):
        return ""
    return f"{(ts - t0) / NS:.3f}"


def _utc(ts: Any) -> str:
    if not isinstance(ts, int):
        return ""
    return dt.datetime.fromtimestamp(ts / NS, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _details(ex: dict[str, Any]) -> list[tuple[str, str]]:
    skip = {"ts", "log_tail", "evidence", *EXAMPLE_COLUMNS}
    return [(k, _fmt(v)) for k, v in ex.items() if k not in skip and v is not None]


#: Examples of each violated check shown in "what broke" (those with log lines, reports/evidence.py).
BROKE_EXAMPLES = EXAMPLES_WITH_LOGS
#: Fields of an event of a request not repeated in its line of details (shown in their own
#: columns, or above the table: what was received).
EVENT_SHOWN_ELSEWHERE = {"ts", "t_s", "src", "ev", "body", "body_len"}


def what_broke(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    """The violated checks, each with the BROKE_EXAMPLES examples shown first (the first of
    each kind of problem, then the earliest) and their evidence, numbered in the order shown
    (their markers on the timeline)."""
    broke = []
    for name, check in (verdict.get("checks") or {}).items():
        if check.get("status") != "violated":
            continue
        shown = []
        examples = check.get("examples") or []
        for i in shown_first(examples, BROKE_EXAMPLES):
            ex = examples[i]
            evidence = ex.get("evidence") or {}
            shown.append({"id": f"{name}-{i + 1}", "ex": ex, "evidence": evidence, "t": evidence.get("t_s")})
        broke.append({"name": name, "check": check, "examples": shown})
    number = 0
    for entry in broke:
        for item in entry["examples"]:
            number += 1
            item["number"] = number
    return broke


def _event_details(event: dict[str, Any]) -> str:
    """An event of a request's evidence in one line: every field but its time, source and kind."""
    return ", ".join(f"{k}={_fmt(v)}" for k, v in event.items() if k not in EVENT_SHOWN_ELSEWHERE)


def render_html(verdict: dict[str, Any], meta: RunMeta, run: RunDir) -> str:
    """The report page as a string."""
    metrics = verdict.get("metrics") or {}
    t0 = metrics.get("t0_ns") or meta.get("load_started_ns") or 0
    promises = (meta.get("manifest") or {}).get("promises") or {}
    load_stop = meta.get("load_stopped_ns")
    load_s = (load_stop - t0) / NS if isinstance(load_stop, int) and t0 else None
    # The band after each fault: how long its requests are excused (the steady-state check's timers).
    steady = ((verdict.get("checks") or {}).get("steady_state") or {}).get("figures") or {}
    broke = what_broke(verdict)
    marks = [
        {
            "id": item["id"],
            "t": item["t"],
            "label": str(item["number"]),
            "title": f"{item['number']}: {entry['name']}, {item['ex'].get('problem') or 'violation'}",
        }
        for entry in broke
        for item in entry["examples"]
    ]
    chart = timeline_chart(
        metrics.get("timeline") or [],
        verdict.get("faults") or [],
        t0,
        float(steady.get("after_stop_s", promises.get("steady_grace_s")) or 0.0),
        load_s,
        metrics.get("servers"),
        marks,
    )
    scenario = meta.get("scenario") or {}
    locust = locust_stats(run)
    template = page_template(
        "report.html.j2",
        rel_s=_rel_s,
        utc=_utc,
        fmt=_fmt,
        details=_details,
        count=_count,
        ms=_ms,
        event_details=_event_details,
    )
    return template.render(
        v=verdict,
        scenario=scenario,
        manifest=meta.get("manifest") or {},
        promises=promises,
        t0=t0,
        chart=chart,
        locust=locust,
        count_difference=count_difference(verdict, locust),
        logs=process_logs(run, verdict),
        example_columns=EXAMPLE_COLUMNS,
        broke=broke,
        generated=_utc(verdict.get("generated_ns")),
    )


def write_html(verdict: dict[str, Any], meta: RunMeta, run: RunDir, path: Path) -> None:
    path.write_text(render_html(verdict, meta, run), encoding="utf-8")
