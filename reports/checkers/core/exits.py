"""no_unexpected_exit: no process ends unless the harness ended it; a crash shows with the
tail of its log."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from reports.checkers.toolkit import (
    MAX_EXAMPLES,
    SUBJECT_EVENTS,
    CheckContext,
    CheckResult,
    checker,
    example,
    process_events,
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
    on_damage=SUBJECT_EVENTS,
)
def no_unexpected_exit(ctx: CheckContext) -> CheckResult:
    procs = process_events(ctx)
    starts = sum(r["ev"] == "proc_start" for r in procs)
    exits = [r for r in procs if r["ev"] == "proc_exit"]
    unexpected = [r for r in exits if not r["expected"]]
    # Once the runs folder's disk ran low, an exit may be zchaos's own doing (a writer of
    # ours in the process, its log): not blamed on the subject, nor taken as a pass.
    disk = ctx.meta.get("disk_full") or {}
    since = min((t for t in (disk.get("low_ns"), disk.get("at_ns")) if t), default=None)
    after_disk = [r for r in unexpected if since is not None and r["ts"] >= since]
    unexpected = [r for r in unexpected if not (since is not None and r["ts"] >= since)]
    bad = len(unexpected)
    figures = {"starts": starts, "exits": len(exits), "unexpected_exits": bad}
    summary = f"{figures['starts']} process starts, {figures['exits']} exits, {bad} unexpected"
    if figures["starts"] == 0 and figures["exits"] == 0:
        return result(
            "no process events recorded",
            figures,
            unknown="history/runner.jsonl holds no proc_start or proc_exit: the runner's history is missing",
        )
    if after_disk:
        figures["exits_after_disk_full"] = len(after_disk)
        summary += f", {len(after_disk)} more after the disk filled"
        if not bad:
            names = ", ".join(sorted({str(r["instance"]) for r in after_disk})[:4])
            return result(
                summary,
                figures,
                unknown=(
                    f"{len(after_disk)} process(es) ({names}) exited unexpectedly after the runs folder's "
                    "disk filled, which zchaos's own writers may have caused: not blamed on the system"
                ),
            )
    found = []
    for r in unexpected[:MAX_EXAMPLES]:
        ex = example({k: v for k, v in r.items() if k != "expected"})
        how = f"signal {ex['signal']}" if ex.get("signal") is not None else f"code {ex.get('code')}"
        ex["problem"] = f"{ex.get('role')} {ex.get('instance')} exited with {how}"
        if ctx.run_dir is not None and ex.get("instance"):
            ex["log_tail"] = log_tail(ctx.run_dir / "logs" / f"{ex['instance']}.log")
        found.append(ex)
    return result(summary, figures, violations=bad, examples=found)
