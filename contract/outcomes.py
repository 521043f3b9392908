"""The outcomes of a run and their exit codes: the one place that says what each means.

A verdict has five outcomes (DESIGN.md, "Judging a black box"). They combine as
violated > incomplete > unknown > passed: a violation that was seen is real even on a run
that was cut short, and a run that did not carry out its plan says more than a check that
could not decide. Bad input (the scenario, the manifest or the machine was wrong) stops a
run before it has a verdict. The CLI's exit code is the outcome's.
"""

from __future__ import annotations

PASSED = "passed"  # every promised check was decided and held (or failed only as expected)
VIOLATED = "violated"  # a promised invariant was seen to break
UNKNOWN = "unknown"  # a promised check could not be decided: never shown as passed
INCOMPLETE = "incomplete"  # the run did not carry out its plan (runner killed, a fault did not fire)
BAD_INPUT = "bad_input"  # the scenario, the manifest, the history or the set-up was wrong

EXIT_CODES: dict[str, int] = {PASSED: 0, VIOLATED: 1, BAD_INPUT: 2, UNKNOWN: 3, INCOMPLETE: 4}
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: every process of the run was stopped first

#: Which outcome wins when several apply (bad input never combines: it has no verdict).
PRECEDENCE: tuple[str, ...] = (VIOLATED, INCOMPLETE, UNKNOWN, PASSED)


def combine_outcomes(outcomes: list[str]) -> str:
    """The run's outcome from the outcomes of its parts (passed when there are none)."""
    for outcome in PRECEDENCE:
        if outcome in outcomes:
            return outcome
    return PASSED


def exit_code(outcome: str) -> int:
    """The CLI's exit code for an outcome."""
    return EXIT_CODES[outcome]
