"""The runner: one scenario, from an empty run directory to a verdict.

Set-up (ports, processes, readiness) -> load (Locust, with the nemesis carrying out the
fault plan) -> drain -> teardown (every process stopped, also on Ctrl-C, SIGTERM or an
error) -> report (the Spark pipeline). Progress goes to the terminal while it runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.kinds import FAULT_KINDS
from chaos.malformed import endpoint_side
from chaos.nemesis import Nemesis, PlannedFault
from contract.clock import clock_sample
from contract.errors import LoadGeneratorCrashed, SetupError
from contract.history import HistoryWriter, history_file, read_events
from contract.outcomes import EXIT_INTERRUPTED
from contract.ports import PortAllocator
from contract.rundir import DEFAULT_CLIENT_BUDGET_S, FORMAT, DiskFullMeta, RunDir, RunMeta
from harness.manifest import ClientKind, client_endpoints
from harness.progress import Progress
from harness.replay import replay_record
from harness.reporting import build_report_for
from harness.scenario import Scenario, fault_plan
from harness.supervisor import Managed, ProcSpec, Supervisor, log_tail
from harness.topology import LOAD_HOST, PROJECT_ROOT, Topology
from loadtests.config import ENV_LOAD, ClientLoad, LoadConfig, read_origin
from reports.store import store_path

if TYPE_CHECKING:
    from chaos.clock import Clocks
    from chaos.disk import Disks
    from chaos.hosts import Hosts
    from chaos.lazyfs import Layers
    from chaos.netfaults import NetworkFaults

LOCUSTFILE = PROJECT_ROOT / "loadtests" / "locustfile.py"
#: Free space of the runs folder's file system under which the runner says the disk is
#: nearly full (and records when): the last seconds before recording stops.
DISK_FLOOR_BYTES = 1 << 20
#: How long the history's follower may take to stop before it is killed (seconds).
FOLLOWER_STOP_S = 10.0
#: How long Locust may take to import and start its runner (seconds on a loaded machine).
LOCUST_START_LIMIT_S = 120.0


class Interrupted(Exception):
    """The runner got SIGINT or SIGTERM; everything is torn down before it propagates."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class RunResult:
    run: RunDir
    exit_code: int
    verdict: dict[str, Any] | None


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into Interrupted in the main thread, for the duration."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while tearing down, so that a second Ctrl-C cannot leave processes.
    One that came while nothing else was going wrong is raised as Interrupted once the
    teardown is done: a Ctrl-C or SIGTERM as the load ended is not lost (an exploration went
    on to its next run, a test's SIGTERM as the run tore down on a loaded machine)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: came.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if came and sys.exc_info()[0] is None:  # an exception on its way already says what happened
        raise Interrupted(came[0])


def client_budget_s(kind: ClientKind) -> float:
    """How long a client of ``kind`` may work on one request before it abandons it: its
    adapter's own rule over its merged options (``ClientAdapter.budget_s``)."""
    from loadtests.adapters import adapter_class

    return adapter_class(kind.adapter).budget_s(kind.options)


def load_budget_s(kinds: tuple[ClientKind, ...]) -> float:
    """The longest budget of the load's client kinds."""
    return max((client_budget_s(k) for k in kinds), default=DEFAULT_CLIENT_BUDGET_S)


def load_attempt_s(kinds: tuple[ClientKind, ...]) -> float:
    """The longest one attempt of the load's client kinds waits for its reply
    (``ClientAdapter.attempt_s``)."""
    from loadtests.adapters import adapter_class

    return max(
        (adapter_class(k.adapter).attempt_s(k.options) for k in kinds), default=DEFAULT_CLIENT_BUDGET_S
    )


def planned_meta(scenario: Scenario, plan: list[PlannedFault]) -> RunMeta:
    """What run.json holds of a run before it starts: what will run and its fault plan."""
    return {
        "format": FORMAT,
        "scenario": scenario.as_dict(),
        "manifest": scenario.manifest.as_dict(),
        "client_budget_s": load_budget_s(scenario.load.clients),
        "client_attempt_s": load_attempt_s(scenario.load.clients),
        "plan": [f.as_dict() for f in plan],
        **({"calibration": scenario.calibration.as_dict()} if scenario.calibration is not None else {}),
    }


def forecast(scenario: Scenario) -> dict[str, str]:
    """Each promised check, and the reason any run of this scenario can only leave it
    unknown ('' when a run may judge it): the checks' own rules (``Checker.forecast``) on
    the run.json the run would start with."""
    from reports.checkers import registry

    meta = planned_meta(scenario, fault_plan(scenario))
    checkers = registry()
    return {name: checkers[name].forecast(meta) for name in scenario.manifest.promises.checks}


def machine_problems(scenario: Scenario) -> list[str]:
    """What this machine lacks for the scenario's faults, one line each (``zchaos check``
    says them; a run stops on the first before anything starts)."""
    from chaos import hosts

    found: dict[str, None] = {}  # each line once: the three clock kinds lack the same library
    if scenario.network == "hosts" and (why := hosts.missing()) is not None:
        found[why] = None
    for kind in (FAULT_KINDS[f.kind] for f in scenario.faults):
        if kind.missing is not None and (why := kind.missing()) is not None:
            found[why] = None
        if scenario.network == "hosts" and kind.on_hosts is not None:
            from chaos.packets import iptables_missing

            if (why := iptables_missing()) is not None:  # the link card is made of rules there
                found[why] = None
    return list(found)


def _exited_within(managed: Managed, timeout: float) -> bool:
    try:
        managed.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


class _Control:
    """The nemesis's handle on the run's processes."""

    def __init__(self, supervisor: Supervisor, topology: Topology, roles: dict[str, str]) -> None:
        self.supervisor = supervisor
        self.topology = topology
        self.roles = roles  # instance -> role

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        return self.supervisor.signal(instance, sig, expected_exit=expected_exit)

    def running(self, instance: str) -> int | None:
        return self.supervisor.running(instance)

    def stop(self, instance: str) -> None:
        self.supervisor.stop(instance)

    def start(self, instance: str) -> int:
        spec = self.topology.proc_spec(self.roles[instance], instance)
        return self.supervisor.start(spec).pid


class Runner:
    def __init__(
        self,
        scenario: Scenario,
        *,
        runs_dir: str | Path = "runs",
        progress: Progress | None = None,
        ui_port: int | None = None,
        store: Path | None = None,
        subject_version: str | None = None,
        meta: RunMeta | None = None,
    ) -> None:
        """``store``: the results store the run is added to (default: the one in ``runs_dir``);
        ``subject_version``: the version of the system under test (default: its manifest's);
        ``meta``: more for run.json (e.g. where the run stands among several seeds)."""
        if scenario.uncalibrated:
            raise SetupError(
                f"gives values relative to the system's own numbers ({', '.join(scenario.relative_keys)}) "
                "and has no calibration; `zchaos run` calibrates first, or run `zchaos calibrate` on it",
                where=scenario.path or scenario.name,
            )
        self.scenario = scenario
        self.ui_port = ui_port  # serve Locust's web UI on 127.0.0.1:ui_port while the load runs
        self.store = store or store_path(runs_dir)
        self.run = RunDir.create(runs_dir, scenario.name)
        self.progress = progress or Progress()
        try:
            self.run.make_reserve()
        except OSError as exc:
            shutil.rmtree(self.run.root, ignore_errors=True)
            raise SetupError(
                f"no room for a run: {exc.strerror} ({_free_text(self.run.root.parent)})", where=runs_dir
            ) from None
        # Quiet: the runner says on the terminal itself when its writers stop (_watch_disk).
        self.history = HistoryWriter(history_file(self.run.history, "runner"), "runner", announce=False)
        self.nemesis_history = HistoryWriter(
            history_file(self.run.history, "nemesis"), "nemesis", announce=False
        )
        self._disk: DiskFullMeta = {}  # what of the run could not be written (see _watch_disk)
        self._disk_said = False
        self.ports = PortAllocator()  # endpoints and fault proxies: never the same port twice
        self.topology = Topology(scenario, self.run, self.ports)
        self.supervisor = Supervisor(self.history, self.topology.base_env())
        self.network: NetworkFaults | None = None  # the fault proxy, when a link fault is planned
        self.clocks: Clocks | None = None  # the faked clocks, when a clock fault is planned
        self.disks: Disks | None = None  # the data folders' file systems, when a disk fault is planned
        self.lazyfs: Layers | None = None  # the lazy layers over data folders, when lose_unsynced is planned
        self.hosts: Hosts | None = None  # the run's network namespaces, network = "hosts"
        self._proxy_stack = contextlib.ExitStack()
        self.follower: subprocess.Popen[bytes] | None = None
        self.supervisor.on_unexpected_exit = self._unexpected_exit
        self.supervisor.notify = self.progress.note  # a role's command that left a process followed
        self.roles = {i: r for r in scenario.manifest.roles for i in scenario.instances(r)}
        self.plan: list[PlannedFault] = fault_plan(scenario)
        self.meta: RunMeta = {
            **planned_meta(scenario, self.plan),
            "ports": self.topology.ports,
            "processes": self.roles,
            "started_ns": time.time_ns(),
            # The host's clocks, now and at the end: a run over which they drifted apart has
            # no one time line (contract/clock.py), and its report says it is incomplete.
            "clocks": {"start": clock_sample()},
            "phases_done": {},  # phase -> time.time_ns() at its end; see _phase_done
            "replay": replay_record(scenario, self.run),
            **(meta or {}),
        }
        if subject_version:
            self.meta["subject_version"] = subject_version
        self._write_meta()

    def _unexpected_exit(self, managed: Managed) -> None:
        code = managed.returncode
        how = "an unknown status" if code is None else f"signal {-code}" if code < 0 else f"code {code}"
        self.progress.warn(f"{managed.spec.instance} exited unexpectedly ({how}); see {managed.spec.log}")

    def _phase(self, name: str) -> None:
        self.history.emit("phase", name=name)
        self.progress.phase(name)

    def _phase_done(self, name: str) -> None:
        """Record the end of a phase in the history and run.json, at once: a runner killed
        later leaves a folder that says how far the run got (the report's completeness)."""
        self.history.emit("phase_done", name=name)
        self.meta["phases_done"][name] = time.time_ns()
        self._write_meta()

    def _write_meta(self) -> None:
        """run.json now; on a full disk it stays as it was (the run goes on, and its end is
        written with the reserve's room: _account_disk)."""
        try:
            self.run.write_meta(self.meta)
        except OSError as exc:
            self._disk_failed("run.json", exc)

    def _disk_failed(self, name: str, exc: OSError) -> None:
        self._disk.setdefault("at_ns", time.time_ns())
        self._disk.setdefault("stopped", {})[name] = exc.strerror or str(exc)
        self._watch_disk()

    def _watch_disk(self) -> None:
        """The runs folder's free space (below DISK_FLOOR_BYTES it is recorded and said) and
        the writers of ours that stopped for want of it (their markers); said on the terminal
        once, as it happens, and recorded in run.json at the end (_account_disk)."""
        free = _free_bytes(self.run.root)
        trouble = self.run.disk_trouble({**self.meta, "disk_full": self._disk})
        if free is not None and "low_ns" not in self._disk and free < DISK_FLOOR_BYTES:
            self._disk["low_ns"], self._disk["free_bytes"] = time.time_ns(), free
            if trouble is None:  # else said below, as what it is
                self.progress.warn(
                    f"the runs folder's file system is nearly full ({_free_text(self.run.root)}) at "
                    f"{self._t_text(self._disk['low_ns'])}: when nothing more fits, recording stops "
                    "and the run is incomplete"
                )
        if trouble is None or not trouble.get("stopped") or self._disk_said:
            return
        self._disk_said = True
        stopped = trouble.get("stopped") or {}
        name = min(stopped)
        self.progress.warn(
            f"disk full at {self._t_text(trouble.get('at_ns'))}: {name} could not be written "
            f"({stopped[name]}); zchaos stops recording there and the run goes on, to an incomplete "
            "verdict"
        )

    def _t_text(self, ns: int | None) -> str:
        origin = self.meta.get("load_started_ns")
        if ns is None:
            return "an unknown time"
        return f"t = {(ns - origin) / 1e9:.1f} s" if origin else "set-up (before the load)"

    def _account_disk(self) -> None:
        """At the end of the run: what could not be written goes to run.json's ``disk_full``,
        and the reserve is freed so that this last run.json fits."""
        self._watch_disk()  # the logs' markers too (harness/output.py)
        trouble = self.run.disk_trouble({**self.meta, "disk_full": self._disk})
        if trouble is not None:
            self.meta["disk_full"] = trouble
        self.run.release_reserve()

    def disk_full(self) -> bool:
        """Something of the run could not be written (or no space is left to write it)."""
        self._watch_disk()
        return self.run.disk_trouble({**self.meta, "disk_full": self._disk}) is not None or (
            "low_ns" in self._disk and _free_bytes(self.run.root) == 0
        )

    # -- the phases -------------------------------------------------------------------

    def _remove_leftovers(self) -> None:
        """Undo what runs killed without their teardown left on the host (starvation cgroups,
        daemons of their roles)."""
        from chaos.clock import remove_leftovers as remove_clock_leftovers
        from chaos.starve import remove_leftovers
        from harness.supervisor import remove_leftovers as end_leftover_processes

        for what in end_leftover_processes():
            self.progress.note(f"ended a process left by a dead zchaos run: {what}")
        found = remove_leftovers()
        for path in found.removed:
            self.progress.note(f"removed a CPU-starvation cgroup left by a dead zchaos run: {path}")
        for path, why in found.failed:
            self.progress.warn(f"could not remove a cgroup left by a dead zchaos run: {path} ({why})")
        from chaos.disk import remove_leftovers as remove_disk_leftovers

        unmounted, stuck = remove_disk_leftovers()
        for path in unmounted:
            self.progress.note(f"unmounted a data file system left by a dead zchaos run: {path}")
        for what in stuck:
            self.progress.warn(f"could not unmount a file system left by a dead zchaos run: {what}")
        from chaos.hosts import remove_leftovers as remove_host_leftovers

        host_things, host_stuck = remove_host_leftovers()
        for what in host_things:
            self.progress.note(f"removed a {what} left by a dead zchaos run")
        for what in host_stuck:
            self.progress.warn(f"could not remove what a dead zchaos run left: {what}")
        clock_state = remove_clock_leftovers()
        for path in clock_state:
            self.progress.note(f"removed the clock faults' shared state left by a dead zchaos run: {path}")
        self.meta["leftovers_removed"] = [
            str(p) for p in (*found.removed, *clock_state, *unmounted, *host_things)
        ]

    def _start_hosts(self) -> None:
        """network = "hosts": a network namespace for every instance and the load, on a
        bridge of the run's (chaos/hosts.py), made before anything starts; without the
        rights, one line and exit 2 (SetupError)."""
        if self.scenario.network != "hosts":
            return
        from chaos.hosts import Hosts, HostsError, missing

        why = missing()
        if why is not None:
            raise SetupError(why)
        try:
            hosts = Hosts(self.topology.host_names())
        except HostsError as exc:
            raise SetupError(f"cannot make the run's hosts: {exc}") from None
        self.hosts = hosts  # what it made is removed at teardown, also when a later step fails
        try:
            hosts.open()
        except HostsError as exc:
            raise SetupError(f"cannot make the run's hosts: {exc}") from None
        self.topology.use_hosts(hosts)
        hosts.links = self.topology.link_paths()
        self.meta["hosts"] = {h.name: h.address for h in hosts.hosts.values()}
        self._write_meta()
        self.progress.note(
            f"hosts: {len(hosts.hosts)} network namespaces on bridge {hosts.bridge} ({hosts.prefix}.0/24)"
        )

    def _start_disks(self) -> None:
        """When the plan has a disk fault: a small file system at the data folder of every
        instance of the roles it targets, mounted before they start (chaos/disk.py)."""
        targets = {f.target for f in self.plan if FAULT_KINDS[f.kind].disk}
        roles = {self.roles[t] for t in targets if t in self.roles}
        if not roles:
            return
        from chaos.disk import DiskError, Disks

        manifest = self.scenario.manifest
        folders = {
            i: (Path(self.topology.data_dir(role, i)), manifest.roles[role].data_size_mb)
            for i, role in self.roles.items()
            if role in roles
        }
        disks = Disks(folders)
        self.disks = disks  # what it mounted is unmounted at teardown, also when a later mount fails
        try:
            disks.open()
        except DiskError as exc:
            raise SetupError(str(exc)) from None
        sizes = ", ".join(f"{f} ({s} MB)" for f, s in sorted(set(folders.values())))
        self.progress.note(f"data folders on small file systems: {sizes}")

    def _start_lazyfs(self) -> None:
        """When the plan has a fault that drops unsynced writes: a lazy layer (FUSE) over the
        data folder of every instance of the roles it targets, mounted before they start
        (chaos/lazyfs.py), over the small file system of a disk fault where there is one (its
        filler goes underneath: chaos/disk.py ``Disks.underneath``)."""
        targets = {f.target for f in self.plan if FAULT_KINDS[f.kind].lazy}
        roles = {self.roles[t] for t in targets if t in self.roles}
        if not roles:
            return
        from chaos.lazyfs import Layers, LazyFsError

        folders = {
            i: Path(self.topology.data_dir(role, i)) for i, role in self.roles.items() if role in roles
        }
        layers = Layers(folders, self.run.root / "logs")
        self.lazyfs = layers  # what it mounted is unmounted at teardown, also when a later mount fails
        try:
            layers.open()
        except LazyFsError as exc:
            raise SetupError(str(exc)) from None
        where = ", ".join(sorted({str(f) for f in folders.values()}))
        self.progress.note(f"unsynced writes held in memory until fsynced (lazy layers) in {where}")

    def _start_clocks(self) -> None:
        """When the plan has a clock fault: libfaketime for every instance of the roles it
        targets, each under a control file of its own at true time (chaos/clock.py). Other
        roles, and every role of a run without a clock fault, start as they always did."""
        targets = {f.target for f in self.plan if FAULT_KINDS[f.kind].clock}
        roles = {self.roles[t] for t in targets if t in self.roles}
        if not roles:
            return
        from chaos.clock import ClockError, Clocks

        instances = [i for i, role in self.roles.items() if role in roles]
        clocks = Clocks(self.run.root / "clock", instances)
        try:
            clocks.open()
        except (ClockError, OSError) as exc:
            clocks.close()
            raise SetupError(f"cannot fake the clocks of {', '.join(sorted(roles))}: {exc}") from None
        self.clocks = clocks
        for instance in instances:
            self.topology.extra_env[instance] = clocks.env(instance)
        self.progress.note(f"faked clocks (libfaketime {clocks.library}) for {', '.join(instances)}")

    def _start_follower(self) -> None:
        """The history's follower (reports/ingest/follow.py): converts the history to Parquet
        parts while the run goes on, so that the report converts only what was written last.
        It runs in the runner's process group (a Ctrl-C reaches it too) at nice 19, and stops
        by itself when the runner is gone."""
        with self.run.follower_log.open("wb") as log:
            self.follower = subprocess.Popen(
                # absolute: it runs in the project's folder, the runs folder may be relative
                [sys.executable, "-m", "reports.ingest.follow", str(self.run.history.resolve())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=PROJECT_ROOT,
                env=self.topology.base_env(),
            )

    def _stop_follower(self) -> None:
        """SIGTERM, then SIGKILL after FOLLOWER_STOP_S; its parts stay for the report. A
        follower that failed only costs the report the time it would have saved."""
        follower, self.follower = self.follower, None
        if follower is None:
            return
        follower.terminate()
        try:
            follower.wait(FOLLOWER_STOP_S)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.wait()
        if follower.returncode not in (0, -signal.SIGTERM):
            log = self.run.follower_log
            self.progress.warn(f"the history's follower ended with code {follower.returncode}; see {log}")

    def _start_fault_proxy(self) -> None:
        """One proxy per link, when the plan has a network fault; the processes then connect
        through them. Without one, links stay direct: a proxy would only add latency."""
        if not any(FAULT_KINDS[f.kind].target == "link" for f in self.plan):
            return
        if self.hosts is not None:
            return  # no proxy on hosts: a link card there is made of rules (chaos/packets.py)
        from chaos.netfaults import NetworkFaults
        from chaos.toxiproxy_client import ToxiproxyError, toxiproxy_server

        log = self._proxy_stack.enter_context(self.run.log("toxiproxy").open("wb"))
        try:
            info = self._proxy_stack.enter_context(toxiproxy_server(log))
        except ToxiproxyError as exc:
            raise SetupError(
                f"the fault proxy would not start: {exc}; see {self.run.log('toxiproxy')}"
            ) from None
        self.network = NetworkFaults(info.client, prefix=self.run.root.name)
        self._proxy_stack.callback(self.network.close)
        for link in self.topology.links():
            address = self.network.add_link(link.name, link.upstream_port, self.ports.allocate())
            self.topology.route(link.name, address)
        self.meta["fault_proxy"] = {"url": info.url, "kind": info.kind, "links": len(self.topology.links())}
        self.progress.note(f"fault proxy: {info.kind} at {info.url}, one proxy per link")

    def _start_system(self) -> None:
        for role in self.topology.start_order():
            instances = self.scenario.instances(role)
            gap = self.scenario.start_gap(role)
            if gap is not None and len(instances) > 1:
                how = "together" if gap == 0 else f"{gap:g} s apart"
                self.progress.note(f"starting {', '.join(instances)} {how}")
                specs = [self.topology.proc_spec(role, instance) for instance in instances]
                self.supervisor.start_together(specs, gap)
                continue
            for instance in instances:
                self.progress.note(f"starting {instance}")
                self.supervisor.start(self.topology.proc_spec(role, instance))

    def _ui_host(self) -> str:
        """Where Locust's web UI listens: loopback, or in hosts mode the load host's address
        (reached from this machine over the run's bridge)."""
        return self.hosts.address(LOAD_HOST) if self.hosts is not None else "127.0.0.1"

    def _locust_spec(self) -> ProcSpec:
        load = self.scenario.load
        clients = [
            ClientLoad(
                name=kind.name,
                adapter=kind.adapter,
                endpoints=self.topology.client_addresses(kind),
                endpoint_names=list(kind.endpoints),
                options=kind.options,
                weight=kind.weight,
                users=kind.users,
                command=self.topology.client_command(kind),
            )
            for kind in load.clients
        ]
        config = LoadConfig(
            clients=clients,
            history_dir=str(self.run.history),
            log_dir=str(self.run.logs),
            payload_bytes=load.payload_bytes,
            wait_ms=load.wait_ms,
            seed=self.scenario.seed,
            name=self.scenario.manifest.name,
            phases=[p.as_dict() for p in load.phases],
            origin_ns=time.time_ns(),  # an estimate until Locust writes the real one
            origin_file=str(self.run.load_origin),
        )
        if self.ui_port is None:
            mode = ["--headless"]
        else:
            # The UI stays up a minute after the run so the user can read it.
            mode = [
                "--autostart",
                "--autoquit",
                "60",
                "--web-host",
                self._ui_host(),
                "--web-port",
                str(self.ui_port),
            ]
        # With phases the load shape sets users and spawn rate and ends the load itself.
        steady = [] if load.phases else [
            "--users", str(load.users), "--spawn-rate", str(load.spawn_rate),
            # Locust takes whole seconds: duration_s = 28.5 failed the run ("Invalid time span").
            "--run-time", f"{math.ceil(self.scenario.duration_s)}s",
        ]  # fmt: skip
        argv = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *mode, *steady,
            "--stop-timeout", f"{self.scenario.drain_s:g}",
            "--csv", str(self.run.locust_csv_prefix), "--only-summary",
            "--loglevel", "WARNING", "--exit-code-on-error", "0",
        ]  # fmt: skip
        if load.processes > 1:
            master_port = self.ports.allocate()
            argv += [
                "--processes", str(load.processes),
                "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
            ]  # fmt: skip
        return ProcSpec(
            instance="locust",
            role="locust",
            argv=argv,
            log=self.run.log("locust"),
            env={ENV_LOAD: config.to_env()},
            follow=False,  # the run waits for Locust's own process; what it leaves goes at teardown
            netns=self.hosts.ns(LOAD_HOST) if self.hosts is not None else None,
        )

    def _wait_for_locust(self, locust: Managed) -> int:
        """Wait until Locust is about to start its users (its start-up takes seconds on a
        loaded machine); the load's time zero, from which faults and phases count."""
        deadline = time.monotonic() + LOCUST_START_LIMIT_S
        while (origin_ns := read_origin(self.run.load_origin)) is None:
            if locust.popen.poll() is not None:
                raise SetupError(
                    f"Locust exited with code {locust.popen.returncode} before its load started; "
                    f"last lines of {locust.spec.log}:\n{log_tail(locust.spec.log)}"
                )
            if time.monotonic() > deadline:
                limit = f"{LOCUST_START_LIMIT_S:.0f} s"
                raise SetupError(f"Locust did not start its load within {limit}; see {locust.spec.log}")
            time.sleep(0.05)
        return origin_ns

    def _run_load(self) -> None:
        control = _Control(self.supervisor, self.topology, self.roles)
        manifest = self.scenario.manifest
        clients = client_endpoints(manifest)
        endpoints = {
            e: (self.topology.bind_address(e), endpoint_side(e, clients)) for e in manifest.endpoints
        }
        nemesis = Nemesis(
            self.plan,
            control,
            self.nemesis_history,
            self.network,
            endpoints,
            self.clocks,
            self.disks,
            self.hosts,
            self.lazyfs,
        )
        locust = self.supervisor.start(self._locust_spec())
        locust.expected_exit = True  # it ends by itself when the run time is over
        origin_ns = self._wait_for_locust(locust)
        t0 = time.monotonic() - (time.time_ns() - origin_ns) / 1e9
        self.meta["load_started_ns"] = origin_ns
        self._write_meta()  # a runner killed from now on leaves the load's start
        nemesis.start(t0)
        self.progress.start_load(self.scenario.duration_s, self.run.history, nemesis, self.scenario.load)
        # Locust stops its users after the run time and lets requests in flight finish.
        limit = self.scenario.duration_s + self.scenario.drain_s + self.scenario.load.ramp_s()
        if self.ui_port is not None:
            limit += 60
            self.progress.note(f"Locust web UI: http://{self._ui_host()}:{self.ui_port}/")
        deadline = t0 + limit + 30
        try:
            while not _exited_within(locust, 0.5):
                elapsed = time.monotonic() - t0
                if elapsed >= self.scenario.duration_s and "load_stopped_ns" not in self.meta:
                    self.meta["load_stopped_ns"] = time.time_ns()
                    self._phase_done("load")
                    self._phase("drain")
                if time.monotonic() > deadline:
                    raise SetupError(f"Locust did not stop within {limit + 30:.0f} s; see {locust.spec.log}")
                self.progress.tick(elapsed)
                self._watch_disk()
        except BaseException:
            nemesis.stop()
            raise
        finally:
            self.meta.setdefault("load_stopped_ns", time.time_ns())
            self.meta["faults_injected"] = nemesis.injected
        self.meta["fault_errors"] = nemesis.stop()
        self.progress.end_load()  # warns of the faults that failed, if any
        if locust.popen.returncode not in (0, None):
            crashed = locust.popen.returncode < 0  # a signal no one of ours sent: SIGABRT, SIGSEGV
            raise (LoadGeneratorCrashed if crashed else SetupError)(
                f"Locust failed with exit code {locust.popen.returncode}; last lines of {locust.spec.log}:\n"
                f"{log_tail(locust.spec.log)}"
            )
        if "load" not in self.meta["phases_done"]:  # Locust ended as the run time ran out
            self._phase_done("load")
        self._phase_done("drain")

    def _check_client_programs(self) -> None:
        """Bad input when a client program of the user's completed no request (its adapter
        records it: loadtests/adapters/external.py): such a run measured the program, not
        the system, so it gets no verdict; the program's own log says why."""
        from loadtests.adapters import adapter_class
        from loadtests.adapters.external import NO_REQUEST

        if not any(adapter_class(k.adapter).RUNS_PROGRAM for k in self.scenario.load.clients):
            return
        errors = read_events(self.run.history, kinds=("client_error",), pattern="locust-*.jsonl")
        failed = [e for e in errors if e.get("reason") == NO_REQUEST]
        if not failed:
            return
        first = failed[0]
        log = self.run.log(str(first.get("cid")))
        also = f" (and {len(failed) - 1} more of its clients)" if len(failed) > 1 else ""
        raise SetupError(
            f"client kind {first.get('kind')!r}: {first.get('detail')} as {first.get('cid')}{also}; "
            f"see the client errors in {self.run.history} and the last lines of {log}:\n{log_tail(log)}"
        )

    def execute(self, *, report: bool = True) -> RunResult:
        """Run the scenario; teardown always happens, whatever goes wrong."""
        self.progress.header(self.scenario, self.run, self.plan)
        for warning in (*self.scenario.manifest.warnings, *self.scenario.warnings):
            self.progress.warn(warning)
        try:
            with interrupts_raise():
                try:
                    self._phase("setup")
                    self._remove_leftovers()
                    self._start_follower()
                    self._start_hosts()
                    self._start_fault_proxy()
                    self._start_clocks()
                    self._start_disks()
                    self._start_lazyfs()
                    self._start_system()
                    self._phase("load")
                    self._run_load()
                except (SetupError, OSError) as exc:
                    # A run whose disk filled fails in many ways (Locust cannot write its
                    # statistics, ...): it is incomplete, and its report says why.
                    if not self.disk_full():
                        raise
                    self.progress.warn(f"the run stopped early, its disk full: {exc}")
                finally:
                    with interrupts_deferred():
                        self._phase("teardown")
                        self._stop_follower()
                        self.supervisor.stop_all()
                        self._proxy_stack.close()
                        if self.clocks is not None:
                            self.clocks.close()
                        if self.lazyfs is not None:
                            for what in self.lazyfs.close():
                                self.progress.warn(f"could not unmount a lazy layer: {what}")
                        if self.disks is not None:
                            for what in self.disks.close():
                                self.progress.warn(f"could not unmount a data file system: {what}")
                        if self.hosts is not None:
                            for what in self.hosts.close():
                                self.progress.warn(f"could not remove a host of the run: {what}")
                        self.ports.release()
                        self._phase_done("teardown")
                        self.meta["ended_ns"] = time.time_ns()
                        self.meta["clocks"]["end"] = clock_sample()
                        self._account_disk()
                        try:
                            self.run.write_meta(self.meta)
                        except OSError as exc:
                            self.progress.warn(f"{self.run.run_json} could not be written at the end: {exc}")
                        self.history.close()
                        self.nemesis_history.close()
                self._check_client_programs()
        except Interrupted as exc:
            self.progress.warn(
                f"interrupted ({exc}); every process of the run was stopped. Run folder: {self.run.root}"
            )
            return RunResult(self.run, EXIT_INTERRUPTED, None)
        if not report:
            return RunResult(self.run, 0, None)
        try:
            return self.report()
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as zchaos's command line turns it
            self.progress.warn(
                f"interrupted during the report; the run is whole: `zchaos report {self.run.root}` builds it"
            )
            return RunResult(self.run, EXIT_INTERRUPTED, None)

    def report(self) -> RunResult:
        verdict = build_report_for(self.run, self.progress, self.store)
        return RunResult(self.run, int(verdict["exit_code"]), verdict)


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _free_text(path: Path) -> str:
    free = _free_bytes(path)
    return f"{free // 1024} KiB free in {path}" if free is not None else f"free space of {path} unknown"


def run_scenario(
    scenario: Scenario,
    *,
    runs_dir: str | Path = "runs",
    report: bool = True,
    ui_port: int | None = None,
    subject_version: str | None = None,
) -> RunResult:
    return Runner(scenario, runs_dir=runs_dir, ui_port=ui_port, subject_version=subject_version).execute(
        report=report
    )
