"""A small file system for the tests of a full disk: a tmpfs mounted for one test (root only)
and unmounted after it, and a filler that leaves it only so many bytes free."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_fs(where: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the block; skips the test when this is not
    root or the mount is refused (a container without the capability)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount refused: {(done.stderr or done.stdout).strip()}")
    try:
        yield where
    finally:
        # Lazy: a file a failed test left open must not keep the mount after it.
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(fs: Path, leave: int = 0) -> Path:
    """A file that takes ``fs``'s free space but ``leave`` bytes (in pages, as tmpfs counts)."""
    filler = fs / "filler"
    with filler.open("ab") as fh:
        want = free_bytes(fs) - leave
        while want > 0:
            try:
                fh.write(bytes(min(want, 1 << 20)))
                fh.flush()
            except OSError:
                break
            want = free_bytes(fs) - leave
    return filler
