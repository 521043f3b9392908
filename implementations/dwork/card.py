"""The dwork family's card: its client and its checks (no probe: its workers are its own)."""

from __future__ import annotations

from contract.family import Family

CARD = Family(
    "dwork",
    "dwork: a task scheduler with dependencies, workers that steal tasks",
    adapters=("dwork",),
    checkers=("dwork",),
)
