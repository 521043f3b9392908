"""``host_partition``: a partition at the IP level between the hosts of a ``network = "hosts"``
run, made of iptables rules in the hosts' namespaces (chaos/packets.py): packets dropped
(a silent partition: a connect hangs, TCP retransmits) or answered with a reset, one way or
both, in Jepsen's shapes (isolate the target, halves, a ring of majorities)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.faults import FaultKind, FaultRun, Param, ParamProblem, duration
from chaos.packets import DIRECTIONS, HOWS, SHAPES, hold_partition, iptables_missing
from contract.promises import OUTAGE

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    hold_partition(nemesis, fault)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if params.get("shape", "isolate") != "isolate" and params.get("peers", "all") != "all":
        raise ParamProblem("peers", "only the isolate shape takes peers: halves and ring split every host")
    roles = getattr(manifest, "roles", None)
    peers = params.get("peers", "all")
    if roles and peers != "all":
        for name in (p.strip() for p in peers.split(",")):
            if name not in roles and name != "load" and name.rsplit("-", 1)[0] not in roles:
                known = ", ".join([*sorted(roles), "load"])
                raise ParamProblem("peers", f"{name!r} is no role, instance or the load ({known}, or all)")


KIND = FaultKind(
    "host_partition",
    'cut the target host off at the IP level (iptables in the hosts\' namespaces; network = "hosts") '
    "for duration_s: packets dropped silently or answered with a TCP reset",
    "process",
    run,
    {
        "duration_s": duration(),
        "how": Param(
            str,
            "drop",
            "drop: silent (a connect hangs, TCP retransmits); reset: refused with a TCP reset",
            choices=HOWS,
            explore=HOWS,
        ),
        "direction": Param(
            str,
            "both",
            "in: the target hears nothing from its peers; out: what it sends them is lost",
            choices=DIRECTIONS,
            explore=DIRECTIONS,
        ),
        "shape": Param(
            str,
            "isolate",
            "isolate: the target from its peers; halves: the instances' hosts in two halves, the target's "
            "first; ring: each keeps a majority of its nearest (Jepsen's); the load reaches all in both",
            choices=SHAPES,
            explore=SHAPES,
        ),
        "peers": Param(
            str,
            "all",
            "isolate: whom the target is cut from (all, or roles, instances and load, comma-separated)",
            explore=(),
        ),
    },
    lossy=True,
    harm=OUTAGE,
    hosts=True,
    missing=iptables_missing,
    validate=validate,
)
