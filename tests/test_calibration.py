"""A system's own numbers: the relative values a scenario may give, how they resolve against
a calibration, the stored file, and the figures a calibration draws from its ramp.

The real runs (a fast and a slow subject calibrated, a run that calibrates first) are in
tests/test_calibrate_runs.py; these need no process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.calibration import (
    Calibration,
    Step,
    calibration_file,
    parse_relative,
    read_calibration,
    write_calibration,
)
from contract.errors import SetupError
from harness.calibrate import Setup, summarise
from harness.manifest import load_manifest
from harness.scenario import load_scenario, reparse
from tests.procs import ROOT


def _calibration(capacity_rps: float, p50_ms: float, p99_ms: float, **more: object) -> Calibration:
    fields: dict = {
        "manifest": "paranoid-pirate",
        "manifest_path": "x.toml",
        "key": "k",
        "machine": "m",
        "date": "2026-12-01T00:00:00Z",
        "setup": {"topology": {"queue": 1, "worker": 3}, "options": {}},
        "capacity_rps": capacity_rps,
        "capacity_users": 4,
        "capped": False,
        "p50_ms": p50_ms,
        "p90_ms": p99_ms,
        "p99_ms": p99_ms,
        "moderate_users": 2,
        "timeout_ms": 3 * p99_ms,
    }
    fields.update(more)
    return Calibration(**fields)


#: Three workers that take 1 s per request, and the same system 100x faster.
SLOW = _calibration(3.0, 1000.0, 1100.0)
FAST = _calibration(300.0, 10.0, 11.0)


@pytest.mark.parametrize(
    ("text", "unit", "factor", "quantity", "low", "high"),
    [
        ("0.5x capacity", "users", 0.5, "capacity", None, None),
        ("0.5x capacity, at most 10", "users", 0.5, "capacity", None, 10.0),
        (" 2 x capacity , at least 2, at most 8", "users", 2.0, "capacity", 2.0, 8.0),
        ("3x p99, at least 250", "ms", 3.0, "p99", 250.0, None),
        ("1.5x timeout", "ms", 1.5, "timeout", None, None),
        ("8x p50", "s", 8.0, "p50", None, None),
    ],
)
def test_relative_values_parse(
    text: str, unit: str, factor: float, quantity: str, low: float | None, high: float | None
) -> None:
    rel = parse_relative(text, unit)
    assert (rel.factor, rel.quantity, rel.at_least, rel.at_most) == (factor, quantity, low, high)


@pytest.mark.parametrize(
    ("text", "unit", "message"),
    [
        ("half capacity", "users", "neither a number nor a relative value"),
        ("0.5x p99", "users", "'p99' is not a quantity for this key (known: capacity)"),
        ("3x capacity", "ms", "'capacity' is not a quantity for this key"),
        ("3x latency", "ms", "known: p50, p99, timeout"),
        ("0x p99", "ms", "the factor must be above 0"),
        ("3x p99, at least 500, at most 100", "ms", "'at least 500' is above 'at most 100'"),
        ("3x p99, at least 1, at least 2", "ms", "'at least' is given twice"),
        ("0.5x capacity, at least 0", "users", "'at least' users must be 1 or more"),
        ("3x p99, at least lots", "ms", "neither a number nor a relative value"),
    ],
)
def test_a_wrong_relative_value_says_what_is_wrong(text: str, unit: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_relative(text, unit)


def test_users_offer_a_share_of_the_capacity_rate_at_the_scenarios_pause() -> None:
    half = parse_relative("0.5x capacity", "users")
    # 3 ok replies/s at 1 s each: 1.5 users' worth, so 2 users (rounded up)
    assert half.resolve(SLOW, "users", wait_ms=20) == 2
    # 300/s at 10 ms + 20 ms of pause per request: 0.5 x 300 x 0.03 = 4.5 -> 5
    assert half.resolve(FAST, "users", wait_ms=20) == 5
    assert parse_relative("0.5x capacity, at most 3", "users").resolve(FAST, "users", wait_ms=20) == 3
    assert parse_relative("0.1x capacity", "users").resolve(SLOW, "users") == 1  # never 0 users


def test_latency_bounds_scale_with_the_measured_latency_in_the_keys_unit() -> None:
    p99 = parse_relative("3x p99, at least 250", "ms")
    assert p99.resolve(SLOW, "ms") == pytest.approx(3300.0)
    assert p99.resolve(FAST, "ms") == 250.0  # 33 ms is under the floor
    assert parse_relative("8x p99, at least 10", "s").resolve(SLOW, "s") == pytest.approx(10.0)
    assert parse_relative("10x p99", "s").resolve(SLOW, "s") == pytest.approx(11.0)


SCENARIO = """
implementation = "paranoid-pirate"
seed = 3
duration_s = 40

[topology]
worker = 3

[load]
users = "0.5x capacity, at most 10"
wait_ms = 20
client = { timeout_ms = "3x p99, at least 2500" }

[promises]
latency_p99_ms = "3x p99, at least 250"
recovery_bound_s = "8x p99, at least 10"

[[faults]]
kind = "kill"
target = "worker:random"
at_s = [20]
restart_after_s = 2
"""


def test_a_scenario_resolves_its_relative_values_against_the_calibration(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    plain = load_scenario(path)
    assert plain.uncalibrated  # stand-ins until a calibration is at hand
    assert plain.relative_keys == [
        "load.client.timeout_ms",
        "promises.latency_p99_ms",
        "promises.recovery_bound_s",
        "load.users",
    ]
    slow, fast = (
        reparse(plain, plain.source, calibration=SLOW),
        reparse(plain, plain.source, calibration=FAST),
    )
    assert not slow.uncalibrated and slow.calibration is SLOW
    assert (slow.load.users, fast.load.users) == (2, 5)
    assert slow.load.clients[0].options["timeout_ms"] == 3300
    assert fast.load.clients[0].options["timeout_ms"] == 2500
    assert slow.manifest.promises.latency_p99_ms == 3300.0
    assert fast.manifest.promises.latency_p99_ms == 250.0
    assert (slow.manifest.promises.recovery_bound_s, fast.manifest.promises.recovery_bound_s) == (10.0, 10.0)
    # availability's window holds 2 x 10 attempts at the rate the load gets: 2 users at 1.02 s
    # each is 1.96 attempts/s, so 11 s (rounded up); the fast system's 5 s default holds them
    assert slow.manifest.promises.availability_window_s == 11.0
    assert fast.manifest.promises.availability_window_s == 5.0
    resolved = {r["key"]: (r["given"], r["value"]) for r in slow.resolved}
    assert resolved["load.users"] == ("0.5x capacity, at most 10", 2)
    assert resolved["promises.availability_window_s"] == ("from the measured rate", 11.0)
    # what a run records of it (run.json's scenario)
    assert slow.as_dict()["resolved"] == [dict(r) for r in slow.resolved]


def test_the_seed_and_reparse_keep_the_calibration(tmp_path: Path) -> None:
    from harness.scenario import with_seed

    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    slow = reparse(load_scenario(path), load_scenario(path).source, calibration=SLOW)
    assert with_seed(slow, 9).calibration is SLOW
    smaller = dict(slow.source, duration_s=30)
    assert reparse(slow, smaller).load.users == 2


@pytest.mark.parametrize(
    ("edit", "where", "message"),
    [
        ('users = "half"', "load.users", "neither a number nor a relative value"),
        ('users = "3x p99"', "load.users", "not a quantity for this key (known: capacity)"),
        ('latency_p99_ms = "3x capacity"', "promises.latency_p99_ms", "not a quantity for this key"),
        ('client = { retries = "2x p99" }', "load.client.retries", "an option in ms or s"),
    ],
)
def test_a_wrong_relative_value_in_a_scenario_names_the_key(
    tmp_path: Path, edit: str, where: str, message: str
) -> None:
    key = edit.split(" = ")[0]
    lines = [line for line in SCENARIO.splitlines() if not line.startswith(f"{key} = ")]
    text = "\n".join(lines)
    table = "[promises]" if where.startswith("promises") else "[load]"
    text = text.replace(table, f"{table}\n{edit}", 1)
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(SetupError) as info:
        load_scenario(path)
    assert info.value.where == f"{path}: {where}"
    assert message in info.value.message


def _setup() -> Setup:
    manifest = load_manifest("paranoid-pirate")
    return Setup(manifest, {"queue": 1, "worker": 3}, dict(manifest.options))


def _step(users: int, rate: float, errors: int = 0, p50: float = 1000.0) -> tuple[Step, list[float]]:
    latencies = [p50] * 9 + [p50 * 1.2]
    return Step(users, rate, int(rate * 3), errors, p50, p50 * 1.2), latencies


def test_capacity_is_the_plateau_of_ok_replies_before_errors_break_away() -> None:
    # three 1 s workers: the rate stops growing at 3/s; latency grows past 4 users; errors at 32
    ramp = [
        _step(1, 1.0),
        _step(2, 2.0),
        _step(4, 2.9, p50=1300.0),
        _step(8, 3.0, p50=2600.0),
        _step(16, 3.0, p50=5000.0),
        _step(32, 1.0, errors=40, p50=9000.0),
    ]
    cal = summarise(ramp, _setup())
    assert (cal.capacity_rps, cal.capacity_users, cal.capped) == (3.0, 4, False)
    assert (cal.moderate_users, cal.p50_ms, cal.p99_ms) == (2, 1000.0, 1200.0)
    assert cal.timeout_ms == 3600.0
    assert any("errors broke away at 32 users" in n for n in cal.notes)


def test_capacity_in_users_stops_where_latency_breaks_away() -> None:
    """Three workers of 1 s through a queue, measured in 3 s windows: 2.67 replies a second
    at 4 users and 8, 3 at 16. Before: capacity "reached" at 16 users, so the moderate load
    took in the 8-user step and its 4 s p99 (every bound 4x too loose)."""
    ramp = [
        _step(1, 1.0),
        _step(2, 2.0),
        _step(4, 2.67, p50=1004.0),
        _step(8, 2.67, p50=3010.0),
        _step(16, 3.0, p50=6000.0),
    ]
    cal = summarise(ramp, _setup())
    assert (cal.capacity_rps, cal.capacity_users, cal.moderate_users) == (3.0, 4, 2)
    assert cal.p99_ms == 1200.0
    assert any("latency broke away after 4 users" in n for n in cal.notes)


def test_a_rate_still_growing_at_the_ramps_top_is_capped() -> None:
    cal = summarise([_step(1, 100.0, p50=1.0), _step(2, 200.0, p50=1.0), _step(4, 390.0, p50=1.0)], _setup())
    assert cal.capped and cal.capacity_rps == 390.0
    assert "at least" in cal.summary()


def test_a_system_that_answers_nothing_cannot_be_calibrated() -> None:
    with pytest.raises(SetupError, match="answered no request ok"):
        summarise([_step(1, 0.0)], _setup())


def test_the_stored_file_reads_back_and_a_damaged_one_is_measured_again(tmp_path: Path) -> None:
    path = calibration_file(tmp_path, "my broker", "abc")
    assert path == tmp_path / "calibration" / "my-broker-abc.json"
    cal = summarise([_step(1, 1.0), _step(2, 2.0), _step(4, 2.0)], _setup())
    write_calibration(path, cal)
    assert read_calibration(path) == cal
    path.write_text("{not json")
    assert read_calibration(path) is None
    path.write_text(json.dumps({**cal.as_dict(), "format": 99}))
    assert read_calibration(path) is None
    assert read_calibration(tmp_path / "none.json") is None


def test_check_shows_stand_ins_before_a_calibration_and_the_numbers_after(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    runs = tmp_path / "runs"

    def check() -> str:
        cmd = [sys.executable, "-m", "harness.cli", "check", str(path), "--runs-dir", str(runs)]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    before = check()
    assert "not calibrated yet on this machine" in before
    assert "load.users = '0.5x capacity, at most 10' -> 10" in before  # the stand-in: at most 10
    from harness.calibrate import scenario_setup

    setup = scenario_setup(load_scenario(path))
    stored = Calibration(**{**SLOW.as_dict(), "key": setup.key(), "steps": (), "notes": ()})
    write_calibration(calibration_file(runs, setup.manifest.name, setup.key()), stored)
    after = check()
    assert "calibration: capacity 3 ok replies/s" in after
    assert "load.users = '0.5x capacity, at most 10' -> 2" in after


def test_a_run_without_its_calibration_is_refused_naming_the_way_out(tmp_path: Path) -> None:
    from harness.runner import Runner

    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    with pytest.raises(SetupError, match="zchaos calibrate"):
        Runner(load_scenario(path), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_scenario_may_give_the_availability_window_itself(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.replace("[promises]\n", "[promises]\navailability_window_s = 8.0\n"))
    slow = reparse(load_scenario(path), load_scenario(path).source, calibration=SLOW)
    assert slow.manifest.promises.availability_window_s == 8.0  # given: not from the rate
    assert "promises.availability_window_s" not in slow.relative_keys
    assert slow.manifest.promises.as_dict()["availability_window_s"] == 8.0
    # the default is left out of what a run records, as before the promise existed
    assert "availability_window_s" not in load_manifest("paranoid-pirate").promises.as_dict()


def test_a_calibration_measured_while_the_load_generator_ran_late_says_the_machine_was_busy(
    tmp_path: Path,
) -> None:
    """Before: a calibration on a machine busy with other work stored starved figures (a low
    capacity, high latencies and timeout) as the system's, and said nothing."""
    from harness.calibrate import busy_note, generator_lag_s, measured_windows

    origin = 10**18
    windows = measured_windows(origin, 3, 5.0)  # each step's last 3 s: 9 s measured
    assert windows[0] == (origin + 2 * 10**9, origin + 5 * 10**9)
    history = tmp_path / "history"
    history.mkdir()

    def lagged(*spans_s: tuple[float, float]) -> float:
        lines = [
            json.dumps({"ts": origin + int(hi * 1e9), "ev": "loadgen_lag", "lag_us": round((hi - lo) * 1e6)})
            for lo, hi in spans_s
        ]
        lines += ['{"ts": 1, "ev": "send"', json.dumps({"ts": origin, "ev": "send", "cid": "c", "seq": 1})]
        (history / "locust-1.jsonl").write_text("\n".join(lines) + "\n")
        return generator_lag_s(history, windows)

    # Lag while a step settles counts nothing; across a window's start, only its part inside.
    assert lagged((0.5, 1.5)) == 0.0
    assert lagged((1.9, 2.1)) == pytest.approx(0.1)
    assert busy_note(lagged((1.9, 2.1)), windows) == ""  # 0.1 s of 9: under 2%
    late = lagged((2.0, 2.1), (6.0, 6.3), (7.5, 7.8), (12.0, 12.2))  # the second settling
    assert late == pytest.approx(0.6)
    note = busy_note(late, windows)
    assert "the machine was busy" in note and "0.6 s late over the 9.0 s measured" in note
    assert "zchaos calibrate NAME --again" in note


def test_a_stored_calibrations_notes_are_said_each_time_it_sizes_a_run(tmp_path: Path) -> None:
    """Before: a calibration's notes (a busy machine's) were printed only by the command that
    measured it; the runs it sized later said nothing of them."""
    import io

    from harness.calibrate import calibrated, scenario_setup
    from harness.progress import Progress

    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    setup = scenario_setup(load_scenario(path))
    busy = "the machine was busy: the load generator's own event loop ran 0.6 s late"
    stored = Calibration(**{**SLOW.as_dict(), "key": setup.key(), "steps": (), "notes": (busy,)})
    write_calibration(calibration_file(tmp_path / "runs", setup.manifest.name, setup.key()), stored)
    said = io.StringIO()
    resolved = calibrated(load_scenario(path), tmp_path / "runs", progress=Progress(said))
    assert resolved.calibration is not None and not resolved.uncalibrated
    assert f"calibration note: {busy}" in said.getvalue()
