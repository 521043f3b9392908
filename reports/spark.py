"""The one SparkSession of a process, configured for zchaos: quiet, loopback, small shuffles.

The master is configuration (``ZCHAOS_SPARK_MASTER``, default ``local[*]``), so a large
history can go to a cluster; ``ZCHAOS_SPARK_DRIVER_MEMORY`` sizes the local driver.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONF_DIR = Path(__file__).resolve().parent / "conf"
_session: SparkSession | None = None


def get_spark() -> SparkSession:
    """The process's SparkSession, started on first use (about 5 s cold)."""
    global _session
    if _session is not None:
        return _session
    # Set before the JVM starts: the log4j2 file silences the banner that setLogLevel cannot.
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
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
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session


def stop_spark() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
