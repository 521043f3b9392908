"""``disk_full``: the file system under the target's data folder filled for duration_s, then
freed (writes fail with ENOSPC meanwhile; chaos/disk.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.disk import hold_full, missing
from chaos.faults import FaultKind, FaultRun, duration, needs_data_dir
from contract.promises import OUTAGE

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    hold_full(nemesis, fault)


KIND = FaultKind(
    "disk_full",
    "the file system under the process's data folder (its role's data_dir, a tmpfs the run mounts) "
    "filled for duration_s, then freed",
    "process",
    run,
    {"duration_s": duration()},
    # A durable store on a full disk must refuse what it cannot keep: new requests fail.
    harm=OUTAGE,
    validate=needs_data_dir,
    disk=True,
    missing=missing,
)
