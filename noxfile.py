"""nox sessions: tests, quick, lint, demo, chaos (the soak tests and the scenario suites), bench.

``tests`` is what CI runs: every test but the soaks. ``quick``, for the edit-test loop, also
leaves out the tests marked ``slow`` (whole scenario runs, long integration tests) and those
that use the test run's SparkSession (marked ``spark`` by tests/conftest.py: a check on a tiny
history takes 1-4 s; leaving out those 118 took the quick tier from 442 to 235 CPU seconds);
``./dev quick -m "spark and not slow and not soak"`` runs the checker tests it leaves out. A new
test opts into the slow tier with ``@pytest.mark.slow`` (or ``pytestmark = pytest.mark.slow``
for a whole module); mark it when it runs a scenario through the runner or takes more than 3
seconds. ``@pytest.mark.soak`` is for a long test (a scenario run or more) whose feature a faster
test in ``tests`` also shows working (ten seeds where two show the summary, a Spark cluster
where local Spark gives the verdict; the comment above each names the faster test): ``chaos``
runs those, with the scenario suites.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"


#: Test processes per core (plus one), and the memory one takes at its peak (its JVM, the
#: scenario processes its tests start: a six-process run peaked at 9 GB used of 23).
WORKERS_PER_CORE = 2
WORKER_MEMORY_GB = 2


def _workers() -> int:
    """Twice the cores plus one (five on two cores), fewer where memory would not hold them.
    Most of a scenario test's time is its load's fixed duration, mostly waiting, so processes
    beyond the cores fill idle time. CI's command on this 2-core machine (2026-12-04, idle,
    2,007 tests): three 734-871 s wall (1.4 cores busy), four 663 s, five 575-662 s (1.74
    cores), six 625 s (1.82 cores); 2026-12-05, five, fresh clones: 698, 640 and 632 s, then
    with the class archive made first (``_class_archive``) 562, 618, 593 and 568 s. The load of
    five showed two faults of the harness, both mended: a line of faults applied link
    by link (availability's ``in_force``) and Locust's run time cut by its start-up
    (loadtests/locustfile.py)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(1, min(WORKERS_PER_CORE * cores + 1, int(memory_gb // WORKER_MEMORY_GB)))


def _parallel() -> list[str]:
    """The test processes (``_workers``). A module that shares a fixture keeps the tests that
    use it in one process, so that fixture (one scenario run for several assertions) runs
    once; other tests are spread one by one, the longest first (tests/conftest.py,
    ``pytest_xdist_make_scheduler``). ``ZCHAOS_TEST_WORKERS=N`` sets the number, 0 runs
    everything in this process."""
    workers = os.environ.get("ZCHAOS_TEST_WORKERS") or str(_workers())
    return ["-n", workers, "--dist", "loadscope"] if workers != "0" else []


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite: unit, integration, end to end, and the CI scenarios."""
    session.install("-e", ".[test]")
    _class_archive(session)
    # The slowest tests are listed at the end, so that CI's own output shows where the time goes.
    session.run("pytest", *_parallel(), "-m", "not soak", "--durations=30", *session.posargs)


def _class_archive(session: nox.Session) -> None:
    """Spark's class archive for this venv, made before the tests if there is none (a fresh
    clone, a CI job): otherwise the first test process's JVM made it at its exit, the end of
    the run, and every other JVM of the run (the other test processes', ~50 reports'
    ``zchaos`` processes) started without it, ~4.5 s more CPU each (a report of a CI run,
    whole process: 16 s CPU without, 11-12 s with). Making it takes about 40 s, once. Its
    JVM's output goes to the venv's folder, not the user's /tmp/zchaos-spark.log."""
    log = os.path.join(session.virtualenv.location, "spark-archive.log")
    session.run("zchaos", "spark", "archive", env={"ZCHAOS_SPARK_LOG": log})


@nox.session(python=PYTHON)
def quick(session: nox.Session) -> None:
    """Every test not marked slow and not using Spark (about two minutes)."""
    session.install("-e", ".[test]")
    session.run("pytest", *_parallel(), "-m", "not slow and not soak and not spark", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff lint and format check, then mypy over the packages (pyproject.toml [tool.mypy]);
    the project is installed so that mypy reads its dependencies' own types."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """Run the demo chaos scenario and print where its report is."""
    session.install("-e", ".")
    session.run("zchaos", "run", "scenarios/paranoid-pirate-kill-worker.toml", *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """The soak tests, the CI scenario suite, then every longer scenario of scenarios/ (about
    an hour and a half)."""
    session.install("-e", ".[test]")
    _class_archive(session)
    session.run("pytest", *_parallel(), "-m", "soak")
    session.run("zchaos", "suite", "scenarios/ci/")
    session.run("zchaos", "suite", "scenarios/", *session.posargs)


#: Scripts under bench/ that are tools, run only when named (``./dev bench compare_verdicts OLD NEW``).
BENCH_TOOLS = ("compare_verdicts",)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmark under bench/ (figures, not pass/fail); ``./dev bench NAME ARGS...`` runs
    only bench/NAME.py, with its own arguments (``./dev bench checker_scaling --help``)."""
    from pathlib import Path

    # compare_verdicts.py is a tool over stored runs, not a benchmark: only when named.
    every = [p for p in sorted(Path("bench").glob("*.py")) if p.stem not in BENCH_TOOLS]
    scripts, args = every, list(session.posargs)
    if args and not args[0].startswith("-"):
        named = Path("bench") / f"{args[0].removesuffix('.py')}.py"
        if not named.is_file():
            known = ", ".join(p.stem for p in sorted(Path("bench").glob("*.py")))
            session.error(f"no benchmark {named} (known: {known})")
        scripts, args = [named], args[1:]
    session.install("-e", ".[bench]")
    for script in scripts:
        session.run("python", str(script), *args)
