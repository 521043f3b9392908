"""The driver JVM's options follow the history's size (reports/spark.py)."""

from __future__ import annotations

from reports import spark


def test_a_short_history_gets_the_quick_compiler_and_the_serial_collector() -> None:
    assert spark.driver_java_options(76_000).split() == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def test_a_long_history_keeps_the_default_collector_and_inlines_less() -> None:
    assert "-XX:+UseSerialGC" not in spark.driver_java_options(spark.SERIAL_GC_EVENTS)
    assert spark.driver_java_options(spark.SERIAL_GC_EVENTS).split() == ["-XX:TieredStopAtLevel=1"]
    assert spark.driver_java_options(spark.QUICK_JVM_EVENTS).split() == list(spark.LESS_INLINING)
    assert spark.driver_java_options(None) == ""  # size unknown: the JVM's own choices
