"""no_unexpected_exit: no process ends unless the harness ended it; a crash shows with the
tail of its log."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from pyspark.sql import functions as F

from reports.checkers.toolkit import (
    CheckContext,
    CheckResult,
    checker,
    count,
    events_of,
    examples,
    result,
)

LOG_TAIL_LINES = 10

# --- no_unexpected_exit ----------------------------------------------------------------


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``lines`` lines of a log file (empty if there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    tail = deque(data.decode("utf-8", "replace").splitlines(), maxlen=lines)
    return list(tail)


@checker(
    "no_unexpected_exit",
    "no process ends unless the harness ended it (a fault or the teardown); a crash shows "
    "with the tail of its log",
    reads_clients=False,
)
def no_unexpected_exit(ctx: CheckContext) -> CheckResult:
    procs = events_of(ctx, "proc_start", "proc_exit")
    unexpected = (F.col("ev") == "proc_exit") & ~F.coalesce("expected", F.lit(False))
    row = procs.agg(
        F.sum((F.col("ev") == "proc_start").cast("int")).alias("starts"),
        F.sum((F.col("ev") == "proc_exit").cast("int")).alias("exits"),
        F.sum(unexpected.cast("int")).alias("bad"),
    ).first()
    bad = count(row["bad"])
    figures = {"starts": count(row["starts"]), "exits": count(row["exits"]), "unexpected_exits": bad}
    summary = f"{figures['starts']} process starts, {figures['exits']} exits, {bad} unexpected"
    if figures["starts"] == 0 and figures["exits"] == 0:
        return result(
            "no process events recorded",
            figures,
            unknown="history/runner.jsonl holds no proc_start or proc_exit: the runner's history is missing",
        )
    found = []
    if bad:
        found = examples(
            procs.filter(unexpected).select(
                "ts", "src", "ev", "cid", "seq", "rid", "instance", "role", "pid", "code", "signal", "detail"
            )
        )
        for ex in found:
            how = f"signal {ex['signal']}" if ex.get("signal") is not None else f"code {ex.get('code')}"
            ex["problem"] = f"{ex.get('role')} {ex.get('instance')} exited with {how}"
            if ctx.run_dir is not None and ex.get("instance"):
                ex["log_tail"] = log_tail(ctx.run_dir / "logs" / f"{ex['instance']}.log")
    return result(summary, figures, violations=bad, examples=found)
