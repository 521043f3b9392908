"""A local Spark Connect server that outlives a command: ``zchaos spark start | stop | status``.

A report in a new process pays Spark's start (a JVM, its classes, the first queries'
compilation) every time; a warm server answers a new process's queries in about a second
(issue 38). ``zchaos spark start`` starts one, the one process of zchaos that outlives its
command because the user asked for it; while it is up, every report of the user's
(``zchaos report/run/suite/explore``, reports/spark.py ``get_spark``) is its client, and
falls back to an in-process session when it is not (or when what is recorded is stale: the
process gone, or another one under its pid, or its port closed).

The server is Spark's own ``SparkConnectServer`` (the ``pyspark`` package carries its jar),
started with ``bin/spark-submit`` in a session and process group of its own (``stop``
ends the group: the JVM and anything it started), bound to 127.0.0.1 on a free port, sized
for the machine (``server_memory``). It asks every client for a token (Spark 4's
``spark.connect.authenticate.token``, given in its environment so that it never shows in
``ps``): another local user can reach the port but cannot send it plans. The token, pid and
port are in ``server.json`` (mode 0600) in a folder of mode 0700 under the user's cache
folder (``ZCHAOS_SPARK_CONNECT_DIR`` moves it, the tests' own), beside the server's log and
its temp folder (``tmp``, removed when it stops).
The client reaches it as ``sc://localhost:PORT``: PySpark sends a token without TLS only to
the host named ``localhost`` (gRPC's local credentials), so not as ``127.0.0.1``.

``ZCHAOS_SPARK_CONNECT=0`` makes a process ignore the server (an in-process session), and a
set ``ZCHAOS_SPARK_MASTER`` (a cluster of the user's) wins over it as well.

Any other Spark Connect endpoint, a remote cluster's above all, is named by
``ZCHAOS_SPARK_REMOTE=sc://HOST:PORT`` (``--spark-remote``; it wins over the local server and
ZCHAOS_SPARK_MASTER): ``remote_session`` asks it one setting first (a short retry policy,
not PySpark's ten minutes), so an endpoint that is down, or not Spark Connect, is one line
of error (exit 2), never a fallback to local Spark the user did not ask for. Its executors
read the history by path: the run folder, when they see it at the same path, or a copy of
the history in a folder both sides see at the same path (``ZCHAOS_SPARK_HISTORY_DIR``,
``--spark-history-dir``; ``stage_history``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from contract.errors import SetupError
from reports import cds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DIR_ENV = "ZCHAOS_SPARK_CONNECT_DIR"
#: A Spark Connect endpoint of the user's (sc://HOST:PORT[/;param=value...]): every report goes there.
REMOTE_ENV = "ZCHAOS_SPARK_REMOTE"
#: A folder this machine and the endpoint's executors see at the same path: the history goes there.
HISTORY_DIR_ENV = "ZCHAOS_SPARK_HISTORY_DIR"
#: Spark Connect's own default port (a URL without one).
DEFAULT_PORT = 15002
#: How long the endpoint's port may take to accept a connection before it is called unreachable.
REACH_S = 10.0
SWITCH = "ZCHAOS_SPARK_CONNECT"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: How long the server may take to listen (a cold JVM on a loaded 2-core machine: 7-30 s).
START_DEADLINE_S = 180.0
#: How long it may take to end after SIGTERM (its shutdown hooks delete its scratch folders).
STOP_DEADLINE_S = 30.0
JAVA_OPTIONS_ENV = "ZCHAOS_SPARK_SERVER_JAVA_OPTIONS"
#: The session settings of reports/spark.py's in-process session that a client cannot set
#: per session (or should not have to): the server's defaults for every session.
SERVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.sql.codegen.cache.maxEntries": "4000",
}


def java_options() -> str:
    """The server JVM's own options: ZCHAOS_SPARK_SERVER_JAVA_OPTIONS, else the quick compiler
    alone, as an in-process report of a history under 2M events (reports/spark.py
    QUICK_COMPILER). A server's reports are many small queries too: warmed up by three
    synthetic reports, a server with C1 alone reported a CI run of paranoid-pirate-kills in
    2.8-3.1 s (whole client process) and six families' runs in 1.0-2.2 s each, median 1.6 s;
    with C2 beside it (the JVM's default) 3.1-3.5 s and 1.5-3.1 s, median 2.25 s; it
    started in 4.2-5.6 s with C1 alone, 5.0-6.2 s with C2 (2026-12-04, idle machine). For
    histories of tens of millions of events C2 pays back (reports/spark.py LESS_INLINING):
    set the variable ("" for the JVM's defaults)."""
    if JAVA_OPTIONS_ENV in os.environ:
        return os.environ[JAVA_OPTIONS_ENV]
    from reports.spark import QUICK_COMPILER

    return " ".join(QUICK_COMPILER)


def state_dir() -> Path:
    """Where the server's record and log live: ZCHAOS_SPARK_CONNECT_DIR, else
    ``$XDG_CACHE_HOME/zchaos/spark-connect`` (``~/.cache/...``)."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "zchaos" / "spark-connect"


def _record() -> Path:
    return state_dir() / "server.json"


def _served() -> Path:
    return state_dir() / "served"


def log_path() -> Path:
    return state_dir() / "server.log"


def _note(text: str) -> None:
    """A line of ours in the server's log, beside its JVM's own."""
    with contextlib.suppress(OSError), log_path().open("a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} zchaos: {text}\n")


@dataclass
class Server:
    """A server as recorded by ``start``."""

    pid: int
    port: int
    token: str
    started: float  # time.time() when it listened
    spark_version: str

    @property
    def address(self) -> str:
        return f"sc://localhost:{self.port}"


def wanted() -> bool:
    """Whether this process may use a running server (ZCHAOS_SPARK_CONNECT=0 and a set
    ZCHAOS_SPARK_MASTER or ZCHAOS_SPARK_REMOTE say no)."""
    return (
        os.environ.get(SWITCH, "1") != "0" and not os.environ.get("ZCHAOS_SPARK_MASTER") and remote() is None
    )


def recorded() -> Server | None:
    """The server ``server.json`` describes, alive or not; None when there is none (or the
    file is unreadable: then it is as good as none)."""
    try:
        data = json.loads(_record().read_text())
        return Server(**data)
    except (OSError, ValueError, TypeError):
        return None


def is_ours(pid: int) -> bool:
    """Whether ``pid`` is a Spark Connect server's JVM (not a process that took a dead one's pid)."""
    import psutil

    try:
        return SERVER_CLASS in psutil.Process(pid).cmdline()
    except (psutil.Error, OSError):
        return False


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def running() -> Server | None:
    """The recorded server if it is up (its JVM alive under its pid, its port open); a stale
    record (the process gone, or another under its pid) is removed. None otherwise."""
    server = recorded()
    if server is None:
        return None
    if not is_ours(server.pid):
        _forget()
        return None
    return server if _listening(server.port) else None


def _scratch() -> Path:
    """The server JVM's temp folder (its java.io.tmpdir): Spark's scratch space and the
    folder each client session gets for its ML cache, which a session that never ended
    (its client killed) left in /tmp after the server had stopped."""
    return state_dir() / "tmp"


def _forget() -> None:
    for path in (_record(), _served()):
        path.unlink(missing_ok=True)
    shutil.rmtree(_scratch(), ignore_errors=True)


def server_memory() -> str:
    """The server's heap: a quarter of the machine's memory, 2 to 8 GB (a report's driver
    gets 1-6 GB by the size of its history, reports/spark.py; the server holds several
    clients' sessions), or ZCHAOS_SPARK_DRIVER_MEMORY."""
    if os.environ.get("ZCHAOS_SPARK_DRIVER_MEMORY"):
        return os.environ["ZCHAOS_SPARK_DRIVER_MEMORY"]
    total_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{max(2, min(8, int(total_gb / 4)))}g"


def _free_port() -> int:
    # Picked here and released: the server binds it a few seconds later (a small race, which
    # the start reports as a server that exited; Spark's own launcher does the same).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(say: Callable[[str], None] = lambda _m: None, master: str | None = None) -> Server:
    """Start the server (or return the one running) and wait until it listens
    (START_DEADLINE_S). Raises SetupError naming the log when it does not come up.
    ``master``: its Spark master (default local mode on every core; the tests' twin of a
    cluster gives ``local-cluster[...]``, executors in JVMs of their own)."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.version import __version__

    from reports.spark import CONF_DIR

    server = running()
    if server is not None:
        say(f"a Spark Connect server is already running at {server.address} (pid {server.pid})")
        return server
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)  # the record holds the token
    _forget()
    spark_home = Path(_find_spark_home())
    port = _free_port()
    token = secrets.token_urlsafe(32)
    command = [
        str(spark_home / "bin" / "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--name",
        "zchaos Spark Connect server",
        "--master",
        master or f"local[{os.cpu_count() or 1}]",
        "--driver-memory",
        server_memory(),
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
    ]
    for key, value in SERVER_CONF.items():
        command += ["--conf", f"{key}={value}"]
    _scratch().mkdir(mode=0o700)
    # spark-submit splits the options at spaces: a folder whose path has one stays /tmp.
    scratch = [] if " " in str(_scratch()) else [f"-Djava.io.tmpdir={_scratch()}"]
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": os.environ.get("SPARK_CONF_DIR") or str(CONF_DIR),  # its quiet log4j2 file
        "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
    }
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
        env.pop(key, None)
    # The reports' class archive, if made (reports/cds.py): a start, a warm-up report of the
    # synthetic run and a CI run's report, stopped (2026-12-05, idle, two each): 32-36 s of
    # CPU without, 26-27 s with (to listening: 5 s, 2 s).
    archive = cds.use_only(spark_home, CONF_DIR / "log4j2.properties", _note)
    # A JVM crash report goes beside its log, not into the folder the user started it from.
    options = [
        *java_options().split(),
        *scratch,
        f"-XX:ErrorFile={cds.quoted(folder / 'zchaos-jvm-crash-%p.log')}",
    ]
    say(f"starting a Spark Connect server on 127.0.0.1:{port}, heap {server_memory()} (log: {log_path()})")
    started = time.monotonic()
    proc = _launch(command, options, env, archive)
    try:
        _until_listening(proc, port, started)
    except SetupError:
        if archive is None or proc.returncode is None:
            raise
        # The archive can keep the JVM from starting (a truncated one kills it as it maps
        # it): started again without, and the archive dropped (the next report makes it
        # again) only if that works.
        proc = _launch(command, options, env, None)
        _until_listening(proc, port, time.monotonic())
        cds.drop(archive, _note)
        archive = None
    if archive is not None:
        cds.check_used(archive, proc.pid, _note)  # one it refused is deleted, to be made again
    server = Server(pid=proc.pid, port=port, token=token, started=time.time(), spark_version=__version__)
    fd = os.open(_record(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(server), out)
    say(f"Spark Connect server up at {server.address} (pid {proc.pid}) in {time.monotonic() - started:.1f} s")
    return server


def _launch(
    command: list[str], options: list[str], env: dict[str, str], archive: cds.Plan | None
) -> subprocess.Popen:
    """The server's JVM, with the class archive's options if ``archive``. Its own session and
    process group: it outlives this command and Ctrl-C in the user's terminal, and stop()
    ends the group. spark-submit exec's into the JVM."""
    if archive is not None:
        options = [*options, *archive.java_options]
        # Its quiet log4j2 file by name, and the archive's own empty folder on the class path.
        env = {**env, "SPARK_CONF_DIR": str(archive.conf_dir)}
    if options:
        command = [*command, "--driver-java-options", " ".join(options)]
    with log_path().open("ab") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
        )


def _until_listening(proc: subprocess.Popen, port: int, started: float) -> None:
    """Wait until the server listens (START_DEADLINE_S from ``started``). A server that exits
    or does not listen in time is a SetupError naming its log; then, as on Ctrl-C, nothing of
    it is left."""
    try:
        while not _listening(port):
            if proc.poll() is not None:
                raise SetupError(
                    f"the Spark Connect server exited during its start (exit {proc.returncode}); see its log",
                    where=log_path(),
                )
            if time.monotonic() - started > START_DEADLINE_S:
                raise SetupError(
                    f"the Spark Connect server did not listen within {START_DEADLINE_S:.0f} s; see its log",
                    where=log_path(),
                )
            time.sleep(0.2)  # polling a port: nothing to wait on
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def _end_group(pgid: int, deadline_s: float = STOP_DEADLINE_S) -> None:
    """SIGTERM to the process group, SIGKILL to what is left of it after ``deadline_s``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + deadline_s
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)  # another's processes: nothing to wait on but their state
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (a zombie, waiting for whoever reaps
    the server's orphans, has ended)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
    return found


def stop(say: Callable[[str], None] = lambda _m: None) -> bool:
    """Stop the recorded server and everything in its process group; forget it. False when
    none was running (a stale record is forgotten all the same)."""
    server = recorded()
    if server is None or not is_ours(server.pid):
        _forget()
        say("no Spark Connect server is running")
        return False
    _end_group(server.pid)
    _forget()
    say(f"stopped the Spark Connect server at {server.address} (pid {server.pid})")
    return True


def status() -> list[str]:
    """What ``zchaos spark status`` says: the address, uptime, memory (RSS of the process
    tree) and reports served, or that none runs."""
    import psutil

    server = running()
    if server is None:
        return ["no Spark Connect server is running (start one: zchaos spark start)"]
    try:
        root = psutil.Process(server.pid)
        rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    except psutil.Error:
        return ["no Spark Connect server is running (it has just ended)"]
    uptime = int(time.time() - server.started)
    try:
        served = len(_served().read_text().splitlines())
    except OSError:
        served = 0
    return [
        f"Spark Connect server at {server.address} (pid {server.pid}, Spark {server.spark_version})",
        f"up {uptime // 3600}h{uptime // 60 % 60:02d}m{uptime % 60:02d}s, "
        f"memory {rss / 2**20:.0f} MB (RSS of its processes)",
        f"reports served: {served}",
        f"log: {log_path()}",
    ]


class Unreachable(Exception):
    """The recorded server is up but would not answer this client (its text says why)."""


#: What a Connect session sets in this process's environment (PySpark's client reads it
#: there). Never handed on to a run's processes: a subject given the token could send the
#: server plans (harness/topology.py ``base_env`` leaves these out).
CLIENT_ENV = ("SPARK_CONNECT_AUTHENTICATE_TOKEN", "SPARK_CONNECT_MODE_ENABLED", REMOTE_ENV)


def session(server: Server) -> SparkSession:
    """A Spark Connect session of ``server``'s (the token in this process's environment,
    where PySpark's client looks for it, so that it is in no URL), asked one setting first:
    a server that refuses it (another token) or fails raises Unreachable, and leaves this
    process as it was (no Connect mode, no token), free to start its own session."""
    from pyspark.sql import SparkSession

    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = server.token
    spark = None
    try:
        spark = SparkSession.builder.remote(server.address).getOrCreate()
        spark.conf.get("spark.sql.session.timeZone")
    except Exception as exc:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        for key in CLIENT_ENV:
            os.environ.pop(key, None)
        raise Unreachable(_reason(exc)) from None
    return spark


def count_report() -> None:
    """One more report served (``status`` counts them): a line appended, by whichever process."""
    with contextlib.suppress(OSError), _served().open("a") as served:
        served.write(f"{os.getpid()} {time.time():.0f}\n")


def remote() -> str | None:
    """The Spark Connect endpoint the user named (ZCHAOS_SPARK_REMOTE), if any."""
    return os.environ.get(REMOTE_ENV, "").strip() or None


def shown(url: str) -> str:
    """``url`` fit to print: a token in it (``;token=...``) masked."""
    return re.sub(r"(;token=)[^;]*", r"\1***", url)


def endpoint(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://HOST[:PORT][/;param=value...]``);
    SetupError naming the setting for anything else."""
    found = re.fullmatch(r"sc://(\[[0-9a-fA-F:.]+\]|[^/:;\[\]]+)(?::(\d+))?(?:/.*)?", url)
    if found is None:
        raise SetupError(
            f"{shown(url)!r} is not a Spark Connect address: give sc://HOST:PORT (e.g. sc://spark-head:15002)",
            where=REMOTE_ENV,
        )
    host = found.group(1).strip("[]")
    return host, int(found.group(2) or DEFAULT_PORT)


#: The settings of reports/spark.py's in-process session that a remote endpoint's session must
#: have too, or a check would judge otherwise (times as UTC, an overflow a null not an error);
#: set per session, as the endpoint's defaults are its owner's.
SESSION_CONF = {
    key: SERVER_CONF[key]
    for key in (
        "spark.sql.session.timeZone",
        "spark.sql.ansi.enabled",
        "spark.sql.inMemoryColumnarStorage.compressed",
    )
}


def reach(url: str) -> None:
    """SetupError, one line, when nothing accepts a connection at ``url``'s host and port
    within REACH_S (no such host, nothing listening, a firewall): said before a run starts,
    not after it."""
    host, port = endpoint(url)
    try:
        socket.create_connection((host, port), timeout=REACH_S).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise SetupError(
            f"cannot reach the Spark Connect endpoint {shown(url)} ({host} port {port}: {why})",
            where=REMOTE_ENV,
        ) from None


def remote_session(url: str) -> SparkSession:
    """A session of the Spark Connect endpoint ``url``, asked for its settings first. An
    endpoint that cannot be reached (no such host, nothing listening, not answering within
    REACH_S), refuses the client, or is not Spark Connect raises SetupError, one line that
    says which (exit 2): the user asked for that endpoint, so no local Spark instead."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    reach(url)
    os.environ.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)  # the local server's, not the endpoint's
    spark = None
    try:
        # PySpark warns on stderr as its retries run out: the error below says it in one line.
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        spark = SparkSession.builder.remote(url).getOrCreate()
        client = spark.client  # a Connect session's
        # A few quick retries while it is asked, not PySpark's default (up to 10 minutes).
        client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=2000)])
        for key, value in SESSION_CONF.items():
            spark.conf.set(key, value)
        client.set_retry_policies([DefaultPolicy()])
    except Exception as exc:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        raise SetupError(
            f"the Spark Connect endpoint {shown(url)} did not answer: {_reason(exc)}", where=REMOTE_ENV
        ) from None
    return spark


def _reason(exc: BaseException) -> str:
    """The one line that says why a Connect call failed (gRPC's own error is a multi-line repr;
    its "details" is the reason)."""
    text = str(exc)
    details = re.search(r'details = "([^"]*)"', text)
    why = details.group(1) if details else (text.strip().splitlines() or [type(exc).__name__])[0]
    return why[:200]


def history_dir() -> Path | None:
    """The folder the endpoint reads histories from (ZCHAOS_SPARK_HISTORY_DIR), if one is named."""
    named = os.environ.get(HISTORY_DIR_ENV, "").strip()
    return Path(named).expanduser().absolute() if named else None


def stage_history(history: Path, into: Path) -> Path:
    """The history folder ``history`` copied to a folder of its own under ``into`` (the shared
    folder the endpoint reads), and that copy's run folder returned: files the copy has
    already (same size and time) are not copied again, files gone from ``history`` go from the
    copy, and times are kept (read_events compares them to tell a current Parquet form).
    The copy's name is the run's with a digest of its path: two runs of one name never share it."""
    import hashlib
    import shutil

    run_root = history.parent.absolute()
    digest = hashlib.sha1(str(run_root).encode()).hexdigest()[:8]
    staged_run = into / f"{run_root.name}-{digest}"
    target = staged_run / history.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        wanted = {p.relative_to(history) for p in history.rglob("*")}
        for have in sorted(target.rglob("*"), reverse=True):  # files before their folders
            if have.relative_to(target) not in wanted:
                if have.is_dir() and not have.is_symlink():
                    shutil.rmtree(have)
                else:
                    have.unlink()
        for rel in sorted(wanted):
            src, dst = history / rel, target / rel
            if src.is_dir():
                dst.mkdir(exist_ok=True)
                continue
            mine, theirs = src.stat(), dst.stat() if dst.exists() else None
            if theirs is None or (theirs.st_size, theirs.st_mtime_ns) != (mine.st_size, mine.st_mtime_ns):
                shutil.copy2(src, dst)
        for rel in sorted(wanted, reverse=True):  # a folder's time after its files were written
            if (history / rel).is_dir():
                mine = (history / rel).stat()
                os.utime(target / rel, ns=(mine.st_atime_ns, mine.st_mtime_ns))
    except OSError as exc:
        raise SetupError(
            f"could not copy the history where the Spark Connect endpoint reads it: {exc.strerror or exc}",
            where=target,
        ) from None
    return staged_run
