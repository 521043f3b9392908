"""The fault kinds a scenario may schedule, with their parameters and what they model.

This table is the one place a fault kind is declared: the scenario reader validates
against it, ``zchaos list`` prints it, and the nemesis dispatches on ``FaultKind.name``.
A parameter's default ``...`` means it is required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.malformed import FAMILIES

#: How a scenario picks instances of a role: ``worker:random`` (one, seeded), ``worker:half``
#: (half of them, rounded up, seeded), ``worker:all``.
SELECTORS = ("random", "half", "all")
#: What a fault does to its target's service: an ``outage`` stops it serving (a crash, a
#: stall, a cut link), a ``slowdown`` only slows it. A manifest's ``survives`` promise
#: names harms (harness/manifest.py); the ``availability`` check holds the system to them.
OUTAGE, SLOWDOWN = "outage", "slowdown"
HARMS = (OUTAGE, SLOWDOWN)


@dataclass(frozen=True)
class FaultKind:
    name: str
    doc: str
    target: str  # "process" (an instance or a role selector) or "link"
    params: dict[str, tuple[type, Any]] = field(default_factory=dict)
    harm: str = OUTAGE

    @property
    def instantaneous(self) -> bool:
        """True when the fault has no duration of its own (its stop follows its start)."""
        return "duration_s" not in self.params


FAULT_KINDS: dict[str, FaultKind] = {
    kind.name: kind
    for kind in (
        FaultKind(
            "kill",
            "SIGKILL the process group (a crash); start it again after restart_after_s if given",
            "process",
            {"restart_after_s": (float, None)},
        ),
        FaultKind(
            "restart",
            "SIGTERM, wait for the exit, start again after delay_s (a deploy, a clean restart)",
            "process",
            {"delay_s": (float, 0.0)},
        ),
        FaultKind(
            "freeze",
            "SIGSTOP for duration_s, then SIGCONT (a GC pause, a stuck process)",
            "process",
            {"duration_s": (float, ...)},
        ),
        FaultKind(
            "starve",
            "keep only `share` of one CPU for the process for duration_s (CPU overload, a slow host)",
            "process",
            {"duration_s": (float, ...), "share": (float, 0.1)},
            harm=SLOWDOWN,
        ),
        # A hostile or broken peer (chaos/malformed.py): junk of a protocol family sent
        # straight to the endpoint the target binds (never through a link's proxy: the
        # sender is the attacker, not a link). `family` defaults to the manifest's name
        # when that is a family zchaos knows; the side (client or worker junk) is the
        # client side for an endpoint the manifest's clients use, the worker side otherwise.
        FaultKind(
            "malformed",
            "send `family` junk (bad frames, unknown commands, strangers' READY/HEARTBEAT/replies) to "
            "the target's `endpoint`, rate_per_s messages a second for duration_s; family: "
            + ", ".join(FAMILIES),
            "process",
            {
                "duration_s": (float, ...),
                "endpoint": (str, ...),
                "family": (str, None),
                "rate_per_s": (float, 20.0),
                "service": (str, "echo"),
            },
        ),
        # Network faults act, through the fault proxy, on the links the target instance
        # connects over (chaos/netfaults.py); `direction` is both, upstream or downstream.
        # The runner routes every link through the fault proxy when the plan has one.
        FaultKind(
            "partition",
            "blackhole the link's data for duration_s (Toxiproxy timeout 0); connections close at the end",
            "link",
            {"duration_s": (float, ...), "direction": (str, "both")},
        ),
        FaultKind(
            "disconnect",
            "close the link's connections and refuse new ones for duration_s (proxy disabled)",
            "link",
            {"duration_s": (float, ...)},
        ),
        FaultKind(
            "reset",
            "reset connections (RST) timeout_ms after their first data, for duration_s (reset_peer)",
            "link",
            {"duration_s": (float, ...), "timeout_ms": (int, 0), "direction": (str, "upstream")},
        ),
        FaultKind(
            "latency",
            "delay the link's data by latency_ms ± jitter_ms for duration_s",
            "link",
            {
                "duration_s": (float, ...),
                "latency_ms": (int, ...),
                "jitter_ms": (int, 0),
                "direction": (str, "downstream"),
            },
            harm=SLOWDOWN,
        ),
        FaultKind(
            "bandwidth",
            "limit the link to rate_kb_s KB/s for duration_s (0 stalls it: use partition for an outage)",
            "link",
            {"duration_s": (float, ...), "rate_kb_s": (int, ...), "direction": (str, "downstream")},
            harm=SLOWDOWN,
        ),
        FaultKind(
            "slicer",
            "cut the link's data into pieces of about average_size bytes, delay_us apart, for duration_s",
            "link",
            {
                "duration_s": (float, ...),
                "average_size": (int, ...),
                "size_variation": (int, 0),
                "delay_us": (int, 0),
                "direction": (str, "downstream"),
            },
            harm=SLOWDOWN,
        ),
        FaultKind(
            "limit_data",
            "close each connection of the link after `bytes` bytes, for duration_s",
            "link",
            {"duration_s": (float, ...), "bytes": (int, ...), "direction": (str, "downstream")},
        ),
    )
}
