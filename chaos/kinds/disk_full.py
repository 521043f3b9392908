"""``disk_full``: the file system under the target's data folder filled for duration_s, then
freed (writes fail with ENOSPC meanwhile; chaos/disk.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.disk import hold_full, missing
from chaos.faults import FaultKind, FaultRun, ParamProblem, duration
from contract.promises import OUTAGE

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    hold_full(nemesis, fault)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
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


KIND = FaultKind(
    "disk_full",
    "the file system under the process's data folder (its role's data_dir, a tmpfs the run mounts) "
    "filled for duration_s, then freed",
    "process",
    run,
    {"duration_s": duration()},
    # A durable store on a full disk must refuse what it cannot keep: new requests fail.
    harm=OUTAGE,
    validate=validate,
    disk=True,
    missing=missing,
)
