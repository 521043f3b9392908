"""Fixtures shared by the whole test suite."""

from tests.procs import procs  # noqa: F401 - a fixture: real processes, stopped after each test
