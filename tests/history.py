"""What the tests that write a history by hand share: time units, when the load starts
(``T0``), ``t`` for the times after it, and the generic checks a run promises."""

from __future__ import annotations

NS = 1_000_000_000
MS = 1_000_000
#: When a hand-written history's load starts (ns).
T0 = 1_700_000_000 * NS
#: The generic checks (reports/checkers/core), in the order a manifest lists them.
GENERIC = (
    "no_lost",
    "no_duplicate",
    "in_order",
    "correct_reply",
    "execution_count",
    "steady_state",
    "no_unexpected_exit",
    "recovery",
)


def t(seconds: float) -> int:
    """The time ``seconds`` after T0 (ns)."""
    return T0 + int(seconds * NS)


def ev(seconds: float, src: str, kind: str, **fields: object) -> dict[str, object]:
    """One event of a hand-written history, ``seconds`` after T0."""
    return {"ts": t(seconds), "src": src, "ev": kind, **fields}
