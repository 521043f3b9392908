"""Fixtures shared by the whole test run: the one SparkSession (about 5 s to start), and
real processes that are stopped after each test (``procs``)."""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import zmq

from reports.spark import driver_java_options
from tests.procs import procs, running  # noqa: F401 - procs is a fixture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from harness.supervisor import Supervisor

# The JVMs of a test run live seconds and run tiny queries: the optimising JIT (C2) costs
# more CPU than it saves there. With C1 alone the Spark checker tests took a third less CPU
# (tests/test_sketch_checkers.py 48 -> 31 s, test_majordomo_checkers.py 44 -> 29 s, under a
# load average of 30). Inherited by the `zchaos` processes the tests start; never set for users.
# QUICK_COMPILER keeps the full code cache: with C1 alone the JVM reserves only 48 MB, which
# a test worker's session, checking a few hundred histories, filled (compiler disabled, and
# once a query failed: "Out of space in CodeCache for method handle intrinsic").
# The test worker's JVM is a short report's (reports/spark.py driver_java_options): C1 alone
# with the full code cache, and the serial collector (test_checkers.py +
# test_pingpong_checkers.py alternated twice at load 4-10: CPU 118/125 s with G1, 112/120 s).
#: A test's hand-written or recorded history: at most a few thousand events.
TEST_HISTORY_EVENTS = 5_000
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f'--conf "spark.driver.extraJavaOptions={driver_java_options(TEST_HISTORY_EVENTS)}" pyspark-shell',
)

# A developer's own Spark Connect server (zchaos spark start) serves no test: a test's
# reports run in-process, as on CI, unless the test says otherwise (tests/test_spark_connect.py).
os.environ.setdefault("ZCHAOS_SPARK_CONNECT", "0")


@pytest.hookimpl(trylast=True)  # after pytest's own tmp_path plugin has set up its factory
def pytest_configure(config: pytest.Config) -> None:
    """The JVMs' own output (reports/spark.py SPARK_LOG) goes to this run's folder under
    pytest's base temp (kept for the last three runs), not the user's /tmp/zchaos-spark.log:
    set before the test processes start, so that they and every ``zchaos`` they run inherit
    it. A log the user names (ZCHAOS_SPARK_LOG) is kept."""
    if hasattr(config, "workerinput") or os.environ.get("ZCHAOS_SPARK_LOG"):
        return
    from reports import spark

    log = config._tmp_path_factory.getbasetemp() / "spark.log"  # type: ignore[attr-defined]  # pytest's own, no public way before a test
    os.environ["ZCHAOS_SPARK_LOG"] = str(log)
    spark.SPARK_LOG = log  # this process's, for a run without workers


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from reports.spark import fit_to, get_spark, stop_spark

    # Test histories are tiny: fewer shuffle partitions, fewer tasks per query.
    os.environ.setdefault("ZCHAOS_SPARK_PARTITIONS", "2")
    # The user's class archive (reports/cds.py), as a report would: made by this session
    # if there is none yet (stop_spark then writes it, ~15 s once), mapped otherwise. The
    # tests that damage an archive keep theirs in a temp cache (tests/test_spark_cds.py).
    session = get_spark()
    # Every test's history is short: the checks a test calls directly run their queries as a
    # short run's report does (reports/spark.py fit_to: interpreted, no adaptive execution),
    # not compiled as the bare session would (a report puts back these settings after it).
    # test_checkers.py + test_pingpong_checkers.py, alternated at load 4.4-4.8: CPU 185/178 s
    # -> 130/127 s, wall 240/181 s -> 204/154 s.
    fit_to(session, TEST_HISTORY_EVENTS)
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
    left = [p for p in left if running(p)]
    described = [(p.pid, _command(p)) for p in left]
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not left, f"processes left running by the tests: {described}"


def _command(proc: Any) -> list[str]:
    import psutil

    try:
        return proc.cmdline()[:4]
    except psutil.Error:  # it ended (or became a zombie) since
        return ["?"]


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``spark`` every test that uses the run's SparkSession (directly or through its
    fixtures): its JVM takes seconds to start and a check on even a tiny history 1-4 s, so
    the quick tier leaves them out (noxfile.py ``quick``) and stays near two minutes."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


_SHARED_SCOPES = {"module", "class", "package"}


def _fixture_decorator(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    for dec in node.decorator_list:
        if ast.unparse(dec).split("(", 1)[0] in ("pytest.fixture", "fixture"):
            return dec
    return None


def _keyword(dec: ast.expr, name: str) -> object:
    for kw in dec.keywords if isinstance(dec, ast.Call) else []:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


@functools.cache
def _module_plan(module: Path) -> tuple[frozenset[str] | None, frozenset[str], bool]:
    """What the scheduler reads in a test module's source: the tests that use a fixture the
    module shares (module, class or package scope; directly or through its other fixtures),
    None if it cannot tell (an autouse one, an unreadable file: the module then stays whole);
    the tests marked slow; whether the whole module is."""
    try:
        tree = ast.parse(module.read_text())
    except (OSError, SyntaxError):
        return None, frozenset(), False
    fixtures: dict[str, set[str]] = {}
    shared: set[str] = set()
    tests: dict[str, set[str]] = {}
    slow: set[str] = set()
    module_slow = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            module_slow = "pytest.mark.slow" in ast.unparse(node.value)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = {a.arg for a in node.args.args}
        dec = _fixture_decorator(node)
        if dec is not None:
            fixtures[node.name] = args
            if _keyword(dec, "scope") in _SHARED_SCOPES:
                if _keyword(dec, "autouse"):
                    return None, frozenset(), module_slow
                shared.add(node.name)
        elif node.name.startswith("test"):
            tests[node.name] = args
            if any(ast.unparse(d).startswith("pytest.mark.slow") for d in node.decorator_list):
                slow.add(node.name)
    grown = True
    while grown:  # a function fixture that takes a shared one shares it with its tests
        users = {name for name, args in fixtures.items() if args & shared} - shared
        grown = bool(users)
        shared |= users
    return frozenset(n for n, args in tests.items() if args & shared), frozenset(slow), module_slow


#: A test with no time of its own in the cache yet (a fresh clone): its tier's rough length.
GUESS_S = {"slow": 30.0, "quick": 1.0}
_DURATIONS_KEY = "zchaos/durations"
#: Each test of 3 s or more, its time in a whole default run on the 2-core machine: the order
#: of a fresh clone's run (CI's), where pytest's cache has none: guessed from the slow mark
#: alone, every slow test is 30 s, and the 2-minute Spark Connect test or the shrink's 90 s
#: start wherever they fall, maybe last, one process busy while the others idle.
#: ``ZCHAOS_TEST_DURATIONS=write ./dev tests`` writes that run's times into it.
SEED_DURATIONS = Path(__file__).parent / "durations.json"
SEED_MIN_S = 3.0
_took: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _took[report.nodeid] = _took.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller keeps each test's time (setup, call, teardown) for the next run's order."""
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _took:
        return
    known = cache.get(_DURATIONS_KEY, {})
    known.update({nodeid: round(s, 2) for nodeid, s in _took.items()})
    cache.set(_DURATIONS_KEY, known)
    if os.environ.get("ZCHAOS_TEST_DURATIONS") == "write":
        times = {**_seed_durations(), **{nodeid: round(s, 1) for nodeid, s in _took.items()}}
        long = {nodeid: s for nodeid, s in times.items() if s >= SEED_MIN_S}
        SEED_DURATIONS.write_text(json.dumps(long, indent=0, sort_keys=True) + "\n")


def _seed_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(SEED_DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}  # an order, not a result: a damaged file leaves the guesses


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadscope`` by test, not by module, unless tests share a fixture; the longest
    work first.

    loadscope keeps a module's tests in one process so that a module-scoped fixture (one
    scenario run for several assertions) runs once; but a module of independent long tests
    (the CI scenarios, 7-9 minutes) then sat in one process while the others idled. Only the
    tests that use a module-, class- or package-scoped fixture of their module stay together;
    every other test is a unit of its own. A module that only imports such a fixture from
    another is not seen: its fixture then runs once per process it lands in (slower, still
    correct). (``--dist loadgroup`` would say this with marks, but pytest 9.2 and xdist
    ignore ``xdist_group``: pytest-xdist issue 1386.)

    Each process is handed the longest unit left: a long test started last keeps one process
    busy while the others idle. A test's length is its time in the last run that ran it
    (pytest's cache), else in tests/durations.json, else a guess from its ``slow`` mark.
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath
    cache = getattr(config, "cache", None)
    known: dict[str, float] = _seed_durations()
    known.update(cache.get(_DURATIONS_KEY, {}) if cache is not None else {})

    def test_of(nodeid: str) -> tuple[Path, str]:
        path, _, rest = nodeid.partition("::")
        return root / path, rest.split("::", 1)[0].split("[", 1)[0]

    def expected_s(nodeid: str) -> float:
        if nodeid in known:
            return known[nodeid]
        module, name = test_of(nodeid)
        _, slow, module_slow = _module_plan(module)
        return GUESS_S["slow" if module_slow or name in slow else "quick"]

    class LongestFirstUnlessShared(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, name = test_of(nodeid)
            sharing, _, _ = _module_plan(module)
            if sharing is None or name in sharing:
                return super()._split_scope(nodeid)
            return nodeid

        def _assign_work_unit(self, node: object) -> None:
            longest = max(self.workqueue, key=lambda scope: sum(map(expected_s, self.workqueue[scope])))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return LongestFirstUnlessShared(config, log)


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    """A ZeroMQ context for the test's own sockets, destroyed (linger 0) after it."""
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    """A process supervisor writing its history into the test's folder; it stops every
    process it started, failed test or not."""
    from contract.history import HistoryWriter
    from harness.supervisor import Supervisor

    history = HistoryWriter(tmp_path / "runner.jsonl", "runner")
    sup = Supervisor(history, dict(os.environ))
    try:
        yield sup
    finally:
        sup.stop_all()
        history.close()
