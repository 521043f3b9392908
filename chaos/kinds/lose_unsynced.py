"""``lose_unsynced``: a crash that takes the page cache with it: SIGKILL the process group and
drop every write to its data folder not yet fsynced (a FUSE layer the run mounts there,
chaos/lazyfs.py), then start it again after restart_after_s."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

from chaos.faults import FaultKind, FaultRun, Param, needs_data_dir, start_again
from chaos.lazyfs import LazyFsError, missing

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault

#: How long the killed process may take to be gone before its writes are dropped.
GONE_LIMIT_S = 5.0


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    layers = nemesis.lazyfs
    if layers is None or fault.target not in layers.folders:
        raise LazyFsError(f"{fault.target} has no data folder under a lazy layer of the run's")
    pid = nemesis.control.signal(fault.target, signal.SIGKILL, expected_exit=True)
    if pid is None:
        nemesis.missed(fault)
        return
    nemesis.started(fault, pid=pid)
    # The writes are dropped once the process is gone, so that none it had under way lands
    # after the drop (a power cut stops the writer and the cache at once).
    deadline = time.monotonic() + GONE_LIMIT_S
    while nemesis.control.running(fault.target) is not None and time.monotonic() < deadline:
        time.sleep(0.005)  # polling the process's end, within the deadline above
    files, held = layers.clear(fault.target)
    dropped = f"{held} unsynced bytes of {files} files dropped"
    start_again(nemesis, fault, fault.params["restart_after_s"], dropped)


KIND = FaultKind(
    "lose_unsynced",
    "SIGKILL the process group and drop its writes to its data folder not yet fsynced (a FUSE "
    "layer over its role's data_dir; needs mfusepy and libfuse: pip install 'zchaos[lazyfs]', "
    "apt-get install fuse3), then start it again after restart_after_s",
    "process",
    run,
    {
        "restart_after_s": Param(
            float,
            1.0,
            "start it again this long after",
            "s",
            min=0,
            length=True,
            explore=(0.5, 5.0),
        )
    },
    validate=needs_data_dir,
    lazy=True,
    missing=missing,
)
