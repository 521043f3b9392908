"""What a run leaves on the host outside its folder (a CPU cgroup, a mounted disk, the clock
fault's shared memory) carries its runner's mark: the runner's pid and its start time, so the
next run can tell a live runner's leftovers from those of one killed with SIGKILL (a pid
alone may since be another process's)."""

from __future__ import annotations

from pathlib import Path


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat field 22); None
    if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def runner_alive(pid: int, ticks: int) -> bool:
    """Whether the runner that marked something ``pid``/``ticks`` still runs."""
    return start_ticks(pid) == ticks
