"""A client given two endpoints, one of them cut off from the clients for part of the run:
each endpoint is its own fault-proxy link (link:clients:primary), the Lazy Pirate client
fails over, and the history's replies say which endpoint answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.history import read_events
from harness.runner import run_scenario
from harness.scenario import load_scenario
from harness.topology import Topology
from tests.procs import ROOT

FAILOVER = ROOT / "scenarios" / "lazy-pirate-failover-partition.toml"


def test_each_client_endpoint_is_its_own_link() -> None:
    from harness.manifest import link_names

    scenario = load_scenario(FAILOVER)
    assert link_names(scenario.manifest, scenario.topology) == ["link:clients:primary", "link:clients:backup"]
    (kind,) = scenario.load.clients
    assert kind.endpoints == ("primary", "backup")
    assert [f.target for f in scenario.faults] == ["link:clients:primary"]


def test_a_fault_names_one_client_link_or_all_of_them(tmp_path: Path) -> None:
    from contract.errors import SetupError

    text = FAILOVER.read_text()
    path = tmp_path / "s.toml"
    path.write_text(text.replace('"link:clients:primary"', '"clients"'))
    assert [f.target for f in load_scenario(path).faults] == ["clients"]  # every client link
    # Before: refused ("unknown target 'link:clients'") when the clients have several endpoints.
    path.write_text(text.replace('"link:clients:primary"', '"link:clients"'))
    assert [f.target for f in load_scenario(path).faults] == ["link:clients"]  # the whole client side
    path.write_text(text.replace('"link:clients:primary"', '"link:clients:nowhere"'))
    with pytest.raises(
        SetupError, match=r"faults\[0\]\.target: unknown target 'link:clients:nowhere' .*link:clients:backup"
    ):
        load_scenario(path)


def test_the_adapter_gets_the_addresses_in_order_through_their_proxies(tmp_path: Path) -> None:
    from contract.ports import PortAllocator
    from contract.rundir import RunDir

    scenario = load_scenario(FAILOVER)
    topology = Topology(scenario, RunDir.create(tmp_path, "t"), PortAllocator())
    (kind,) = scenario.load.clients
    direct = topology.client_addresses(kind)
    assert direct == [topology.bind_address("primary"), topology.bind_address("backup")]
    topology.route("link:clients:backup", "tcp://127.0.0.1:1")
    assert topology.client_addresses(kind) == [topology.bind_address("primary"), "tcp://127.0.0.1:1"]


@pytest.mark.slow
def test_a_partitioned_endpoint_moves_the_replies_to_the_other(tmp_path: Path, spark) -> None:
    result = run_scenario(load_scenario(FAILOVER), runs_dir=tmp_path / "runs")
    verdict = result.verdict
    assert result.exit_code == 0, {n: c["summary"] for n, c in verdict["checks"].items()}
    events = list(read_events(result.run.history))
    (start,) = [e["ts"] for e in events if e["ev"] == "fault_start"]
    (stop,) = [e["ts"] for e in events if e["ev"] == "fault_stop"]
    replies = [e for e in events if e["ev"] == "reply"]
    assert all(e["endpoint"] in ("primary", "backup") for e in replies)
    before = {e["endpoint"] for e in replies if e["ts"] < start}
    during = [e["endpoint"] for e in replies if start + 200_000_000 < e["ts"] < stop]
    assert before == {"primary"}  # every client starts on the first endpoint
    assert during and set(during) == {"backup"}  # the cut-off server answered nothing
    assert any(e["ev"] == "retry" and start <= e["ts"] <= stop for e in events)  # each noticed, resent
    by_endpoint = verdict["metrics"]["client_kinds"]["lazy_pirate"]["replies_by_endpoint"]
    assert set(by_endpoint) == {"primary", "backup"} and sum(by_endpoint.values()) == len(replies)
    assert "<code>backup</code>" in result.run.report_html.read_text()
