"""The history as a Spark DataFrame: the explicit schema (from contract.history) and readers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.history import FIELD_TYPES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def history_schema() -> StructType:
    """Every field of the history with its type; an event lacks most of them (null)."""
    from pyspark.sql import types as T

    spark_types = {
        "string": T.StringType(),
        "long": T.LongType(),
        "int": T.IntegerType(),
        "bool": T.BooleanType(),
        "double": T.DoubleType(),
    }
    return T.StructType([T.StructField(name, spark_types[t], True) for name, t in FIELD_TYPES.items()])


def parquet_is_current(parquet: Path, files: list[Path]) -> bool:
    """A compaction exists and no JSON-lines file changed after it was written."""
    if not parquet.is_dir():
        return parquet.exists()
    written = max((p.stat().st_mtime for p in parquet.iterdir()), default=0.0)
    return all(f.stat().st_mtime <= written for f in files)


def read_history(spark: SparkSession, history_dir: str | Path) -> DataFrame:
    """Every ``*.jsonl`` of a run's history folder, or its Parquet compaction while that is current."""
    history_dir = Path(history_dir)
    parquet = history_dir / "events.parquet"
    if parquet_is_current(parquet, sorted(history_dir.glob("*.jsonl"))):
        return spark.read.schema(history_schema()).parquet(str(parquet.absolute()))
    lines = str(history_dir.absolute() / "*.jsonl")  # absolute: a Connect server has its own cwd
    return spark.read.schema(history_schema()).option("mode", "PERMISSIVE").json(lines)


def events_frame(spark: SparkSession, events: Iterable[dict[str, Any]]) -> DataFrame:
    """A DataFrame of hand-made events (for unit tests of checkers).

    Handed to Spark as an Arrow table, which the JVM reads itself: made from Python rows,
    the frame was an RDD of pickled rows that a Python worker process unpickled again for
    every job that scanned it (a checker runs several).
    """
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = history_schema()
    arrow_schema = to_arrow_schema(schema)
    events = list(events)
    columns = [pa.array([e.get(f.name) for e in events], type=f.type) for f in arrow_schema]
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow_schema), schema)
