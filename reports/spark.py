"""The one SparkSession of a process, configured for zchaos: quiet, loopback, sized to the work.

The master is configuration (``ZCHAOS_SPARK_MASTER``, default ``local[*]``), so a large
history can go to a cluster (README: "Checking a history on a Spark cluster"). What the JVM needs is
chosen from the size of the history it will check (``get_spark(events=...)``): a short
run gets a small heap and a JVM tuned to start fast (its fixed cost is most of the
report), a long one a larger heap; ``ZCHAOS_SPARK_DRIVER_MEMORY`` overrides the heap.
``fit_to`` sets the per-query settings (shuffle partitions, adaptive execution, code
generation) for each history. The JVM's
own output goes to ``SPARK_LOG``, not to the user's terminal.

When the user names a Spark Connect endpoint (``ZCHAOS_SPARK_REMOTE``, ``--spark-remote``), or
their local Spark Connect server is up (``zchaos spark start``, reports/connect.py),
``get_spark`` returns a client session of it instead: nothing starts in this process, and
nothing of the JVM's below applies to it.

The driver JVM starts from a class-data-sharing archive made by the first report
(reports/cds.py). Measured 2026-11-23 05:00-05:15 UTC on the shared 2-core machine at
load 9-13 (wall seconds are 2-4x a quiet machine's; CPU seconds of the process and its
JVM move less), archive on / off, alternating:

- a fresh process to a session and two small queries: CPU 5.6-7.1 / 11.1-11.4 s; gateway
  (launcher and JVM boot) 2.8-3.0 / 3.6-4.4 s, session 3.2-3.6 / 6.1-9.1 s, the first
  Parquet count 2.1-3.4 / 8.8-9.0 s;
- ``zchaos report`` of the demo run (76k events), whole process: from JSON 46-59 / 47-60 s
  (CPU 23.6-29.2 / 28.9-32.0), from Parquet 30-49 / 46-53 s (CPU 20.6-24.7 / 25.3-27.0);
  what is left is the checks' own work.

Measured and left alone: the launcher JVM of bin/spark-class (0.1-0.4 s wall, 0.12 s CPU;
SPARK_HOME is set for it, so its script does not search); importing pyspark.sql (0.25-0.6
s); an unsigned copy of
Janino's (signed, so not archived) jars first on the class path (0.25 s CPU less, within
the noise). The archive leaves out ~4,600 of the ~5,000 lambda classes a report spins
(Scala's, which are serializable): they are still made at each start. The collector: with
more pairs of runs, the serial one cost a short report slightly less CPU than G1
(SERIAL_GC_EVENTS); an archive made under one collector is used under the other.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from reports import cds, connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONF_DIR = Path(__file__).resolve().parent / "conf"
#: Where the JVM's own stderr goes (Spark errors included): ZCHAOS_SPARK_LOG, or the temp folder.
SPARK_LOG = Path(os.environ.get("ZCHAOS_SPARK_LOG") or Path(tempfile.gettempdir()) / "zchaos-spark.log")
_session: SparkSession | None = None
#: The Spark Connect server whose client ``_session`` is, if it is one.
_remote: connect.Server | None = None
#: The user's Spark Connect endpoint (ZCHAOS_SPARK_REMOTE) whose client ``_session`` is, if it is one.
_endpoint: str | None = None
#: Why get_spark started its own session though a server was up (the report says it).
fallback_notes: list[str] = []
#: The class archive this process's JVM writes when it exits (reports/cds.py), if it makes one.
_archive: cds.Plan | None = None
#: Below this many events the JVM runs only its quick compiler (C1): the report is a few
#: seconds of many small queries, where C2's compile time never pays back.
QUICK_JVM_EVENTS = 2_000_000
#: With C1 alone the JVM reserves a 48 MB code cache, not 240 MB: a process that goes on
#: checking history after history in one session (a test worker, ~250 reports) filled it,
#: and a query then failed ("Out of space in CodeCache for method handle intrinsic"). The
#: reservation is address space; the cache grows only as code is compiled.
QUICK_CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
#: The JVM options of the quick compiler alone (also the test workers', tests/conftest.py).
QUICK_COMPILER = ("-XX:TieredStopAtLevel=1", QUICK_CODE_CACHE)
#: From QUICK_JVM_EVENTS on, C2 inlines less (callees up to 100 bytecodes, not 325; none whose
#: compiled code is over 1,000 bytes, not 2,500): a cold report at 10M events spent 37 s of CPU
#: in C2 (45 s compiling in all, -XX:+CITime) on a 2-core machine, while its tasks waited on
#: the other core. ``zchaos report`` of 10M events rebuilt from Parquet, 5 pairs alternating
#: (2026-11-26, nothing else running): 37.9-48.0 s (median 40.1) against 44.4-51.5 s (48.8),
#: shorter in each pair.
LESS_INLINING = ("-XX:FreqInlineSize=100", "-XX:InlineSmallCode=1000")
#: Below this many events (the driver's 1 GB heap) the JVM collects with the serial collector:
#: G1's concurrent threads and write barriers cost a short report more CPU than its pauses
#: on a small heap save (the demo run, whole process from Parquet, 9 pairs alternating at
#: load 8-13: 0.7 s less CPU of ~15 s on average, less in 7 of the 9).
SERIAL_GC_EVENTS = 1_000_000
#: Shuffle partitions: one per this many events (a task's aggregation must fit its heap
#: share), at most MAX_PARTITIONS.
EVENTS_PER_PARTITION = 500_000
MAX_PARTITIONS = 200
#: Below this many events adaptive query execution is off: with the partitions already sized
#: to the history it has nothing to coalesce, and its re-planning of every shuffle stage (one
#: more Spark job each) cost a report of 100k events 15-30% more CPU (bench/checker_scaling.py).
ADAPTIVE_MIN_EVENTS = 2_000_000


#: Imported on another thread while the JVM starts (the main thread only waits for it then):
#: PySpark's first call into the JVM with an argument imports pyspark.testing.utils for its
#: NumPy converter, and that imports pandas, NumPy and pyarrow, ~0.35 s of CPU that was on
#: the way of every report; then the report's own modules (the checkers, the metrics).
PRELOAD = ("pyspark.testing.utils", "reports.metrics", "reports.checkers.toolkit")


def _preload() -> None:
    import importlib

    from reports.checkers import registry

    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # an internal module of another PySpark
            importlib.import_module(name)
    registry()


def _start_preload() -> None:
    """``_preload`` on its own thread, once pyspark.sql is whole (the thread imports from it)."""
    import pyspark.sql  # noqa: F401

    threading.Thread(target=_preload, name="zchaos-preload", daemon=True).start()


def driver_memory(events: int | None) -> str:
    """The driver heap for a history of ``events`` events (local mode runs every task in it)."""
    if os.environ.get("ZCHAOS_SPARK_DRIVER_MEMORY"):
        return os.environ["ZCHAOS_SPARK_DRIVER_MEMORY"]
    if events is None or events < 1_000_000:
        return "1g"
    total_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{max(2, min(6, int(total_gb / 4), 2 + events // 5_000_000))}g"


def driver_java_options(events: int | None) -> str:
    """The driver JVM's options for a history of ``events`` events (None: unknown): the quick
    compiler alone (with the full code cache) below QUICK_JVM_EVENTS, LESS_INLINING from
    there on, the serial collector below SERIAL_GC_EVENTS. They go in
    spark.driver.extraJavaOptions, so that a user's own options there replace them (two
    collectors asked for would stop the JVM from starting)."""
    options: list[str] = []
    if events is not None and events < QUICK_JVM_EVENTS:
        options += QUICK_COMPILER
    elif events is not None:
        options += LESS_INLINING
    if events is not None and events < SERIAL_GC_EVENTS:
        options.append("-XX:+UseSerialGC")
    return " ".join(options)


def get_spark(events: int | None = None) -> SparkSession:
    """The process's SparkSession, started on first use (about 5 s cold, 3 s with the class
    archive) and sized for a history of about ``events`` events (None: unknown). A session
    already running is reused as it is: its heap is fixed for its life."""
    global _session, _archive, _remote, _endpoint
    if _session is not None:
        return _session
    url = connect.remote()
    if url is not None:  # the user's endpoint, or an error: never a local Spark instead
        _start_preload()
        _session = connect.remote_session(url)
        _endpoint = url
        return _session
    server = connect.running() if connect.wanted() else None
    if server is not None:
        _start_preload()
        try:
            _session = connect.session(server)
            _remote = server
            return _session
        except connect.Unreachable as exc:  # an in-process session after all, and the user told why
            fallback_notes.append(
                f"the Spark Connect server at {server.address} did not answer ({exc}): starting Spark here"
            )
            _log(fallback_notes[-1])
    # Left by a parent process that was a Connect client: PySpark would take this one for
    # a client too, and find no server to reach.
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", module="pyspark")
    from pyspark.find_spark_home import _find_spark_home

    spark_home = Path(_find_spark_home())
    _bridge_to_log()
    _start_preload()
    plan = cds.prepare(spark_home, CONF_DIR / "log4j2.properties", _log)
    try:
        _session = _start(events, spark_home, plan)
    except Exception:
        # The archive's options can keep the JVM from starting (a truncated archive kills
        # it as it maps it; a Java without a base archive cannot make one): start without,
        # and blame them only if that works.
        blame = None if plan is None else cds.failed(plan, _jvm_process(), _log)
        if blame is None:
            raise
        _session = _start(events, spark_home, None)
        blame()
        plan = None
    except BaseException:  # Ctrl-C: no JVM, no temp file left
        if plan is not None:
            cds.abandon(plan, _jvm_process())
        raise
    if plan is not None:
        jvm = _jvm_process()
        if jvm is not None:
            cds.check_used(plan, jvm.pid, _log)
        if plan.making is not None:
            _archive = plan
            atexit.register(_save_at_exit)
    _session.sparkContext.setLogLevel("ERROR")
    from pyspark import SparkContext

    from reports.jvm_lookups import remember_lookups

    remember_lookups(SparkContext._jvm)
    jvm = _jvm_process()
    _log(
        f"driver JVM started (pid {jvm.pid if jvm else '?'}), heap {driver_memory(events)} for about "
        f"{events if events is not None else 'an unknown number of'} events"
    )
    return _session


def start_message() -> str:
    """The line a report says as it gets its session (which one, and whether it starts)."""
    if _session is not None:
        return "Spark: reusing this process's session"
    url = connect.remote()
    if url is not None:
        return f"Spark: the Spark Connect endpoint {connect.shown(url)} ({connect.REMOTE_ENV})"
    server = connect.running() if connect.wanted() else None
    if server is not None:
        return f"Spark: the Spark Connect server at {server.address} (zchaos spark status)"
    return "starting Spark"


#: Whether this process's reports count as the user's in the server's status (``zchaos
#: spark start``'s own warm-up reports do not).
count_served = True


def count_report() -> None:
    """A report done: counted by the Spark Connect server's status, if it served it."""
    if _remote is not None and count_served:
        connect.count_report()


def _start(events: int | None, spark_home: Path, plan: cds.Plan | None) -> SparkSession:
    """Start the driver JVM and its session, with the class archive as ``plan`` says."""
    from pyspark.sql import SparkSession

    # Only the launched JVM sees these, not the processes this one starts later. A set
    # SPARK_HOME spares the launcher script its search.
    launch_env = {"SPARK_HOME": str(spark_home)}
    if plan is not None:
        launch_env["SPARK_CONF_DIR"] = str(plan.conf_dir)
    elif not os.environ.get("SPARK_CONF_DIR"):
        # On the class path: its log4j2 file silences the banner that setLogLevel cannot.
        launch_env["SPARK_CONF_DIR"] = str(CONF_DIR)
    # A JVM crash report goes to the temp folder, not into the user's working directory.
    options = [f"-XX:ErrorFile={cds.quoted(SPARK_LOG.parent / 'zchaos-jvm-crash-%p.log')}"]
    options += plan.java_options if plan is not None else cds.LOG_TO_STDERR
    builder = (
        SparkSession.builder.appName("zchaos-report")
        .master(os.environ.get("ZCHAOS_SPARK_MASTER", "local[*]"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.memory", driver_memory(events))
        # The driver's "default" options, so that extraJavaOptions stays the user's (and the tests').
        .config("spark.driver.defaultJavaOptions", " ".join(options))
        .config("spark.sql.shuffle.partitions", os.environ.get("ZCHAOS_SPARK_PARTITIONS", "8"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
        # The cached frames (the per-request and per-id aggregates) live for one report:
        # choosing and applying a compression per column cost more than the aggregation
        # itself (10M events, warm: per_request cached 8.1-8.9 s CPU compressed, 5.7-6.3 s
        # not, 3.5-4.1 s not cached at all); reading it back is faster too.
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # PySpark's DataFrame debugging records the Python call site of every column function
        # in the JVM (about 9 round trips through py4j each, and a walk of the Python stack):
        # over half of a report's calls into the JVM. It only names the Python line in a
        # Spark error's text. Off (a warm report of a CI run, bench/checker_scaling.py --reports):
        # 15.6k -> 7.3k calls, Python CPU 1.8 -> 1.0 s.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # Spark keeps 100 generated classes by default; a report compiles about 235, so a
        # session's next report compiled the same code again. Kept (bench/checker_scaling.py
        # --reports, six CI runs x 2 rounds alternated, 16:31-16:41 UTC, load 0.6-3.1): warm
        # per run 7.0 -> 6.2 s, each of the ten reports faster.
        .config("spark.sql.codegen.cache.maxEntries", "4000")
    )
    if driver_java_options(events):
        builder = builder.config("spark.driver.extraJavaOptions", driver_java_options(events))
    if plan is not None and plan.scratch is not None and not os.environ.get("SPARK_LOCAL_DIRS"):
        builder = builder.config("spark.local.dir", str(plan.scratch))
    with _environment(launch_env), _jvm_output_to(SPARK_LOG):
        return builder.getOrCreate()


def _jvm_process() -> subprocess.Popen | None:
    """The driver JVM (spark-submit's shell exec's into it, so it is PySpark's child itself)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return getattr(gateway, "proc", None) if gateway is not None else None


class _BridgeMessages(logging.Filter):
    """py4j logs the errors of its connections to the JVM on the root logger, with their
    tracebacks (``logging.exception``): a report interrupted during a call printed four on
    the terminal. They go to SPARK_LOG, beside the JVM's own; every other record passes."""

    PATH = f"{os.sep}py4j{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        if self.PATH not in record.pathname:
            return True
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        _log(f"py4j {record.levelname}: {text}")
        return False


def _bridge_to_log() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _BridgeMessages) for f in root.filters):
        root.addFilter(_BridgeMessages())


def _log(text: str) -> None:
    """A line of ours in SPARK_LOG, next to the JVM's own."""
    with contextlib.suppress(OSError), SPARK_LOG.open("a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} zchaos: {text}\n")


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ for the duration (PySpark hands os.environ to the JVM it starts)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: Below this many events a report's queries are interpreted, not compiled: whole-stage code
#: generation off and each expression evaluated as it is (CODEGEN_OFF). A short run's report is
#: a few dozen small queries over a few thousand rows; in a new JVM, compiling their generated
#: Java (Janino, itself still being compiled by the JIT) cost more than their rows took. Measured
#: 2026-12-02 on the shared 2-core machine (load 5-10, nice 19, alternated): a lone cold
#: ``zchaos report`` of a CI run of dwork (8.5k events), CPU of the whole process 36.0 / 33.2 s
#: against 35.5 / 38.7 s compiled (x0.93, bench/checker_scaling.py --reports ... --before); the
#: JVM's CPU from the session's start to the report's end, dwork 29.3 / 32.3 -> 22.6 / 25.1 s and
#: majordomo (24k events) 25.0 / 24.9 -> 22.8 / 21.6 s. A session's later reports find the
#: compiled classes cached (spark.sql.codegen.cache.maxEntries): six runs in one session cost
#: the same either way (86-87 s CPU), as on 2026-11-27 (bench/checker_scaling.py). Not measured
#: above 24k events: the bound stays well under the demo run's 76-114k, whose rows are many.
INTERPRETED_MAX_EVENTS = 50_000
#: The settings that interpret a query: no whole-stage code, and expressions evaluated rather
#: than compiled (Spark's ``factoryMode``; its default FALLBACK compiles and interprets only what
#: fails to compile).
CODEGEN_OFF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
CODEGEN_ON = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}

#: The settings fit_to changes (build_report puts them back after each report).
FITTED = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", *CODEGEN_OFF)


def fit_to(spark: SparkSession, events: int) -> None:
    """Per-query settings for a history of ``events`` events: adaptive execution only for a
    large one (ADAPTIVE_MIN_EVENTS); its queries interpreted, not compiled, for a short one
    (INTERPRETED_MAX_EVENTS); few shuffle partitions for a short run, where per-task
    overhead dominates, more for a long one, so that each task's aggregation fits its share
    of the heap (unless ZCHAOS_SPARK_PARTITIONS says)."""
    spark.conf.set("spark.sql.adaptive.enabled", str(events >= ADAPTIVE_MIN_EVENTS).lower())
    for key, value in (CODEGEN_OFF if events < INTERPRETED_MAX_EVENTS else CODEGEN_ON).items():
        spark.conf.set(key, value)
    if os.environ.get("ZCHAOS_SPARK_PARTITIONS"):
        return
    wanted = max(1, min(MAX_PARTITIONS, -(-events // EVENTS_PER_PARTITION)))
    spark.conf.set("spark.sql.shuffle.partitions", str(wanted))


@contextlib.contextmanager
def _jvm_output_to(path: Path) -> Iterator[None]:
    """Start the JVM with its stdout and stderr in ``path``: the launcher's own warnings
    (incubator modules, native libraries), the JVM's (class-data sharing) and a crash's
    summary are noise in the user's terminal, and log4j cannot mute them."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def stop_spark(say: Callable[[str], None] | None = None) -> None:
    """Stop the session and wait for the JVM behind it to exit (STOP_DEADLINE_S, then it is
    killed). Left to itself, PySpark's JVM exits only once it reads the end of its stdin,
    after the Python process has gone: ``zchaos report`` left it running about half a second
    past its own exit (and it then lingered as a zombie nobody waited for). If this JVM makes
    the class archive (the first report of an install), it is written now, about 15 s: ``say``
    tells the user why they wait."""
    global _session, _archive, _remote, _endpoint
    if _session is None:
        return
    if _remote is not None or _endpoint is not None:  # the server's session for this client ends
        session, _session, _remote, _endpoint = _session, None, None, None
        with contextlib.suppress(Exception):  # the server gone meanwhile: nothing to release
            session.stop()
        return
    from pyspark import SparkContext

    plan, _archive = _archive, None
    jvm = _jvm_process()
    session, _session = _session, None
    try:
        if plan is not None and say is not None:
            say(
                f"saving Spark's class archive, once (about 15 s on an idle machine), so that later "
                f"reports start faster ({cds.SWITCH}=0 turns it off)"
            )
        session.stop()
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
            SparkContext._gateway = None
            SparkContext._jvm = None
        if jvm is None:
            return
        if plan is not None:
            cds.finish(plan, jvm, _log)
        else:
            _end_jvm(jvm)
    except BaseException:
        if plan is not None:
            cds.abandon(plan, jvm)
        elif jvm is not None:
            _end_jvm(jvm, deadline_s=0)
        raise


#: How long a JVM asked to exit may take (its shutdown hooks delete its scratch folders).
STOP_DEADLINE_S = 30.0


def _end_jvm(jvm: subprocess.Popen, deadline_s: float = STOP_DEADLINE_S) -> None:
    """End the JVM: its stdin closed and SIGTERM (either runs its shutdown hooks, which delete
    its scratch folders), waited for up to ``deadline_s``, then SIGKILL."""
    with contextlib.suppress(OSError):
        if jvm.stdin is not None:
            jvm.stdin.close()
    if jvm.poll() is None:
        jvm.terminate()
    try:
        jvm.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        jvm.kill()
        jvm.wait()


def kill_spark() -> None:
    """At the end of an interrupted command: the JVM ended now, no archive written, and no
    clean stop of the session (a check may still be running in it, or the JVM still starting)."""
    global _session, _archive, _remote, _endpoint
    if "pyspark" not in sys.modules:
        return
    if (
        _remote is not None or _endpoint is not None
    ):  # no JVM of ours; the server interrupts what this client asked
        session, _session, _remote, _endpoint = _session, None, None, None
        with contextlib.suppress(Exception):
            session.interruptAll()  # type: ignore[union-attr]
        return
    plan, _archive = _archive, None
    jvm = _jvm_process()
    _session = None
    if plan is not None:
        cds.abandon(plan, jvm)
    elif jvm is not None:
        _end_jvm(jvm, deadline_s=10)


def running() -> bool:
    """Whether this process has a session running."""
    return _session is not None


def class_archive() -> Path | None:
    """This install's class archive (reports/cds.py), made yet or not; None when reports use
    none (ZCHAOS_SPARK_CDS=0, the user's own SPARK_CONF_DIR, no java found)."""
    if not cds.enabled() or os.environ.get("SPARK_CONF_DIR"):
        return None
    java = cds.java_binary()
    if java is None:
        return None
    from pyspark.find_spark_home import _find_spark_home

    return cds.archive_path(Path(_find_spark_home()), java)


def making_archive() -> bool:
    """Whether this process's JVM makes the class archive (written as its session stops)."""
    return _archive is not None


def save_class_archive(say: Callable[[str], None] | None = None) -> None:
    """If this process's JVM makes the class archive, stop the session and write it (stop_spark)."""
    if _archive is not None:
        stop_spark(say)


def _save_at_exit() -> None:
    # A script that never stopped its session (the benchmark, a test's child): the archive
    # is written before the process ends, or dropped on Ctrl-C (cds.finish cleans up).
    with contextlib.suppress(KeyboardInterrupt):
        save_class_archive()
