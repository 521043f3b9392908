"""``clock_step``: the target's wall clock stepped by offset_s for duration_s, then back
(an NTP step, a VM resumed; chaos/clock.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.clock import hold, missing
from chaos.faults import FaultKind, FaultRun, Param, ParamProblem, duration
from contract.promises import SLOWDOWN

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault

#: A week either way: further than any timer a system keeps.
MAX_OFFSET_S = 7 * 86400.0


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    offset = float(fault.params["offset_s"])
    hold(nemesis, fault, lambda _t: offset, 0.0)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if params["offset_s"] == 0:
        raise ParamProblem(
            "offset_s", "a step of 0 s changes nothing; give a positive (forward) or negative offset"
        )


KIND = FaultKind(
    "clock_step",
    "the process's wall clock stepped by offset_s (forward if positive) for duration_s, then back "
    "to true time; its monotonic clock is left alone (libfaketime)",
    "process",
    run,
    {
        "offset_s": Param(
            float,
            doc="how far the clock jumps (negative: back)",
            unit="s",
            min=-MAX_OFFSET_S,
            max=MAX_OFFSET_S,
            explore=(-3600.0, 3600.0),  # up to an hour either way (0 is drawn again)
        ),
        "duration_s": duration("how long the clock stays off"),
    },
    # A correct system times with its monotonic clock and serves on: judged as a slowdown
    # (availability holds it to serving), never excused as an outage.
    harm=SLOWDOWN,
    validate=validate,
    clock=True,
    missing=missing,
)
