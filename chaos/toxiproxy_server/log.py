"""JSON-lines logging on stdout, like Toxiproxy's zerolog output, filtered by ``LOG_LEVEL``."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

LEVELS = ("trace", "debug", "info", "warn", "error", "fatal", "panic")
_threshold = (
    LEVELS.index(os.environ.get("LOG_LEVEL", "info").lower())
    if os.environ.get("LOG_LEVEL", "info").lower() in LEVELS
    else LEVELS.index("info")
)


def enabled(level: str) -> bool:
    return LEVELS.index(level) >= _threshold


def log(level: str, message: str, **fields: Any) -> None:
    """Write one log line if ``level`` passes ``LOG_LEVEL``; never fails the caller."""
    if not enabled(level):
        return
    record = {
        "level": level,
        **fields,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "message": message,
    }
    try:
        sys.stdout.write(json.dumps(record, default=str) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
