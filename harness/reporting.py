"""One run's report as a command shows it: its verdict built (reports/pipeline.py), printed
with how long it took, and the run added to the results store; ``zchaos report`` and the
runner at the end of a run. Apart from the runner, so that ``zchaos report`` does not import
the fault injectors and the load clients (0.3 s of a report's process)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.errors import CannotWrite, SetupError

if TYPE_CHECKING:
    from contract.rundir import RunDir
    from harness.progress import Progress


def build_report_for(
    run: RunDir, progress: Progress, store: Path | None = None, events: int | None = None
) -> dict[str, Any]:
    """Run the Spark pipeline over a run folder, print the verdict and how long it took, and
    add the run to the results store (``store``: default the one of its runs folder,
    reports/store.py). A store that cannot take it is named in a warning; the verdict stands.
    ``events``: what a Spark session started here is sized for (reports/pipeline.py build_report)."""
    from reports.pipeline import build_report
    from reports.store import record_run

    progress.phase("report")
    started = time.monotonic()
    verdict = build_report(run.root, progress=progress.note, events=events, store=store)
    progress.note(f"report built in {time.monotonic() - started:.1f} s")
    progress.verdict(verdict, run)
    try:
        progress.note(f"added to the results store {record_run(run.root, store)}")
    except CannotWrite:  # a full disk: the outputs are not whole, said as an error (exit 4)
        raise
    except (SetupError, sqlite3.OperationalError) as exc:  # StoreDamaged among them
        progress.warn(f"this run is not in the results store: {exc}")
    return verdict
