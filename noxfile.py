"""nox sessions: tests, quick, lint, demo, chaos (the scenario suites), bench.

``tests`` is what CI runs: every test. ``quick`` leaves out the tests marked ``slow`` (whole
scenario runs, long integration tests) for the edit-test loop. A new test opts into the slow
tier with ``@pytest.mark.slow`` (or ``pytestmark = pytest.mark.slow`` for a whole module);
mark it when it runs a scenario through the runner or takes more than a few seconds.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite: unit, integration, end to end, and the CI scenarios."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def quick(session: nox.Session) -> None:
    """Every test not marked slow (measured: 479 tests, 234 s of CPU, 2/3 of it Spark)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff>=0.15,<0.18")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Run the demo chaos scenario and print where its report is."""
    session.install("-e", ".")
    session.run("zchaos", "run", "scenarios/paranoid-pirate-kill-worker.toml", *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """The CI scenario suite, then every longer scenario of scenarios/ (about an hour)."""
    session.install("-e", ".")
    session.run("zchaos", "suite", "scenarios/ci/")
    session.run("zchaos", "suite", "scenarios/", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmark under bench/ (figures, not pass/fail)."""
    session.install("-e", ".[bench]")
    for script in sorted(__import__("pathlib").Path("bench").glob("*.py")):
        session.run("python", str(script), *session.posargs)
