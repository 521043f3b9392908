"""The fault kinds a scenario may schedule, with their parameters and what they model.

This table is the one place a fault kind is declared: the scenario reader validates
against it, ``zchaos list`` prints it, and the nemesis dispatches on ``FaultKind.name``.
A parameter's default ``...`` means it is required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: How a scenario picks instances of a role: ``worker:random`` (one, seeded), ``worker:half``
#: (half of them, rounded up, seeded), ``worker:all``.
SELECTORS = ("random", "half", "all")


@dataclass(frozen=True)
class FaultKind:
    name: str
    doc: str
    target: str  # "process" (an instance or a role selector) or "link"
    params: dict[str, tuple[type, Any]] = field(default_factory=dict)

    @property
    def instantaneous(self) -> bool:
        """True when the fault has no duration of its own (its stop follows its start)."""
        return "duration_s" not in self.params


FAULT_KINDS: dict[str, FaultKind] = {
    kind.name: kind
    for kind in (
        FaultKind(
            "kill",
            "SIGKILL the process group (a crash); start it again after restart_after_s if given",
            "process",
            {"restart_after_s": (float, None)},
        ),
        FaultKind(
            "restart",
            "SIGTERM, wait for the exit, start again after delay_s (a deploy, a clean restart)",
            "process",
            {"delay_s": (float, 0.0)},
        ),
        FaultKind(
            "freeze",
            "SIGSTOP for duration_s, then SIGCONT (a GC pause, a stuck process)",
            "process",
            {"duration_s": (float, ...)},
        ),
    )
}
