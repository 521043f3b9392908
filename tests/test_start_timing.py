"""How a role's instances start (issue 33 part 6): ``[topology] start`` of a scenario says
"in_turn" (each once the one before it is ready: the default), "together" (back to back,
then each waited for) or ``{ stagger_s = N }``. Some bugs live there (two workers seeding an
identity from the clock in the same second), so the spacing is what the proc_start events
show: real processes, started by the supervisor."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.history import HistoryWriter
from harness.config import load_toml
from harness.scenario import parse_scenario
from harness.supervisor import ProcSpec, Supervisor
from tests.procs import ROOT

pytestmark = pytest.mark.timeout(60)

#: Ready only after a while (so "in turn" shows as the readiness between starts), then waits.
SLOW_READY = "import time\ntime.sleep(1.0)\nprint('ready', flush=True)\ntime.sleep(3600)\n"


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[tuple[Supervisor, Path]]:
    path = tmp_path / "runner.jsonl"
    history = HistoryWriter(path, "runner")
    sup = Supervisor(history, dict(os.environ))
    try:
        yield sup, path
    finally:
        sup.stop_all()
        history.close()


def specs(tmp_path: Path, n: int) -> list[ProcSpec]:
    return [
        ProcSpec(
            instance=f"worker-{i}",
            role="worker",
            argv=[sys.executable, "-c", SLOW_READY],
            log=tmp_path / f"worker-{i}.log",
            ready_line="^ready",
            captured=True,
        )
        for i in range(1, n + 1)
    ]


def starts_s(path: Path) -> list[float]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e["ts"] / 1e9 for e in events if e["ev"] == "proc_start"]


def gaps(path: Path) -> list[float]:
    ts = starts_s(path)
    return [b - a for a, b in itertools.pairwise(ts)]


def test_together_starts_every_instance_before_any_is_ready(supervisor, tmp_path: Path) -> None:
    sup, path = supervisor
    sup.start_together(specs(tmp_path, 4), 0.0, ready_timeout=30)
    ts = starts_s(path)
    assert len(ts) == 4
    # back to back: all four before the first is ready, 1 s after its start (measured: ~10 ms
    # apart on a quiet machine, 0.38 s for all four at a load average of 9 on 2 cores)
    assert ts[-1] - ts[0] < 0.9, gaps(path)
    assert all(sup.alive(f"worker-{i}") for i in range(1, 5))


def test_staggered_starts_are_spaced_by_the_stagger(supervisor, tmp_path: Path) -> None:
    sup, path = supervisor
    sup.start_together(specs(tmp_path, 3), 0.7, ready_timeout=30)
    # each that long after the one before it started: never closer, later only by a fork
    assert all(0.7 <= g < 1.2 for g in gaps(path)), gaps(path)
    ts = starts_s(path)
    assert ts[2] - ts[0] < 0.7 * 2 + 0.5, gaps(path)


def test_in_turn_waits_for_each_to_be_ready(supervisor, tmp_path: Path) -> None:
    sup, path = supervisor
    for spec in specs(tmp_path, 2):
        sup.start(spec, ready_timeout=30)
    assert all(g >= 1.0 for g in gaps(path)), gaps(path)  # each one's readiness in between


SCENARIO = """
implementation = "{manifest}"
duration_s = 5
[topology]
worker = 3
START
"""


def scenario(tmp_path: Path, start: str):
    path = tmp_path / "s.toml"
    manifest = ROOT / "implementations" / "simple_pirate" / "manifest.toml"
    path.write_text(SCENARIO.replace("{manifest}", str(manifest)).replace("START", start))
    return parse_scenario(load_toml(path, "scenario"), path, where=str(path))


def test_the_scenario_says_how_each_role_starts(tmp_path: Path) -> None:
    s = scenario(tmp_path, 'start = { worker = "together" }')
    assert s.start_gap("worker") == 0.0 and s.start_gap("queue") is None
    assert s.topology["worker"] == 3 and "start" not in s.topology
    assert s.as_dict()["start"] == {"worker": "together"}
    s = scenario(tmp_path, "[topology.start]\nworker = { stagger_s = 1.5 }\nqueue = 'in_turn'")
    assert s.start == {"worker": 1.5} and s.as_dict()["start"] == {"worker": {"stagger_s": 1.5}}
    assert scenario(tmp_path, "").start == {} and "start" not in scenario(tmp_path, "").as_dict()


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ('start = { worker = "at_once" }', "expected 'in_turn' or 'together'"),
        ('start = { wroker = "together" }', "no such role"),
        ("start = { worker = { stagger_s = -1 } }", "must be at least 0"),
        ("start = { worker = { stagger = 1 } }", "stagger_s"),
    ],
)
def test_a_wrong_start_is_named_with_its_key(tmp_path: Path, start: str, message: str) -> None:
    with pytest.raises(SetupError) as err:
        scenario(tmp_path, start)
    assert message in str(err.value) and "topology.start" in str(err.value), str(err.value)
