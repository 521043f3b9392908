"""Fault kinds as cards (chaos/kinds/): each card is complete, the nemesis records its class
in ``fault_start`` and the runner in run.json's plan, and the reports read the class back
from the history, also from a history recorded before the class was (contract/faults.py)."""

from __future__ import annotations

import time

import pytest

from chaos.faults import FaultKind
from chaos.kinds import FAULT_KINDS
from chaos.nemesis import Nemesis, PlannedFault
from contract.faults import RECORDED_BEFORE, UNKNOWN_KIND, FaultClass, fault_class
from contract.history import EVENTS
from contract.promises import HARMS, OUTAGE, SLOWDOWN
from reports.checkers import FaultWindow
from tests.doubles import EventList, GoneControl


def card_class(kind: FaultKind) -> FaultClass:
    recorded = kind.fault_class()
    return FaultClass(
        recorded["fault_scope"], recorded["fault_lossy"], recorded["fault_harm"], recorded["fault_lasting"]
    )


@pytest.mark.parametrize("name", sorted(FAULT_KINDS))
def test_every_card_is_complete(name: str) -> None:
    kind = FAULT_KINDS[name]
    assert kind.name == name and kind.doc and callable(kind.run)
    assert kind.harm in HARMS and kind.target in ("process", "link")
    if kind.toxic is not None:
        assert kind.target == "link"
        assert set(kind.toxic.attributes) <= set(kind.params), (
            "a toxic attribute maps a parameter of the card"
        )
        assert "direction" in kind.params, "a toxic's default direction is its direction parameter's default"
    # fault_start carries every field of the class: the schema declares them
    assert set(kind.fault_class()) <= EVENTS["fault_start"].allowed


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
    recorded = (start["fault_scope"], start["fault_lossy"], start["fault_harm"], start["fault_lasting"])
    assert recorded == ("process", False, OUTAGE, True)
    assert "fault_scope" not in sink.items[1]
    plan = planned.as_dict()
    assert (plan["kind"], plan["target"], plan["fault_harm"], plan["fault_lasting"]) == (
        "freeze",
        "worker-1",
        OUTAGE,
        True,
    )
