"""``clock_rate``: the target's wall clock runs ``factor`` times as fast as true time for
duration_s, then steps back to true time (a drifting clock; chaos/clock.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.clock import hold, missing
from chaos.faults import FaultKind, FaultRun, Param, ParamProblem, duration
from contract.promises import SLOWDOWN

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault

#: How often the offset is set again: the faked clock advances in steps this long.
TICK_S = 0.05


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    factor = float(fault.params["factor"])
    # The offset grows with the time spent, written every tick, rather than libfaketime's own
    # "x" rate: that one counts from the process's start, so changing it at run time jumps
    # the clock by the whole time run so far (its smoothing, FAKETIME_XRESET, is experimental).
    hold(nemesis, fault, lambda t: (factor - 1.0) * t, TICK_S)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if params["factor"] == 1:
        raise ParamProblem("factor", "a factor of 1 is true time; give one above 1 (fast) or below (slow)")


KIND = FaultKind(
    "clock_rate",
    "the process's wall clock runs `factor` times as fast as true time (0: stopped) for "
    "duration_s, then steps back to true time; its monotonic clock is left alone",
    "process",
    run,
    {
        "factor": Param(
            float, doc="how fast the clock runs against true time", min=0, max=100, explore=(0.0, 10.0)
        ),
        "duration_s": duration(),
    },
    harm=SLOWDOWN,
    validate=validate,
    clock=True,
    missing=missing,
)
