"""Fault kinds as cards (chaos/kinds/): each card is complete, the nemesis records its class
in ``fault_start`` and the runner in run.json's plan, and the reports read the class back
from the history, also from a history recorded before the class was (contract/faults.py)."""

from __future__ import annotations

import time

import pytest

from chaos.faults import FIXED, FaultKind, Param
from chaos.kinds import FAULT_KINDS
from chaos.nemesis import Nemesis, PlannedFault
from contract.faults import RECORDED_BEFORE, UNKNOWN_KIND, FaultClass, fault_class
from contract.history import EVENTS
from contract.promises import HARMS, OUTAGE, SLOWDOWN, STOPS, STOPS_ALL, STOPS_CONNECTIONS, STOPS_NOTHING
from reports.checkers import FaultWindow
from tests.doubles import EventList, GoneControl


def card_class(kind: FaultKind) -> FaultClass:
    recorded = kind.fault_class()
    return FaultClass(
        recorded["fault_scope"],
        recorded["fault_lossy"],
        recorded["fault_harm"],
        recorded["fault_lasting"],
        recorded["fault_stops"],
    )


@pytest.mark.parametrize("name", sorted(FAULT_KINDS))
def test_every_card_is_complete(name: str) -> None:
    kind = FAULT_KINDS[name]
    assert kind.name == name and kind.doc and callable(kind.run)
    assert kind.harm in HARMS and kind.target in ("process", "link")
    assert kind.fault_class()["fault_stops"] in STOPS
    if kind.toxic is not None:
        assert kind.target == "link"
        assert set(kind.toxic.attributes) <= set(kind.params), (
            "a toxic attribute maps a parameter of the card"
        )
        assert "direction" in kind.params, "a toxic's default direction is its direction parameter's default"
    # fault_start carries every field of the class: the schema declares them
    assert set(kind.fault_class()) <= EVENTS["fault_start"].allowed


#: The parameters exploration leaves at their default or fills from the manifest, not from
#: a range: a new one must be named here, on purpose.
EXPLORE_FIXED = {
    ("malformed", "endpoint"),
    ("malformed", "family"),
    ("malformed", "service"),
    ("host_partition", "peers"),  # whom to cut: the whole run (all) unless a scenario says
}


def explore_problems(kind: FaultKind) -> list[str]:
    """What is wrong with a card's ``explore`` declarations (empty: nothing)."""
    problems = []
    for pname, spec in kind.params.items():
        where = f"{kind.name}.{pname}"
        if spec.explore is None:
            problems.append(f"{where} declares no explore range")
        elif spec.explore == FIXED:
            if (kind.name, pname) not in EXPLORE_FIXED:
                problems.append(f"{where} is left fixed: say so in EXPLORE_FIXED")
        elif spec.choices:
            if not set(spec.explore) <= set(spec.choices):
                problems.append(f"{where}: {spec.explore} are not among its choices {spec.choices}")
        elif len(spec.explore) != 2 or spec.type not in (int, float):
            problems.append(f"{where}: expected (lo, hi) for a number, got {spec.explore}")
        else:
            lo, hi = spec.explore
            if lo > hi or (spec.type is int and not (isinstance(lo, int) and isinstance(hi, int))):
                problems.append(f"{where}: ({lo}, {hi}) is not a range of {spec.type.__name__}")
            if spec.min is not None and lo < spec.min:
                problems.append(f"{where}: {lo} is below its min {spec.min}")
            if spec.max is not None and hi > spec.max:
                problems.append(f"{where}: {hi} is above its max {spec.max}")
    return problems


@pytest.mark.parametrize("name", sorted(FAULT_KINDS))
def test_every_parameter_says_what_exploration_draws_it_from(name: str) -> None:
    """``zchaos explore`` draws every parameter from its card's ``explore``: a range inside
    the parameter's own bounds, or values among its choices."""
    assert explore_problems(FAULT_KINDS[name]) == []


def test_a_card_without_or_outside_its_ranges_is_refused() -> None:
    card = FaultKind(
        "faulty",
        "a card of this test",
        "process",
        FAULT_KINDS["freeze"].run,
        {
            "duration_s": Param(float, 1.0, min=0),
            "share": Param(float, 0.1, min=0.01, max=0.99, explore=(0.0, 0.5)),
            "side": Param(str, "a", choices=("a", "b"), explore=("a", "c")),
            "bytes": Param(int, 1, min=1, explore=(1.5, 9)),
            "service": Param(str, "echo", explore=FIXED),
        },
    )
    assert explore_problems(card) == [
        "faulty.duration_s declares no explore range",
        "faulty.share: 0.0 is below its min 0.01",
        "faulty.side: ('a', 'c') are not among its choices ('a', 'b')",
        "faulty.bytes: (1.5, 9) is not a range of int",
        "faulty.service is left fixed: say so in EXPLORE_FIXED",
    ]


@pytest.mark.parametrize("name", sorted(RECORDED_BEFORE))
def test_the_fallback_for_old_histories_agrees_with_the_cards(name: str) -> None:
    """A history recorded before fault_harm (or before fault_scope) is judged as its card says."""
    assert RECORDED_BEFORE[name] == card_class(FAULT_KINDS[name])


def test_a_window_takes_what_fault_start_recorded_and_completes_an_old_history() -> None:
    # recorded before fault_harm and fault_lasting: scope and lossy as written, the rest from the card
    old = FaultWindow(1, "latency", "link:worker-1", 0, 1, "link", False)
    assert (old.scope, old.lossy, old.harm, old.lasting, old.outage) == ("link", False, SLOWDOWN, True, False)
    kill = FaultWindow(2, "kill", "worker-1", 0, 1)
    assert (kill.scope, kill.lossy, kill.harm, kill.lasting, kill.on_link) == (
        "process",
        False,
        OUTAGE,
        False,
        False,
    )
    # what fault_start recorded wins (a history is read as written, whatever the cards say today)
    recorded = FaultWindow(3, "kill", "worker-1", 0, 1, "link", True, SLOWDOWN, True)
    assert (recorded.on_link, recorded.lossy, recorded.outage, recorded.lasting) == (True, True, False, True)
    # recorded before fault_stops: a kind of that time as its card said, a younger one by its harm
    for kind, target, lossy, harm, stops in (
        ("limit_data", "link:clients", True, OUTAGE, STOPS_CONNECTIONS),
        ("malformed", "queue", False, OUTAGE, STOPS_NOTHING),
        ("host_partition", "queue", True, OUTAGE, STOPS_ALL),
        ("clock_step", "queue", False, SLOWDOWN, STOPS_NOTHING),
    ):
        scope = "link" if target.startswith("link:") else "process"
        assert FaultWindow(4, kind, target, 0, 1, scope, lossy, harm, True).stops == stops, kind
    # a kind nobody knows, with nothing recorded: the strictest reading
    assert fault_class("mystery", "worker-1") == UNKNOWN_KIND
    assert fault_class("kill", "link:worker-1").scope == "link"


def test_the_nemesis_writes_the_fault_class_into_fault_start_and_the_plan() -> None:
    sink = EventList()
    planned = PlannedFault(1, 0.0, "freeze", "worker-1", "worker-1", {"duration_s": 1.0})
    nemesis = Nemesis([planned], GoneControl(), sink)
    nemesis.start()
    deadline = time.monotonic() + 10
    while len(sink.items) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert nemesis.stop() == []
    start = sink.items[0]
    assert start["ev"] == "fault_start"
    recorded = (
        start["fault_scope"],
        start["fault_lossy"],
        start["fault_harm"],
        start["fault_lasting"],
        start["fault_stops"],
    )
    assert recorded == ("process", False, OUTAGE, True, STOPS_ALL)
    assert "fault_scope" not in sink.items[1]
    plan = planned.as_dict()
    class_ = (plan["fault_harm"], plan["fault_lasting"], plan.get("fault_stops"))
    assert (plan["kind"], plan["target"], *class_) == (
        "freeze",
        "worker-1",
        OUTAGE,
        True,
        STOPS_ALL,
    )
