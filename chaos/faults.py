"""The fault kinds a scenario may schedule, with their parameters and what they model.

This table is the one place a fault kind is declared: the scenario reader validates every
parameter against its ``Param`` (type, required or default, range, choices) before
anything starts, ``zchaos list`` prints it, and the nemesis dispatches on
``FaultKind.name``. To add a kind, add a ``FaultKind`` here and a ``_do_<name>`` handler
to ``chaos.nemesis.Nemesis``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.malformed import FAMILIES
from contract.promises import OUTAGE, SLOWDOWN

REQUIRED: Any = ...  # a Param's default when the scenario must give the value
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


@dataclass(frozen=True)
class FaultKind:
    name: str
    doc: str
    target: str  # "process" (an instance or a role selector) or "link"
    params: dict[str, Param] = field(default_factory=dict)
    #: A rule across parameters: the problem with the given values, or None when they fit.
    check: Callable[[dict[str, Any]], str | None] | None = None
    #: A link fault that loses what is sent (rather than delaying it): a message sent into
    #: it never arrives. Recorded in ``fault_start`` so the checkers need no list of kinds.
    lossy: bool = False
    #: What it does to the target's service (see HARMS).
    harm: str = OUTAGE

    def __post_init__(self) -> None:
        for pname, spec in self.params.items():
            if not isinstance(spec, Param):
                raise TypeError(f"fault kind {self.name!r}: parameter {pname!r} must be declared as a Param")

    @property
    def instantaneous(self) -> bool:
        """True when the fault has no duration of its own (its stop follows its start)."""
        return "duration_s" not in self.params


def _duration(doc: str = "how long the fault lasts") -> Param:
    return Param(float, doc=doc, unit="s", min=0)


def _direction(default: str) -> Param:
    return Param(
        str,
        default,
        "upstream: towards the side that binds; downstream: back to the side that connects",
        choices=("both", "upstream", "downstream"),
    )


def _toxicity() -> Param:
    return Param(float, 1.0, "the fraction of the link's connections the toxic applies to", min=0, max=1)


def _count(doc: str, unit: str, default: Any = REQUIRED, minimum: int = 0) -> Param:
    return Param(int, default, doc, unit, min=minimum, max=INT64_MAX)


def _slicer_sizes(params: dict[str, Any]) -> str | None:
    if params.get("size_variation", 0) >= params["average_size"]:
        return (
            f"size_variation ({params['size_variation']}) must be below average_size "
            f"({params['average_size']}): pieces would have no size"
        )
    return None


FAULT_KINDS: dict[str, FaultKind] = {
    kind.name: kind
    for kind in (
        FaultKind(
            "kill",
            "SIGKILL the process group (a crash); start it again after restart_after_s if given",
            "process",
            {
                "restart_after_s": Param(
                    float, None, "start it again this long after (none: never)", "s", min=0
                )
            },
        ),
        FaultKind(
            "restart",
            "SIGTERM, wait for the exit, start again after delay_s (a deploy, a clean restart)",
            "process",
            {"delay_s": Param(float, 0.0, "pause between the exit and the new start", "s", min=0)},
        ),
        FaultKind(
            "freeze",
            "SIGSTOP for duration_s, then SIGCONT (a GC pause, a stuck process)",
            "process",
            {"duration_s": _duration()},
        ),
        FaultKind(
            "starve",
            "keep only `share` of one CPU for the process for duration_s (CPU overload, a slow host)",
            "process",
            {
                "duration_s": _duration(),
                # chaos/starve.py: a quota of 0 stops the process (that is freeze), 1 is no fault.
                "share": Param(float, 0.1, "the part of one CPU the process keeps", min=0.01, max=0.99),
            },
            harm=SLOWDOWN,
        ),
        # A hostile or broken peer (chaos/malformed.py): junk of a protocol family sent
        # straight to the endpoint the target binds (never through a link's proxy: the
        # sender is the attacker, not a link). `family` defaults to the manifest's name
        # when that is a family zchaos knows; the side (client or worker junk) is the
        # client side for an endpoint the manifest's clients use, the worker side otherwise.
        # harness/scenario.py check_malformed checks endpoint and family against the manifest.
        FaultKind(
            "malformed",
            "send `family` junk (bad frames, unknown commands, strangers' READY/HEARTBEAT/replies) to "
            "the target's `endpoint`, rate_per_s messages a second for duration_s; family: "
            + ", ".join(FAMILIES),
            "process",
            {
                "duration_s": _duration(),
                "endpoint": Param(str, doc="an endpoint the target binds (the manifest's [endpoints])"),
                "family": Param(str, None, "whose junk to send (default: the manifest's family)"),
                "rate_per_s": Param(float, 20.0, "junk messages a second", "messages/s", min=0.01),
                "service": Param(str, "echo", "the service named in Majordomo junk"),
            },
        ),
        # Network faults act, through the fault proxy, on the links the target instance
        # connects over (chaos/netfaults.py). The runner routes every link through the
        # fault proxy when the plan has one.
        FaultKind(
            "partition",
            "blackhole the link's data for duration_s (Toxiproxy timeout 0); connections close at the end",
            "link",
            {"duration_s": _duration(), "direction": _direction("both"), "toxicity": _toxicity()},
            lossy=True,
        ),
        FaultKind(
            "disconnect",
            "close the link's connections and refuse new ones for duration_s (proxy disabled)",
            "link",
            {"duration_s": _duration()},
            lossy=True,
        ),
        FaultKind(
            "reset",
            "reset connections (RST) timeout_ms after their first data, for duration_s (reset_peer)",
            "link",
            {
                "duration_s": _duration(),
                "timeout_ms": _count("wait before the reset", "ms", 0),
                "direction": _direction("upstream"),
                "toxicity": _toxicity(),
            },
            lossy=True,
        ),
        FaultKind(
            "latency",
            "delay the link's data by latency_ms ± jitter_ms for duration_s",
            "link",
            {
                "duration_s": _duration(),
                "latency_ms": _count("added delay", "ms"),
                "jitter_ms": _count("random spread around latency_ms", "ms", 0),
                "direction": _direction("downstream"),
                "toxicity": _toxicity(),
            },
            harm=SLOWDOWN,
        ),
        FaultKind(
            "bandwidth",
            "limit the link to rate_kb_s KB/s for duration_s (0 stalls it: use partition for an outage)",
            "link",
            {
                "duration_s": _duration(),
                "rate_kb_s": _count("the rate allowed (0 stalls the link)", "KB/s"),
                "direction": _direction("downstream"),
                "toxicity": _toxicity(),
            },
            lossy=True,
            harm=SLOWDOWN,
        ),
        FaultKind(
            "slicer",
            "cut the link's data into pieces of about average_size bytes, delay_us apart, for duration_s",
            "link",
            {
                "duration_s": _duration(),
                "average_size": _count("mean size of a piece", "bytes", minimum=1),
                "size_variation": _count("random spread of a piece's size (below average_size)", "bytes", 0),
                "delay_us": _count("pause between two pieces", "us", 0),
                "direction": _direction("downstream"),
                "toxicity": _toxicity(),
            },
            check=_slicer_sizes,
            harm=SLOWDOWN,
        ),
        FaultKind(
            "limit_data",
            "close each connection of the link after `bytes` bytes, for duration_s",
            "link",
            {
                "duration_s": _duration(),
                "bytes": _count("bytes let through per connection", "bytes", minimum=1),
                "direction": _direction("downstream"),
                "toxicity": _toxicity(),
            },
            lossy=True,
        ),
    )
}
