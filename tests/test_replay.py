"""Replay (harness/replay.py): a run records what it ran, and ``zchaos run --replay RUN``
runs the same fault plan and the same request streams again, even after the scenario file
changed."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.rundir import RunDir
from harness.cli import main
from harness.config import dump_toml
from harness.replay import scenario_of_run

SCENARIO = {
    "description": "a short Majordomo run with seeded random kills, to replay",
    "implementation": "majordomo",
    "seed": 3,
    "duration_s": 5,
    "drain_s": 2,
    "topology": {"worker": 3},
    "load": {"users": 2, "spawn_rate": 2, "wait_ms": 20},
    "faults": [
        {"kind": "kill", "target": "worker:random", "random": {"count": 2, "between": [1, 3]},
         "restart_after_s": 0.5},
    ],
}  # fmt: skip


def _sends(run: Path) -> dict[str, list[tuple[int, str]]]:
    """Each client's first sends: (seq, rid), in order."""
    sends: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for path in sorted((run / "history").glob("locust-*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("ev") == "send" and event.get("attempt", 1) == 1:
                sends[event["cid"]].append((event["seq"], event["rid"]))
    return {cid: sorted(s)[:20] for cid, s in sends.items()}


def _run_folder(runs: Path) -> Path:
    (folder,) = [p for p in runs.iterdir() if (p / "run.json").exists()]
    return folder


def test_a_folder_without_a_replay_record_is_refused_with_a_message(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "old")
    run.write_meta({"scenario": {"name": "old"}, "manifest": {"promises": {"checks": ["no_lost"]}}})
    with pytest.raises(SetupError, match="no replay record"):
        scenario_of_run(run.root)
    with pytest.raises(SetupError, match=r"no run\.json"):
        scenario_of_run(tmp_path / "nothing")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_replay_runs_the_same_plan_and_request_streams(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "replayed.toml"
    path.write_text(dump_toml(SCENARIO))
    assert main(["run", str(path), "--seed", "77", "--no-report", "--runs-dir", str(tmp_path / "a")]) == 0
    first = _run_folder(tmp_path / "a")
    meta = json.loads((first / "run.json").read_text())
    assert meta["scenario"]["seed"] == 77 and "seed" not in meta["replay"]  # stored once
    assert meta["replay"]["scenario_text"] == path.read_text()
    assert meta["replay"]["zchaos_version"].startswith("0.")
    commands = meta["replay"]["commands"]
    assert commands[0] == f"zchaos run --replay {first}"
    assert commands[1].endswith("replayed.toml --seed 77")

    # the file changes: the replay runs what the run recorded, not today's file
    path.write_text(dump_toml({**SCENARIO, "seed": 4, "faults": []}))
    assert main(["run", "--replay", str(first), "--no-report", "--runs-dir", str(tmp_path / "b")]) == 0
    assert "changed since the run" in capsys.readouterr().err
    second = _run_folder(tmp_path / "b")
    again = json.loads((second / "run.json").read_text())

    assert meta["plan"] and again["plan"] == meta["plan"]  # same faults, times and targets
    assert again["scenario"]["seed"] == 77
    assert again["replay"]["scenario_data"] == meta["replay"]["scenario_data"]
    first_sends, second_sends = _sends(first), _sends(second)
    assert first_sends.keys() == second_sends.keys() and first_sends
    for cid, sends in first_sends.items():
        n = min(len(sends), len(second_sends[cid]))
        assert n >= 5 and sends[:n] == second_sends[cid][:n]
