"""A report sent to a Spark Connect endpoint of the user's (``--spark-remote sc://HOST:PORT``,
``ZCHAOS_SPARK_REMOTE``; reports/connect.py): an address that is not one, or an endpoint that
is not there, is one line of error before anything starts; the history is copied where the
endpoint reads it (``--spark-history-dir``); and the Connect twin of tests/test_spark_cluster.py:
a second Spark Connect server process with its own master (executors in JVMs of their own)
gives the verdict local Spark gives, key by key."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.errors import SetupError
from reports import connect
from reports.history_frame import parquet_is_current
from reports.ingest.read import PARQUET
from reports.pipeline import build_report
from tests.procs import ROOT
from tests.test_report import make_run
from tests.test_spark_connect import _group_of, same_verdict


def _zchaos(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_an_address_is_read_and_its_token_never_shown() -> None:
    assert connect.endpoint("sc://spark-head:15003") == ("spark-head", 15003)
    assert connect.endpoint("sc://spark-head") == ("spark-head", connect.DEFAULT_PORT)
    assert connect.endpoint("sc://[::1]:15002/;token=abc;use_ssl=true") == ("::1", 15002)
    assert connect.shown("sc://h:1/;token=s3cret;use_ssl=true") == "sc://h:1/;token=***;use_ssl=true"
    for bad in ("spark://h:7077", "http://h:15002", "sc://", "sc://h:port", "h:15002"):
        with pytest.raises(SetupError, match="not a Spark Connect address"):
            connect.endpoint(bad)


def test_an_endpoint_that_is_not_there_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    """A closed port, a malformed address: exit 2, one line naming the setting and the endpoint,
    no traceback, no Spark started, the run's earlier verdict untouched; the token not shown."""
    with socket.socket() as sock:  # a port nothing listens on (bound, not listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        run = tmp_path / "run"
        run.mkdir()
        (run / "verdict.json").write_text('{"status": "passed"}')
        env = {**os.environ, "ZCHAOS_SPARK_LOG": str(tmp_path / "spark.log")}
        env.pop(connect.REMOTE_ENV, None)
        url = f"sc://localhost:{port}/;token=s3cret"
        for args, said in (
            (["report", str(run), "--spark-remote", url], f"cannot reach the Spark Connect endpoint sc://localhost:{port}/;token=***"),
            (["report", str(run), "--spark-remote", "spark://h:7077"], "is not a Spark Connect address"),
        ):  # fmt: skip
            done = _zchaos(env, *args, timeout=60)
            assert done.returncode == 2, done.stdout + done.stderr
            assert done.stderr.startswith(f"zchaos: error: {connect.REMOTE_ENV}: ") and said in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1 and "s3cret" not in done.stderr
            assert "Traceback" not in done.stderr and "Spark" not in done.stdout
        done = _zchaos({**env, connect.REMOTE_ENV: url}, "run", "paranoid-pirate-kill-worker", "--runs-dir",
                       str(tmp_path / "runs"), timeout=60)  # fmt: skip
        assert done.returncode == 2 and "cannot reach the Spark Connect endpoint" in done.stderr
        assert not (tmp_path / "runs").exists()  # no run started
    assert json.loads((run / "verdict.json").read_text()) == {"status": "passed"}


def test_the_history_is_copied_where_the_endpoint_reads_it(tmp_path: Path) -> None:
    """stage_history: a copy of its own per run, its times kept (its Parquet form still current
    there), only what changed copied again, what went from the run gone from the copy."""
    history = tmp_path / "run" / "history"
    (history / PARQUET).mkdir(parents=True)
    (history / "client-1.jsonl").write_text('{"ts": 1, "src": "client-1", "ev": "send"}\n')
    (history / "gone.jsonl").write_text("{}\n")
    (history / PARQUET / "part-0.parquet").write_bytes(b"x" * 10)
    shared = tmp_path / "shared"
    staged = connect.stage_history(history, shared)
    assert staged.parent == shared and staged.name.startswith("run-")
    copy = staged / "history"
    assert sorted(p.name for p in copy.rglob("*")) == sorted(p.name for p in history.rglob("*"))
    assert parquet_is_current(copy / PARQUET, sorted(copy.glob("*.jsonl")))
    (history / "gone.jsonl").unlink()
    (copy / "client-1.jsonl").write_text("changed here only, same size and time? no\n")
    os.utime(copy / "client-1.jsonl", ns=(0, (history / "client-1.jsonl").stat().st_mtime_ns))
    kept = (copy / PARQUET / "part-0.parquet").stat().st_ino
    assert connect.stage_history(history, shared) == staged
    assert not (copy / "gone.jsonl").exists()
    assert (copy / "client-1.jsonl").read_text() == (history / "client-1.jsonl").read_text()  # size differed
    assert (copy / PARQUET / "part-0.parquet").stat().st_ino == kept  # unchanged: not copied again
    other = tmp_path / "elsewhere" / "run" / "history"
    other.mkdir(parents=True)
    assert connect.stage_history(other, shared) != staged  # same run name, another run


@contextlib.contextmanager
def connect_server(state: Path, master: str | None = None) -> Iterator[connect.Server]:
    """A Spark Connect server of its own (its record in ``state``, not the user's), stopped
    with everything it started; this process's environment as it was."""
    saved = os.environ.get(connect.DIR_ENV)

    def restore() -> None:
        if saved is None:
            os.environ.pop(connect.DIR_ENV, None)
        else:
            os.environ[connect.DIR_ENV] = saved

    os.environ[connect.DIR_ENV] = str(state)
    try:
        server = connect.start(master=master)
    finally:
        restore()
    try:
        yield server
    finally:
        os.environ[connect.DIR_ENV] = str(state)
        try:
            connect.stop()
        finally:
            restore()
        assert _group_of(server.pid) == []


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[connect.Server]:
    """A second Spark Connect server process, its own master a local cluster (one worker, its
    executor a JVM of its own), token-protected."""
    with connect_server(tmp_path_factory.mktemp("endpoint"), "local-cluster[1,1,1024]") as server:
        yield server


def remote_env(tmp_path: Path) -> dict[str, str]:
    """A ``zchaos`` process's environment that names no endpoint, server or master of its own."""
    env = {**os.environ, connect.SWITCH: "0", "ZCHAOS_SPARK_LOG": str(tmp_path / "spark.log")}
    for key in ("ZCHAOS_SPARK_MASTER", "SPARK_CONNECT_AUTHENTICATE_TOKEN", connect.REMOTE_ENV):
        env.pop(key, None)
    return env


# A server, its local cluster and an executor JVM, a cold first report: about a minute on
# two shared cores. tests/test_spark_connect.py shows the same code path in the default tier.
@pytest.mark.soak
def test_a_report_on_a_remote_endpoint_gives_the_local_verdict(
    spark, endpoint: connect.Server, tmp_path: Path, monkeypatch
) -> None:
    """``zchaos report RUN --spark-remote sc://...;token=... --spark-history-dir DIR``: the report
    says where it goes (the token masked), the history is read from its copy in DIR, and the
    verdict is local Spark's, every key of every check and the metrics."""
    on_remote = make_run(tmp_path / "on-remote")
    in_process = make_run(tmp_path / "in-process")
    shared = tmp_path / "shared"
    url = f"{endpoint.address}/;token={endpoint.token}"
    env = remote_env(tmp_path)
    where = ["--spark-remote", url, "--spark-history-dir", str(shared)]
    done = _zchaos(env, "report", str(on_remote.root), *where, timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # the run holds a duplicate
    assert f"Spark: the Spark Connect endpoint {endpoint.address}/;token=***" in said
    assert endpoint.token not in said and "starting Spark" not in said
    (copy,) = shared.iterdir()
    assert parquet_is_current(copy / "history" / PARQUET, sorted((copy / "history").glob("*.jsonl")))
    monkeypatch.setenv(connect.SWITCH, "0")
    same_verdict(json.loads(on_remote.verdict_json.read_text()), build_report(in_process.root))
