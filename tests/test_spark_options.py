"""The driver JVM's options follow the history's size (reports/spark.py)."""

from __future__ import annotations

import subprocess

from reports import cds
from reports import spark as options


def test_a_short_history_gets_the_quick_compiler_and_the_serial_collector() -> None:
    assert options.driver_java_options(76_000).split() == [
        "-XX:TieredStopAtLevel=1",
        options.QUICK_CODE_CACHE,
        "-XX:+UseSerialGC",
    ]


def test_a_long_history_keeps_the_default_collector_and_inlines_less() -> None:
    assert "-XX:+UseSerialGC" not in options.driver_java_options(options.SERIAL_GC_EVENTS)
    assert options.driver_java_options(options.SERIAL_GC_EVENTS).split() == [
        "-XX:TieredStopAtLevel=1",
        options.QUICK_CODE_CACHE,
    ]
    assert options.driver_java_options(options.QUICK_JVM_EVENTS).split() == list(options.LESS_INLINING)
    assert options.driver_java_options(None) == ""  # size unknown: the JVM's own choices


def code_cache_bytes(options: str) -> int:
    java = cds.java_binary()
    assert java is not None
    flags = subprocess.run(
        [str(java), *options.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    [line] = [line for line in flags.splitlines() if line.split()[1:2] == ["ReservedCodeCacheSize"]]
    return int(line.split()[3])


def test_the_quick_compiler_keeps_the_code_cache_of_a_long_session() -> None:
    # A JVM started for a short history may check many more in the same process.
    default = code_cache_bytes("")
    assert code_cache_bytes(options.driver_java_options(76_000)) >= default
    assert code_cache_bytes("-XX:TieredStopAtLevel=1") < default  # what the option is for


def test_the_test_sessions_jvm_keeps_the_full_code_cache(spark) -> None:
    # Each test worker's JVM checks a few hundred histories (tests/conftest.py).
    factory = spark._jvm.java.lang.management.ManagementFactory
    reserved = sum(
        pool.getUsage().getMax() for pool in factory.getMemoryPoolMXBeans() if "Code" in pool.getName()
    )
    assert reserved >= code_cache_bytes("")


def compiled_stages(spark, events: int) -> int:
    """How many whole-stage compiled parts Spark plans for a grouping, after fit_to(events)."""
    from pyspark.sql import functions as F

    options.fit_to(spark, events)
    df = spark.range(1000).withColumn("k", F.col("id") % 7).groupBy("k").agg(F.sum("id"))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert sorted(r["k"] for r in df.collect()) == list(range(7))  # it runs either way
    return plan.count("*(")  # Spark marks each operator of a compiled stage "*(N)"


def test_a_short_historys_queries_are_interpreted_and_a_long_ones_compiled(spark) -> None:
    saved = {key: spark.conf.get(key) for key in options.FITTED}
    try:
        assert compiled_stages(spark, options.INTERPRETED_MAX_EVENTS - 1) == 0
        assert {k: spark.conf.get(k) for k in options.CODEGEN_OFF} == options.CODEGEN_OFF
        assert compiled_stages(spark, options.INTERPRETED_MAX_EVENTS) > 0
        assert {k: spark.conf.get(k) for k in options.CODEGEN_ON} == options.CODEGEN_ON
    finally:
        for key, value in saved.items():  # the test worker's session checks other histories next
            spark.conf.set(key, value)
