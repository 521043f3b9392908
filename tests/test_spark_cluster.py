"""The report on a real Spark standalone cluster: a master and one worker on 127.0.0.1,
started from the installed pyspark's own launcher (bin/spark-class), give the same verdict
as local mode, and stop with the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract.ports import PortAllocator, port_accepts
from reports.pipeline import build_report
from tests.procs import Proc, wait_for
from tests.test_report import make_run

# Three more JVMs (master, worker, executor), 2-5 minutes: a soak (`./dev chaos`). Every
# other Spark test gives its verdicts on local Spark, the same code on one JVM.
pytestmark = pytest.mark.soak
ROOT = Path(__file__).resolve().parent.parent
START_S = 120  # a JVM each, on a loaded 2-core machine


def spark_class() -> Path:
    import pyspark

    launcher = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not launcher.exists():
        pytest.skip(f"this pyspark has no {launcher}")
    return launcher


def alive_workers(ui_port: int) -> int:
    """How many workers the master's status page (its JSON view) says are alive."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as page:
            status = json.load(page)
    except (OSError, ValueError):
        return 0
    return int(status.get("aliveworkers") or 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT of a master with one registered worker (both stopped at the end)."""
    tmp = tmp_path_factory.mktemp("cluster")
    ports = PortAllocator()
    port, ui, worker_port, worker_ui = (ports.allocate() for _ in range(4))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    env.pop("SPARK_CONF_DIR", None)  # the daemons log at INFO to their files
    master_url = f"spark://127.0.0.1:{port}"
    launcher = str(spark_class())
    master = Proc(
        "spark-master",
        [launcher, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)],
        tmp / "master.log", env,
    )  # fmt: skip
    started = [master]
    try:
        wait_for(lambda: port_accepts(port) and port_accepts(ui), START_S, "the Spark master to listen")
        worker = Proc(
            "spark-worker",
            [launcher, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
             "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", "1",
             "--memory", "1g", "--work-dir", str(tmp / "work")],
            tmp / "worker.log", env,
        )  # fmt: skip
        started.append(worker)
        wait_for(lambda: alive_workers(ui) == 1, START_S, "the Spark worker to register with the master")
        yield master_url
    finally:
        for proc in reversed(started):
            proc.stop(timeout=20)
        assert all(p.popen.poll() is not None for p in started)


def checks(verdict: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (c["status"], c["violations"], c["summary"], c["figures"], c["examples"])
        for name, c in verdict["checks"].items()
    }


def test_a_stored_run_gets_the_same_verdict_on_a_cluster(spark, cluster: str, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    local = json.loads(json.dumps(build_report(run.root), default=str))
    env = {**os.environ, "ZCHAOS_SPARK_MASTER": cluster, "ZCHAOS_SPARK_LOG": str(tmp_path / "spark.log")}
    env.pop("ZCHAOS_SPARK_PARTITIONS", None)
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "report", str(run.root)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    # The verdict's exit code (1: the run has a known violation and a crash in it), not a failure to report.
    assert done.returncode == local["exit_code"], done.stdout + done.stderr
    remote = json.loads(run.verdict_json.read_text())
    assert remote["status"] == local["status"] == "violated"
    assert checks(remote) == checks(local)
    assert remote["metrics"]["latency_ms"] == local["metrics"]["latency_ms"]
