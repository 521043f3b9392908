"""Link names (contract/links.py): the runner writes them, the nemesis and the checkers read
them back, with one parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.netfaults import NetworkFaultError, NetworkFaults
from contract.links import CLIENTS, Link, covers, link_name, parse_link, target_instance
from contract.ports import PortAllocator
from contract.rundir import RunDir
from harness.scenario import load_scenario
from harness.topology import Topology
from reports.checkers import FaultWindow
from tests.procs import ROOT


@pytest.mark.parametrize(
    ("target", "link", "instance"),
    [
        ("link:worker-1", Link("worker-1"), "worker-1"),
        ("link:worker-1:backend", Link("worker-1", "backend"), "worker-1"),
        ("link:clients", Link(CLIENTS), CLIENTS),
        ("link:clients:primary", Link(CLIENTS, "primary"), CLIENTS),
        ("worker-1", None, "worker-1"),
        ("clients", None, CLIENTS),
    ],
)
def test_a_target_parses_to_its_link_and_instance(target: str, link: Link | None, instance: str) -> None:
    assert parse_link(target) == link
    assert target_instance(target) == instance
    if link is not None:
        assert str(link) == target == link_name(link.instance, link.endpoint)
        assert link.clients == (instance == CLIENTS)


@pytest.mark.parametrize(
    ("target", "covered"),
    [
        ("link:clients", ["link:clients:primary", "link:clients:backup"]),  # the whole client side
        ("clients", ["link:clients:primary", "link:clients:backup"]),
        ("link:clients:backup", ["link:clients:backup"]),
        ("link:worker-1", ["link:worker-1"]),
        ("worker-1", ["link:worker-1"]),
        ("worker", []),
    ],
)
def test_a_fault_target_covers_its_links(target: str, covered: list[str]) -> None:
    links = ["link:clients:primary", "link:clients:backup", "link:worker-1", "link:worker-10"]
    assert [link for link in links if covers(target, link)] == covered
    # The nemesis's proxies for it (the proxies' table alone: no Toxiproxy server needed).
    net = NetworkFaults(client=None)  # type: ignore[arg-type]
    net.links = {link: f"proxy-{i}" for i, link in enumerate(links)}
    if covered:
        assert net.proxies_for(target) == [net.links[link] for link in covered]
    else:
        with pytest.raises(NetworkFaultError, match="no proxied link"):
            net.proxies_for(target)


def test_every_link_the_runner_names_parses_back(tmp_path: Path) -> None:
    """Each scenario's topology: the name of each link gives back its connecting side and,
    where the name carries one, its endpoint."""
    scenarios = sorted((ROOT / "scenarios").rglob("*.toml"))
    seen_endpoint = False
    for path in scenarios:
        scenario = load_scenario(path)
        run = RunDir.create(tmp_path, scenario.name)
        for link in Topology(scenario, run, PortAllocator()).links():
            parsed = parse_link(link.name)
            assert parsed is not None and parsed.instance == link.instance, (path, link)
            assert parsed.endpoint in (None, link.endpoint), (path, link)
            seen_endpoint |= parsed.endpoint is not None
    assert seen_endpoint  # some scenario names a link by its endpoint (link:clients:primary)


def test_a_link_fault_on_an_instance_acts_on_all_its_links() -> None:
    assert FaultWindow(1, "partition", "worker-2", 0, 1, "link", True).link == Link("worker-2")
    assert FaultWindow(2, "partition", "link:clients:b", 0, 1, "link", True).link == Link(CLIENTS, "b")
    assert FaultWindow(3, "kill", "worker-2", 0, 1, "process", False).link is None
