"""The run directory: where one run keeps everything, and what ``run.json`` holds.

```
runs/20261121T120000Z-paranoid-pirate-kill-worker/
  run.json        what ran: scenario, manifest (promises included), times, processes
  history/        one <source>.jsonl per writing process (see harness/history.py)
  logs/           stdout+stderr of every process, <instance>.log
  locust/         Locust's CSV statistics (stats_stats.csv, stats_stats_history.csv, ...)
  verdict.json    written by the report pipeline
  junit.xml
  report.html
```

``run.json`` keys the report pipeline relies on: ``scenario`` (Scenario.as_dict),
``manifest`` (Manifest.as_dict, with ``promises``), ``expect_violated``, and the times
``started_ns``, ``load_started_ns``, ``load_stopped_ns``, ``ended_ns`` (time.time_ns()),
``plan`` (the fault plan) and ``phases_done`` (phase -> end time: a run without ``load`` and
``drain`` there, nor ``phase_done`` events in its history, was cut short: incomplete).
Standard library only: the report pipeline reads it too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def history(self) -> Path:
        return self.root / "history"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def locust(self) -> Path:
        return self.root / "locust"

    @property
    def locust_csv_prefix(self) -> Path:
        return self.locust / "stats"

    @property
    def load_origin(self) -> Path:
        """Written by Locust: the wall-clock ns of the load's time zero."""
        return self.locust / "origin"

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def verdict_json(self) -> Path:
        return self.root / "verdict.json"

    @property
    def junit_xml(self) -> Path:
        return self.root / "junit.xml"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    def log(self, instance: str) -> Path:
        return self.logs / f"{instance}.log"

    @classmethod
    def create(cls, base: str | Path, scenario_name: str) -> RunDir:
        """A new, empty run directory under ``base``, named by UTC time and scenario."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        base = Path(base)
        for n in range(1000):
            suffix = f"-{n}" if n else ""
            root = base / f"{stamp}-{scenario_name}{suffix}"
            try:
                root.mkdir(parents=True)
            except FileExistsError:
                continue
            run = cls(root)
            for sub in (run.history, run.logs, run.locust):
                sub.mkdir()
            return run
        raise RuntimeError(f"cannot create a run directory under {base}")

    def write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.run_json.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        tmp.replace(self.run_json)

    def read_meta(self) -> dict[str, Any]:
        return json.loads(self.run_json.read_text())
