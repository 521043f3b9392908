"""The driver JVM's class-data-sharing archive: Spark's classes, parsed and verified once,
then mapped from a file by every later driver JVM instead of being read again out of ~280 jars.

A dynamic AppCDS archive (``-XX:ArchiveClassesAtExit``, Java 13+) is written by the JVM
itself when it exits, holding every class it loaded from the class path. The first report
on a machine (per pyspark and Java install) starts its JVM with that option and, at its
end, lets the JVM exit by closing its stdin (PySpark's gateway exits on EOF; a SIGTERM
would skip the dump), which takes ~15 s once; every later report starts its JVM with
``-XX:SharedArchiveFile`` (figures: reports/spark.py).

The archive lives in the user's cache (``$XDG_CACHE_HOME/zchaos/spark-cds``, else
``~/.cache/zchaos/spark-cds``), named by a digest of what makes it valid: the pyspark
version, its jars, the java binary and its VM library (another build makes another file).
``ZCHAOS_SPARK_CDS=0`` turns all of this off. Safety:

- one maker at a time: the maker holds an exclusive lock on ``<archive>.lock`` until the
  file is in place; a second process meanwhile runs without the archive. The JVM writes a
  temp file that is renamed into place only after the JVM exited with 0, so no reader ever
  sees half an archive, and a maker that died leaves only a temp file the next maker removes;
- a stale, corrupt or mismatched archive is refused by the JVM, which then starts without
  it (its warnings go to stderr, which is SPARK_LOG); after the start, the JVM's memory
  map shows whether the archive was used, and one that was not is deleted, so the next
  report makes a new one;
- the making JVM's temp folder and Spark local folder are a scratch folder beside the temp
  file, removed with it: an interrupted first report kills that JVM before its shutdown
  hooks could remove its block manager's files;
- the JVM refuses a non-empty directory on its class path when it dumps, and Spark puts
  SPARK_CONF_DIR there: the driver gets an empty conf directory of ours and log4j2's file
  by ``-Dlog4j2.configurationFile``. A user's own SPARK_CONF_DIR is kept, without the
  archive (the reason is logged).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Set to 0 (or false, no, off) to start the driver JVM without the archive.
SWITCH = "ZCHAOS_SPARK_CDS"
#: How long the JVM may take to exit and write the archive (~15 s on a quiet 2-core
#: machine) before it is killed and the half-written file dropped.
DUMP_DEADLINE_S = 240.0
#: Another build's archive not used for this long is deleted when a new one is made.
UNUSED_DAYS = 30
#: And only this many others are kept then, the most recently used: each venv (a fresh
#: clone's, a CI job's) makes its own, as its jars' paths are part of what the JVM checks.
KEPT_OTHERS = 3
#: Options every driver JVM gets when the archive is on: JVM warnings (CDS's among them)
#: go to stderr, which is SPARK_LOG, never to stdout, which is the user's terminal.
LOG_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def cache_dir() -> Path:
    """Where zchaos keeps what it makes once per machine: ``$XDG_CACHE_HOME/zchaos``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zchaos"


def java_binary() -> Path | None:
    """The java that Spark's launcher (bin/spark-class) runs: $JAVA_HOME/bin/java, else java on PATH."""
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        return candidate.resolve() if candidate.exists() else None
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def archive_path(spark_home: Path, java: Path) -> Path:
    """The archive for this pyspark and this Java: a new name whenever either changes."""
    from pyspark.version import __version__

    jars = spark_home / "jars"
    vm = java.parent.parent / "lib" / "server" / "libjvm.so"
    parts = [__version__, str(jars.resolve())]
    for path in (jars, java, vm):
        with contextlib.suppress(OSError):
            stat = path.stat()
            parts += [str(path), str(stat.st_mtime_ns), str(stat.st_size)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return cache_dir() / "spark-cds" / f"driver-{__version__}-{digest}.jsa"


@dataclass
class Plan:
    """What the driver JVM about to start does with the archive: use ``archive``, or make it
    (``making``: the temp file it writes at exit, under the lock held by ``lock_fd``)."""

    archive: Path
    conf_dir: Path
    java_options: list[str]
    making: Path | None = None
    lock_fd: int | None = None
    # The making JVM's temp and Spark local folder, removed with the temp file: a JVM
    # killed before its shutdown hooks ran (an interrupted first report) leaves its
    # block manager's files there, not in the machine's temp folder.
    scratch: Path | None = None
    inode: int | None = None  # of the archive used, to drop that file (not a newer one) if refused


def prepare(spark_home: Path, conf_file: Path, log: Callable[[str], None]) -> Plan | None:
    """The plan for a driver JVM about to start, or None (no archive: the reason is logged)."""
    plan = _plan(spark_home, conf_file, log)
    if plan is None or _use(plan):
        return plan
    archive, conf_dir, options = plan.archive, plan.conf_dir, plan.java_options
    if _unsupported(archive).exists():
        log(f"class-data sharing off: this Java could not make an archive ({_unsupported(archive)})")
        return None
    fd = _lock(archive)
    if fd is None:
        log(f"class-data sharing: another process is making {archive}; this report starts without it")
        return Plan(archive=archive, conf_dir=conf_dir, java_options=options)
    if _use(plan):  # made and put in place while we waited for the lock
        os.close(fd)
        return plan
    for stale in archive.parent.glob(archive.name + ".*.tmp"):  # a maker that died; we hold the lock
        stale.unlink(missing_ok=True)
    for stale in archive.parent.glob(archive.name + ".*.scratch"):
        shutil.rmtree(stale, ignore_errors=True)
    _prune(archive)
    plan.making = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    plan.lock_fd = fd
    plan.java_options.append(f"-XX:ArchiveClassesAtExit={quoted(plan.making)}")
    with contextlib.suppress(OSError):
        scratch = archive.with_name(f"{archive.name}.{os.getpid()}.scratch")
        scratch.mkdir(exist_ok=True)
        plan.scratch = scratch
        plan.java_options.append(f"-Djava.io.tmpdir={quoted(scratch)}")
    log(f"class-data sharing: this JVM makes {archive} when it exits")
    return plan


def use_only(spark_home: Path, conf_file: Path, log: Callable[[str], None]) -> Plan | None:
    """The plan for a JVM that maps the archive if it is made, and never makes it: the Spark
    Connect server, whose exit (days later, maybe killed) is no time for a dump, and which
    would hold the maker's lock all its life. None: no archive (yet), or none to be had."""
    plan = _plan(spark_home, conf_file, log)
    return plan if plan is not None and _use(plan) else None


def _plan(spark_home: Path, conf_file: Path, log: Callable[[str], None]) -> Plan | None:
    """A plan with the options every JVM of an archive gets, or None when there can be no
    archive (off, the user's own SPARK_CONF_DIR, no java, no cache folder: logged)."""
    if not enabled():
        return None
    if os.environ.get("SPARK_CONF_DIR"):
        log(
            f"class-data sharing off: SPARK_CONF_DIR is set ({os.environ['SPARK_CONF_DIR']}); the JVM "
            "cannot archive classes with a non-empty directory on its class path"
        )
        return None
    java = java_binary()
    if java is None:
        return None
    archive = archive_path(spark_home, java)
    conf_dir = archive.parent / "conf"  # empty, and the same path for the maker and the users
    try:
        conf_dir.mkdir(parents=True, exist_ok=True)
        if any(conf_dir.iterdir()):
            log(f"class-data sharing off: {conf_dir} must stay empty (the JVM refuses it on its class path)")
            return None
    except OSError as exc:
        log(f"class-data sharing off: cannot use {archive.parent}: {exc}")
        return None
    options = [f"-Dlog4j2.configurationFile={quoted(conf_file)}", *LOG_TO_STDERR]
    return Plan(archive=archive, conf_dir=conf_dir, java_options=options)


def _use(plan: Plan) -> bool:
    try:
        stat = plan.archive.stat()
    except OSError:
        return False
    plan.inode = stat.st_ino
    plan.java_options.append(f"-XX:SharedArchiveFile={quoted(plan.archive)}")
    with contextlib.suppress(OSError):  # its mtime says when it was last used (see _prune)
        os.utime(plan.archive)
    return True


def quoted(path: Path) -> str:
    """A path as one word of Spark's java options string (which splits on spaces, honours quotes)."""
    text = str(path)
    return (
        text
        if not any(c in text for c in " \t'\"\\")
        else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    )


def being_made(archive: Path) -> bool:
    """Whether another process holds the maker's lock on ``archive`` right now."""
    try:
        fd = os.open(archive.with_name(archive.name + ".lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: nobody ever started making it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # which releases the lock if it was ours
    return False


def _unsupported(archive: Path) -> Path:
    """The mark left when this Java could not start making the archive (see failed)."""
    return archive.with_name(archive.name + ".unsupported")


def _lock(archive: Path) -> int | None:
    """An exclusive lock on ``<archive>.lock`` (released when its fd closes, or the process dies)."""
    try:
        fd = os.open(archive.with_name(archive.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _prune(archive: Path) -> None:
    """Delete other builds' archives (each ~190 MB) unused for UNUSED_DAYS, and all but the
    KEPT_OTHERS most recently used, each with its lock file, unless a maker holds its lock."""
    old = time.time() - UNUSED_DAYS * 86400
    others: list[tuple[float, Path]] = []
    for other in archive.parent.glob("driver-*.jsa"):
        with contextlib.suppress(OSError):
            if other != archive:
                others.append((other.stat().st_mtime, other))
    others.sort(reverse=True)
    for rank, (used, other) in enumerate(others):
        if rank < KEPT_OTHERS and used >= old:
            continue
        fd = _lock(other)
        if fd is None:
            continue  # being made again right now
        try:
            other.unlink(missing_ok=True)
            other.with_name(other.name + ".lock").unlink(missing_ok=True)
        finally:
            os.close(fd)


def failed(plan: Plan, jvm: subprocess.Popen | None, log: Callable[[str], None]) -> Callable[[], None] | None:
    """The JVM did not start with ``plan``'s options: None if they are not to blame (nothing
    to start again without), else what to do once it starts without them. They are to blame
    only then: a truncated archive kills the JVM as it maps it (before its own checks could
    refuse it), so the archive is dropped; a Java without a base archive cannot make one, so
    it is not asked again (unsupported). A JVM that cannot start at all (a user's bad option)
    fails both ways and says nothing of the archive."""
    making, used = plan.making is not None, plan.inode is not None
    abandon(plan, jvm)
    if making:
        return lambda: unsupported(plan, log)
    if used:
        return lambda: drop(plan, log)
    return None


def unsupported(plan: Plan, log: Callable[[str], None]) -> None:
    """The JVM would not start making the archive, and started without (a Java with no base
    archive cannot make one): marked so, not to try again at every report."""
    with contextlib.suppress(OSError):
        _unsupported(plan.archive).touch()
    log(f"class-data sharing: this Java would not start making {plan.archive}; not tried again")


def drop(plan: Plan, log: Callable[[str], None]) -> None:
    """Delete the archive ``plan`` used (not a newer one put in its place since), because the
    JVM refused it or died mapping it: the next report makes a new one."""
    with contextlib.suppress(OSError):
        if plan.inode is not None and plan.archive.stat().st_ino == plan.inode:
            plan.archive.unlink()
            log(f"class-data sharing: the JVM could not use {plan.archive}; deleted, to be made again")
    plan.inode = None


def check_used(plan: Plan, jvm_pid: int, log: Callable[[str], None]) -> bool | None:
    """Whether the started JVM mapped the archive (None: cannot tell, no /proc). One it
    refused (stale, corrupt, another build's) is deleted so that the next report remakes it."""
    if plan.inode is None:
        return None
    try:
        maps = Path(f"/proc/{jvm_pid}/maps").read_text()
    except OSError:
        return None
    # By inode, not path: the map shows the real path, which differs if the cache is under a symlink.
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[4] == str(plan.inode) and fields[5].endswith(plan.archive.name):
            return True
    drop(plan, log)
    return False


def finish(plan: Plan, jvm: subprocess.Popen, log: Callable[[str], None]) -> bool:
    """End the JVM that makes the archive: close its stdin (it exits and writes the temp
    file), wait for it (DUMP_DEADLINE_S), and rename the file into place. On a timeout,
    a failure or Ctrl-C, the JVM is killed and the temp file deleted. True when the archive
    is in place. The lock is released in every case."""
    assert plan.making is not None
    started = time.monotonic()
    placed = False
    try:
        with contextlib.suppress(OSError):
            if jvm.stdin is not None:
                jvm.stdin.close()
        try:
            code = jvm.wait(timeout=DUMP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            log(f"class-data sharing: the JVM took over {DUMP_DEADLINE_S:.0f} s to write the archive; killed")
            code = None
        if code == 0 and plan.making.is_file() and plan.making.stat().st_size > 0:
            os.replace(plan.making, plan.archive)
            placed = True
            size, took = plan.archive.stat().st_size / 2**20, time.monotonic() - started
            log(f"class-data sharing: {plan.archive} written ({size:.0f} MB in {took:.1f} s)")
        elif code is not None:
            log(f"class-data sharing: the JVM exited with {code} and no archive")
    finally:
        abandon(plan, jvm)  # a timeout or Ctrl-C: nothing of ours outlives us
    return placed


def abandon(plan: Plan, jvm: subprocess.Popen | None) -> None:
    """Stop making the archive: kill the JVM if it still runs (a timeout, an interrupted
    report), drop the temp file and the JVM's scratch folder, release the lock."""
    if plan.making is None:
        return
    if jvm is not None and jvm.poll() is None:
        jvm.send_signal(signal.SIGKILL)
        jvm.wait()
    plan.making.unlink(missing_ok=True)
    if plan.scratch is not None:
        shutil.rmtree(plan.scratch, ignore_errors=True)
        plan.scratch = None
    if plan.lock_fd is not None:
        os.close(plan.lock_fd)
        plan.lock_fd = None
    plan.making = None
