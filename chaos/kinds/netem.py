"""``netem``: tc's netem on the target host's link (``network = "hosts"``, chaos/packets.py):
delay with jitter and correlation, loss, duplication, reordering, corruption, a rate limit,
for duration_s, on what it sends, receives or both. Where the kernel has no netem, the same
effects are built of iptables rules, tbf and a userspace packet queue (chaos/packets.py
``add_emulated``, chaos/packet_queue.py), with netem's meaning for every parameter.

It loses packets (``lossy``: TCP's retransmissions back off through it, so on hosts the
checks excuse as long again after its stop) but not the service (``harm`` a slowdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.faults import FaultKind, FaultRun, Param, ParamProblem, duration
from chaos.packets import NETEM_DIRECTIONS, hold_netem, packet_faults_missing
from contract.promises import SLOWDOWN

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault

EFFECTS = ("delay_ms", "jitter_ms", "loss_pct", "duplicate_pct", "reorder_pct", "corrupt_pct", "rate_kbit")


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    hold_netem(nemesis, fault)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if not any(params.get(k) for k in EFFECTS):
        raise ParamProblem(None, f"give netem something to do: one of {', '.join(EFFECTS)} above 0")
    if params.get("reorder_pct") and not params.get("delay_ms"):
        raise ParamProblem(
            "reorder_pct",
            "netem reorders by sending some packets at once and delaying the rest: give delay_ms",
        )
    if params.get("correlation_pct") and not params.get("jitter_ms"):
        raise ParamProblem("correlation_pct", "the correlation is the jitter's: give jitter_ms")


def pct(doc: str, explore: tuple[float, float]) -> Param:
    return Param(float, 0.0, doc, "%", min=0, max=100, explore=explore)


KIND = FaultKind(
    "netem",
    'tc netem on the target host\'s link (network = "hosts") for duration_s: delay ± jitter, loss, '
    "duplication, reordering, corruption, a rate limit (without the kernel's netem: iptables, tbf and "
    "a userspace packet queue)",
    "process",
    run,
    {
        "duration_s": duration(),
        "delay_ms": Param(float, 0.0, "added delay", "ms", min=0, max=60_000, explore=(10, 1000)),
        "jitter_ms": Param(
            float, 0.0, "random spread around delay_ms", "ms", min=0, max=60_000, explore=(0, 200)
        ),
        "correlation_pct": pct("how much each packet's jitter follows the last one's", (0, 50)),
        "loss_pct": pct("packets dropped at random", (0, 30)),
        "duplicate_pct": pct("packets sent twice", (0, 10)),
        "reorder_pct": pct("packets sent at once, ahead of the delayed rest (needs delay_ms)", (0, 25)),
        "corrupt_pct": pct("packets with a bit flipped (TCP drops them: a loss)", (0, 5)),
        "rate_kbit": Param(
            int, 0, "bandwidth limit (0: none)", "kbit/s", min=0, max=10_000_000, explore=(0, 10_000)
        ),
        "direction": Param(
            str,
            "out",
            "out: what the host sends; in: what it receives; both",
            choices=NETEM_DIRECTIONS,
            explore=NETEM_DIRECTIONS,
        ),
    },
    lossy=True,
    harm=SLOWDOWN,
    hosts=True,
    missing=packet_faults_missing,
    validate=validate,
)
