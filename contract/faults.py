"""A fault's class as the history records it, read back for the reports.

Each fault kind's card (chaos/kinds/) says what the fault does: its scope (a process or a
link), whether it loses what is sent, its harm (contract/promises.py HARMS), what of the target's
traffic it stops (contract/promises.py STOPS) and whether it lasts (has a duration of its
own, unlike a kill or a restart). The nemesis records these in every ``fault_start``
(``fault_scope``, ``fault_lossy``, ``fault_harm``, ``fault_stops``, ``fault_lasting``) and
the runner in run.json's plan, so a report judges a fault from the run alone and never
asks the fault injector.

Histories recorded before a field existed lack it (``fault_scope`` and ``fault_lossy``
came first, ``fault_harm`` and ``fault_lasting`` later, ``fault_stops`` last).
``RECORDED_BEFORE`` holds the classes of the kinds that existed then, so those histories
are judged as they were; it is frozen history, never extended: a new kind's faults always
carry their class (a kind younger than it but older than ``fault_stops``, whose faults lack
that one field, stops what its harm says by default: ``default_stops``; none of those
kinds says otherwise). tests/test_fault_cards.py checks that it agrees with the cards.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.links import PREFIX
from contract.promises import (
    OUTAGE,
    SLOWDOWN,
    STOPS_ALL,
    STOPS_CONNECTIONS,
    STOPS_NOTHING,
    default_stops,
)


@dataclass(frozen=True)
class FaultClass:
    scope: str  # "process" or "link"
    lossy: bool  # it loses what is sent (a partition), not only delays it
    harm: str  # outage or slowdown
    lasting: bool  # it has a duration of its own (not a kill or a restart)
    stops: str = STOPS_ALL  # what of the target's traffic it stops: all, connections, nothing


def _process(harm: str = OUTAGE, lasting: bool = True, stops: str | None = None) -> FaultClass:
    return FaultClass("process", False, harm, lasting, stops or default_stops(harm))


def _link(lossy: bool, harm: str = OUTAGE, stops: str | None = None) -> FaultClass:
    return FaultClass("link", lossy, harm, True, stops or default_stops(harm))


#: The class of each kind whose histories may lack some of it (see the module doc).
RECORDED_BEFORE: dict[str, FaultClass] = {
    "kill": _process(lasting=False),
    "restart": _process(lasting=False),
    "freeze": _process(),
    "starve": _process(SLOWDOWN),
    "malformed": _process(stops=STOPS_NOTHING),
    "partition": _link(True),
    "disconnect": _link(True),
    "reset": _link(True, stops=STOPS_CONNECTIONS),
    "latency": _link(False, SLOWDOWN),
    "bandwidth": _link(True, SLOWDOWN),
    "slicer": _link(False, SLOWDOWN),
    "limit_data": _link(True, stops=STOPS_CONNECTIONS),
}
#: A kind none of whose class was recorded nor is known: the strictest reading (it cuts
#: a link, stops the service, all of it, for a while).
UNKNOWN_KIND = FaultClass("link", False, OUTAGE, True, STOPS_ALL)


def fault_class(
    kind: str,
    target: str,
    scope: str | None = None,
    lossy: bool | None = None,
    harm: str | None = None,
    lasting: bool | None = None,
    stops: str | None = None,
) -> FaultClass:
    """The class of a fault of ``kind`` on ``target`` from what was recorded (None: not
    recorded), the rest from RECORDED_BEFORE (``stops`` of a kind it does not know: what
    the harm stops by default). A ``link:`` target is always on a link."""
    known = RECORDED_BEFORE.get(kind, UNKNOWN_KIND)
    if scope is None:
        scope = "link" if target.startswith(PREFIX) else known.scope
    harm = known.harm if harm is None else harm
    if stops is None:
        stops = known.stops if kind in RECORDED_BEFORE else default_stops(harm)
    return FaultClass(
        scope,
        known.lossy if lossy is None else lossy,
        harm,
        known.lasting if lasting is None else lasting,
        stops,
    )
