"""The driver JVM's class-data-sharing archive (reports/cds.py) with real JVMs, in child
processes that keep it in a temp cache (XDG_CACHE_HOME), never the user's: made once by the
first session and mapped by the next, one archive from two first sessions at once, nothing
left after Ctrl-C during the dump, a truncated archive that neither breaks a report nor
reaches the terminal, and ``zchaos spark archive``, which makes it up front. Each child is a
JVM start: they are few, and run in one sequence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from reports import cds
from tests.procs import running
from tests.test_report import make_run

ROOT = Path(__file__).resolve().parent.parent
# A session, one query, and what the child knows: whether the JVM mapped an archive, and
# whether it is the one making it (it does so at exit: the script never stops its session).
SESSION = """
import json
from reports import spark
session = spark.get_spark()
assert session.range(1000).selectExpr("sum(id)").first()[0] == 499500
jvm = spark._jvm_process()
maps = open(f"/proc/{jvm.pid}/maps").read()
making, local = spark._archive is not None, session.conf.get("spark.local.dir", None)
mapped = any("/spark-cds/driver-" in line and line.endswith(".jsa") for line in maps.splitlines())
print(json.dumps({"mapped": mapped, "making": making, "local": local}))
"""


def child_env(cache: Path, log: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "ZCHAOS_SPARK_LOG": str(log)}
    env.pop("ZCHAOS_SPARK_CDS", None)
    return env


def session(cache: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SESSION], cwd=ROOT, env=child_env(cache, log),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def outcome(child: subprocess.Popen) -> dict:
    out, err = child.communicate(timeout=400)
    assert child.returncode == 0, out + err
    assert err == "", err  # the JVM's output, the archive's warnings: all in SPARK_LOG
    return json.loads(out)


def files(cache: Path) -> list[str]:
    """The archive folder's files and folders, but its lock and its (empty) conf folder."""
    folder = cache / "zchaos" / "spark-cds"
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock") and p.name != "conf")


# Six JVM starts and a dump (~1 min quiet, 4 at load 11, up to 7 beside a test run): a soak.
# The archive's use in every report is shown by each test's own Spark session (conftest).
@pytest.mark.soak
@pytest.mark.timeout(900)
def test_the_archive_is_made_once_then_mapped_and_a_damaged_one_is_replaced(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache", tmp_path / "spark.log"
    run = make_run(tmp_path / "run")

    # A first report interrupted while the JVM writes the archive: no JVM, no file left.
    report = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "report", str(run.root)], cwd=ROOT,
        env=child_env(cache, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    said = []
    for line in report.stderr:
        said.append(line)
        if "saving Spark's class archive" in line:
            break
    assert report.poll() is None, "".join(said)
    jvms = psutil.Process(report.pid).children(recursive=True)
    assert jvms, "".join(said)
    os.killpg(report.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole foreground group
    rest = report.communicate(timeout=120)[1]
    assert report.returncode == 130, "".join(said) + rest
    assert not [p for p in jvms if running(p)]
    assert files(cache) == []

    # Two first sessions at once: one makes the archive (at its exit), the other runs without.
    first = [session(cache, log), session(cache, log)]
    results = [outcome(child) for child in first]
    assert sorted(r["making"] for r in results) == [False, True], results
    assert not any(r["mapped"] for r in results)
    # The maker's Spark files went to its scratch folder, removed once the archive was made.
    [scratch] = [r["local"] for r in results if r["making"]]
    assert scratch and scratch.startswith(str(cache / "zchaos" / "spark-cds")), results
    [archive] = files(cache)
    assert archive.endswith(".jsa") and (cache / "zchaos" / "spark-cds" / archive).stat().st_size > 10 * 2**20

    # The next session maps it, also through a symlink to the cache (the memory map shows
    # the real path), and keeps it.
    (tmp_path / "link").symlink_to(cache)
    again = outcome(session(tmp_path / "link", log))
    assert again["mapped"] and not again["making"], again
    assert files(cache) == [archive]

    # A JVM that cannot start at all (an option it does not know, as a user's own options
    # may hold) fails with and without the archive: that says nothing of it, it stays.
    env = {**child_env(cache, log), "JAVA_TOOL_OPTIONS": "-XX:+NoSuchZchaosOption"}
    bad = subprocess.run(
        [sys.executable, "-c", SESSION], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400
    )
    assert bad.returncode != 0, bad.stdout
    assert files(cache) == [archive]

    # Truncated (a full disk, a killed copy): the JVM dies mapping it; the report starts
    # again without it, gives its verdict, says nothing about it, and drops the file.
    path = cache / "zchaos" / "spark-cds" / archive
    path.chmod(0o644)  # the JVM writes it read-only
    os.truncate(path, path.stat().st_size // 3)
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "report", str(run.root)], cwd=ROOT,
        env=child_env(cache, log), capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # the run's known violation
    assert "FAILED: VIOLATED" in done.stdout
    said = done.stdout + done.stderr
    assert "fatal error" not in said and "SIGBUS" not in said and "WARNING" not in said, said
    assert "saving Spark's class archive" not in done.stderr  # it used one: it does not make one
    assert files(cache) == []
    assert "could not use" in log.read_text()
    assert not list(ROOT.glob("hs_err_pid*.log"))  # the crash's report went to the temp folder


def test_off_by_switch_or_with_the_users_own_conf_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home, conf = spark_home(), tmp_path / "log4j2.properties"
    lines: list[str] = []
    monkeypatch.setenv(cds.SWITCH, "0")
    assert cds.prepare(home, conf, lines.append) is None
    monkeypatch.setenv(cds.SWITCH, "1")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "mine"))
    assert cds.prepare(home, conf, lines.append) is None
    assert "SPARK_CONF_DIR is set" in lines[-1]


def test_one_maker_at_a_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv(cds.SWITCH, raising=False)
    home, conf = spark_home(), tmp_path / "log4j2.properties"
    maker = cds.prepare(home, conf, print)
    assert maker is not None and maker.making is not None
    assert f"-XX:ArchiveClassesAtExit={maker.making}" in maker.java_options
    # Meanwhile (another process: flock locks are per open file, so this one too is refused).
    other = cds.prepare(home, conf, print)
    assert other is not None and other.making is None
    assert not any("Archive" in o for o in other.java_options)
    cds.abandon(maker, None)
    again = cds.prepare(home, conf, print)
    assert again is not None and again.making is not None
    cds.abandon(again, None)
    assert not list(maker.archive.parent.glob("*.tmp"))


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


@pytest.mark.slow
def test_a_java_that_cannot_make_an_archive_still_reports_and_is_not_asked_again(tmp_path: Path) -> None:
    """A Java without its base archive (here: forced off) refuses to start making one."""
    java = cds.java_binary()
    assert java is not None
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text(f'#!/bin/sh\nexec "{java}" -Xshare:off "$@"\n')
    (home / "bin" / "java").chmod(0o755)
    cache, log = tmp_path / "cache", tmp_path / "spark.log"
    env = {**child_env(cache, log), "JAVA_HOME": str(home)}
    child = subprocess.Popen(
        [sys.executable, "-c", SESSION], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert outcome(child) == {"mapped": False, "making": False, "local": None}
    assert [name.rsplit(".", 1)[1] for name in files(cache)] == ["unsupported"]
    assert "would not start making" in log.read_text()


def test_other_installs_archives_are_pruned_to_the_most_recently_used(tmp_path: Path) -> None:
    folder = tmp_path / "spark-cds"
    folder.mkdir()
    now = time.time()

    def made(name: str, days_ago: float) -> Path:
        path = folder / f"driver-4.3.0-{name}.jsa"
        path.write_bytes(b"x")
        path.with_name(path.name + ".lock").touch()
        os.utime(path, (now - days_ago * 86400,) * 2)
        return path

    recent = [made(f"recent{i}", i) for i in range(cds.KEPT_OTHERS)]
    older, ancient, busy = made("older", 10), made("ancient", cds.UNUSED_DAYS + 1), made("busy", 20)
    held = cds._lock(busy)  # being made again by another process: left alone
    assert held is not None
    try:
        cds._prune(folder / "driver-4.3.0-new.jsa")
    finally:
        os.close(held)
    left = {p.name for p in folder.iterdir()}
    for path in [*recent, busy]:
        assert {path.name, path.name + ".lock"} <= left
    for path in (older, ancient):
        assert not {path.name, path.name + ".lock"} & left


def archive_command(cache: Path, log: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``zchaos spark archive`` in a child with the temp cache."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "spark", "archive"], cwd=ROOT,
        env={**child_env(cache, log), **env}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_spark_archive_starts_no_jvm_when_the_archive_is_there_being_made_or_off(
    tmp_path: Path, monkeypatch
) -> None:
    from reports.spark import class_archive

    cache, log = tmp_path / "cache", tmp_path / "spark.log"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv(cds.SWITCH, raising=False)
    archive = class_archive()
    assert archive is not None and archive.is_relative_to(cache)
    archive.parent.mkdir(parents=True)
    # Another process making it (two CI jobs of one machine): said, and not an error.
    held = cds._lock(archive)
    assert held is not None
    try:
        busy = archive_command(cache, log)
    finally:
        os.close(held)
    assert busy.returncode == 0 and "another process is making" in busy.stdout, busy.stdout + busy.stderr
    assert files(cache) == []
    archive.write_bytes(b"")  # it only has to be there
    there = archive_command(cache, log)
    assert there.returncode == 0 and f"made already: {archive}" in there.stdout, there.stdout + there.stderr
    off = archive_command(cache, log, **{cds.SWITCH: "0"})
    assert off.returncode == 0 and "reports use no class archive" in off.stdout, off.stdout + off.stderr
    # The user's own SPARK_CONF_DIR: no report could use one (it once started a JVM to learn so).
    mine = archive_command(cache, log, SPARK_CONF_DIR=str(tmp_path / "conf"))
    assert mine.returncode == 0 and "reports use no class archive" in mine.stdout, mine.stdout + mine.stderr
    # No session started: a JVM's start, or the archive's plan, is a line in the Spark log.
    said = there.stdout + off.stdout + busy.stdout + mine.stdout
    assert "once per install" not in said and not log.exists()


# A JVM start, a report and a dump, then a session (about a minute): a soak. The default
# tier's own run makes the archive with this very command before its tests, on a clone
# that has none (noxfile.py _class_archive);
# test_the_archive_is_made_once_then_mapped_and_a_damaged_one_is_replaced shows a report
# making and mapping one.
@pytest.mark.soak
@pytest.mark.timeout(900)
def test_spark_archive_makes_the_archive_that_the_next_session_maps(tmp_path: Path, monkeypatch) -> None:
    from reports.spark import class_archive

    cache, log, scratch = tmp_path / "cache", tmp_path / "spark.log", tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv(cds.SWITCH, raising=False)
    archive = class_archive()
    assert archive is not None
    made = archive_command(cache, log, TMPDIR=str(scratch))
    assert made.returncode == 0, made.stdout + made.stderr
    assert f"made {archive}" in made.stdout and files(cache) == [archive.name]
    assert archive.stat().st_size > 10 * 2**20
    assert list(scratch.iterdir()) == []  # its synthetic run is gone
    again = outcome(session(cache, log))
    assert again["mapped"] and not again["making"], again
