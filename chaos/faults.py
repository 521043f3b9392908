"""What a fault kind is: its card (``FaultKind``), its parameters (``Param``), how it runs.

Each kind is one card, in a module of its own under ``chaos/kinds/`` (found there by
``chaos.kinds.FAULT_KINDS``): its parameters, how it runs (``run``: a handler the nemesis
calls, or for a link fault a ``Toxic`` with its attribute mapping, the default direction
being the ``direction`` parameter's default), what it does to its target (``harm``,
``target`` as the scope, ``lossy``, ``stops``) and a ``validate`` hook for rules across its parameters
and the manifest. The scenario reader validates every parameter against its ``Param``
(type, required or default, range, choices) and then calls ``validate``, before anything
starts; ``zchaos list`` prints the cards; the nemesis records each fault's class
(``fault_class``) in its ``fault_start`` and the runner in run.json's plan, so the reports
judge a fault from the history alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from contract.promises import HARMS, OUTAGE, STOPS, default_stops

if TYPE_CHECKING:
    from chaos.clock import Clocks
    from chaos.disk import Disks
    from chaos.hosts import Hosts
    from chaos.lazyfs import Layers
    from chaos.nemesis import PlannedFault
    from chaos.netfaults import NetworkFaults

REQUIRED: Any = ...  # a Param's default when the scenario must give the value
#: A Param's ``explore`` when exploration leaves it at its default.
FIXED: tuple[Any, ...] = ()
INT64_MAX = 2**63 - 1  # Toxiproxy's toxic attributes are Go int64

#: How a scenario picks instances of a role: ``worker:random`` (one, seeded), ``worker:half``
#: (half of them, rounded up, seeded), ``worker:all``.
SELECTORS = ("random", "half", "all")


@dataclass(frozen=True)
class Param:
    """One parameter of a fault kind: what the scenario may give and what it means."""

    type: type  # float, int, str or bool (an int is accepted for a float)
    default: Any = REQUIRED  # REQUIRED: the scenario must give it; None: optional, no value
    doc: str = ""
    unit: str = ""  # s, ms, us, KB/s, bytes; shown by `zchaos list`
    min: float | None = None  # inclusive bounds
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    #: It says how long the fault, or a part of it, lasts (seconds): ``zchaos shrink`` halves
    #: it, and a fault ends after its longest such parameter.
    length: bool = False
    #: What ``zchaos explore`` draws it from (harness/explore/generate.py): ``(lo, hi)`` for a
    #: number (inclusive, inside min/max: values that show a system something, not every value
    #: the type allows), the values to pick from for a parameter with choices, or ``FIXED``:
    #: left at its default (or, for the few the generator fills from the manifest, from
    #: there). None: not declared, which tests/test_fault_cards.py refuses for every card.
    explore: tuple[Any, ...] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self, name: str) -> str:
        """One line for `zchaos list`: ``direction: one of both, upstream, downstream (default both)``."""
        if self.choices:
            what = "one of " + ", ".join(map(str, self.choices))
        else:
            what = {float: "number", int: "integer", str: "string", bool: "true/false"}[self.type]
            if self.unit:
                what += f" in {self.unit}"
            upper = self.max if self.max is not None and self.max < INT64_MAX else None  # not the type's
            if self.min is not None and upper is not None:
                what += f", {self.min:g} to {upper:g}"
            elif self.min is not None:
                what += f", at least {self.min:g}"
            elif upper is not None:
                what += f", at most {upper:g}"
        if self.required:
            what += ", required"
        elif self.default is not None:
            what += f" (default {self.default})"
        return f"{name}: {what}" + (f" - {self.doc}" if self.doc else "")


class ParamProblem(Exception):
    """A fault's parameters do not fit (a card's ``validate``): the key at fault (None: the
    fault as a whole) and what is wrong, for the scenario reader to name with its file."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


class ProcessControl(Protocol):
    """What a fault may do to the run's processes (the supervisor, through the runner)."""

    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None: ...
    def running(self, instance: str) -> int | None:
        """The pid of ``instance`` if it runs now (a frozen process runs), else None."""
        ...

    def stop(self, instance: str) -> None: ...
    def start(self, instance: str) -> int: ...


class FaultRun(Protocol):
    """What a card's ``run`` handler gets from the nemesis that carries the fault out."""

    control: ProcessControl
    network: NetworkFaults | None  # the run's links behind the fault proxy (None: no link faults)
    endpoints: dict[str, tuple[str, str]]  # endpoint -> (its bound address, "client" or "worker" side)
    clocks: Clocks | None  # the faked clocks of the roles a clock fault targets (None: no clock faults)
    disks: Disks | None  # the data folders' file systems a disk fault fills (None: no disk faults)
    hosts: Hosts | None  # the run's network namespaces (None: not network = "hosts")
    lazyfs: Layers | None  # the lazy layers over data folders (None: no lose_unsynced faults)

    def started(self, fault: PlannedFault, **extra: Any) -> None:
        """Record ``fault_start`` (with the fault's class) and count the fault as injected."""

    def stopped(self, fault: PlannedFault, **extra: Any) -> None:
        """Record ``fault_stop``."""

    def missed(self, fault: PlannedFault) -> None:
        """The target was not running: record that the fault came and did nothing."""

    def target_pid(self, fault: PlannedFault) -> int | None:
        """The pid of the fault's target if it runs now; else None, the miss recorded."""

    def record(self, ev: str, fault: PlannedFault, **fields: Any) -> None:
        """Record another nemesis event about the fault (``malformed_batch``)."""

    def wait(self, seconds: float) -> bool:
        """Wait, unless the run is ending; True if the full time passed."""


#: How a fault is carried out: the nemesis calls it in the fault's own thread, with the
#: target's lock held; it records ``fault_start`` and ``fault_stop`` through ``run``.
Handler = Callable[[FaultRun, "FaultKind", "PlannedFault"], None]


@dataclass(frozen=True)
class Toxic:
    """How a link fault is made of a Toxiproxy toxic (chaos/netfaults.py)."""

    type: str  # the toxic's type: timeout, latency, ...
    attributes: dict[str, str] = field(default_factory=dict)  # fault parameter -> toxic attribute
    fixed: dict[str, int] = field(default_factory=dict)  # attributes with a set value (timeout 0)


@dataclass(frozen=True)
class FaultKind:
    """One fault kind's card."""

    name: str
    doc: str
    target: str  # "process" (an instance or a role selector) or "link": the fault's scope
    run: Handler
    params: dict[str, Param] = field(default_factory=dict)
    #: A link fault that loses what is sent (rather than delaying it): a message sent into
    #: it never arrives.
    lossy: bool = False
    #: What it does to the target's service (contract/promises.py HARMS).
    harm: str = OUTAGE
    #: What of the target's traffic it stops (contract/promises.py STOPS): None, what its
    #: harm stops (an outage all of it, a slowdown nothing); an outage that cuts connections
    #: one by one says ``connections``, junk a correct target survives ``nothing``.
    stops: str | None = None
    #: The toxic a link fault adds (None: it runs otherwise, see ``run``).
    toxic: Toxic | None = None
    #: Rules across the parameters, and against the manifest: ``validate(params, target,
    #: manifest)`` raises ParamProblem, and may fill in a parameter whose default comes
    #: from the manifest. The scenario reader calls it after checking each Param.
    validate: Callable[[dict[str, Any], str, Any], None] | None = None
    #: It acts through the target's faked wall clock (chaos/clock.py): the runner preloads
    #: libfaketime into every process of the target's role, and only then.
    clock: bool = False
    #: It fills the target's data folder (chaos/disk.py): the runner mounts a small file
    #: system there for the target's role, and only then.
    disk: bool = False
    #: It drops the target's unsynced writes (chaos/lazyfs.py): the runner mounts a lazy
    #: layer over the data folder of the target's role, and only then.
    lazy: bool = False
    #: It acts on the packets between hosts (chaos/hosts.py): the scenario must say
    #: ``network = "hosts"``.
    hosts: bool = False
    #: What the machine lacks for it (one line, or None): root, a library, a kernel module.
    missing: Callable[[], str | None] | None = None
    #: A link card in a ``network = "hosts"`` run, where there is no fault proxy: how it is
    #: carried out on the link's own TCP flows (chaos/packets.py ``hold_link``): iptables
    #: rules that "drop" or "reset" them, or a packet queue that holds them ("delay") or
    #: holds them to a "rate"; None: it needs the proxy, and the scenario reader refuses it
    #: there, saying what to use instead (``hosts_instead``).
    on_hosts: str | None = None
    hosts_instead: str = ""

    def __post_init__(self) -> None:
        for pname, spec in self.params.items():
            if not isinstance(spec, Param):
                raise TypeError(f"fault kind {self.name!r}: parameter {pname!r} must be declared as a Param")
        if self.harm not in HARMS or self.target not in ("process", "link"):
            raise TypeError(f"fault kind {self.name!r}: harm is one of {HARMS}, target process or link")
        if self.stops is not None and self.stops not in STOPS:
            raise TypeError(f"fault kind {self.name!r}: stops is one of {STOPS}")

    @property
    def instantaneous(self) -> bool:
        """True when the fault has no duration of its own (its stop follows its start)."""
        return "duration_s" not in self.params

    def fault_class(self) -> dict[str, Any]:
        """What ``fault_start`` and run.json's plan record of the kind, for the reports
        (contract/faults.py reads it back)."""
        return {
            "fault_scope": self.target,
            "fault_lossy": self.lossy,
            "fault_harm": self.harm,
            "fault_stops": self.stops or default_stops(self.harm),
            "fault_lasting": not self.instantaneous,
        }


def start_again(nemesis: FaultRun, fault: PlannedFault, after_s: float, done: str = "") -> None:
    """Start the fault's target again ``after_s`` seconds on (kill, restart, lose_unsynced),
    and record the fault's stop with the new pid, or that the run ended first; ``done``: what
    else the fault did, said first."""
    said = f"{done}; " if done else ""
    if nemesis.wait(after_s):
        new_pid = nemesis.control.start(fault.target)
        nemesis.stopped(fault, pid=new_pid, detail=f"{said}restarted")
    else:
        nemesis.stopped(fault, detail=f"{said}run ended before the restart")


# --- parameters several kinds share ----------------------------------------------------


#: How long an explored fault lasts (seconds): from a blink to longer than the usual
#: heartbeat liveness (3 s) and reply timeouts (2.5 s) of the families, so that both sides
#: of those timers get tried.
EXPLORE_DURATION_S = (0.5, 8.0)


def duration(
    doc: str = "how long the fault lasts", explore: tuple[float, float] = EXPLORE_DURATION_S
) -> Param:
    return Param(float, doc=doc, unit="s", min=0, length=True, explore=explore)


CHOICES_DIRECTION = ("both", "upstream", "downstream")


def direction(default: str) -> Param:
    """The link direction a toxic acts on; its default is the kind's default direction."""
    return Param(
        str,
        default,
        "upstream: towards the side that binds; downstream: back to the side that connects",
        choices=CHOICES_DIRECTION,
        explore=CHOICES_DIRECTION,
    )


def toxicity() -> Param:
    # Explored from half the connections up: a toxic on few of them mostly shows nothing.
    return Param(
        float, 1.0, "the fraction of the link's connections the toxic applies to", min=0, max=1,
        explore=(0.5, 1.0),
    )  # fmt: skip


def count(
    doc: str, unit: str, default: Any = REQUIRED, minimum: int = 0, *, explore: tuple[int, int] | None = None
) -> Param:
    """A whole number a toxic takes (Go int64)."""
    return Param(int, default, doc, unit, min=minimum, max=INT64_MAX, explore=explore)


def needs_data_dir(params: dict[str, Any], target: str, manifest: Any) -> None:
    """A card's ``validate`` for a fault on a role's data folder (disk_full, lose_unsynced):
    the target's role must declare one."""
    roles = getattr(manifest, "roles", None)
    if not roles:
        return
    name = target.partition(":")[0]
    role = roles.get(name) or roles.get(name.rsplit("-", 1)[0])
    if role is not None and role.data_dir is None:
        raise ParamProblem(
            "target",
            f"role {role.name!r} declares no data folder: give it one in its manifest ([roles.{role.name}] "
            f'data_dir = "{{run_dir}}/{role.name}-data", its command taking {{data_dir}})',
        )
