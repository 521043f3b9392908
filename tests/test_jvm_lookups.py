"""The session's py4j view remembers the classes and static methods it resolves
(reports/jvm_lookups.py): a column built again costs one round trip to the JVM, not three,
and a field's value is still read each time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from py4j import clientserver


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The commands this process sends to the JVM meanwhile (their first two lines)."""
    sent: list[str] = []
    original = clientserver.ClientServerConnection.send_command

    def counting(self, command: str) -> str:
        sent.append(" ".join(command.split("\n")[:2]))
        return original(self, command)

    clientserver.ClientServerConnection.send_command = counting
    try:
        yield sent
    finally:
        clientserver.ClientServerConnection.send_command = original


def test_a_column_built_again_asks_the_jvm_only_to_build_it(spark) -> None:
    from pyspark.sql import functions as F

    F.col("warm"), F.sum("warm"), F.lit(1)  # the first use of each looks them up
    with round_trips() as sent:
        for _ in range(20):
            F.col("x"), F.sum("x"), F.lit(2)
    lookups = [c for c in sent if c.startswith("r ")]  # py4j's reflection commands
    assert lookups == [], lookups[:5]
    # What is left: the calls that build the columns (and py4j freeing the JVM's side of
    # the columns Python let go of, and the password of a connection py4j opens when another
    # thread holds its only one: seen once, in a full run).
    assert {c[:2] for c in sent} <= {"c ", "m ", "A "}, sent[:10]
    assert sum(c.startswith("c ") for c in sent) >= 60


def test_the_same_class_comes_back_and_a_fields_value_is_read_each_time(spark) -> None:
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    assert jvm.PythonUtils is jvm.PythonUtils
    integer = getattr(jvm, "java.lang.Integer")
    assert integer.MAX_VALUE == 2**31 - 1
    assert "MAX_VALUE" not in vars(integer)  # a field is never remembered
    with round_trips() as sent:
        assert integer.MAX_VALUE == 2**31 - 1
    assert len(sent) == 1
