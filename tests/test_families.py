"""A protocol family is one card (implementations/<family>/card.py): every piece a family
has is listed here per family, and a family registered only in part fails."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.malformed import families as junk_families
from contract.family import Family, Junk, Probe
from contract.history import CORE_EVENTS, EVENTS, FAMILY_EVENTS
from harness.config import load_toml
from implementations import families, probes
from loadtests.adapters import adapter_names
from reports.checkers import registry
from tests.procs import ROOT

IMPLEMENTATIONS = ROOT / "implementations"
#: Adapters and checker modules no family brings: they serve every family.
SHARED_ADAPTERS = {"external"}
SHARED_CHECKERS = {"core", "availability"}


def checker_modules() -> dict[str, list[str]]:
    """reports/checkers/<module>.py -> the checks it registers (modules that register none are
    helpers); the generic checks' package (reports/checkers/core/) counts as one module, core."""
    found: dict[str, list[str]] = {}
    for name, check in registry().items():
        module = check.fn.__module__.removeprefix("reports.checkers.").partition(".")[0]
        found.setdefault(module, []).append(name)
    return found


def packages() -> dict[str, Path]:
    """Family name -> its package folder (the folder whose card.py names it)."""
    found = {}
    for path in sorted(IMPLEMENTATIONS.glob("*/card.py")):
        found[importlib.import_module(f"implementations.{path.parent.name}.card").CARD.name] = path.parent
    return found


def manifest_names(package: Path) -> set[str]:
    return {load_toml(p, "manifest")["name"] for p in package.glob("manifest*.toml")}


def baselines() -> dict[str, list[str]]:
    """Implementation -> the stock scenarios that run it with no fault (its steady state)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        data = load_toml(path, "scenario")
        if not data.get("faults"):
            found.setdefault(str(data.get("implementation")), []).append(path.name)
    return found


def pieces(card: Family, package: Path) -> dict[str, object]:
    """Everything the family has, for a person reading a failure."""
    return {
        "package": package.name,
        "manifests": sorted(manifest_names(package)),
        "probe": card.probe and card.probe.name,
        "junk": card.junk and {"client": len(card.junk.client), "worker": len(card.junk.worker)},
        "events": sorted(card.events),
        "adapters": card.adapters,
        "checkers": card.checkers,
    }


def family_problems(card: Family, package: Path) -> list[str]:
    """What is missing or dangling in the registration of a family whose package is ``package``."""
    problems = []
    if card.name not in manifest_names(package):
        problems.append(f"no manifest*.toml in its package is named {card.name!r}")
    if not any(baselines().get(name) for name in manifest_names(package)):
        problems.append("no stock scenario without faults runs it (scenarios/<family>-baseline.toml)")
    if card.probe is not None:
        if importlib.util.find_spec(card.probe.module) is None:
            problems.append(f"probe module {card.probe.module} does not exist")
        elif not card.probe.module.startswith(f"implementations.{package.name}."):
            problems.append(f"probe module {card.probe.module} is not in the family's package")
    if card.junk is not None:
        if not (card.junk.client or card.junk.worker):
            problems.append("junk with no case on either side")
        if card.name not in junk_families():
            problems.append("its junk is not offered to the malformed fault")
    for adapter in card.adapters:
        if adapter not in adapter_names():
            problems.append(f"adapter {adapter!r}: no loadtests/adapters/{adapter}.py")
    modules = checker_modules()
    for module in card.checkers:
        if module not in modules:
            problems.append(f"checkers {module!r}: no reports/checkers/{module}.py registering a check")
    for event in card.events:
        if event in CORE_EVENTS:
            problems.append(f"event {event!r} is a core event, not the family's")
    return problems


@pytest.mark.parametrize("name", sorted(families()))
def test_each_family_is_registered_whole(name: str) -> None:
    card, package = families()[name], packages()[name]
    assert family_problems(card, package) == [], pieces(card, package)


def test_every_package_has_a_card_and_every_piece_a_family() -> None:
    cards = families()
    folders = {p.name for p in IMPLEMENTATIONS.iterdir() if (p / "__init__.py").exists()}
    with_cards = {p.name for p in packages().values()}
    assert folders == with_cards, f"packages without a card.py: {sorted(folders - with_cards)}"
    assert len(cards) == len(folders)
    # every adapter and every family checker module belongs to a family; an adapter to one only
    claimed = [a for c in cards.values() for a in c.adapters]
    assert len(claimed) == len(set(claimed)), f"an adapter claimed twice: {claimed}"
    assert set(adapter_names()) - SHARED_ADAPTERS == set(claimed)
    family_modules = set(checker_modules()) - SHARED_CHECKERS
    assert family_modules == {m for c in cards.values() for m in c.checkers}
    # every family group of the history schema belongs to a family, and the schema is whole
    assert set(FAMILY_EVENTS) <= set(cards)
    assert EVENTS.keys() == CORE_EVENTS.keys() | {e for c in cards.values() for e in c.events}
    # every probe is found by its name
    assert set(probes()) == {c.probe.name for c in cards.values() if c.probe is not None}


def test_a_half_registered_family_is_caught() -> None:
    card, package = families()["majordomo"], packages()["majordomo"]
    assert family_problems(card, package) == []
    broken = [
        (replace(card, name="majordomo-ng"), "no manifest*.toml in its package is named 'majordomo-ng'"),
        (replace(card, adapters=("mdp_sync", "mdp_turbo")), "no loadtests/adapters/mdp_turbo.py"),
        (replace(card, checkers=("majordomo",)), "no reports/checkers/majordomo.py"),
        (replace(card, junk=Junk("nothing")), "junk with no case on either side"),
        (
            replace(card, probe=replace(card.probe or Probe("", "", "", ""), module="implementations.nope")),
            "probe module implementations.nope does not exist",
        ),
        (
            replace(
                card, probe=replace(card.probe or Probe("", "", "", ""), module="implementations.wmp.worker")
            ),
            "is not in the family's package",
        ),
    ]
    for bad, message in broken:
        found = family_problems(bad, package)
        assert any(message in p for p in found), (message, found)


def test_a_family_without_a_baseline_scenario_is_caught(tmp_path: Path) -> None:
    card = replace(families()["majordomo"], name="majordomo-ng")
    (tmp_path / "manifest.toml").write_text('name = "majordomo-ng"\n')
    missing = "no stock scenario without faults runs it (scenarios/<family>-baseline.toml)"
    assert missing in family_problems(card, tmp_path)
    assert missing not in family_problems(families()["majordomo"], packages()["majordomo"])
