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
