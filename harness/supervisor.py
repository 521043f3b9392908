"""The process supervisor: starts, watches, signals and stops every process of a run.

Each process runs in its own process group (so a signal reaches its children too), with
stdout and stderr in ``logs/<instance>.log`` (a role's read through a pseudo-terminal, each
line stamped with its arrival time: ``harness/output.py``), and is recorded in the history
(``proc_start``/``proc_exit``, with ``expected`` saying whether the harness caused the
exit). Processes are forked from one long-lived thread and ask the kernel to kill them
when that thread's process dies (PR_SET_PDEATHSIG), so even a runner killed with SIGKILL
leaves no broker behind; ``stop_all`` is the normal way out.

A role's command may detach what it starts (``setsid prog &``, ``nohup prog &``, a
double-fork daemon, a parent that forks and exits). The supervisor's process is the child
subreaper (PR_SET_CHILD_SUBREAPER), so such a process is re-parented here rather than to
init, and every process a role's command starts carries ``ZCHAOS_OWNER`` in its
environment (naming this supervisor and the incarnation), so it is told apart from the
runner's other children (Locust, the fault proxy, the history's follower). Signals and
the stop reach every process of an instance; when the command exits while a process it
started keeps running, that process is followed as the instance (its log and the terminal
say so). A process that replaces its environment and leaves the command's tree cannot be
attributed; a daemon re-parented here has no PR_SET_PDEATHSIG, so a runner killed with
SIGKILL leaves it: ``remove_leftovers`` ends it at the next run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from chaos.host_marks import runner_alive, start_ticks
from chaos.hosts import enter
from contract.errors import SetupError
from contract.history import HistoryWriter, mark_stopped
from contract.logstamp import stamp, unstamped
from contract.ports import describe_pid, listening_pids, listens, port_accepts
from harness.output import Captured, LineEvents, OutputReader, output_pair

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: How long an instance whose command ended is still looked for among this process's
#: descendants before it is called ended (a daemon's last fork in transit).
FOLLOW_SETTLE_S = 0.5
#: In the environment of every process a role's command starts (inherited by what that
#: starts in turn): ``<supervisor>/<instance>/<incarnation>``, the process's owner.
ENV_OWNER = "ZCHAOS_OWNER"
#: How long the supervisor keeps killing an instance's processes that appear while it does
#: (a fork racing the SIGKILL), in seconds.
KILL_LIMIT_S = 5.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _die_in_ns(ns: str) -> None:  # runs in the child between fork and exec
    _die_with_parent()
    enter(ns)  # its network only: its group, session and death signal stay as for any process


def become_subreaper() -> bool:
    """Make this process the child subreaper (Linux): an orphaned descendant is re-parented
    here rather than to init, so a daemonizing role stays among this process's descendants.
    False where the kernel does not offer it."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _returncode(info: os.waitid_result) -> int:
    """A waitid result as Popen's returncode: the exit code, or minus the signal."""
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _children() -> list[int]:
    """This process's child pids (every thread's, as the kernel lists them)."""
    pids: list[int] = []
    for path in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError):
            pids += map(int, path.read_text().split())
    return pids


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, session) of ``pid`` from /proc; None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[2]), int(fields[3])


def log_tail(path: Path, lines: int = 10) -> str:
    """The last ``lines`` lines of a log file ('' if there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 8192))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _taken(port: int | None, foreign: set[int]) -> str:
    """What to tell of the others listening on ``port`` (found before, or now that ours is
    gone or not listening: any listener is someone else)."""
    if port is None:
        return ""
    foreign = foreign or listening_pids(port) or set()
    if not foreign:
        return ""
    return (
        f" (port {port} was taken, between zchaos choosing it and the bind, by another "
        f"program: {'; '.join(map(describe_pid, sorted(foreign)))})"
    )


def _silence(managed: Managed) -> str:
    """The likely cause when a process waited for by a line wrote nothing at all."""
    spec = managed.spec
    if spec.ready_line is None or spec.log.stat().st_size > managed.log_offset:
        return ""
    if managed.output is not None and managed.output.tty:
        return (
            "; it wrote nothing at all: if it prints that line, it holds it in a buffer of its own "
            "(flush after printing it, e.g. fflush(stdout) in C), or wait for a port it binds instead "
            '(ready = "port:ENDPOINT")'
        )
    return (
        "; it wrote nothing at all: if it prints that line, its output is likely buffered (C's stdio "
        "buffers a file or pipe fully): flush after printing it, or start it line-buffered "
        f'(command = ["stdbuf", "-oL", "{spec.argv[0]}", ...]), or wait for a port it binds '
        '(ready = "port:ENDPOINT")'
    )


class _NewOutput:
    """The lines a process writes to its log from ``offset`` on, read as they come."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path = path
        self.offset = offset
        self.partial = b""

    def lines(self) -> list[str]:
        """The lines written since the last call, and the unfinished last one so far."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        *done, self.partial = (self.partial + data).split(b"\n")
        return [unstamped(line.decode(errors="replace")) for line in (*done, self.partial)]


@dataclass
class ProcSpec:
    """How to start one process: its instance name, role, argv, readiness and log."""

    instance: str
    role: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    ready_port: int | None = None  # ready when this port accepts connections
    ready_line: str | None = None  # ready when this regex matches a line of the log
    stop_signal: int = signal.SIGTERM
    #: When the command exits leaving a process it started running, follow that process as
    #: the instance (False: the instance ended; what it left is stopped with the run).
    follow: bool = True
    #: every endpoint it binds (name -> port): ready only once it listens on each, whatever
    #: its rule (a queue whose second bind failed is not ready); with neither a ready port
    #: nor a line, nothing is waited for
    binds: dict[str, int] = field(default_factory=dict)
    #: its output read by the supervisor through a pseudo-terminal (line-buffered by the
    #: program's stdio), each line stamped (harness/output.py); else straight into the log
    captured: bool = False
    #: history events made from its captured output lines: (kind, regex) pairs
    #: (``[roles.X.events]``), written to ``events_history`` as each line arrives
    events: tuple[tuple[str, str], ...] = ()
    events_history: Path | None = None
    #: the network namespace it runs in (``network = "hosts"``, chaos/hosts.py; None: the
    #: runner's own), and the address its ports are reached at from the runner for readiness
    netns: str | None = None
    address: str = "127.0.0.1"


@dataclass
class Managed:
    """One incarnation of an instance: the command's process and what it started."""

    spec: ProcSpec
    popen: subprocess.Popen
    tag: str = ""  # its ENV_OWNER
    expected_exit: bool = False
    frozen: bool = False
    recorded: bool = False
    log_offset: int = 0  # where this incarnation's output begins in the (appended) log
    #: The process the command started and left running when it exited, followed as the
    #: instance from then on (None: the command's own process is the instance).
    followed: psutil.Process | None = None
    #: The followed process's exit (Popen's convention); None while it runs or when unknown.
    followed_code: int | None = None
    #: When its command (or the process followed) was first seen ended with no process of
    #: its own in sight: a daemon's last fork may still be in transit (see FOLLOW_SETTLE_S).
    unseen_since: float | None = None
    output: Captured | None = None  # its output on the way to the log, when captured

    @property
    def pid(self) -> int:
        return self.followed.pid if self.followed is not None else self.popen.pid

    @property
    def returncode(self) -> int | None:
        """How the instance ended (Popen's convention): its command's, or the followed process's."""
        return self.popen.returncode if self.followed is None else self.followed_code


class Supervisor:
    """Owns the processes of one run."""

    def __init__(self, history: HistoryWriter, base_env: dict[str, str]) -> None:
        self.history = history
        self.base_env = base_env
        self.current: dict[str, Managed] = {}  # instance -> its live (or last) process
        self.every: list[Managed] = []
        self._lock = threading.RLock()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="zchaos-spawn")
        self._output = OutputReader()
        self._stop_watch = threading.Event()
        self.on_unexpected_exit: Callable[[Managed], None] | None = None
        self.notify: Callable[[str], None] | None = None  # tells the terminal of a followed process
        self.subreaper = become_subreaper()
        # This supervisor's ENV_OWNER prefix: its process (pid and start, remove_leftovers), then its own.
        self._prefix = f"{_runner_id(os.getpid())}.{uuid.uuid4().hex[:8]}"
        self._incarnations = 0
        self._owners: dict[tuple[int, float], str] = {}  # (pid, start) -> its ENV_OWNER
        self._leaders: set[int] = set()  # the commands' pids: Popen reaps those
        self._groups: set[int] = set()  # sessions and groups seen among the instances' processes
        self._codes: dict[int, int] = {}  # adopted pid -> how it ended, reaped here
        # Last: the reaper reads every attribute above (it once started before _leaders was set,
        # and died with an AttributeError when it woke first).
        self._watcher = threading.Thread(target=self._watch, name="zchaos-reaper", daemon=True)
        self._watcher.start()

    # -- starting -----------------------------------------------------------------

    def _popen(self, spec: ProcSpec, tag: str) -> tuple[subprocess.Popen, int, Captured | None]:
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("ab") as log:
            # A restarted instance appends to the log of its previous incarnations: readiness
            # must only read from here on.
            offset = log.tell()
            if not spec.captured:
                return self._spawn(spec, tag, log), offset, None
        reader, writer, tty = output_pair()
        try:
            popen = self._spawn(spec, tag, writer)
        except BaseException:
            os.close(reader)
            raise
        finally:
            os.close(writer)  # the child has it: the reader sees the end when the child's copies close
        events = None
        if spec.events and spec.events_history is not None:
            patterns = [(kind, re.compile(text)) for kind, text in spec.events]
            try:
                recorder = HistoryWriter(spec.events_history, spec.instance)
                events = LineEvents(patterns, recorder, spec.instance)
            except OSError as exc:  # a history folder that takes no new file (a full disk):
                mark_stopped(spec.events_history, exc)  # the gap is known, as any writer's
        return popen, offset, self._output.add(reader, spec.log, tty, events)

    def _spawn(self, spec: ProcSpec, tag: str, output: Any) -> subprocess.Popen:
        return subprocess.Popen(
            spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**self.base_env, **spec.env, ENV_OWNER: tag},
            start_new_session=True,
            preexec_fn=_die_with_parent if spec.netns is None else partial(_die_in_ns, spec.netns),
        )

    def start(self, spec: ProcSpec, *, ready_timeout: float = 30.0) -> Managed:
        """Start ``spec`` and wait until it is ready; SetupError if it dies or never is."""
        managed = self._launch(spec)
        self._wait_ready(managed, ready_timeout)
        return managed

    def start_together(self, specs: Sequence[ProcSpec], gap_s: float, *, ready_timeout: float = 30.0) -> None:
        """Start each of ``specs`` ``gap_s`` after the one before it started (0: back to back),
        not waiting for one to be ready before the next, then wait until each is ready (each
        wait from the last start). A scenario's ``[topology] start`` of a role."""
        launched: list[Managed] = []
        started = 0.0
        for spec in specs:
            # From the one before it was started (its proc_start written), so no two are closer.
            if launched and (left := started + gap_s - time.monotonic()) > 0:
                time.sleep(left)  # the plan's own spacing, not a wait for a condition (Ctrl-C ends it)
            launched.append(self._launch(spec))
            started = time.monotonic()
        for managed in launched:
            self._wait_ready(managed, ready_timeout)

    def _launch(self, spec: ProcSpec) -> Managed:
        with self._lock:
            self._incarnations += 1
            tag = f"{self._prefix}/{spec.instance}/{self._incarnations}"
        try:
            popen, offset, output = self._spawner.submit(self._popen, spec, tag).result()
        except (OSError, subprocess.SubprocessError) as exc:
            raise SetupError(f"cannot start {spec.instance} ({spec.argv[0]}): {exc}") from None
        managed = Managed(spec, popen, tag=tag, log_offset=offset, output=output)
        with self._lock:
            self._leaders.add(popen.pid)
            self._groups.add(popen.pid)  # its own session and group
            self.current[spec.instance] = managed
            self.every.append(managed)
        self.history.emit("proc_start", role=spec.role, instance=spec.instance, pid=popen.pid)
        return managed

    def _wait_ready(self, managed: Managed, timeout: float) -> None:
        spec = managed.spec
        if spec.ready_port is None and spec.ready_line is None:
            return
        pattern = re.compile(spec.ready_line) if spec.ready_line else None
        output = _NewOutput(spec.log, managed.log_offset)
        deadline = time.monotonic() + timeout
        foreign: set[int] = set()  # who else listens on the ready port
        rule_met = False
        unbound: list[str] = []
        while time.monotonic() < deadline:
            with self._lock:
                running = self._running(managed)
            if not running:
                if managed.output is not None:  # its last words, read to the end
                    managed.output.closed.wait(1.0)
                raise SetupError(
                    f"{spec.instance} exited with code {managed.returncode} before it was ready"
                    f"{_taken(spec.ready_port, foreign)}; last lines of {spec.log}:\n{log_tail(spec.log)}"
                )
            port = spec.ready_port
            if port is not None and self._listens(managed, port, foreign):
                rule_met = True
            if pattern is not None and any(map(pattern.search, output.lines())):
                rule_met = True
            if rule_met:
                unbound = [
                    f"{name} (port {p})"
                    for name, p in spec.binds.items()
                    if not self._listens(managed, p, foreign)
                ]
                if not unbound:
                    return
            time.sleep(0.05)  # polling a condition with a deadline, not synchronising on time
        what = (
            f"port {spec.ready_port} to accept" if spec.ready_port else f"a line matching {spec.ready_line!r}"
        )
        if unbound:
            what += (
                f", which came, and for a listener of its own on every endpoint it binds: "
                f"{', '.join(unbound)} had none (a bind that failed?)"
            )
        raise SetupError(
            f"{spec.instance} was not ready after {timeout:.0f} s (waited for {what})"
            f"{_taken(spec.ready_port, foreign)}{_silence(managed)}; "
            f"last lines of {spec.log}:\n{log_tail(spec.log)}"
        )

    def _listens(self, managed: Managed, port: int, foreign: set[int]) -> bool:
        """Whether ``port`` accepts and the instance's own processes are who listens there."""
        if not port_accepts(port, managed.spec.address):
            return False
        # A daemon the command started listens from outside its tree: still the subject.
        with self._lock:
            also = [p.pid for p in self._members(managed)] if managed.followed is not None else []
        return listens(port, managed.popen.pid, foreign, also=also)

    # -- the processes of an instance ------------------------------------------------

    def _owner(self, proc: psutil.Process) -> str:
        """The ENV_OWNER of ``proc`` ('' if none, or it cannot be read), read once per process."""
        key = (proc.pid, proc.create_time())
        if key not in self._owners:
            try:
                env = proc.environ()
            except (psutil.Error, OSError):
                return ""
            if not env:  # read in the middle of an exec: not known yet, asked again next time
                return ""
            self._owners[key] = env.get(ENV_OWNER, "")
        return self._owners[key]

    def _members(self, managed: Managed) -> list[psutil.Process]:
        """The live processes of ``managed``: its command's process while it runs, and what
        it started, in its tree or re-parented to this process; oldest first. The command's
        pid counts only until Popen has reaped it: then its number may be another process's
        (a daemon of another instance, whose stop or fault this would reach)."""
        leader = managed.popen.pid if managed.popen.returncode is None else None
        return self._processes(lambda owner: owner == managed.tag, leader)

    def _processes(self, owned: Callable[[str], bool], leader: int | None = None) -> list[psutil.Process]:
        """The live descendants of this process whose ENV_OWNER is ``owned`` (or that are
        ``leader``), and their descendants; oldest first."""
        try:
            tree = psutil.Process().children(recursive=True)
        except psutil.Error:
            return []
        found: dict[int, psutil.Process] = {}
        parents: dict[int, int] = {}
        for proc in tree:
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                parents[proc.pid] = proc.ppid()
                if proc.pid == leader or owned(self._owner(proc)):
                    found[proc.pid] = proc
            except psutil.Error:
                continue
        grown = True
        while grown:  # descendants that replaced their environment are still its own
            grown = False
            for proc in tree:
                if proc.pid not in found and parents.get(proc.pid) in found:
                    found[proc.pid] = proc
                    grown = True
        members = []
        for proc in found.values():
            with contextlib.suppress(psutil.Error):
                self._groups.update((os.getsid(proc.pid), os.getpgid(proc.pid)))
                members.append((proc.create_time(), proc.pid, proc))
        return [proc for *_, proc in sorted(members)]

    def _code_of(self, proc: psutil.Process) -> tuple[bool, int | None]:
        """(ended, how) of a followed process: reaped here when it is this process's child."""
        if proc.pid in self._codes:
            return True, self._codes.pop(proc.pid)
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG)
        except ChildProcessError:  # not a child of ours: alive while psutil says so
            try:
                return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, None
            except psutil.Error:
                return True, None
        return (False, None) if info is None else (True, _returncode(info))

    def _running(self, managed: Managed) -> bool:
        """Whether the instance still runs; when its command has exited leaving a process it
        started running, that process is followed as the instance (said in its log). Call
        with the lock held."""
        if managed.recorded:
            return False
        if managed.followed is None:
            if managed.popen.poll() is None:
                return True
            if not managed.spec.follow:
                return False
            ended = f"exited with {_how(managed.popen.returncode)}"
            code = managed.popen.returncode
        else:
            done, code = self._code_of(managed.followed)
            if not done:
                return True
            managed.followed_code = code
            ended = f"(pid {managed.followed.pid}) ended with {_how(code)}"
        members = self._members(managed)
        if not members:
            # A double-fork daemon's middle process may have gone while the server it forked
            # is still between fork and exec, its environment unreadable for that moment:
            # nothing of the instance in sight for a few milliseconds. Calling it ended then
            # failed a correct daemon's start ("exited with code 0 before it was ready").
            # Only a clean exit hands on to a fork (a killed process's are not in transit), and
            # an instance asked to stop is not looked for.
            if code != 0 or managed.expected_exit:
                return False
            now = time.monotonic()
            if managed.unseen_since is None:
                managed.unseen_since = now
            return now - managed.unseen_since < FOLLOW_SETTLE_S
        managed.unseen_since = None
        managed.followed, managed.followed_code = members[0], None
        self._follow_note(managed, ended)
        return True

    def _follow_note(self, managed: Managed, ended: str) -> None:
        proc = managed.followed
        assert proc is not None
        try:
            what = " ".join(proc.cmdline())[:200]
        except psutil.Error:
            what = "?"
        instance = managed.spec.instance
        text = (
            f"{instance}'s command {ended}, but a process it started keeps running: pid {proc.pid} "
            f"({what}) is followed as {instance} from now on (faults and the stop reach it)"
        )
        with contextlib.suppress(OSError), managed.spec.log.open("a") as log:
            mark = stamp(time.time_ns()).decode() if managed.spec.captured else ""
            log.write(f"{mark}zchaos: {text}\n")
        if self.notify is not None:
            self.notify(text)

    def _send(self, managed: Managed, sig: int) -> None:
        """``sig`` to every process of ``managed``: its command's group and each process it
        started. A SIGKILL is repeated until none is left (a fork may race it)."""
        deadline = time.monotonic() + KILL_LIMIT_S
        while True:
            if managed.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(managed.popen.pid, sig)
            members = self._members(managed)
            for proc in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, sig)
            if sig != signal.SIGKILL or not members or time.monotonic() > deadline:
                return
            self._wait_gone(managed, time.monotonic() + 0.05)

    def _wait_gone(self, managed: Managed, deadline: float) -> bool:
        """Wait until no process of ``managed`` runs (its command reaped); False at ``deadline``."""
        while True:
            self._reap_adopted()
            if managed.popen.poll() is not None and not self._members(managed):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)  # polling a condition with a deadline

    # -- signalling -----------------------------------------------------------------

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        """Send ``sig`` to every process of ``instance``; its pid, or None if it is gone."""
        with self._lock:
            managed = self.current.get(instance)
            if managed is None or not self._running(managed):
                return None
            if expected_exit:
                managed.expected_exit = True
            if sig == signal.SIGSTOP:
                managed.frozen = True
            elif sig == signal.SIGCONT:
                managed.frozen = False
            pid = managed.pid
            if sig != 0:
                self._send(managed, sig)
            return pid

    def running(self, instance: str) -> int | None:
        """The pid of ``instance`` if it runs now (a frozen process runs), else None."""
        with self._lock:
            managed = self.current.get(instance)
            return managed.pid if managed is not None and self._running(managed) else None

    def stop(self, instance: str, timeout: float = 5.0) -> None:
        """Stop ``instance`` (its stop signal, then SIGKILL after ``timeout``) and wait for it."""
        with self._lock:
            managed = self.current.get(instance)
        if managed is not None:
            self._stop([managed], timeout)

    def _stop(self, processes: Sequence[Managed], timeout: float) -> None:
        with self._lock:
            live = [m for m in processes if self._running(m)]
            for m in live:
                m.expected_exit = True
                if m.frozen:  # a stopped process cannot act on SIGTERM
                    self._send(m, signal.SIGCONT)
                self._send(m, m.spec.stop_signal)
        deadline = time.monotonic() + timeout
        for m in live:
            if not self._wait_gone(m, deadline):
                self._send(m, signal.SIGKILL)
                m.popen.wait()
        for m in live:
            # Whatever the group leader left behind in its group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(m.popen.pid, signal.SIGKILL)
        self.reap()

    def stop_all(self, timeout: float = 5.0) -> None:
        """Stop every process of the run; nothing it started is left afterwards."""
        with self._lock:
            everything = list(self.every)
        self._stop(everything, timeout)
        # What an instance started and left after its end (Locust's, or a command not followed).
        deadline = time.monotonic() + KILL_LIMIT_S
        mine = self._prefix + "/"
        while left := self._processes(lambda owner: owner.startswith(mine)):
            for proc in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)  # polling a condition with a deadline
        self._output.close()
        self._stop_watch.set()
        self._watcher.join(timeout=2)
        self._spawner.shutdown(wait=True)
        self._reap_adopted()
        self.reap()

    # -- watching -------------------------------------------------------------------

    def reap(self) -> None:
        """Record the exit of every instance that ended since the last call."""
        with self._lock:
            self._reap_adopted()
            for m in self.every:
                if m.recorded or self._running(m):
                    continue
                m.recorded = True
                code = m.returncode
                if code is None:
                    fields: dict[str, Any] = {"detail": "exit status unknown (not a child of zchaos)"}
                else:
                    fields = {"signal": -code} if code < 0 else {"code": code}
                self.history.emit(
                    "proc_exit", role=m.spec.role, instance=m.spec.instance, pid=m.pid,
                    expected=m.expected_exit, **fields,
                )  # fmt: skip
                if not m.expected_exit and self.on_unexpected_exit is not None:
                    self.on_unexpected_exit(m)

    def _reap_adopted(self) -> None:
        """Reap the ended processes the instances' commands left to this process (the child
        subreaper): each is told by its session or group, one the instances' processes were
        seen in; the commands' own processes are Popen's to reap."""
        own = {os.getsid(0), os.getpgid(0)}
        with self._lock:
            for pid in _children():
                if pid in self._leaders:
                    continue
                stat = _stat(pid)
                if stat is None or stat[0] != "Z" or not ({stat[1], stat[2]} & (self._groups - own)):
                    continue
                with contextlib.suppress(ChildProcessError):
                    if (info := os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)) is not None:
                        self._codes[pid] = _returncode(info)

    def _watch(self) -> None:
        while not self._stop_watch.wait(0.1):
            self.reap()

    def alive(self, instance: str) -> bool:
        with self._lock:
            managed = self.current.get(instance)
            return managed is not None and self._running(managed)


def _runner_id(pid: int) -> str | None:
    """``<pid>@<start in clock ticks after boot>`` of a process (a reused pid has another
    start). Not psutil's create_time: that adds the boot time the kernel derives from the
    wall clock, which moves when the clock is stepped (NTP, a virtual machine restored), and
    a live runner then looked dead to another run's remove_leftovers, which killed its
    processes mid-run. (The ``@`` also keeps a zchaos that marked ``<pid>-<centiseconds>``
    from sweeping these: it cannot read them and leaves them alone.)"""
    ticks = start_ticks(pid)
    return None if ticks is None else f"{pid}@{ticks}"


def _runner_gone(owner: str) -> bool:
    """Whether the runner that marked a process ``owner`` has ended (False where the mark is
    not one this version makes: it cannot tell)."""
    pid, at, ticks = owner.partition(".")[0].partition("@")
    if not at or not pid.isdigit() or not ticks.isdigit():
        return False
    return not runner_alive(int(pid), int(ticks))


def remove_leftovers() -> list[str]:
    """End the processes whose supervisor's process is gone (a runner killed with SIGKILL):
    a daemon a role's command left has no PR_SET_PDEATHSIG and is re-parented to init then.
    Each is told by its ENV_OWNER, whose runner id no clock step moves (``_runner_id``: a step
    of the host's wall clock, a virtual machine resumed, +97 s at 07:31 on 2026-12-02, once
    made every live runner look dead, and a run's sweep SIGKILLed a live exploration's
    servers and load); what was ended, described, is returned."""
    ended = []
    for proc in psutil.process_iter():
        try:
            owner = proc.environ().get(ENV_OWNER, "")
            if not owner or not _runner_gone(owner):
                continue
            what = f"pid {proc.pid} ({' '.join(proc.cmdline())[:160]}; {owner})"
            proc.kill()
            ended.append(what)
        except (psutil.Error, OSError, ValueError):
            continue
    return ended


def _how(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    return f"signal {-code}" if code < 0 else f"code {code}"
