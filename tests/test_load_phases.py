"""Load phases: ``[[load.phases]]`` validated in the scenario, carried out by a Locust
LoadTestShape and a per-phase wait, and shown on the progress line; the load's time zero
that they and Locust's run time count from."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contract.errors import SetupError
from harness.progress import Progress
from harness.scenario import load_scenario
from loadtests.config import ClientLoad, LoadConfig, wait_time_for
from tests.procs import ROOT

PHASED = """
implementation = "paranoid-pirate"
[load]
users = 4
wait_ms = 20
[[load.phases]]
name = "busy"
duration_s = 5
[[load.phases]]
name = "idle"
duration_s = 8
users = 1
wait_ms = 2000
[[load.phases]]
duration_s = 3
users = 0
[[faults]]
kind = "restart"
target = "queue"
at_s = [15]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_phases_are_read_with_defaults_and_set_the_duration(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, PHASED))
    busy, idle, third = scenario.load.phases
    assert (busy.name, busy.start_s, busy.users, busy.wait_ms) == ("busy", 0, 4, 20)  # [load]'s
    assert (idle.start_s, idle.end_s, idle.users, idle.wait_ms) == (5, 13, 1, 2000)
    assert (third.name, third.users) == ("phase-3", 0)
    assert scenario.duration_s == 16  # their sum: the fault at 15 s lies inside the load
    assert [scenario.load.phase_at(t).name for t in (0, 4.9, 5, 12.9, 13, 99)] == [
        "busy", "busy", "idle", "idle", "phase-3", "phase-3"
    ]  # fmt: skip
    assert scenario.as_dict()["load"]["phases"][1]["wait_ms"] == 2000


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("[load]", "duration_s = 20\n[load]"),
            "load.phases: the phases last 16 s in all but duration_s = 20",
        ),
        (('name = "busy"', 'name = "idle"'), "load.phases[1].name: a phase named 'idle' comes earlier"),
        (("duration_s = 5", "duration_s = 0"), "load.phases[0].duration_s: must be at least 0.1"),
        (("users = 1", "users = -1"), "load.phases[1].users: must be at least 0"),
        (("wait_ms = 2000", "wait = 2000"), "load.phases[1].wait: unknown key; did you mean 'wait_ms'?"),
        (("users = 4\n", "users = 0\n"), "load.users: must be at least 1"),
        (("at_s = [15]", "at_s = [17]"), "lies outside the load (0 to 16.0 s)"),
    ],
)
def test_phase_mistakes_name_the_file_and_the_key(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, PHASED.replace(*edit, 1))
    with pytest.raises(SetupError) as caught:
        load_scenario(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_phases_without_any_user_are_refused(tmp_path: Path) -> None:
    text = PHASED.replace('name = "busy"\n', 'name = "busy"\nusers = 0\n').replace("users = 1", "users = 0")
    with pytest.raises(SetupError, match="every phase has 0 users"):
        load_scenario(write(tmp_path, text))


def _config(origin_ns: int) -> LoadConfig:
    phases = [
        {"name": "busy", "start_s": 0.0, "duration_s": 5.0, "users": 4, "spawn_rate": 10.0, "wait_ms": 20.0},
        {
            "name": "idle",
            "start_s": 5.0,
            "duration_s": 8.0,
            "users": 1,
            "spawn_rate": 10.0,
            "wait_ms": 2000.0,
        },
    ]
    client = ClientLoad(name="c", adapter="lazy_pirate", endpoints=["tcp://127.0.0.1:1"])
    return LoadConfig(clients=[client], history_dir="", phases=phases, origin_ns=origin_ns)


def test_the_per_phase_wait_follows_the_runners_origin() -> None:
    now = time.time_ns()
    assert wait_time_for(_config(now))(None) == 0.02
    assert wait_time_for(_config(now - 6 * 10**9))(None) == 2.0  # 6 s into the load
    assert wait_time_for(_config(now - 60 * 10**9))(None) == 2.0  # after the end: the last phase's


SHAPE = """
import json, sys, time
from loadtests.config import LoadConfig, ClientLoad
from loadtests.shape import make_shape_class
data = json.loads(sys.argv[1])
data["clients"] = [ClientLoad(**c) for c in data["clients"]]
ticks = []
for ago_s in (0, 6, 14):
    config = LoadConfig(**{**data, "origin_ns": time.time_ns() - ago_s * 10**9})
    ticks.append(make_shape_class(config)().tick())
print(json.dumps(ticks))
"""


def _in_a_process_of_its_own(script: str) -> Any:
    """What ``script`` prints (JSON), run with the phased load's config as its argument: in a
    process of its own, since importing Locust patches the whole process for gevent."""
    out = subprocess.run(
        [sys.executable, "-c", script, _config(0).to_env()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_the_load_shape_follows_the_phases_then_stops() -> None:
    assert _in_a_process_of_its_own(SHAPE) == [[4, 10.0], [1, 10.0], None]  # past the end: Locust stops


RUN_TIME = """
import json, os, sys, time, types
import gevent
from locust import events
from loadtests.config import ENV_LOAD
os.environ[ENV_LOAD] = sys.argv[1]
gevent.get_hub().loop.update_now()
busy_until = time.monotonic() + 1.5  # the locustfile's imports on a loaded machine
while time.monotonic() < busy_until:
    pass
import loadtests.locustfile  # noqa: F401,E402
events.init.fire(environment=types.SimpleNamespace(runner=None), runner=None, web_ui=None)
started = time.monotonic()
gevent.spawn_later(1.0, lambda: None).join()  # Locust's --run-time timer, started right after
print(json.dumps(time.monotonic() - started))
"""


def test_locusts_run_time_counts_from_the_loads_zero_however_long_its_start_took() -> None:
    """A fractional run's load ran 2.8 of 3.5 s under five test processes: gevent's timers
    count from the time its loop last read, before the locustfile's imports."""
    assert _in_a_process_of_its_own(RUN_TIME) >= 0.95  # was 0 (the timer's second passed in the imports)


def test_the_progress_line_shows_the_phase(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, PHASED))
    stream = io.StringIO()
    progress = Progress(stream=stream, every_s=0)
    (tmp_path / "history").mkdir()
    progress.start_load(scenario.duration_s, tmp_path / "history", None, scenario.load)
    progress.tick(6.0)
    lost = '{"ts":1,"src":"client-1","ev":"lost","cid":"client-1","seq":1,"rid":"client-1:1","reason":"x"}\n'
    (tmp_path / "history" / "locust-0.jsonl").write_text(lost)
    progress.tick(14.0)
    lines = stream.getvalue().splitlines()
    assert "phase idle (2/3, 1 user)" in lines[0] and "lost" not in lines[0]
    assert "phase phase-3 (3/3, 0 users)" in lines[1]
    assert "lost 1" in lines[1]  # a no-resend client's losses show as they happen
