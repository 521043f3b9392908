"""What the user sees while a run goes on, and the verdict at its end.

Progress goes to stderr: one line rewritten in place on a terminal, a line every few
seconds otherwise (CI logs). It counts requests from the clients' history files as they
grow, so it costs the load nothing. The verdict table goes to stdout.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from contract.calibration import users_text

if TYPE_CHECKING:
    from chaos.nemesis import Nemesis, PlannedFault
    from contract.rundir import RunDir
    from harness.scenario import LoadSpec, Scenario

_COUNTED = {
    "send": b'"ev":"send"',
    "reply": b'"ev":"reply"',
    "retry": b'"ev":"retry"',
    "abandon": b'"ev":"abandon"',
    "lost": b'"ev":"lost"',  # a no-resend client's request past its reply deadline
}
STATUS_MARK = {"held": "ok  ", "violated": "FAIL", "unknown": "??  "}
#: The last line of a verdict, by run outcome (contract/outcomes.py).
OUTCOME_WORD = {
    "passed": "PASSED",
    "violated": "FAILED: VIOLATED",
    "unknown": "UNKNOWN: not every promised check could be decided",
    "incomplete": "INCOMPLETE: the run did not carry out its plan",
}


class HistoryCounter:
    """Counts client events in ``history/locust-*.jsonl`` incrementally."""

    def __init__(self, history_dir: Path) -> None:
        self.history_dir = history_dir
        self.offsets: dict[Path, int] = {}
        self.counts = dict.fromkeys(_COUNTED, 0)

    def update(self) -> dict[str, int]:
        for path in self.history_dir.glob("locust-*.jsonl"):
            offset = self.offsets.get(path, 0)
            with path.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1  # count whole lines only
            for name, needle in _COUNTED.items():
                self.counts[name] += chunk.count(needle, 0, end)
            self.offsets[path] = offset + end
        return self.counts


class Progress:
    def __init__(
        self, stream: IO[str] | None = None, out: IO[str] | None = None, every_s: float = 5.0
    ) -> None:
        self.stream = stream or sys.stderr
        self.out = out or sys.stdout
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self._last = 0.0
        self._counter: HistoryCounter | None = None
        self._nemesis: Nemesis | None = None
        self._total = 0.0
        self._load: LoadSpec | None = None
        self._live_line = False
        self._errors_shown = 0

    def _print(self, text: str) -> None:
        if self._live_line:
            self.stream.write("\r\033[K")
            self._live_line = False
        print(text, file=self.stream, flush=True)

    def header(self, scenario: Scenario, run: RunDir, plan: list[PlannedFault]) -> None:
        topology = ", ".join(f"{n} {r}" for r, n in scenario.topology.items())
        self._print(f"zchaos: {scenario.name} on {scenario.manifest.name} ({topology}), seed {scenario.seed}")
        self._print(
            f"  load: {scenario.load.users} users for {scenario.duration_s:g} s; "
            f"{len(plan)} fault(s) planned; run folder {run.root}"
        )
        for phase in scenario.load.phases:
            self._print(
                f"    phase {phase.name}: {phase.start_s:g}-{phase.end_s:g} s, {users_text(phase.users)}, "
                f"{phase.wait_ms:g} ms between requests"
            )
        for fault in plan:
            self._print(f"    {fault.describe()}")
        for note in scenario.notes:
            self._print(f"  note: {note}")
        for r in scenario.resolved:
            self._print(f"  {r['key']} = {r['given']!r} -> {r['value']:g} (from the calibration)")

    def phase(self, name: str) -> None:
        self._print(f"[{name}]")

    def note(self, text: str) -> None:
        self._print(f"  {text}")

    def warn(self, text: str) -> None:
        self._print(f"  ! {text}")

    def start_load(
        self, total_s: float, history_dir: Path, nemesis: Nemesis, load: LoadSpec | None = None
    ) -> None:
        self._counter = HistoryCounter(history_dir)
        self._nemesis = nemesis
        self._total = total_s
        self._load = load

    def _fault_errors(self) -> None:
        """Warn of each fault that failed since the last call (once each, as it happens)."""
        errors = self._nemesis.errors if self._nemesis else []
        for error in errors[self._errors_shown :]:
            self.warn(f"fault failed: {error}")
        self._errors_shown = len(errors)

    def tick(self, elapsed: float) -> None:
        self._fault_errors()
        now = time.monotonic()
        if not self.tty and now - self._last < self.every_s:
            return
        self._last = now
        c = self._counter.update() if self._counter else {}
        faults = self._nemesis.injected if self._nemesis else 0
        upcoming = self._nemesis.next_fault(elapsed) if self._nemesis else None
        line = f"  {min(elapsed, self._total):5.0f}/{self._total:g} s" + self._phase_label(elapsed)
        line += (
            f"  requests {c.get('send', 0):>7} "
            f"replies {c.get('reply', 0):>7}  retries {c.get('retry', 0)}  abandons {c.get('abandon', 0)}  "
            f"faults {faults}"
        )
        if c.get("lost"):
            line += f"  lost {c['lost']}"
        if upcoming is not None:
            line += f"  next: {upcoming.kind} {upcoming.target} at {upcoming.at_s:g} s"
        if self.tty:
            self.stream.write("\r\033[K" + line[:160])
            self.stream.flush()
            self._live_line = True
        else:
            self._print(line)

    def _phase_label(self, elapsed: float) -> str:
        """`` phase idle (2/3, 1 user)`` while a phased load runs, else nothing."""
        load = self._load
        phase = load.phase_at(elapsed) if load else None
        if load is None or phase is None:
            return ""
        n = load.phases.index(phase) + 1
        return f"  phase {phase.name} ({n}/{len(load.phases)}, {users_text(phase.users)})"

    def end_load(self) -> None:
        self._fault_errors()
        if self._counter is not None:
            c = self._counter.update()
            self._print(
                f"  load done: {c['send']} sends, {c['reply']} replies, {c['retry']} retries, "
                f"{c['abandon']} abandons" + (f", {c['lost']} lost" if c["lost"] else "")
            )

    def verdict(self, verdict: dict[str, Any], run: RunDir) -> None:
        """The check table and the run's outcome, with the reasons when it is not plainly
        passed or violated (an undecided check, a run cut short)."""
        self._print("")
        out = self.out
        print(f"verdict for {run.root.name}:", file=out)
        checks: dict[str, dict[str, Any]] = verdict.get("checks", {})
        width = max((len(n) for n in checks), default=10)
        for name, check in checks.items():
            status = check.get("status", "unknown")
            mark = STATUS_MARK.get(status, status)
            expected = ""
            if check.get("expected") and status == "violated":
                expected = "  (expected)"
            elif check.get("expected") and status == "held":
                # a known weakness the run did not show fails the run: the line must say why
                mark, expected = (
                    STATUS_MARK["violated"],
                    "  (expected to be violated: the run did not show it)",
                )
            print(f"  {mark} {name:<{width}}  {check.get('summary', '')}{expected}", file=out)
            if status == "unknown" and check.get("reason") and check.get("reason") != check.get("summary"):
                print(f"       {'':<{width}}  unknown: {check['reason']}", file=out)
        for warning in verdict.get("warnings") or []:
            print(f"  ! {warning}", file=out)
        for note in verdict.get("notes") or []:
            print(f"  note: {note}", file=out)
        if verdict.get("calibration"):
            resolved = ", ".join(f"{r['key']} = {r['value']:g}" for r in verdict.get("resolved") or [])
            print(f"  calibration: {verdict['calibration']}; {resolved}", file=out)
        outcome = str(verdict.get("outcome") or "unknown")
        for reason in verdict.get("reasons") or []:
            if not reason.split(":", 1)[0].endswith(" unknown"):  # an unknown check shows above
                print(f"  ! {reason}", file=out)
        commands = run.read_meta().get("replay", {}).get("commands") if run.run_json.exists() else None
        for command in commands or []:
            print(f"  reproduce: {command}", file=out)
        word = OUTCOME_WORD.get(outcome, outcome.upper())

        print(f"{word} (exit {verdict.get('exit_code')})  report: {run.report_html}", file=out, flush=True)
