"""What a system promises, and what a promise means: the defaults, the harms a fault does,
the ``survives`` rules and the ``expiry_ms`` expression.

The manifest reader (harness/manifest.py) parses ``[promises]`` into ``Promises``; the
checkers read the same promises back from ``run.json`` and interpret them with the
functions here, so the two never disagree on a default or on what a rule means.
Standard library only, like the rest of the contract.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from contract.links import target_instance

#: What a fault does to its target's service: an ``outage`` stops it serving (a crash, a
#: stall, a cut link), a ``slowdown`` only slows it. Each fault kind declares its harm
#: (its card in chaos/kinds/); a manifest's ``survives`` promise names harms or fault kinds.
OUTAGE, SLOWDOWN = "outage", "slowdown"
HARMS = (OUTAGE, SLOWDOWN)

#: What of the target's traffic a fault stops while it acts (each card says, beside its
#: harm): ``all`` of it (a killed, frozen or restarted process, a blackholed or closed
#: link: nothing reaches the target), ``connections`` one by one (reset, closed after so
#: many bytes: what each carried may be lost, but the peers reconnect and hear the target
#: between the cuts), or ``nothing`` a correct target has to lose (a slowdown; junk sent
#: beside the good requests, which a correct target drops and serves on).
STOPS_ALL, STOPS_CONNECTIONS, STOPS_NOTHING = "all", "connections", "nothing"
STOPS = (STOPS_ALL, STOPS_CONNECTIONS, STOPS_NOTHING)


def default_stops(harm: str) -> str:
    """What a fault of this harm stops when its card does not say: an outage all of its
    target's traffic, a slowdown nothing."""
    return STOPS_ALL if harm == OUTAGE else STOPS_NOTHING


#: The faults a system promises to stay available through unless its manifest says otherwise.
DEFAULT_SURVIVES = ("slowdown", "outage:some")
SURVIVE_SCOPES = ("", "some")

#: The defaults of the numeric promises, used by the manifest reader and ``Promises`` alike.
DEFAULT_RECOVERY_BOUND_S = 10.0
DEFAULT_LATENCY_P99_MS = 500.0
DEFAULT_AVAILABILITY_FLOOR = 0.5
#: How long before a fault gives ``availability`` its baseline, and the attempts that
#: baseline needs to judge (a calibrated scenario lengthens the window to hold them twice
#: at its measured rate: harness/scenario.py).
DEFAULT_AVAILABILITY_WINDOW_S = 5.0
MIN_WINDOW_ATTEMPTS = 10
EXECUTIONS = ("at_least_once", "exactly_once")


def expiry_s(expr: float | str | None, options: dict[str, Any]) -> float | None:
    """The seconds an ``expiry_ms`` promise comes to with these options (None: not given).

    ``expr`` is a number of milliseconds or ``"NAME * NAME * 2"``: a product of option
    names and numbers. Raises ValueError naming what does not evaluate.
    """
    if expr is None:
        return None
    if isinstance(expr, int | float) and not isinstance(expr, bool):
        return float(expr) / 1000
    product = 1.0
    for factor in str(expr).split("*"):
        token = factor.strip()
        try:
            product *= float(token)
            continue
        except ValueError:
            pass
        value = options.get(token)
        if isinstance(value, bool) or not isinstance(value, int | float):
            known = ", ".join(sorted(k for k, v in options.items() if isinstance(v, int | float)))
            raise ValueError(f"{token!r} is not a number nor a numeric option (options: {known or 'none'})")
        product *= float(value)
    return product / 1000


#: A no-resend client's ``reply_deadline_s`` taken from the system's own timers and the
#: fault plan (``timer_deadline_s``) rather than written as a number.
AUTO_DEADLINE = "auto"


def timer_deadline_s(
    outage_times_s: Collection[float], expiry: float, recovery_bound_s: float
) -> tuple[float, int]:
    """The reply deadline a client that never resends needs on a correct system, and the
    most outages one request can live through: (seconds, outages).

    Each outage a request lives through (its worker killed, frozen or cut off) can hold it
    until the system notices, one ``expiry`` (s), before it is handed on (a request may be
    re-queued once per kill); after the last one the system serves again within its
    recovery bound. So a deadline of ``recovery_bound_s + n x expiry`` covers ``n`` outages,
    and ``n`` is the most outage starts of the plan inside any stretch that long (found by
    widening the stretch until it holds no more).
    """
    times = sorted(outage_times_s)
    outages = 0
    while True:
        deadline = recovery_bound_s + outages * expiry
        most = max((sum(1 for u in times if t <= u <= t + deadline) for t in times), default=0)
        if most <= outages:
            return deadline, outages
        outages = most


#: The promises that name a system's declared weaknesses, each a list of roles (``unrecovered``).
UNRECOVERED_KEYS = ("unrecovered_restarts", "unrecovered_link_loss", "unrecovered_malformed")


def unrecovered(
    promises: dict[str, Any],
    processes: dict[str, str],
    target: str,
    restarts: bool,
    link_loss: bool = False,
    junk: bool = False,
) -> bool:
    """Whether the system does not promise to recover from a fault on ``target`` (an
    instance or a link; ``processes``: instance -> role): one that restarts its process
    (``restarts``: a kill or a restart, no duration of its own) on a role
    ``unrecovered_restarts`` names, one that loses data (``link_loss``) on a link of an
    instance of a role ``unrecovered_link_loss`` names, or junk sent to an instance of a role
    ``unrecovered_malformed`` names (``junk``)."""
    if restarts:
        return processes.get(target) in (promises.get("unrecovered_restarts") or ())
    if link_loss:
        return processes.get(target_instance(target)) in (promises.get("unrecovered_link_loss") or ())
    if junk:
        return processes.get(target) in (promises.get("unrecovered_malformed") or ())
    return False


def survive_rule(entry: str, fault_kinds: Collection[str] | None = None) -> tuple[str, str]:
    """``"outage:some"`` -> (``"outage"``, ``"some"``); ValueError for what is not a rule.

    With ``fault_kinds`` the head must be a harm or one of them (the manifest reader checks
    that); without, a head that is not a harm is taken as a fault kind (a recorded run's
    promises were checked when it ran).
    """
    head, _, scope = entry.partition(":")
    if fault_kinds is not None and head not in HARMS and head not in fault_kinds:
        raise ValueError(
            f"{entry!r}: expected a harm ({', '.join(HARMS)}) or a fault kind "
            f"({', '.join(fault_kinds)}), optionally with ':some'"
        )
    if scope not in SURVIVE_SCOPES:
        raise ValueError(f"{entry!r}: the scope after ':' can only be 'some'")
    return head, scope


def survives_every_outage(promises: dict[str, Any]) -> bool:
    """Whether ``survives`` holds an unscoped ``"outage"``: the system promises to carry its
    requests through any outage, also those of clients that never resend."""
    return any(survive_rule(e) == (OUTAGE, "") for e in promises.get("survives", DEFAULT_SURVIVES))


@dataclass(frozen=True)
class Promises:
    checks: tuple[str, ...]
    execution: str = "at_least_once"
    in_order: bool = True
    recovery_bound_s: float = DEFAULT_RECOVERY_BOUND_S
    steady_grace_s: float = DEFAULT_RECOVERY_BOUND_S
    latency_p99_ms: float = DEFAULT_LATENCY_P99_MS
    expiry_ms: float | str | None = None  # a number, or a product of option names (see expiry_s)
    availability_floor: float = DEFAULT_AVAILABILITY_FLOOR
    availability_window_s: float = DEFAULT_AVAILABILITY_WINDOW_S
    survives: tuple[str, ...] = DEFAULT_SURVIVES
    requeue: bool = False
    #: Roles whose restart (a kill or a restart of an instance: a new process) the system
    #: does not recover from, a weakness it declares (Simple Pirate's queue forgets its
    #: workers): the checks take such a fault as never healed (``unrecovered``).
    unrecovered_restarts: tuple[str, ...] = ()
    #: Roles whose links' lossy faults (a cut, a reset: a message lost on the way) the system
    #: does not recover from, a weakness it declares (a Simple Pirate worker whose request or
    #: reply was lost waits for good, and its queue takes it for busy: no heartbeats).
    unrecovered_link_loss: tuple[str, ...] = ()
    #: Roles that junk sent to them (a ``malformed`` fault) leaves harmed past the run's
    #: timers, a weakness it declares (a Simple Pirate queue lists every stranger that says
    #: READY, and each such ghost costs a request, however long after).
    unrecovered_malformed: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # family-specific promise values

    def as_dict(self) -> dict[str, Any]:
        return {
            "checks": list(self.checks),
            "execution": self.execution,
            "in_order": self.in_order,
            "recovery_bound_s": self.recovery_bound_s,
            "steady_grace_s": self.steady_grace_s,
            "latency_p99_ms": self.latency_p99_ms,
            "expiry_ms": self.expiry_ms,
            "availability_floor": self.availability_floor,
            "survives": list(self.survives),
            "requeue": self.requeue,
            # only when not the default: a run.json of a run that did not set it reads the same
            **(
                {"availability_window_s": self.availability_window_s}
                if self.availability_window_s != DEFAULT_AVAILABILITY_WINDOW_S
                else {}
            ),
            **({"unrecovered_restarts": list(restarts)} if (restarts := self.unrecovered_restarts) else {}),
            **({"unrecovered_link_loss": list(lossy)} if (lossy := self.unrecovered_link_loss) else {}),
            **({"unrecovered_malformed": list(junk)} if (junk := self.unrecovered_malformed) else {}),
            **self.extra,
        }
