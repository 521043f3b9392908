"""The load generator's lag probe (loadtests/user.py ``probe_lag``): when the event loop that
reads every reply runs late, the history says how late (``loadgen_lag``), so that
steady_state takes that lateness out of the latencies (tests/test_checkers.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contract.history import read_events
from tests.procs import ROOT

# In a process of its own: importing Locust patches the standard library for gevent.
PROGRAM = """
import sys, time
import gevent
from contract.history import HistoryWriter
from loadtests.user import probe_lag

with HistoryWriter(sys.argv[1], "locust") as writer:
    probe = gevent.spawn(probe_lag, writer)
    gevent.sleep(0.2)
    busy_until = time.perf_counter() + 0.4
    while time.perf_counter() < busy_until:  # the loop held, as a starved CPU holds it
        pass
    gevent.sleep(0.2)
    probe.kill()
"""


def test_a_held_event_loop_is_recorded_with_how_late_it_ran(tmp_path: Path) -> None:
    history = tmp_path / "locust-0.jsonl"
    subprocess.run([sys.executable, "-c", PROGRAM, str(history)], cwd=ROOT, check=True, timeout=60)
    lags = [e["lag_us"] for e in read_events(history) if e["ev"] == "loadgen_lag"]
    assert lags and max(lags) >= 300_000, lags  # held 400 ms, the probe asleep for 50 of them
