"""docs/architecture.md stays true: every path it names exists and every event kind of the
history schema is in its table (so a new module, package or event kind updates the map)."""

from __future__ import annotations

import re

from contract.history import EVENTS
from tests.procs import ROOT

DOC = ROOT / "docs" / "architecture.md"


def test_every_path_the_map_names_exists() -> None:
    named = set(
        re.findall(
            r"`((?:contract|harness|chaos|loadtests|reports|implementations|tests|docs)/[\w/.<>-]*)`",
            DOC.read_text(),
        )
    )
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p.split(" ")[0]).exists())
    assert named and not missing, f"docs/architecture.md names what is not there: {missing}"


def test_every_event_kind_is_on_the_map() -> None:
    text = DOC.read_text()
    absent = sorted(kind for kind in EVENTS if f"`{kind}`" not in text)
    assert not absent, f"event kinds missing from docs/architecture.md's table: {absent}"
