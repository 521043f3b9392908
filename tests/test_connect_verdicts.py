"""Issue 38 part 4: a report's verdict does not depend on where Spark runs. Runs of the CI
suite (one per family, recorded here) and a synthetic run of 1M events are reported on a
Spark Connect server and in this process's own session, and every key of every check, the
metrics and the rest are the same. The default tier shows the same on a hand-written run
and a synthetic one of 20k events (tests/test_spark_connect.py); these are soaks: a
scenario run each, and a 1M-event history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.rundir import RunDir
from harness.runner import run_scenario
from harness.scenario import load_scenario
from reports import connect
from reports.pipeline import build_report
from tests.procs import ROOT
from tests.test_ci_scenarios import SECOND_OF_A_FAMILY
from tests.test_spark_connect import same_verdict, synthetic_run
from tests.test_spark_remote import _zchaos, connect_server, remote_env

pytestmark = pytest.mark.soak
#: One CI scenario per family.
FAMILIES = sorted(p for p in (ROOT / "scenarios" / "ci").glob("*.toml") if p.stem not in SECOND_OF_A_FAMILY)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[connect.Server]:
    with connect_server(tmp_path_factory.mktemp("server")) as running:
        yield running


def on_server_then_here(run: RunDir, server: connect.Server, tmp_path: Path, monkeypatch) -> None:
    """``zchaos report RUN --spark-remote`` (the server), then build_report here (in-process):
    the same verdict, key by key."""
    url = f"{server.address}/;token={server.token}"
    done = _zchaos(remote_env(tmp_path), "report", str(run.root), "--spark-remote", url, timeout=1800)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "Spark: the Spark Connect endpoint" in done.stdout + done.stderr
    remote = json.loads(run.verdict_json.read_text())
    monkeypatch.setenv(connect.SWITCH, "0")
    same_verdict(remote, build_report(run.root))


@pytest.mark.parametrize("path", FAMILIES, ids=[p.stem for p in FAMILIES])
def test_a_ci_runs_verdict_is_the_same_on_connect(
    spark, server: connect.Server, path: Path, tmp_path: Path, monkeypatch
) -> None:
    result = run_scenario(load_scenario(path), runs_dir=tmp_path / "runs", report=False)
    on_server_then_here(result.run, server, tmp_path, monkeypatch)


def test_a_synthetic_1m_runs_verdict_is_the_same_on_connect(
    spark, server: connect.Server, tmp_path: Path, monkeypatch
) -> None:
    run = synthetic_run(spark, tmp_path / "synthetic", 1_000_000)
    on_server_then_here(run, server, tmp_path, monkeypatch)
