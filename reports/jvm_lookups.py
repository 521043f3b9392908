"""Java classes and static methods that PySpark looks up through py4j, remembered for the
life of the JVM instead of asked for again at every use.

PySpark resolves a Java name anew each time it builds a column or a sequence: every
``F.col``, ``F.sum`` ... asks the JVM for ``org.apache.spark.sql.functions`` and then for the
method, each a round trip; ``sc._jvm.functions`` and ``sc._jvm.PythonUtils`` (behind every
``select``, ``groupBy``, ``agg``) go through py4j's imports, trying names that do not exist
first, and the JVM searches its ~250 jars for each of those before it finds the real one.
Counted over two warm reports of CI runs (2026-11-27, a py4j send_command counter): 13,952
round trips, 4,234 of them such lookups (about 1.5 s spent in them, half in the failing
searches). A class's name resolves to the same class for the life of a JVM, and a static
method's handle (py4j's ``JavaMember``) is only a name: neither can go stale. A field's
value can change, so it is never remembered.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView


class _RememberingClass(JavaClass):
    """A Java class whose static methods and inner classes are looked up once."""

    def __getattr__(self, name: str) -> Any:
        member = super().__getattr__(name)
        if isinstance(member, JavaClass):
            member.__class__ = _RememberingClass
        if isinstance(member, (JavaMember, JavaClass)):
            self.__dict__[name] = member  # found as a plain attribute from now on
        return member


class _RememberingView(JVMView):
    """The JVM's view whose classes are looked up once (a package is not: it is only a
    step of a dotted name)."""

    def __getattr__(self, name: str) -> Any:
        found = super().__getattr__(name)
        if isinstance(found, JavaClass):
            found.__class__ = _RememberingClass
            self.__dict__[name] = found
        return found


def remember_lookups(view: JVMView | None) -> None:
    """Make ``view`` (PySpark's ``SparkContext._jvm``) remember what it resolves. A view of
    another kind (a later py4j's, or already remembering) is left as it is."""
    if view is not None and type(view) is JVMView:
        view.__class__ = _RememberingView
