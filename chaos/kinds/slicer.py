"""``slicer``: Toxiproxy ``slicer``: data cut in pieces of about ``average_size`` bytes,
``delay_us`` apart."""

from __future__ import annotations

from typing import Any

from chaos.faults import FaultKind, ParamProblem, Toxic, count, direction, duration, toxicity
from chaos.netfaults import toxic_fault
from contract.promises import SLOWDOWN


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    if params.get("size_variation", 0) >= params["average_size"]:
        raise ParamProblem(
            None,
            f"size_variation ({params['size_variation']}) must be below average_size "
            f"({params['average_size']}): pieces would have no size",
        )


KIND = FaultKind(
    "slicer",
    "cut the link's data into pieces of about average_size bytes, delay_us apart, for duration_s",
    "link",
    toxic_fault,
    {
        "duration_s": duration(),
        "average_size": count("mean size of a piece", "bytes", minimum=1, explore=(1, 64)),
        "size_variation": count(
            "random spread of a piece's size (below average_size)", "bytes", 0, explore=(0, 32)
        ),
        "delay_us": count("pause between two pieces", "us", 0, explore=(0, 20000)),
        "direction": direction("downstream"),
        "toxicity": toxicity(),
    },
    harm=SLOWDOWN,
    toxic=Toxic(
        "slicer", {"average_size": "average_size", "size_variation": "size_variation", "delay_us": "delay"}
    ),
    validate=validate,
    hosts_instead='none: it reshapes the byte stream, which only a proxy can (network = "proxy")',
)
