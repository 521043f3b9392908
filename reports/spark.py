"""The one SparkSession of a process, configured for zchaos: quiet, loopback, sized to the work.

The master is configuration (``ZCHAOS_SPARK_MASTER``, default ``local[*]``), so a large
history can go to a cluster (README: "Checking on a Spark cluster"). What the JVM needs is
chosen from the size of the history it will check (``get_spark(events=...)``): a short
run gets a small heap and a JVM tuned to start fast (its fixed cost is most of the
report), a long one a larger heap; ``ZCHAOS_SPARK_DRIVER_MEMORY`` overrides the heap.
``fit_to`` sets the per-query settings (shuffle partitions, adaptive execution) for each history. The JVM's
own output goes to ``SPARK_LOG``, not to the user's terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONF_DIR = Path(__file__).resolve().parent / "conf"
#: Where the JVM's own stderr goes (Spark errors included): ZCHAOS_SPARK_LOG, or the temp folder.
SPARK_LOG = Path(os.environ.get("ZCHAOS_SPARK_LOG") or Path(tempfile.gettempdir()) / "zchaos-spark.log")
_session: SparkSession | None = None
#: Below this many events the JVM runs only its quick compiler (C1): the report is a few
#: seconds of many small queries, where C2's compile time never pays back.
QUICK_JVM_EVENTS = 2_000_000
#: Shuffle partitions: one per this many events (a task's aggregation must fit its heap
#: share), at most MAX_PARTITIONS.
EVENTS_PER_PARTITION = 500_000
MAX_PARTITIONS = 200
#: Below this many events adaptive query execution is off: with the partitions already sized
#: to the history it has nothing to coalesce, and its re-planning of every shuffle stage (one
#: more Spark job each) cost a report of 100k events 15-30% more CPU (bench/checker_scaling.py).
ADAPTIVE_MIN_EVENTS = 2_000_000


def driver_memory(events: int | None) -> str:
    """The driver heap for a history of ``events`` events (local mode runs every task in it)."""
    if os.environ.get("ZCHAOS_SPARK_DRIVER_MEMORY"):
        return os.environ["ZCHAOS_SPARK_DRIVER_MEMORY"]
    if events is None or events < 1_000_000:
        return "1g"
    total_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{max(2, min(6, int(total_gb / 4), 2 + events // 5_000_000))}g"


def get_spark(events: int | None = None) -> SparkSession:
    """The process's SparkSession, started on first use (about 5 s cold) and sized for a
    history of about ``events`` events (None: unknown). A session already running is
    reused as it is: its heap is fixed for its life."""
    global _session
    if _session is not None:
        return _session
    # Set before the JVM starts: the log4j2 file silences the banner that setLogLevel cannot.
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", module="pyspark")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName("zchaos-report")
        .master(os.environ.get("ZCHAOS_SPARK_MASTER", "local[*]"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.memory", driver_memory(events))
        .config("spark.sql.shuffle.partitions", os.environ.get("ZCHAOS_SPARK_PARTITIONS", "8"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
    )
    if events is not None and events < QUICK_JVM_EVENTS:
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    with _jvm_stderr_to(SPARK_LOG):
        _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session


#: The settings fit_to changes (build_report puts them back after each report).
FITTED = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


def fit_to(spark: SparkSession, events: int) -> None:
    """Per-query settings for a history of ``events`` events: adaptive execution only for a
    large one (ADAPTIVE_MIN_EVENTS); few shuffle partitions for a short run, where per-task
    overhead dominates, more for a long one, so that each task's aggregation fits its share
    of the heap (unless ZCHAOS_SPARK_PARTITIONS says)."""
    spark.conf.set("spark.sql.adaptive.enabled", str(events >= ADAPTIVE_MIN_EVENTS).lower())
    if os.environ.get("ZCHAOS_SPARK_PARTITIONS"):
        return
    wanted = max(1, min(MAX_PARTITIONS, -(-events // EVENTS_PER_PARTITION)))
    spark.conf.set("spark.sql.shuffle.partitions", str(wanted))


@contextlib.contextmanager
def _jvm_stderr_to(path: Path) -> Iterator[None]:
    """Start the JVM with its stderr in ``path``: the launcher's own warnings (incubator
    modules, native libraries) are noise in the user's terminal, and log4j cannot mute them."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def stop_spark() -> None:
    """Stop the session and the JVM behind it (PySpark keeps the JVM until Python exits)."""
    global _session
    if _session is None:
        return
    from pyspark import SparkContext

    _session.stop()
    _session = None
    gateway = SparkContext._gateway
    if gateway is not None:
        jvm = getattr(gateway, "proc", None)
        gateway.shutdown()
        if jvm is not None:
            jvm.terminate()
            jvm.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None
