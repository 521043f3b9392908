"""The ``malformed`` fault (issue 8 part 8): its parameters are validated with the scenario,
and it finds a black-box broker that exits on a malformed message (``no_unexpected_exit``)
or stops serving after one (``recovery``), while the same broker without those bugs passes
the same scenario."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chaos.malformed import HEAVY, Wire, cases, families, send_batch
from contract.errors import SetupError
from contract.history import read_events
from harness.runner import run_scenario
from harness.scenario import load_scenario
from tests.procs import ROOT

SUBJECT = ROOT / "tests" / "blackbox_lru"

FAULT = """
implementation = "{impl}"
duration_s = 20

[[faults]]
kind = "malformed"
target = "{target}"
at_s = [5]
duration_s = 2
{extra}
"""


def scenario_text(
    impl: str = "paranoid-pirate", target: str = "queue", extra: str = 'endpoint = "backend"'
) -> str:
    return FAULT.format(impl=impl, target=target, extra=extra)


def test_the_family_comes_from_the_manifest_or_the_fault(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(scenario_text())
    (fault,) = load_scenario(path).faults
    assert fault.params["family"] == "paranoid-pirate" and fault.params["rate_per_s"] == 20.0
    path.write_text(scenario_text("majordomo-async", "broker"))
    assert load_scenario(path).faults[0].params["family"] == "majordomo"  # a flavour of the family
    path.write_text(
        scenario_text(str(SUBJECT / "manifest.toml"), extra='endpoint = "backend"\nfamily = "majordomo"')
    )
    assert load_scenario(path).faults[0].params["family"] == "majordomo"


@pytest.mark.parametrize(
    ("impl", "target", "extra", "message"),
    [
        (
            "paranoid-pirate",
            "queue",
            'endpoint = "sideways"',
            "faults[0].endpoint: 'sideways' is not an endpoint",
        ),
        (
            "paranoid-pirate",
            "worker:random",
            'endpoint = "backend"',
            "faults[0].endpoint: 'backend' is not an",
        ),
        (
            "paranoid-pirate",
            "queue",
            'endpoint = "backend"\nfamily = "klingon"',
            "faults[0].family: unknown family",
        ),
        (str(SUBJECT / "manifest.toml"), "queue", 'endpoint = "backend"', "faults[0].family: required"),
        (
            "paranoid-pirate",
            "queue",
            'endpoint = "backend"\nrate_per_s = 0.0',
            "faults[0].rate_per_s: must be",
        ),
        ("paranoid-pirate", "queue", "", "faults[0].endpoint"),
    ],
)
def test_a_bad_malformed_fault_names_the_key(
    tmp_path: Path, impl: str, target: str, extra: str, message: str
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(impl, target, extra))
    with pytest.raises(SetupError) as caught:
        load_scenario(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


class RecordingWire(Wire):
    """Records what would go out (a unit test of the generators: no sockets)."""

    def __init__(self) -> None:
        super().__init__(None, "tcp://127.0.0.1:1")  # type: ignore[arg-type]
        self.sent: list[list[bytes]] = []

    def send(self, identity: bytes, frames: list[bytes]) -> None:
        self.sent.append(frames)

    def recv(self, identity: bytes, timeout_ms: int) -> list[bytes] | None:
        return None


@pytest.mark.parametrize("family", families())
def test_the_same_seed_sends_the_same_junk(family: str) -> None:
    for side in ("client", "worker"):
        runs = []
        for seed in (1, 1, 2):
            wire = RecordingWire()
            counts = send_batch(wire, family, side, random.Random(seed), 200)
            runs.append((counts, wire.sent))
        assert runs[0] == runs[1] and runs[0] != runs[2]
        counts, sent = runs[0]
        assert sum(counts.values()) == 200 and len(sent) >= 200
        assert all(counts[name] <= 1 for name in HEAVY)  # megabytes at most once a batch
        assert set(counts) == set(cases(family, side))  # 200 draws reach every case


def run_subject(tmp_path: Path, on_malformed: str):
    text = (SUBJECT / "malformed.toml").read_text()
    text = text.replace('"manifest.toml"', json.dumps(str(SUBJECT / "manifest.toml")))
    path = tmp_path / "scenario.toml"
    path.write_text(text + f'\n[options]\non_malformed = "{on_malformed}"\n')
    return run_scenario(load_scenario(path), runs_dir=tmp_path / "runs")


# The wedge is a soak: junk is injected the same way in the exit case, and recovery violated
# after junk is test_checkers' test_junk_sent_to_a_role_the_manifest_does_not_promise_to_recover_
# from_is_never_healed, a queue that never serves again end to end test_idle_faults'.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("bug", "check"),
    [("exit", "no_unexpected_exit"), pytest.param("wedge", "recovery", marks=pytest.mark.soak)],
)
def test_a_broker_that_exits_or_stops_on_junk_fails_the_check_named(
    tmp_path: Path, spark, bug: str, check: str
) -> None:
    result = run_subject(tmp_path, on_malformed=bug)
    checks = result.verdict["checks"]
    assert checks[check]["status"] == "violated", checks[check]
    assert result.exit_code == 1
    batches = list(e for e in read_events(result.run.history) if e["ev"] == "malformed_batch")
    assert batches and json.loads(batches[0]["detail"])["family"] == "simple-pirate"


@pytest.mark.slow
def test_the_same_broker_without_the_bug_passes(tmp_path: Path, spark) -> None:
    result = run_subject(tmp_path, on_malformed="drop")
    summary = {name: (c["status"], c["summary"]) for name, c in result.verdict["checks"].items()}
    assert result.exit_code == 0, json.dumps(summary, indent=1)
    batches = [e for e in read_events(result.run.history) if e["ev"] == "malformed_batch"]
    sent = sum(sum(json.loads(b["detail"])["sent"].values()) for b in batches)
    assert len(batches) == 3 and sent == 60, (len(batches), sent)  # 3 s at 20 a second
