"""Scenario files: one chaos experiment as data, validated before anything runs.

```toml
name = "paranoid-pirate-kill-worker"     # default: the file's stem
description = "Workers are killed under load and restarted; nothing may be lost."
implementation = "paranoid-pirate"       # a built-in name, or the path of a manifest
written_for = "paranoid-pirate"          # default: implementation (see "another implementation" below)
seed = 7                                 # same seed: same faults, same request streams
duration_s = 60                          # how long the load runs
drain_s = 8                              # after the load: time for requests in flight
network = "proxy"                        # or "hosts": each process in a network namespace of
                                         # its own (root; chaos/hosts.py), for packet faults;
                                         # default: the manifest's network, else "proxy"

[topology]                               # instances of each scalable role
worker = 3
start = { worker = "together" }          # how a role's instances start (below)

[options]                                # overrides of the manifest's [options]
heartbeat_ms = 1000

[load]
users = 10                               # Locust users, one protocol client each, or relative
                                         # to the calibration: "0.5x capacity, at most 10"
spawn_rate = 10                          # users started per second
wait_ms = 20                             # pause of a user between two requests
payload_bytes = 32                       # request size (the request id included)
processes = 1                            # Locust processes (--processes)
client = { timeout_ms = 2500 }           # overrides of the client options (every kind that has them)

[clients.sync]                           # overrides for one client kind of the manifest
options = { timeout_ms = 5000 }          # validated against the kind's adapter
weight = 2                               # or users = 3 (a fixed number of its users)
in_order = false                         # its replies may come in any order

[clients.mdp_async]                      # with adapter: a kind the scenario brings where the
adapter = "mdp_async"                    # manifest has none of that name (a built-in client
endpoint = "frontend"                    # of the family its clients speak; default endpoint:
                                         # its first kind's), else that kind's override

[promises]                               # overrides of the manifest's [promises] values
latency_p99_ms = 400.0                   # (not checks; same types as the manifest's)

[[load.phases]]                          # optional: the load in phases (Locust's LoadTestShape)
name = "busy"                            # default phase-N; shown on the progress line
duration_s = 40                          # the phases' durations add up to duration_s
users = 10                               # users, spawn_rate, wait_ms: default [load]'s
[[load.phases]]
name = "idle"                            # a near-idle stretch: faults that land here hit a
duration_s = 20                          # system whose workers hold no request
users = 1
wait_ms = 2000

[[faults]]
kind = "kill"                            # see `zchaos list` for the kinds and their parameters
target = "worker:random"                 # an instance, a role, or role:random|half|all
at_s = [10, 30]                          # or every_s = 15 (start_s, until_s),
restart_after_s = 2                      # or random = { count = 3, between = [5, 50] }

[expect]
violated = []                            # checks expected to fail (a known weakness)
implementation = "paranoid-pirate"       # whose weakness it is (default: written_for)

[baseline]                               # optional: do not regress against a stored baseline run
label = "v1.4"                           # `zchaos baseline RUN --label v1.4` stores one
recovery_ratio = 1.5                     # each recovery at most 1.5x the baseline's (+ recovery_slack_s, 0.5)
p99_ratio = 2.0                          # p99 latency at most 2x the baseline's (+ p99_slack_ms, 1.0)
availability_ratio = 0.9                 # lowest availability at least 0.9x the baseline's
```

A scenario is written for one implementation (``written_for``; ``--set
implementation=...`` keeps it at the file's ``implementation``) and may run against
another. Then what is about the one it was written for does not apply: ``[expect]`` is set
aside (every check is judged), and an ``[options]`` key, a ``[load] client`` option or a
``[clients.NAME]`` kind the implementation under test does not have is skipped; each says
so in ``notes`` (``zchaos check``, the run's terminal, run.json and the report).

How a role's instances start (``[topology] start``, per role): ``"in_turn"`` (the default:
each once the one before it is ready), ``"together"`` (all of them back to back, then each
waited for: some bugs live there, two workers seeding their identity from the clock in the
same second) or ``{ stagger_s = 1.0 }`` (each that long after the one before it started,
then each waited for). Roles still start in the manifest's order, binding roles first.

Loads and bounds may be given relative to the system's own numbers, measured by ``zchaos
calibrate`` (contract/calibration.py has the grammar, harness/calibrate.py the measuring):
``users = "0.5x capacity, at most 10"`` in ``[load]`` and ``[[load.phases]]``;
``latency_p99_ms``, ``recovery_bound_s`` and ``steady_grace_s`` in ``[promises]``, and
client options in ms or s (``timeout_ms = "3x p99, at least 2500"``), as multiples of the
measured ``p50``, ``p99`` or ``timeout``. ``parse_scenario`` resolves them against the
``calibration`` it is given and records each in ``resolved``; without one they stand in
(their bounds applied to the manifest's value) and the scenario is ``uncalibrated``, which
the runner refuses: ``zchaos run`` calibrates first (``harness/calibrate.py calibrated``).
A calibrated scenario's ``availability_window_s`` (unless it gives one) holds the attempts
the ``availability`` check needs twice over at the rate its load gets.

A ``[baseline]`` adds the ``baseline`` check (reports/baseline.py): violated when the run
regresses beyond a ratio it gives, unknown when no baseline ``label`` is stored for the
scenario (or, failing that, for any one scenario) in the runs folder's results store.
"""

from __future__ import annotations

import copy
import math
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chaos.faults import SELECTORS, ParamProblem
from chaos.kinds import FAULT_KINDS
from chaos.nemesis import PlannedFault, Schedule, plan_faults
from contract.calibration import Calibration, is_relative, parse_relative
from contract.errors import SetupError, key_path
from contract.links import CLIENTS, covers, parse_link
from contract.promises import (
    AUTO_DEADLINE,
    DEFAULT_AVAILABILITY_WINDOW_S,
    MIN_WINDOW_ATTEMPTS,
    OUTAGE,
    UNRECOVERED_KEYS,
    expiry_s,
    timer_deadline_s,
)
from contract.rundir import ScenarioMeta
from harness.config import (
    MAX_DURATION_S,
    MAX_FAULT_TIMES,
    MAX_INSTANCES,
    MAX_PAYLOAD_BYTES,
    MAX_PROCESSES,
    MAX_SEED,
    MAX_USERS,
    REQUIRED,
    Table,
    load_toml,
)
from harness.manifest import (
    NETWORKS,
    ClientKind,
    Manifest,
    Promises,
    adapter_of,
    check_client_options,
    client_endpoints,
    known_options,
    link_names,
    load_manifest,
    manifest_path,
    parse_promises,
    reply_deadline_problem,
)


@dataclass(frozen=True)
class LoadPhase:
    """One stretch of the load: so many users, each pausing ``wait_ms`` between requests."""

    name: str
    start_s: float  # offset from the start of the load
    duration_s: float
    users: int
    spawn_rate: float
    wait_ms: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "users": self.users,
            "spawn_rate": self.spawn_rate,
            "wait_ms": self.wait_ms,
        }


@dataclass(frozen=True)
class LoadSpec:
    users: int = 10
    spawn_rate: float = 10.0
    wait_ms: float = 20.0
    payload_bytes: int = 32
    processes: int = 1
    clients: tuple[ClientKind, ...] = ()  # the manifest's client kinds with the scenario's overrides
    phases: tuple[LoadPhase, ...] = ()  # empty: ``users`` for the whole run

    def phase_at(self, elapsed_s: float) -> LoadPhase | None:
        """The phase the load is in ``elapsed_s`` after its start (the last one after its end)."""
        for phase in self.phases:
            if elapsed_s < phase.end_s:
                return phase
        return self.phases[-1] if self.phases else None

    def ramp_s(self) -> float:
        """The longest time spawning users can take over the run."""
        steps = self.phases or (LoadPhase("", 0, 0, self.users, self.spawn_rate, self.wait_ms),)
        return sum(p.users / p.spawn_rate for p in steps)


@dataclass(frozen=True)
class FaultSpec:
    """One line of the fault schedule; ``fault_plan`` turns the lines into timed events."""

    index: int  # position in the file, from 1
    kind: str
    target: str
    schedule: Schedule  # when it fires (offsets from the start of the load)
    params: dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    path: Path | None
    manifest: Manifest  # as the scenario runs it: its client kinds and promises overridden
    seed: int
    duration_s: float
    drain_s: float
    topology: dict[str, int]  # role -> instance count, every role of the manifest
    options: dict[str, Any]  # manifest options with the scenario's overrides
    load: LoadSpec
    faults: tuple[FaultSpec, ...]
    expect_violated: tuple[str, ...]
    baseline: dict[str, Any] | None = None  # [baseline]: label and the ratios it bounds
    written_for: str = ""  # the implementation its [expect] and own settings are about
    expect_set_aside: tuple[str, ...] = ()  # [expect] violated, about another implementation
    #: what of the scenario did not apply to the implementation under test, and why
    notes: tuple[str, ...] = ()
    #: what may make the run call a correct system wrong (a reply deadline its timers outlast)
    warnings: tuple[str, ...] = ()
    # What it was parsed from (its TOML data, overrides such as --seed included) and its
    # manifest as the manifest's file says: enough to parse it again with a change
    # (another seed, a smaller variant) and to replay it (harness/replay.py).
    source: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    base_manifest: Manifest | None = field(default=None, compare=False, repr=False)
    #: the ``--set KEY=VALUE`` overrides applied to its file (already in ``source``), for
    #: the commands that reproduce a run
    sets: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: ``source`` is what its file with ``sets`` says, but for the seed: ``zchaos run PATH
    #: --seed S --set ...`` runs it again (not so for a shrink candidate, or a replay of a
    #: file changed since)
    from_file: bool = field(default=False, compare=False, repr=False)
    #: how a role's instances start (``[topology] start``), for the roles that say: the
    #: seconds between two starts, 0.0 for "together"; a role not here starts "in_turn"
    start: dict[str, float] = field(default_factory=dict)

    def start_gap(self, role: str) -> float | None:
        """Seconds between the starts of ``role``'s instances (0: together), or None: in turn."""
        return self.start.get(role)

    #: the calibration its relative values were resolved against (None: it gives none, or
    #: none was at hand and they stand in as ``uncalibrated``)
    calibration: Calibration | None = field(default=None, compare=False, repr=False)
    #: each relative value and what it resolved to: key, given, value
    resolved: tuple[dict[str, Any], ...] = ()
    #: the client kinds whose ``reply_deadline_s = "auto"`` was made the deadline of the
    #: seed's plan (its outages): ``with_seed`` makes theirs again
    auto_deadlines: tuple[str, ...] = ()
    #: "proxy" (every process on 127.0.0.1, link faults through the fault proxy) or "hosts"
    #: (each process in a network namespace of its own, packet faults: chaos/hosts.py)
    network: str = "proxy"

    @property
    def relative_keys(self) -> list[str]:
        return [r["key"] for r in self.resolved]

    @property
    def uncalibrated(self) -> bool:
        """It gives relative values and has no calibration: the numbers are stand-ins, and
        it may not run until ``harness/calibrate.py`` ``calibrated`` has given it one."""
        return bool(self.resolved) and self.calibration is None

    def instances(self, role: str) -> list[str]:
        return self.manifest.roles[role].instance_names(self.topology[role])

    def as_dict(self) -> ScenarioMeta:
        """The scenario as run.json records it. Its fault lines are not repeated: the plan
        holds each fault with its parameters, the replay record the TOML as written; nor
        its client kinds, which the manifest's record holds (contract/rundir.py)."""
        return {
            "name": self.name,
            "description": self.description,
            "path": str(self.path) if self.path else None,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "drain_s": self.drain_s,
            # only in hosts mode, or where it overrides a manifest's hosts: a proxy-mode run
            # records what an older zchaos did
            **({"network": self.network} if "hosts" in (self.network, self.manifest.network) else {}),
            "topology": self.topology,
            # only when some role says: a scenario without it records what an older zchaos did
            **({"start": {role: _start_text(gap) for role, gap in self.start.items()}} if self.start else {}),
            "options": self.options,
            "load": {
                "users": self.load.users,
                "spawn_rate": self.load.spawn_rate,
                "wait_ms": self.load.wait_ms,
                "payload_bytes": self.load.payload_bytes,
                "processes": self.load.processes,
                "phases": [p.as_dict() for p in self.load.phases],
            },
            "expect_violated": list(self.expect_violated),
            "baseline": self.baseline,
            "written_for": self.written_for,
            "expect_set_aside": list(self.expect_set_aside),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            # only for a scenario that gives relative values (contract/calibration.py)
            **({"resolved": [dict(r) for r in self.resolved]} if self.resolved else {}),
        }


#: The [promises] keys a scenario may give relative to the calibration, with their units.
RELATIVE_PROMISES = {"latency_p99_ms": "ms", "recovery_bound_s": "s", "steady_grace_s": "s"}


@dataclass
class Relatives:
    """Resolves the relative values of one scenario (contract/calibration.py's grammar)
    against ``calibration``, or to stand-ins without one, and records each."""

    calibration: Calibration | None
    resolved: list[dict[str, Any]] = field(default_factory=list)

    def resolve(
        self,
        table: Table,
        key: str,
        unit: str,
        stand_in: float,
        *,
        wait_ms: float = 0.0,
        integer: bool = False,
    ) -> None:
        """Put the number for ``table``'s relative value at ``key`` in its place (a value
        that is not relative is left for the table's own check); ``integer``: a whole
        number (rounded up), for an option whose default is one."""
        given = table.data.get(key)
        # A string where a number goes is a relative value or a mistake (an option may take
        # other strings: reply_deadline_s = "auto").
        plain_string = isinstance(given, str) and (unit == "users" or key in RELATIVE_PROMISES)
        if not (is_relative(given) or plain_string):
            return
        try:
            relative = parse_relative(str(given), unit)
        except ValueError as exc:
            raise table.error(key, str(exc)) from None
        if self.calibration is None:
            value = relative.fallback(stand_in)
        else:
            value = relative.resolve(self.calibration, unit, wait_ms=wait_ms)
        number: float | int
        if unit == "users" or integer:
            number = math.ceil(value - 1e-9)
        elif unit == "ms":
            number = float(math.ceil(value))
        else:
            number = math.ceil(value * 10) / 10
        table.data[key] = number
        where = ".".join(str(p) for p in table.path)
        name = f"{where}.{key}" if where else key
        self.resolved.append({"key": name, "given": relative.text, "value": number})

    def resolve_options(self, table: Table, stand_ins: dict[str, Any]) -> None:
        """Client options in ms or s given relative (``timeout_ms = "3x p99, at least 2500"``)."""
        for key in list(table.data):
            if not is_relative(table.data[key]):
                continue
            unit = "ms" if key.endswith("_ms") else "s" if key.endswith("_s") else ""
            if not unit:
                raise table.error(
                    key, "a relative value is for an option in ms or s (a name ending _ms or _s)"
                )
            stand_in = stand_ins.get(key)
            number = isinstance(stand_in, int | float) and not isinstance(stand_in, bool)
            self.resolve(
                table,
                key,
                unit,
                float(stand_in) if number else 0.0,  # type: ignore[arg-type]
                integer=isinstance(stand_in, int) and not isinstance(stand_in, bool),
            )


def _schedule(ft: Table, duration_s: float) -> Schedule:
    """When one fault line fires; its times must lie within the load whatever the seed."""
    ways = [k for k in ("at_s", "every_s", "random") if ft.has(k)]
    if len(ways) != 1:
        raise ft.error(None, "give exactly one of at_s = [..], every_s = N or random = {count, between}")
    if ft.has("at_s"):
        at = ft.get("at_s", (list, float))
        schedule = Schedule(at_s=tuple(ft.list_of("at_s", float) if isinstance(at, list) else [float(at)]))
    elif ft.has("every_s"):
        every = ft.get("every_s", float, minimum=0.1)
        start = ft.get("start_s", float, every, minimum=0)
        until = ft.get("until_s", float, duration_s, minimum=0)
        if (until - start) / every > MAX_FAULT_TIMES:
            raise ft.error("every_s", f"fires more than {MAX_FAULT_TIMES} times from start_s to until_s")
        schedule = Schedule(every_s=every, start_s=start, until_s=until)
    else:
        rt = ft.table("random")
        count = rt.get("count", int, minimum=1, maximum=MAX_FAULT_TIMES)
        between = rt.list_of("between", float)
        if len(between) != 2 or between[0] > between[1]:
            raise rt.error("between", f"expected [earliest_s, latest_s], got {between!r}")
        rt.done()
        for t in between:  # every time drawn lies between them, on any seed
            if not 0 <= t <= duration_s:
                raise rt.error("between", f"fault time {t} s lies outside the load (0 to {duration_s} s)")
        return Schedule(count=count, between=(between[0], between[1]))
    for t in schedule.times(0, 0):  # at_s and every_s: the seed draws nothing
        if not 0 <= t <= duration_s:
            raise ft.error(None, f"fault time {t} s lies outside the load (0 to {duration_s} s)")
    return schedule


def _phases(
    lt: Table, users: int, spawn_rate: float, wait_ms: float, rel: Relatives
) -> tuple[LoadPhase, ...]:
    """``[[load.phases]]``: each phase's users, spawn rate and wait default to [load]'s."""
    phases: list[LoadPhase] = []
    start = 0.0
    for i, pt in enumerate(lt.tables("phases"), start=1):
        rel.resolve(pt, "users", "users", users, wait_ms=_number(pt.data.get("wait_ms"), wait_ms))
        name = pt.get("name", str, f"phase-{i}")
        if any(p.name == name for p in phases):
            raise pt.error("name", f"a phase named {name!r} comes earlier: give each phase its own name")
        duration = pt.get("duration_s", float, minimum=0.1, maximum=MAX_DURATION_S)
        phase = LoadPhase(
            name=name,
            start_s=start,
            duration_s=duration,
            # 0 users: no load at all for a while (the users stop and new ones start after)
            users=pt.get("users", int, users, minimum=0, maximum=MAX_USERS),
            spawn_rate=pt.get("spawn_rate", float, spawn_rate, minimum=0.1),
            wait_ms=pt.get("wait_ms", float, wait_ms, minimum=0),
        )
        pt.done()
        phases.append(phase)
        start = round(start + duration, 6)
    if lt.has("phases") and not phases:
        raise lt.error("phases", "is empty: give at least one [[load.phases]] or leave it out")
    if phases and not any(p.users for p in phases):
        raise lt.error("phases", "every phase has 0 users: there would be no load at all")
    return tuple(phases)


def check_target(
    target: str, link_fault: bool, manifest: Manifest, topology: dict[str, int], ft: Table
) -> None:
    """Raise unless ``target`` names what the fault can hit: an instance, a role or a role
    selector (``worker:random``); for a network fault also a link (``link:clients``), and
    an instance then stands for every link it connects over."""
    roles = manifest.roles
    if link_fault:
        roles = {n: r for n, r in roles.items() if r.connects}
    instances = {i for r in roles.values() for i in r.instance_names(topology[r.name])}
    links = set(link_names(manifest, topology)) if link_fault else set()
    if link_fault and target == CLIENTS:
        return  # every link of the load's clients
    role, _, selector = target.partition(":")
    role = role[:-1] if role.endswith("s") and role[:-1] in roles else role
    covered = any(covers(target, link) for link in links)
    if target in instances or covered or (role in roles and selector in ("", *SELECTORS)):
        if role in roles and topology[role] == 0:
            raise ft.error("target", f"role {role!r} has no instances in this topology")
        return
    known = sorted(instances) + [f"{r}:{s}" for r in roles for s in SELECTORS] + sorted(links)
    if link_fault:
        known.append(CLIENTS)
    raise ft.error("target", f"unknown target {target!r} (known: {', '.join(known)})")


def _link_ends(target: str, manifest: Manifest) -> str:
    """The processes at the ends of a link fault's target, as targets of a process fault
    (``target = "worker-1" or "queue"``): the connecting instance (not the load, which no
    process fault targets) and the roles that bind what it connects to."""
    link = parse_link(target)
    instance = target if link is None else link.instance
    if link is not None and link.endpoint is not None:
        endpoints = [link.endpoint]
    elif instance == CLIENTS:
        endpoints = client_endpoints(manifest)
    else:
        role = manifest.roles.get(instance.rsplit("-", 1)[0]) or manifest.roles.get(
            instance.partition(":")[0]
        )
        endpoints = list(role.connects) if role is not None else []
    ends = [] if instance == CLIENTS else [instance]
    ends += [r for r in dict.fromkeys(manifest.endpoints[e] for e in endpoints if e in manifest.endpoints)]
    return "target = " + " or ".join(f'"{e}"' for e in ends)


def _number(value: Any, default: float) -> float:
    """``value`` when it is a number (the table's own check refuses it later if it is not)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _availability_window_s(calibration: Calibration, load: LoadSpec) -> float:
    """The time before a fault that holds the attempts ``availability`` needs twice over at
    the rate this load gets from the calibrated system (at least the default window)."""
    per_user = 1000.0 / (calibration.p50_ms + load.wait_ms) if calibration.p50_ms + load.wait_ms > 0 else 1e9
    rate = min(calibration.capacity_rps, load.users * per_user)
    if rate <= 0:
        return DEFAULT_AVAILABILITY_WINDOW_S
    return float(max(DEFAULT_AVAILABILITY_WINDOW_S, math.ceil(2 * MIN_WINDOW_ATTEMPTS / rate)))


def _client_overrides(
    top: Table, lt: Table, manifest: Manifest, foreign: Foreign | None, rel: Relatives
) -> tuple[ClientKind, ...]:
    """The manifest's client kinds with ``[load] client`` and ``[clients.NAME]`` applied;
    with ``foreign`` (another implementation than the scenario's own) what they lack is
    skipped and noted there instead of refused."""
    ct = top.table("clients")
    brought = _brought_kinds(ct, manifest)
    pool = (*manifest.clients, *brought)
    stand_ins = {k: v for kind in pool for k, v in {**_defaults(kind), **kind.options}.items()}
    if isinstance(lt.data.get("client"), dict):
        rel.resolve_options(Table(lt.data["client"], lt.file, *lt.path, "client"), stand_ins)
    common = dict(lt.get("client", dict, {}))
    for key in list(common):
        if not any(key in k.options or _knows(k, key) for k in pool):
            if foreign is not None:
                foreign.skip("[load] client", key, "a client option")
                del common[key]
                continue
            known = "; ".join(f"kind {k.name}: {known_options(k.adapter, k.options)}" for k in pool)
            raise lt.error("client", f"{key!r} is not a client option of {manifest.name} ({known})")
    by_name = {k.name: k for k in pool}
    for name in list(ct.data):
        if name not in by_name:
            if foreign is not None:
                foreign.skip("[clients]", name, "a client kind")
                ct.get(name, dict)
                continue
            raise ct.error(name, f"no client kind {name!r} in {manifest.name} (kinds: {sorted(by_name)})")
    kinds = []
    for kind in pool:
        applied = {k: v for k, v in common.items() if k in kind.options or _knows(kind, k)}
        check_client_options(kind.adapter, applied, lt, "client")
        weight, users, in_order = kind.weight, kind.users, kind.in_order
        if kind.name in ct.data:
            kt = ct.table(kind.name)
            # what _brought_kinds read of another Table of the same data
            for key in ("adapter", "endpoint") if kind in brought else ("adapter",):
                kt.get(key, object, None)
            in_order = kt.get("in_order", bool, in_order)
            if isinstance(kt.data.get("options"), dict):
                kind_stand_ins = {**_defaults(kind), **kind.options}
                rel.resolve_options(Table(kt.data["options"], kt.file, *kt.path, "options"), kind_stand_ins)
            own = dict(kt.get("options", dict, {}))
            for key in list(own):
                if key not in kind.options and not _knows(kind, key):
                    if foreign is not None:
                        foreign.skip(f"[clients.{kind.name}] options", key, "a client option")
                        del own[key]
                        continue
                    known = known_options(kind.adapter, kind.options)
                    raise kt.table("options").error(
                        key, f"not a client option of kind {kind.name!r} ({known})"
                    )
            check_client_options(kind.adapter, own, kt)
            applied.update(own)
            if kt.has("weight") and kt.has("users"):
                raise kt.error(None, "give weight (a share of the users) or users (a fixed number), not both")
            if kt.data.get("weight") == 0:
                raise kt.error("weight", "must be at least 1, got 0 (users = 0 switches the kind off)")
            weight = kt.get("weight", int, weight, minimum=1)
            users = kt.get("users", int, 0 if kt.has("weight") else users, minimum=0, maximum=MAX_USERS)
            kt.done()
            if kt.has("users") and users == 0:
                continue  # switched off: no user of this kind
        kinds.append(
            replace(kind, options={**kind.options, **applied}, weight=weight, users=users, in_order=in_order)
        )
    ct.done()
    if not kinds:
        raise ct.error(None, "every client kind has users = 0: there would be no load at all")
    return tuple(kinds)


def _defaults(kind: ClientKind) -> dict[str, Any]:
    """The options of ``kind``'s adapter with their defaults."""
    from loadtests.adapters import adapter_class

    return dict(adapter_class(kind.adapter).DEFAULTS)


def _family_of(adapter: str) -> str | None:
    from implementations import families

    return next((f.name for f in families().values() if adapter in f.adapters), None)


def _brought_kinds(ct: Table, manifest: Manifest) -> list[ClientKind]:
    """The client kinds a scenario brings: each ``[clients.NAME]`` with an ``adapter`` that
    is no kind of the manifest, a built-in client of the family the manifest's clients speak
    (the asynchronous MDP client for any Majordomo broker). Its endpoints default to the
    manifest's first kind's; its options, weight, users and in_order are read as an
    override's. The same table on a manifest that has the kind is an override of it."""
    by_name = {k.name: k for k in manifest.clients}
    brought = []
    for name in list(ct.data):
        kt = ct.table(name)
        if not kt.has("adapter"):
            continue
        adapter = kt.get("adapter", str)
        if name in by_name:
            if adapter != by_name[name].adapter:
                raise kt.error(
                    "adapter",
                    f"kind {name!r} of {manifest.name} uses adapter {by_name[name].adapter!r}: "
                    "give the kind you bring a name of its own",
                )
            continue
        if adapter_of(adapter, kt).RUNS_PROGRAM:
            raise kt.error("adapter", "a scenario brings built-in clients only; a program is its manifest's")
        family = _family_of(adapter)
        spoken = {f for k in manifest.clients if (f := _family_of(k.adapter))}
        if family not in spoken:
            raise kt.error(
                "adapter",
                f"adapter {adapter!r} speaks {family or 'no family'}; the clients of {manifest.name} speak "
                f"{', '.join(sorted(spoken)) or 'no protocol zchaos knows'}",
            )
        endpoints = manifest.clients[0].endpoints
        if kt.has("endpoint"):
            endpoints = (kt.get("endpoint", str),)
            if endpoints[0] not in manifest.endpoints:
                raise kt.error(
                    "endpoint", f"{endpoints[0]!r} is not in [endpoints] {sorted(manifest.endpoints)}"
                )
        brought.append(ClientKind(name, adapter, endpoints, {}, in_order=manifest.promises.in_order))
    return brought


@dataclass
class Foreign:
    """A scenario run against another implementation than the one it was written for: what
    of it that implementation lacks is skipped, each with a note saying why."""

    written_for: str
    manifest: Manifest
    notes: list[str] = field(default_factory=list)

    def skip(self, where: str, key: str, what: str) -> None:
        self.notes.append(
            f"{where} {key}: {what} of {self.written_for}, the implementation the scenario was written "
            f"for; {self.manifest.name} has none, so it is skipped"
        )


def is_implementation(ref: str, manifest: Manifest, scenario_path: Path | None) -> bool:
    """``ref`` (a built-in name or a manifest's path, as a scenario gives it) names ``manifest``."""
    try:
        found = manifest_path(ref, relative_to=scenario_path.parent if scenario_path else None)
    except SetupError:
        return False  # no such built-in: not this one either
    return found == manifest.path.resolve()


#: how a note of a deadline made from the plan begins (``with_seed`` makes it again)
_AUTO_NOTE = "client kind %s: reply_deadline_s = auto"


def _reply_deadlines(
    kinds: tuple[ClientKind, ...],
    promises: Promises,
    options: dict[str, Any],
    faults: list[FaultSpec],
    notes: list[str],
    seed: int,
) -> tuple[tuple[ClientKind, ...], list[str]]:
    """The client kinds with each ``reply_deadline_s = "auto"`` made the deadline the
    system's own timers need under this fault plan (``timer_deadline_s``, noted in
    ``notes``), and a warning for each deadline given as a number that falls short of it."""
    declared = expiry_s(promises.expiry_ms, options)
    expiry = promises.steady_grace_s if declared is None else declared
    source = (
        "[promises] steady_grace_s, as no expiry_ms is given"
        if declared is None
        else f"[promises] expiry_ms = {promises.expiry_ms}"
    )
    times = [t for f in faults if FAULT_KINDS[f.kind].harm == OUTAGE for t in f.schedule.times(seed, f.index)]
    needed, outages = timer_deadline_s(times, expiry, promises.recovery_bound_s)
    why = (
        f"{outages} outage(s) of the fault plan one request can live through, each held up to the expiry "
        f"{expiry:g} s ({source}) before it is handed on, + recovery_bound_s {promises.recovery_bound_s:g}"
    )
    resolved, warnings = [], []
    for kind in kinds:
        deadline = kind.options.get("reply_deadline_s")
        if deadline == AUTO_DEADLINE:
            kind = replace(kind, options={**kind.options, "reply_deadline_s": needed})
            notes.append(f"{_AUTO_NOTE % kind.name} = {needed:g} s ({why})")
        elif _never_resends(kind) and 0 < float(deadline or 0) < needed:
            warnings.append(
                f"client kind {kind.name}: reply_deadline_s = {deadline:g} s cannot cover the system's own "
                f"timers ({why} = {needed:g} s): a correct system may answer after it and the request counts "
                f'as lost; give reply_deadline_s = "{AUTO_DEADLINE}" (or at least {needed:g})'
            )
        resolved.append(kind)
    return tuple(resolved), warnings


def _never_resends(kind: ClientKind) -> bool:
    """A client of ``kind`` sends each request once, and calls it lost after its deadline."""
    from loadtests.adapters import adapter_class

    deadline = kind.options.get("reply_deadline_s")
    number = isinstance(deadline, int | float) and not isinstance(deadline, bool)
    return number and adapter_class(kind.adapter).NO_RESEND_DEADLINE


def _knows(kind: ClientKind, key: str) -> bool:
    """The kind's adapter has option ``key`` (the manifest may not have set it)."""
    from loadtests.adapters import adapter_class

    return key in adapter_class(kind.adapter).DEFAULTS


def _override_promises(
    top: Table, promises: Promises, options: dict[str, Any], rel: Relatives, roles: tuple[str, ...]
) -> Promises:
    """The manifest's promises with the scenario's ``[promises]`` values (not its checks),
    checked as the manifest's are (``parse_promises``) and with the scenario's options;
    the bounds of RELATIVE_PROMISES may be given relative to the calibration."""
    pt = top.table("promises")
    current = promises.as_dict()
    for key, unit in RELATIVE_PROMISES.items():
        rel.resolve(pt, key, unit, float(current[key]))
    known = sorted({k for k in current if k != "checks"} | {"availability_window_s", *UNRECOVERED_KEYS})
    for key in list(pt.data):
        if key not in known:
            raise pt.error(key, f"not a promise of the manifest to override (known: {', '.join(known)})")
        if key in promises.extra:  # a family's own promise: keep the manifest's type
            default = promises.extra[key]
            pt.get(key, float if isinstance(default, float) else type(default))
    merged = {k: v for k, v in current.items() if v is not None} | pt.data
    return parse_promises(Table(merged, pt.file, *pt.path), options, check_names=False, roles=roles)


def binding_roles_on_hosts(manifest: Manifest, topology: dict[str, int]) -> list[tuple[str, str]]:
    """(role, why) for each role that binds an endpoint and has several instances in
    ``topology``: on hosts each would bind its own host's address, and every connector reach
    the first alone; the others would idle unseen (through the proxy they collide on one port)."""
    return [
        (
            role.name,
            f"role {role.name!r} binds {', '.join(role.binds)}: on hosts its {topology[role.name]} instances "
            "would each bind their own address and everything that connects would reach the first alone",
        )
        for role in manifest.roles.values()
        if role.binds and topology[role.name] > 1
    ]


def parse_scenario(
    data: dict[str, Any],
    path: Path | None,
    *,
    where: str | Path = "",
    manifest: Manifest | None = None,
    calibration: Calibration | None = None,
) -> Scenario:
    """A scenario from its TOML data; ``manifest`` stands for the implementation's file
    (a replay parses the manifest text a run recorded, not today's file); ``calibration``
    is what its relative values resolve against (without one they stand in, and the
    scenario is ``uncalibrated``)."""
    where = where or path or "<scenario>"
    source = copy.deepcopy(data)
    data = copy.deepcopy(data)  # relative values are replaced by numbers in it
    rel = Relatives(calibration)
    top = Table(data, where)
    name = top.get("name", str, path.stem if path else "scenario")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise top.error("name", "use letters, digits, '.', '_' and '-' only (it names the run folder)")
    description = top.get("description", str, "")
    impl_ref = top.get("implementation", str)
    if manifest is None:
        try:
            manifest = load_manifest(impl_ref, relative_to=path.parent if path else None)
        except SetupError as exc:
            raise top.error("implementation", str(exc)) from None
    base_manifest = manifest
    written_for = top.get("written_for", str, impl_ref)
    own = written_for == impl_ref or is_implementation(written_for, manifest, path)
    notes: list[str] = []
    foreign = None if own else Foreign(written_for, manifest, notes)
    seed = top.get("seed", int, 1, maximum=MAX_SEED)
    duration_given = top.has("duration_s")
    duration_s = top.get("duration_s", float, 60.0, minimum=1, maximum=MAX_DURATION_S)
    drain_s = top.get("drain_s", float, manifest.promises.recovery_bound_s, minimum=0)
    # the manifest's unless the scenario says: a system that only makes sense on hosts says so once
    network = top.get("network", str, manifest.network, choices=NETWORKS)

    tt = top.table("topology")
    topology = {name: role.count for name, role in manifest.roles.items()}
    start = _start_timing(tt, manifest) if isinstance(tt.data.get("start"), dict) else {}
    for role_name in list(tt.data):
        if role_name == "start" and isinstance(tt.data[role_name], dict):
            continue
        # Zero instances would leave every check with nothing to judge, and "judged" said so.
        count = tt.get(role_name, int, minimum=1, maximum=MAX_INSTANCES)
        role = manifest.roles.get(role_name)
        if role is None:
            raise tt.error(role_name, f"no such role in {manifest.name} (roles: {sorted(manifest.roles)})")
        if not role.scalable and count != role.count:
            raise tt.error(role_name, f"role {role_name!r} is not scalable (the manifest fixes {role.count})")
        topology[role_name] = count
    if network == "hosts":
        for role_name, problem in binding_roles_on_hosts(manifest, topology):
            raise tt.error(role_name if role_name in tt.data else None, f"{problem}; give it 1 instance")
    tt.done()

    ot = top.table("options")
    options = dict(manifest.options)
    for key in list(ot.data):
        if key not in manifest.options:
            if foreign is not None:  # e.g. the work_ms of our workers, for a system of the user's
                foreign.skip("[options]", key, "an option")
                ot.get(key, object)
                continue
            raise ot.error(key, f"not an option of {manifest.name} (options: {sorted(manifest.options)})")
        options[key] = ot.get(key, type(manifest.options[key]))
    ot.done()

    lt = top.table("load")
    defaults = LoadSpec()
    clients = _client_overrides(top, lt, manifest, foreign, rel)
    promises = _override_promises(top, manifest.promises, options, rel, tuple(manifest.roles))
    manifest = replace(manifest, clients=clients, promises=promises)
    load_wait_ms = _number(lt.data.get("wait_ms"), defaults.wait_ms)
    rel.resolve(lt, "users", "users", defaults.users, wait_ms=load_wait_ms)
    users = lt.get("users", int, defaults.users, minimum=1, maximum=MAX_USERS)
    spawn_rate = lt.get("spawn_rate", float, defaults.spawn_rate, minimum=0.1)
    wait_ms = lt.get("wait_ms", float, defaults.wait_ms, minimum=0)
    phases = _phases(lt, users, spawn_rate, wait_ms, rel)
    if phases:
        total = phases[-1].end_s
        if duration_given and abs(total - duration_s) > 1e-6:
            raise lt.error(
                "phases",
                f"the phases last {total:g} s in all but duration_s = {duration_s:g}: "
                "make them agree, or leave duration_s out (it is then their sum)",
            )
        duration_s = total
    load = LoadSpec(
        users=max((p.users for p in phases), default=users),
        spawn_rate=spawn_rate,
        wait_ms=wait_ms,
        payload_bytes=lt.get(
            "payload_bytes", int, defaults.payload_bytes, minimum=16, maximum=MAX_PAYLOAD_BYTES
        ),
        processes=lt.get("processes", int, defaults.processes, minimum=1, maximum=MAX_PROCESSES),
        clients=clients,
        phases=phases,
    )
    window_given = "availability_window_s" in top.data.get("promises", {})
    if calibration is not None and rel.resolved and not window_given:
        window = _availability_window_s(calibration, load)
        manifest = replace(manifest, promises=replace(manifest.promises, availability_window_s=window))
        rel.resolved.append(
            {"key": "promises.availability_window_s", "given": "from the measured rate", "value": window}
        )
    fixed = sum(k.users for k in clients)
    if fixed > load.users or (fixed == load.users and any(k.users == 0 for k in clients)):
        shared = [k.name for k in clients if k.users == 0]
        raise lt.error(
            "users",
            f"{load.users} users cannot hold the {fixed} fixed users of the client kinds"
            + (f" and a share for {', '.join(shared)}" if shared else ""),
        )
    lt.done()

    faults = []
    for i, ft in enumerate(top.tables("faults"), start=1):
        kind_name = ft.get("kind", str)
        kind = FAULT_KINDS.get(kind_name)
        if kind is None:
            raise ft.error("kind", f"unknown fault {kind_name!r} (known: {', '.join(sorted(FAULT_KINDS))})")
        target = ft.get("target", str)
        check_target(target, kind.target == "link", manifest, topology, ft)
        if kind.hosts and network != "hosts":
            raise ft.error("kind", f'{kind_name} acts on packets between hosts: it needs network = "hosts"')
        if kind.target == "link" and network == "hosts" and kind.on_hosts is None:
            instead = kind.hosts_instead or "host_partition or netem on {ends}"
            raise ft.error(
                "kind",
                f'{kind_name} on {target} needs the fault proxy, which network = "hosts" has not; '
                f"instead: {instead.format(ends=_link_ends(target, manifest))}",
            )
        schedule = _schedule(ft, duration_s)
        params = {}
        for pname, spec in kind.params.items():
            value = ft.get(
                pname,
                spec.type,
                REQUIRED if spec.required else spec.default,
                minimum=spec.min,
                maximum=spec.max,
                choices=spec.choices,
            )
            if value is not None:
                params[pname] = value
        ft.done()
        if kind.on_hosts is not None and network == "hosts" and params.get("toxicity", 1.0) < 1.0:
            # a rule cuts every connection of the link; the proxy picks some
            raise ft.error(
                "toxicity",
                f"{kind_name} on hosts cuts every connection of the link: "
                'toxicity < 1 needs network = "proxy"',
            )
        if kind.validate is not None:
            try:
                kind.validate(params, target, manifest)
            except ParamProblem as problem:
                raise ft.error(problem.key, problem.message) from None
        faults.append(FaultSpec(i, kind_name, target, schedule, params))

    auto_deadlines = tuple(k.name for k in clients if k.options.get("reply_deadline_s") == AUTO_DEADLINE)
    clients, warnings = _reply_deadlines(clients, manifest.promises, options, faults, notes, seed)
    for client_kind in clients:
        deadline_problem = reply_deadline_problem(client_kind.options, manifest.promises)
        if deadline_problem:
            raise lt.error("client", f"client kind {client_kind.name!r}: {deadline_problem}")
    manifest = replace(manifest, clients=clients)
    load = replace(load, clients=clients)

    et = top.table("expect")
    expect_violated = tuple(et.list_of("violated", str, []))
    about = et.get("implementation", str, written_for)
    expect_set_aside: tuple[str, ...] = ()
    if expect_violated and not (own if about == written_for else is_implementation(about, manifest, path)):
        # A known weakness of one implementation says nothing of another: judged like any check.
        expect_set_aside, expect_violated = expect_violated, ()
        notes.append(
            f"[expect] violated = {list(expect_set_aside)} is about {about}, not {manifest.name} "
            f"({manifest.path}): set aside, so those checks are judged like every other"
        )
    for check in expect_violated:
        if check not in manifest.promises.checks:
            raise et.error(
                "violated", f"{check!r} is not a check of {manifest.name} ({list(manifest.promises.checks)})"
            )
    et.done()
    baseline = _baseline(top.table("baseline"))
    top.done()
    return Scenario(
        name=name,
        description=description,
        path=path,
        manifest=manifest,
        seed=seed,
        duration_s=duration_s,
        drain_s=drain_s,
        topology=topology,
        start=start,
        options=options,
        load=load,
        faults=tuple(faults),
        expect_violated=expect_violated,
        baseline=baseline,
        written_for=written_for,
        expect_set_aside=expect_set_aside,
        notes=tuple(notes),
        warnings=tuple(warnings),
        source=source,
        base_manifest=base_manifest,
        calibration=calibration if rel.resolved else None,
        resolved=tuple(rel.resolved),
        auto_deadlines=auto_deadlines,
        network=network,
    )


#: The longest gap between two starts of a role's instances ([topology] start).
MAX_STAGGER_S = 600.0
START_CHOICES = ("in_turn", "together")


def _start_text(gap: float) -> str | dict[str, float]:
    return "together" if gap == 0 else {"stagger_s": gap}


def _start_timing(tt: Table, manifest: Manifest) -> dict[str, float]:
    """``[topology] start``: role -> "in_turn", "together" or { stagger_s = N }."""
    st = tt.table("start")
    start: dict[str, float] = {}
    for role_name in list(st.data):
        if role_name not in manifest.roles:
            raise st.error(role_name, f"no such role in {manifest.name} (roles: {sorted(manifest.roles)})")
        value = st.get(role_name, (str, dict))
        if isinstance(value, str):
            if value not in START_CHOICES:
                raise st.error(
                    role_name,
                    f"expected {' or '.join(map(repr, START_CHOICES))} or {{ stagger_s = N }}, got {value!r}",
                )
            if value == "together":
                start[role_name] = 0.0
            continue
        gt = st.table(role_name)
        start[role_name] = gt.get("stagger_s", float, minimum=0, maximum=MAX_STAGGER_S)
        gt.done()
    st.done()
    return start


#: The ratios a [baseline] may bound, and the slack each allows beyond its ratio.
BASELINE_RATIOS = ("recovery_ratio", "p99_ratio", "availability_ratio")


def _baseline(bt: Table) -> dict[str, Any] | None:
    """``[baseline]``: the label of the stored baseline run and at least one ratio."""
    if not bt.data:
        return None
    promise: dict[str, Any] = {"label": bt.get("label", str)}
    if not promise["label"].strip():
        raise bt.error("label", "is empty: name the baseline (zchaos baseline RUN --label NAME)")
    for key in ("recovery_ratio", "p99_ratio"):
        value = bt.get(key, float, None, minimum=1.0)
        if value is not None:
            promise[key] = value
    value = bt.get("availability_ratio", float, None, minimum=0.0, maximum=1.0)
    if value is not None:
        promise["availability_ratio"] = value
    promise["recovery_slack_s"] = bt.get("recovery_slack_s", float, 0.5, minimum=0.0)
    promise["p99_slack_ms"] = bt.get("p99_slack_ms", float, 1.0, minimum=0.0)
    bt.done()
    if not any(k in promise for k in BASELINE_RATIOS):
        raise bt.error(None, f"give at least one of {', '.join(BASELINE_RATIOS)}")
    return promise


def reparse(
    scenario: Scenario,
    data: dict[str, Any],
    *,
    where: str | Path = "",
    calibration: Calibration | None = None,
) -> Scenario:
    """``scenario`` parsed again from other TOML data (another seed, a smaller variant),
    with the same manifest, the same folder for relative paths and the same calibration
    (or ``calibration``)."""
    again = parse_scenario(
        data,
        scenario.path,
        where=where or scenario.path or "<scenario>",
        manifest=scenario.base_manifest,
        calibration=calibration or scenario.calibration,
    )
    return replace(again, sets=scenario.sets)


def with_seed(scenario: Scenario, seed: int) -> Scenario:
    """The same scenario with another seed: fields replaced, nothing parsed again. The seed
    is drawn from in ``fault_plan``, and so in the reply deadlines given as "auto", which
    cover the outages of the seed's own plan (random fault times): those are made again, by
    the function that made them (a deadline kept from the first seed once judged every other
    seed's requests by it)."""
    reseeded = replace(scenario, seed=seed, source={**scenario.source, "seed": seed})
    if not scenario.auto_deadlines:
        return reseeded
    made = tuple(_AUTO_NOTE % name for name in scenario.auto_deadlines)
    notes = [n for n in scenario.notes if not n.startswith(made)]
    kinds = tuple(
        replace(k, options={**k.options, "reply_deadline_s": AUTO_DEADLINE})
        if k.name in scenario.auto_deadlines
        else k
        for k in scenario.load.clients
    )
    promises = scenario.manifest.promises
    clients, warnings = _reply_deadlines(
        kinds, promises, scenario.options, list(scenario.faults), notes, seed
    )
    return replace(
        reseeded,
        manifest=replace(scenario.manifest, clients=clients),
        load=replace(scenario.load, clients=clients),
        notes=tuple(notes),
        warnings=tuple(warnings),
    )


def fault_plan(scenario: Scenario) -> list[PlannedFault]:
    """The run's plan: every fault's times and targets drawn from the scenario's seed. The
    runner, ``zchaos check``, ``--seeds``, replay and shrink all plan through here."""
    return plan_faults(
        scenario.faults, {r: scenario.instances(r) for r in scenario.manifest.roles}, scenario.seed
    )


def apply_sets(data: dict[str, Any], sets: Sequence[str], where: str | Path) -> dict[str, Any]:
    """``data`` (a copy) with each ``--set KEY=VALUE`` applied: a dotted key into the
    scenario's tables (a number picks an item of a list, ``faults.0.at_s``), the value read
    as a TOML value (text that is not one is a string: ``implementation=my-broker``). Only
    the way in: whether the key and the value fit is ``parse_scenario``'s to say."""
    data = copy.deepcopy(data)
    for given in sets:
        key, eq, text = given.partition("=")
        keys = key.strip().split(".")
        if not eq or not all(keys):
            raise SetupError(
                f"expected KEY=VALUE (a dotted key: options.server=...), got {given!r}", where="--set"
            )
        try:
            parsed = tomllib.loads(f"value = {text}")
            value = parsed["value"] if len(parsed) == 1 else text
        except tomllib.TOMLDecodeError:
            value = text
        node: Any = data
        for depth, part in enumerate(keys):
            last = depth == len(keys) - 1
            here = key_path(where, *keys[: depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise SetupError(
                        f"no item {part} (there are {len(node)}; from --set {given})", where=here
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                where_above = key_path(where, *keys[:depth])
                raise SetupError(
                    f"is not a table, so it has no key {part!r} (from --set {given})", where=where_above
                )
    return data


def _from_set(exc: SetupError, sets: Sequence[str], where: str | Path) -> SetupError:
    """``exc`` saying which ``--set`` gave the key it names, when one did."""
    for given in sets:
        keys = given.partition("=")[0].strip().split(".")
        for depth in range(len(keys), 0, -1):
            if exc.where == key_path(where, *(int(k) if k.isdigit() else k for k in keys[:depth])):
                return SetupError(f"{exc.message} (from --set {given})", where=exc.where)
    return exc


def with_sets(data: dict[str, Any], sets: Sequence[str], where: str | Path) -> dict[str, Any]:
    """A scenario file's TOML ``data`` with the ``--set`` overrides given, as a run reads it."""
    if not sets:
        return data
    changed = apply_sets(data, sets, where)
    written = data.get("implementation")
    if "written_for" not in changed and isinstance(written, str) and changed.get("implementation") != written:
        # Run against another implementation, it is still the file's scenario for its own.
        changed["written_for"] = written
    return changed


def load_scenario(path: str | Path, *, sets: Sequence[str] = ()) -> Scenario:
    """The scenario of a file, with the ``--set KEY=VALUE`` overrides given."""
    path = Path(path)
    data = with_sets(load_toml(path, "scenario"), sets, path)
    try:
        scenario = parse_scenario(data, path.resolve(), where=path)
    except SetupError as exc:
        raise _from_set(exc, sets, path) from None
    return replace(scenario, sets=tuple(sets), from_file=True)
