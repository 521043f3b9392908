"""bench/loadgen_rate.py counts a rate only for a clean run: a recorded history with a resend,
or more requests unanswered than there are users, stops it (a faster user that timed out
early would otherwise look like a win)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.procs import ROOT

_spec = importlib.util.spec_from_file_location("loadgen_rate", ROOT / "bench" / "loadgen_rate.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def history(folder: Path, events: list[tuple[str, int]]) -> Path:
    folder.mkdir()
    lines = [
        json.dumps({"ts": i, "ev": ev, "src": "c1", "cid": "c1", "seq": seq})
        for i, (ev, seq) in enumerate(events)
    ]
    (folder / "locust-1.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def test_a_clean_history_with_one_request_in_flight_per_user_passes(tmp_path: Path) -> None:
    bench.check_history(history(tmp_path / "h", [("send", 1), ("reply", 1), ("send", 2)]), users=1)


@pytest.mark.parametrize(
    "events",
    [
        [("send", 1), ("retry", 1), ("reply", 1)],  # a resend: the user's timeout fired
        [("send", 1), ("send", 2), ("send", 3), ("reply", 1)],  # two unanswered with one user
        [],  # nothing recorded
    ],
    ids=["resend", "unanswered", "empty"],
)
def test_a_history_that_is_not_a_clean_run_stops_the_benchmark(tmp_path: Path, events) -> None:
    with pytest.raises(SystemExit, match="not a clean run"):
        bench.check_history(history(tmp_path / "h", events), users=1)


def test_the_ladder_climbs_from_bare_to_zchaos_one_piece_per_rung() -> None:
    # The rungs' locustfile is written out and run by Locust: a syntax error would only show
    # after the bare rung had been measured.
    compile(bench.LADDER_USER, "ladder_user.py", "exec")
    steps = list(bench.LADDER.values())
    assert steps[0] == 0 and steps[-2:] == [None, None]
    assert steps[:-2] == list(range(len(steps) - 2))
    assert list(bench.LADDER)[-2:] == list(bench.VARIANTS[1:])
