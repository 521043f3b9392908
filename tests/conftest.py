"""Fixtures shared by the whole test run: the one SparkSession (about 5 s to start), and
real processes that are stopped after each test (``procs``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.procs import procs  # noqa: F401 - a fixture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from reports.spark import get_spark, stop_spark

    # Test histories are tiny: fewer shuffle partitions, fewer tasks per query.
    os.environ.setdefault("ZCHAOS_SPARK_PARTITIONS", "2")
    session = get_spark()
    yield session
    stop_spark()
