"""Fixtures shared by the whole test run: the one SparkSession (about 5 s to start), and
real processes that are stopped after each test (``procs``)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import zmq

from reports.spark import QUICK_COMPILER
from tests.procs import procs  # noqa: F401 - a fixture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The JVMs of a test run live seconds and run tiny queries: the optimising JIT (C2) costs
# more CPU than it saves there. With C1 alone the Spark checker tests took a third less CPU
# (tests/test_sketch_checkers.py 48 -> 31 s, test_majordomo_checkers.py 44 -> 29 s, under a
# load average of 30). Inherited by the `zchaos` processes the tests start; never set for users.
# QUICK_COMPILER keeps the full code cache: with C1 alone the JVM reserves only 48 MB, which
# a test worker's session, checking a few hundred histories, filled (compiler disabled, and
# once a query failed: "Out of space in CodeCache for method handle intrinsic").
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f'--conf "spark.driver.extraJavaOptions={" ".join(QUICK_COMPILER)}" pyspark-shell',
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from reports.spark import get_spark, stop_spark

    # Test histories are tiny: fewer shuffle partitions, fewer tasks per query.
    os.environ.setdefault("ZCHAOS_SPARK_PARTITIONS", "2")
    # The user's class archive (reports/cds.py), as a report would: made by this session
    # if there is none yet (stop_spark then writes it, ~15 s once), mapped otherwise. The
    # tests that damage an archive keep theirs in a temp cache (tests/test_spark_cds.py).
    session = get_spark()
    yield session
    stop_spark()


_MARK = "ZCHAOS_TEST_SESSION"


def _leftovers(token: str) -> list:
    import psutil

    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(_MARK) == token:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_tests() -> Iterator[None]:
    """Every process a test starts inherits a mark; at the end none may be left running."""
    import uuid

    token = uuid.uuid4().hex
    os.environ[_MARK] = token
    yield
    import psutil

    _, left = psutil.wait_procs(_leftovers(token), timeout=10)  # some may be on their way out
    left = [p for p in left if p.status() != psutil.STATUS_ZOMBIE]
    for proc in left:
        proc.kill()
    assert not left, f"processes left running by the tests: {[(p.pid, p.cmdline()[:4]) for p in left]}"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a test module that imports Locust into the test process.

    Importing Locust monkey-patches the standard library with gevent (subprocess among it)
    for the whole process; every later test that starts a process or a SparkSession then
    fails far from the cause. Locust belongs in the processes the runner starts, or in a
    child Python of the test.
    """
    import sys

    if "locust" in sys.modules:
        raise pytest.UsageError(
            "a test module imported Locust at collection time, which patches this test process "
            "with gevent; import it inside a child process (see tests/test_load_phases.py)"
        )


_SHARED_FIXTURE = re.compile(r"""scope\s*=\s*["'](module|class|package)["']""")


@functools.cache
def _shares_fixtures(module: Path) -> bool:
    try:
        return bool(_SHARED_FIXTURE.search(module.read_text()))
    except OSError:
        return True  # not a file we can read: keep its tests together, as loadscope would


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadscope`` by test, not by module, where a module shares no fixture.

    loadscope keeps a module's tests in one process so that a module-scoped fixture (one
    scenario run for several assertions) runs once; but a module of independent long tests
    (the CI scenarios, 7-9 minutes) then sat in one process while the other idled. Only the
    modules that declare a module-, class- or package-scoped fixture stay whole; every other
    test is a unit of its own. A module that only imports such a fixture from another is
    not seen: its fixture then runs once per process it lands in (slower, still correct).
    (``--dist loadgroup`` would say this with marks, but pytest 9.2 and xdist ignore
    ``xdist_group``: pytest-xdist issue 1386.)
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class ByTestUnlessShared(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if _shares_fixtures(root / nodeid.split("::", 1)[0]):
                return super()._split_scope(nodeid)
            return nodeid

    return ByTestUnlessShared(config, log)


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    """A ZeroMQ context for the test's own sockets, destroyed (linger 0) after it."""
    context = zmq.Context()
    yield context
    context.destroy(linger=0)
