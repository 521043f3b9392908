"""The one SparkSession of a process, configured for zchaos: quiet, loopback, small shuffles.

The master is configuration (``ZCHAOS_SPARK_MASTER``, default ``local[*]``), so a large
history can go to a cluster; ``ZCHAOS_SPARK_DRIVER_MEMORY`` sizes the local driver. The
JVM's own output goes to ``SPARK_LOG``, not to the user's terminal.
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


def get_spark() -> SparkSession:
    """The process's SparkSession, started on first use (about 5 s cold)."""
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
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", os.environ.get("ZCHAOS_SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.sql.shuffle.partitions", os.environ.get("ZCHAOS_SPARK_PARTITIONS", "8"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
    )
    with _jvm_stderr_to(SPARK_LOG):
        _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session


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
