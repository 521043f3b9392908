"""A full disk under a role's data folder: a small file system the run mounts, which the
``disk_full`` fault fills (writes then fail with ENOSPC) and frees again.

When the plan has a ``disk_full`` fault on a role, the runner mounts a tmpfs of the role's
``data_size_mb`` at each of its instances' ``data_dir`` (manifest, ``[roles.X]``) before
they start, so the subject keeps its data there from the first byte; the fault writes a
filler file (``FILLER``) until the file system is full, keeps it full for ``duration_s``
(what the subject frees is filled again) and removes it. Mounting needs root (or
CAP_SYS_ADMIN): without it the run stops before anything starts, saying so (exit 2).

A mount cannot remove itself when the runner is SIGKILLed, so its source names the runner
(``zchaos-disk-runner<PID>.<START>``, as the starvation cgroups' names do): the run
unmounts its own at its end (lazily: a process of the subject still inside must not keep
it), and ``remove_leftovers`` unmounts those whose runner is gone, at the next run's start,
and the lazy layers' (chaos/lazyfs.py) too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.host_marks import runner_alive, start_ticks

if TYPE_CHECKING:
    from chaos.faults import FaultRun
    from chaos.nemesis import PlannedFault

#: The file the fault fills a data folder's file system with (removed when it stops).
FILLER = ".zchaos-disk-full"
SOURCE_PREFIX = "zchaos-disk-runner"
#: The mounts a runner marks: these small file systems, and the lazy layers (chaos/lazyfs.py).
_OWNED = re.compile(r"zchaos-(?:disk|lazyfs)-runner(\d+)\.(\d+)")
CHUNK = 1 << 20
#: How often a full disk takes back what the subject freed.
TOP_UP_S = 0.01


class DiskError(Exception):
    """The run cannot mount the small file systems a disk fault needs (not root, ...)."""


def missing() -> str | None:
    """What this machine lacks for disk faults (one line), or None."""
    if os.geteuid() != 0:
        return "disk_full needs root to mount a small file system (tmpfs) at a role's data_dir"
    return None


def _unmount(where: Path) -> str | None:
    """Unmount ``where`` lazily; why not, or None."""
    done = subprocess.run(["umount", "-l", str(where)], capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip() or f"exit {done.returncode}"


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(folder: Path) -> int:
    """Write ``FILLER`` in ``folder`` until its file system takes no more; the bytes written."""
    written = 0
    chunk = CHUNK
    fd = os.open(folder / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while chunk >= 512:
            try:
                written += os.write(fd, bytes(chunk))
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                chunk //= 2  # the last pages, in smaller writes
    finally:
        os.close(fd)
    return written


class Disks:
    """The small file systems of one run, by instance: ``open`` before the processes start,
    ``close`` after they stopped."""

    def __init__(self, folders: dict[str, tuple[Path, int]]) -> None:
        self.folders = folders  # instance -> (its data folder, the file system's size in MB)
        self.source = f"{SOURCE_PREFIX}{os.getpid()}.{start_ticks(os.getpid())}"
        self.mounted: list[Path] = []
        self.roots: dict[Path, int] = {}  # each file system's root, held open (``underneath``)

    def open(self) -> None:
        if os.geteuid() != 0:
            where = ", ".join(sorted({str(f) for f, _ in self.folders.values()}))
            raise DiskError(f"disk_full needs root to mount a small file system (tmpfs) at {where}")
        for folder, size_mb in {f: s for f, s in self.folders.values()}.items():
            folder.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", self.source, str(folder)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                why = (done.stderr or done.stdout).strip()
                raise DiskError(f"could not mount a {size_mb} MB file system at {folder}: {why}")
            self.mounted.append(folder)
            self.roots[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)

    def folder(self, instance: str) -> Path:
        return self.folders[instance][0]

    def underneath(self, instance: str) -> Path:
        """The file system's own root, also where a lazy layer (chaos/lazyfs.py) is mounted
        over the folder since: through the root's handle, so that the filler fills the disk,
        not the layer's memory."""
        return Path(f"/proc/self/fd/{self.roots[self.folder(instance)]}")

    def close(self) -> list[str]:
        """Unmount every file system of the run (its data goes with it); what failed, each why."""
        failed = []
        for folder in self.mounted:
            with contextlib.suppress(OSError):
                os.unlink(FILLER, dir_fd=self.roots[folder])
            os.close(self.roots.pop(folder))
            why = _unmount(folder)
            if why is not None:
                failed.append(f"{folder}: {why}")
        self.mounted.clear()
        return failed


def _mounts() -> list[tuple[str, Path]]:
    """(source, mount point) of every mount, the point's escapes (``\\040``) decoded."""
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[1])
            found.append((parts[0], Path(point)))
    return found


def remove_leftovers() -> tuple[list[Path], list[str]]:
    """Unmount the file systems of runners that are gone: (unmounted, failed with why)."""
    removed: list[Path] = []
    failed: list[str] = []
    for source, point in reversed(_mounts()):
        m = _OWNED.fullmatch(source)
        if m is None or runner_alive(int(m[1]), int(m[2])):
            continue
        why = _unmount(point)
        if why is None:
            removed.append(point)
        else:
            failed.append(f"{point}: {why}")
    return removed, failed


def hold_full(nemesis: FaultRun, fault: PlannedFault) -> None:
    """Carry out ``disk_full``: fill the target's data file system, hold, free it."""
    disks = nemesis.disks
    if disks is None or fault.target not in disks.folders:
        raise DiskError(f"{fault.target} has no data folder on a file system of the run's")
    pid = nemesis.target_pid(fault)
    if pid is None:
        return
    folder = disks.underneath(fault.target)
    try:
        written = fill(folder)
        nemesis.started(
            fault,
            pid=pid,
            detail=f"{disks.folder(fault.target)} full ({written} bytes filled, {free_bytes(folder)} free)",
        )
        # The subject's own deletes free pages while the disk is "full" (a Titanic closing
        # answered requests frees as much as storing the next one takes): taken back at once,
        # or the fault is full in name only and a store's bug shows on some runs only.
        deadline = time.monotonic() + float(fault.params["duration_s"])
        while (left := deadline - time.monotonic()) > 0 and nemesis.wait(min(TOP_UP_S, left)):
            fill(folder)
    finally:
        (folder / FILLER).unlink(missing_ok=True)
    nemesis.stopped(fault, pid=pid)
