"""The arrival stamp at the start of each line the supervisor captures from a role process.

``logs/<instance>.log`` of a role holds every line its program wrote, each preceded by the
time (UTC, microseconds) the supervisor read its first byte and a bar:
``2026-11-28T17:22:07.123456Z | queue ready``. The bar tells the stamp from a time the
program prints itself. So a log's lines carry a time whatever the program prints (the
report's log evidence reads it, ``reports/evidence.py``), and a readiness line is matched
against what the program wrote, the stamp taken off. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import re

NS = 1_000_000_000
#: A stamp and the bar after it, at the start of a line.
STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z \| ")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def stamp(ts_ns: int) -> bytes:
    """The stamp for a line whose first byte arrived at ``ts_ns`` (``time.time_ns()``)."""
    when = _EPOCH + dt.timedelta(microseconds=ts_ns // 1000)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ | ").encode()


def stamp_time(line: str) -> int | None:
    """The time (ns) of the stamp ``line`` starts with, or None when it has none."""
    m = STAMP.match(line)
    if m is None:
        return None
    year, month, day, hh, mm, ss, micros = map(int, m.groups())
    when = dt.datetime(year, month, day, hh, mm, ss, tzinfo=dt.UTC)
    return int((when - _EPOCH).total_seconds()) * NS + micros * 1000


def unstamped(line: str) -> str:
    """``line`` as the program wrote it: without the stamp, when it has one."""
    m = STAMP.match(line)
    return line[m.end() :] if m else line
