"""``clock_strobe``: the target's wall clock flips between true time and delta_s ahead every
period_s for duration_s (Jepsen's strobe; chaos/clock.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.clock import hold, missing
from chaos.faults import FaultKind, FaultRun, Param, ParamProblem, duration
from chaos.kinds.clock_step import MAX_OFFSET_S
from contract.promises import SLOWDOWN

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    delta, period = float(fault.params["delta_s"]), float(fault.params["period_s"])
    # Set at each period's end (a wake-up a little late still rounds to the right half).
    hold(nemesis, fault, lambda t: delta if round(t / period) % 2 == 0 else 0.0, period)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if params["delta_s"] == 0:
        raise ParamProblem("delta_s", "a strobe of 0 s changes nothing")


KIND = FaultKind(
    "clock_strobe",
    "the process's wall clock flips between delta_s off and true time every period_s for "
    "duration_s, then stays at true time; its monotonic clock is left alone",
    "process",
    run,
    {
        "delta_s": Param(
            float,
            doc="how far off the clock is every other period (negative: back)",
            unit="s",
            min=-MAX_OFFSET_S,
            max=MAX_OFFSET_S,
            explore=(-60.0, 60.0),
        ),
        "period_s": Param(
            float, 1.0, "how long each half of the strobe lasts", unit="s", min=0.01, explore=(0.2, 2.0)
        ),
        "duration_s": duration(),
    },
    harm=SLOWDOWN,
    validate=validate,
    clock=True,
    missing=missing,
)
