"""A fault that lands while the system is idle: the stock scenario that restarts a
Paranoid Pirate queue in a near-idle stretch of a phased load, run on a user's queue
that never takes back workers idle at its restart (tests/blackbox/forgetful_queue.py:
pyzmq only, no history, by path, with zchaos's Paranoid Pirate probe workers) and on our
queue.

``recovery`` catches the subject: after the restart no worker was holding a request,
so none comes back with a reply, and the queue ignores their heartbeats; it then knows
no idle worker, never reads its frontend, and no ok reply arrives within the recovery
bound (the last phase runs longer than the bound, so the check can decide). Under a
busy load the same bug would mostly hide: a worker holding a request comes back with
its reply.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.runner import RunResult
from tests.procs import ROOT
from tests.test_blackbox_loss import run_on, statuses

STOCK = ROOT / "scenarios" / "paranoid-pirate-idle-queue-restart.toml"
FORGETFUL = ROOT / "tests" / "blackbox" / "forgetful-queue.toml"
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # whole scenario runs


def summaries(result: RunResult) -> str:
    return json.dumps({n: c["summary"] for n, c in result.verdict["checks"].items()}, indent=1)


def test_a_queue_that_forgets_idle_workers_fails_recovery_after_an_idle_restart(
    tmp_path: Path, spark
) -> None:
    result = run_on(FORGETFUL, tmp_path, STOCK)
    assert result.exit_code == 1, summaries(result)
    assert statuses(result)["recovery"] == "violated", summaries(result)
    recovery = result.verdict["checks"]["recovery"]
    assert recovery["examples"][0]["problem"] == "no ok reply after the fault"
    assert recovery["examples"][0]["target"] == "queue"
    assert statuses(result)["no_unexpected_exit"] == "held"  # nothing crashed: it just never serves


def test_our_queue_takes_idle_workers_back_and_passes(tmp_path: Path, spark) -> None:
    result = run_on("paranoid-pirate", tmp_path, STOCK)
    assert result.exit_code == 0, summaries(result)
    assert statuses(result)["recovery"] == "held"
