"""Lost unsynced writes (Jepsen's lazyfs idea): a FUSE layer over a role's data folder that
keeps what is written in memory until the file is fsynced, so that the ``lose_unsynced``
fault can drop it at a kill, as a power cut drops a machine's page cache.

The layer is a process of its own (``python -m chaos.lazyfs FOLDER --name SOURCE``,
through ``mfusepy``'s high-level API on libfuse 2 or 3) mounted over the folder itself: it
opens the folder before mounting and does every operation relative to that handle, so the
subject sees what was there, and what it made stays in the folder after the unmount (no
second folder beside it). What passes straight through: the metadata (create, mkdir,
rename, unlink, rmdir, links, modes, times) and ``truncate``, as a journaling file system
commits them on its own. What is held: each file's written bytes, by inode, in memory,
seen by reads and by the size that ``stat`` reports, until ``fsync`` or ``fdatasync`` on
any descriptor of the file writes them through and syncs them. ``close`` syncs nothing.

It is driven through its stdin, one command a line, answered on stdout: ``clear`` drops
everything not yet fsynced and answers ``cleared FILES BYTES``; ``exit``, or the end of
stdin (its runner gone, even killed with SIGKILL), unmounts it and it exits. It prints
``ready`` once the mount serves. ``Layers`` is the runner's side: one layer per instance of
a role that a ``lose_unsynced`` fault targets, started before the role and ended after it.

A mount's source names its runner (``zchaos-lazyfs-runner<PID>.<START>``, as the disk
fault's tmpfs does), so a mount whose layer was killed with its runner is unmounted by the
next run's sweep (chaos/disk.py ``remove_leftovers``). The kernel caches no attributes or
names (timeouts 0), so a file's size after a ``clear`` is the backing file's at once.

Not modelled: a rename or create that a crash would lose before its directory is fsynced
(metadata passes through), ``sync``/``syncfs`` (FUSE's high-level API never hears them),
partial loss (a ``clear`` drops all that is unsynced, never some of it).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import ctypes.util
import errno
import importlib.util
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from chaos.host_marks import start_ticks

SOURCE_PREFIX = "zchaos-lazyfs-runner"
#: How long a layer may take to mount and answer.
READY_TIMEOUT_S = 15.0
ANSWER_TIMEOUT_S = 10.0
ENV_LIBRARY = "FUSE_LIBRARY_PATH"  # mfusepy's own: the libfuse to load


class LazyFsError(Exception):
    """A layer could not be mounted, did not answer, or could not be unmounted."""


def missing() -> str | None:
    """What this machine lacks for the layer (one line), or None."""
    why = "lose_unsynced needs"
    if not os.path.exists("/dev/fuse"):
        return f"{why} FUSE, and this machine has no /dev/fuse (a container without the device?)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return f"{why} FUSE, and /dev/fuse is not open to this user (run as root)"
    named = os.environ.get(ENV_LIBRARY)  # mfusepy loads the library it names, else finds one
    if named is not None and not os.path.isfile(named):
        return f"{why} the libfuse library, and {ENV_LIBRARY} names none ({named})"
    if named is None and not (ctypes.util.find_library("fuse3") or ctypes.util.find_library("fuse")):
        return f"{why} the libfuse library, which is not installed (Debian: apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return f"{why} the Python package mfusepy, which is not installed (pip install 'zchaos[lazyfs]')"
    return None


# --- what is held: each file's unsynced bytes ---------------------------------------------


class Unsynced:
    """One file's written bytes not yet fsynced: non-overlapping extents in offset order, the
    file's size as the subject sees it, and the time of its last write."""

    def __init__(self, size: int) -> None:
        self.starts: list[int] = []
        self.blocks: list[bytearray] = []
        self.size = size
        self.mtime_ns = time.time_ns()

    @property
    def held(self) -> int:
        return sum(len(b) for b in self.blocks)

    def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        i = bisect.bisect_right(self.starts, offset)
        if i > 0 and self.starts[i - 1] + len(self.blocks[i - 1]) >= offset:
            i -= 1  # the extent before touches it
        j = i
        while j < len(self.starts) and self.starts[j] <= end:
            j += 1
        if j == i:
            self.starts.insert(i, offset)
            self.blocks.insert(i, bytearray(data))
        elif j == i + 1 and self.starts[i] <= offset:  # within or appended to one extent
            at = offset - self.starts[i]
            self.blocks[i][at : at + len(data)] = data
        else:  # joins several extents
            start = min(self.starts[i], offset)
            stop = max(self.starts[j - 1] + len(self.blocks[j - 1]), end)
            merged = bytearray(stop - start)
            for s, b in zip(self.starts[i:j], self.blocks[i:j], strict=True):
                merged[s - start : s - start + len(b)] = b
            merged[offset - start : end - start] = data
            self.starts[i:j] = [start]
            self.blocks[i:j] = [merged]
        self.size = max(self.size, end)
        self.mtime_ns = time.time_ns()

    def truncate(self, length: int) -> None:
        keep = bisect.bisect_left(self.starts, length)
        del self.starts[keep:], self.blocks[keep:]
        if self.blocks and self.starts[-1] + len(self.blocks[-1]) > length:
            del self.blocks[-1][length - self.starts[-1] :]
        self.size = length
        self.mtime_ns = time.time_ns()

    def overlay(self, data: bytearray, offset: int) -> None:
        """Put the held bytes over ``data``, the file's bytes from ``offset`` on."""
        end = offset + len(data)
        i = max(0, bisect.bisect_right(self.starts, offset) - 1)
        for s, b in zip(self.starts[i:], self.blocks[i:], strict=True):
            if s >= end:
                break
            lo, hi = max(s, offset), min(s + len(b), end)
            if lo < hi:
                data[lo - offset : hi - offset] = b[lo - s : hi - s]

    def write_through(self, fd: int) -> None:
        for s, b in zip(self.starts, self.blocks, strict=True):
            done = 0
            while done < len(b):
                done += os.pwrite(fd, b[done:], s + done)


# --- the file system ------------------------------------------------------------------


def _rel(path: str) -> str:
    """A path FUSE gives (``/a/b``) relative to the backing folder's handle."""
    return path.lstrip("/") or "."


class LazyOps:
    """The FUSE operations (mfusepy's ``Operations`` protocol), every one relative to ``root``,
    a handle on the backing folder opened before the mount hid it."""

    use_ns = True  # times in nanoseconds (mfusepy)

    def __init__(self, root: int, on_ready: Callable[[], None] | None = None) -> None:
        # No attribute may share a name with a FUSE operation (``lock`` is one): mfusepy
        # registers whatever it finds under those names.
        self.root = root
        self.on_ready = on_ready
        self._lock = threading.Lock()
        self.unsynced: dict[int, Unsynced] = {}  # inode -> what is held of it
        self.handles: dict[int, tuple[int, int]] = {}  # fh -> (backing fd, inode)

    def init(self, path: str) -> None:
        if self.on_ready is not None:
            self.on_ready()  # the kernel talks to the mount: it serves

    # -- holding and dropping

    def clear(self) -> tuple[int, int]:
        """Drop everything not yet fsynced: (files, bytes) dropped."""
        with self._lock:
            files, held = len(self.unsynced), sum(u.held for u in self.unsynced.values())
            self.unsynced.clear()
        return files, held

    def _forget_if_gone(self, ino: int) -> None:
        """An inode with no name left and no open handle is freed: nothing of it is held."""
        if any(i == ino for _, i in self.handles.values()):
            return
        self.unsynced.pop(ino, None)

    # -- metadata, passed through

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        with self._lock:
            if fh is not None and fh in self.handles:
                st = os.fstat(self.handles[fh][0])
            else:
                st = os.lstat(_rel(path), dir_fd=self.root)
            attrs = {
                k: getattr(st, k)
                for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_blocks")
            }
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            held = self.unsynced.get(st.st_ino)
            if held is not None:
                attrs["st_size"] = held.size
                attrs["st_blocks"] = max(st.st_blocks, (held.size + 511) // 512)
                attrs["st_mtime"] = max(st.st_mtime_ns, held.mtime_ns)
            return attrs

    def access(self, path: str, amode: int) -> int:
        if not os.access(_rel(path), amode, dir_fd=self.root):
            raise OSError(errno.EACCES, "access")
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        fd = os.open(_rel(path), os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.root)
        try:
            return [".", "..", *os.listdir(fd)]
        finally:
            os.close(fd)

    def readlink(self, path: str) -> str:
        return os.readlink(_rel(path), dir_fd=self.root)

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(_rel(path), mode, dir_fd=self.root)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(_rel(path), dir_fd=self.root)
        return 0

    def unlink(self, path: str) -> int:
        with self._lock:
            st = os.lstat(_rel(path), dir_fd=self.root)
            os.unlink(_rel(path), dir_fd=self.root)
            if st.st_nlink <= 1:
                self._forget_if_gone(st.st_ino)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self._lock:
            try:
                replaced = os.lstat(_rel(new), dir_fd=self.root)
            except FileNotFoundError:
                replaced = None
            os.rename(_rel(old), _rel(new), src_dir_fd=self.root, dst_dir_fd=self.root)
            if replaced is not None and replaced.st_nlink <= 1:
                self._forget_if_gone(replaced.st_ino)
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, _rel(target), dir_fd=self.root)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(_rel(source), _rel(target), src_dir_fd=self.root, dst_dir_fd=self.root)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(_rel(path), mode, dir_fd=self.root)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(_rel(path), uid, gid, dir_fd=self.root, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        with self._lock:
            if times is None:
                os.utime(_rel(path), dir_fd=self.root)
            else:
                os.utime(_rel(path), ns=times, dir_fd=self.root)
            held = self.unsynced.get(os.lstat(_rel(path), dir_fd=self.root).st_ino)
            if held is not None:
                held.mtime_ns = 0  # the time set stands
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.fstatvfs(self.root)
        return {k: getattr(st, k) for k in dir(st) if k.startswith("f_") and k != "f_fsid"}

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self._lock:
            if fh is not None and fh in self.handles:
                fd, ino = self.handles[fh]
                os.ftruncate(fd, length)
            else:
                fd = os.open(_rel(path), os.O_WRONLY, dir_fd=self.root)
                try:
                    os.ftruncate(fd, length)
                    ino = os.fstat(fd).st_ino
                finally:
                    os.close(fd)
            held = self.unsynced.get(ino)
            if held is not None:
                held.truncate(length)
        return 0

    # -- files: data held until fsync

    def _open(self, path: str, flags: int, mode: int = 0) -> int:
        # The backing descriptor never appends or truncates by itself (the kernel gives each
        # write its offset and truncates through truncate), and may always write (fsync
        # writes through it).
        flags &= ~(os.O_APPEND | os.O_TRUNC | os.O_ACCMODE)
        try:
            fd = os.open(_rel(path), flags | os.O_RDWR, mode, dir_fd=self.root)
        except PermissionError:
            fd = os.open(_rel(path), flags | os.O_RDONLY, mode, dir_fd=self.root)
        with self._lock:
            fh = max(self.handles, default=0) + 1
            self.handles[fh] = (fd, os.fstat(fd).st_ino)
        return fh

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        return self._open(path, flags | os.O_CREAT, mode)

    def open(self, path: str, flags: int) -> int:
        return self._open(path, flags)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._lock:
            fd, ino = self.handles[fh]
            held = self.unsynced.get(ino)
            if held is None:
                return os.pread(fd, size, offset)
            size = max(0, min(size, held.size - offset))
            data = bytearray(os.pread(fd, size, offset))
            data.extend(bytes(size - len(data)))  # past the backing file's end: held bytes or a hole
            held.overlay(data, offset)
            return bytes(data)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._lock:
            fd, ino = self.handles[fh]
            held = self.unsynced.get(ino)
            if held is None:
                held = self.unsynced[ino] = Unsynced(os.fstat(fd).st_size)
            held.write(offset, data)
        return len(data)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._lock:
            fd, ino = self.handles[fh]
            held = self.unsynced.pop(ino, None)
            if held is not None:
                try:
                    held.write_through(fd)
                except OSError:
                    self.unsynced[ino] = held  # not written (ENOSPC ...): still only held
                    raise
            (os.fdatasync if datasync else os.fsync)(fd)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        fd = os.open(_rel(path), os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.root)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close(2) syncs nothing

    def release(self, path: str, fh: int) -> int:
        with self._lock:
            fd, ino = self.handles.pop(fh)
            gone = os.fstat(fd).st_nlink == 0
            os.close(fd)
            if gone:
                self._forget_if_gone(ino)
        return 0


# --- the layer's process ----------------------------------------------------------------


def unmount(point: Path) -> str | None:
    """Unmount a layer lazily (a process still inside keeps nothing mounted); why not, or None."""
    fusermount = shutil.which("fusermount3") or shutil.which("fusermount")
    if os.geteuid() == 0 or fusermount is None:
        argv = ["umount", "-l", str(point)]
    else:
        argv = [fusermount, "-u", "-z", str(point)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip() or f"exit {done.returncode}"


def _serve_commands(ops: LazyOps, point: Path, out: IO[str]) -> None:
    """The layer's control: stdin's commands until ``exit`` or its end, then the unmount that
    ends the FUSE loop."""
    for line in sys.stdin:
        command = line.strip()
        if command == "clear":
            files, held = ops.clear()
            print(f"cleared {files} {held}", file=out, flush=True)
        elif command == "exit":
            break
        elif command:
            print(f"error unknown command {command!r}", file=out, flush=True)
    unmount(point)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.lazyfs", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the data folder to mount the layer over")
    parser.add_argument("--name", default=SOURCE_PREFIX, help="the mount's source (names its runner)")
    args = parser.parse_args(argv)
    import mfusepy

    point = args.folder.resolve()
    out = sys.stdout

    def ready() -> None:
        print("ready", file=out, flush=True)
        threading.Thread(target=_serve_commands, args=(ops, point, out), daemon=True).start()

    # The folder's own handle, taken before the mount hides the folder: the backing store.
    ops = LazyOps(os.open(point, os.O_RDONLY | os.O_DIRECTORY), ready)
    mfusepy.FUSE(
        ops,
        str(point),
        foreground=True,
        fsname=args.name,
        subtype="zchaos-lazyfs",
        default_permissions=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )
    return 0


# --- the runner's side ------------------------------------------------------------------


class _Layer:
    def __init__(self, folder: Path, proc: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self.proc = proc
        self.buffer = b""
        self._lock = threading.Lock()

    def line(self, timeout: float) -> str | None:
        """The layer's next line on stdout, or None if it said nothing in time (or ended)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self.buffer += chunk
        text, _, self.buffer = self.buffer.partition(b"\n")
        return text.decode(errors="replace").strip()


class Layers:
    """The lazy layers of one run, by instance: ``open`` before the processes start, ``close``
    after they stopped (and also after a failed ``open``)."""

    def __init__(self, folders: dict[str, Path], logs: Path) -> None:
        self.folders = folders  # instance -> its data folder
        self.logs = logs  # where each layer's stderr goes
        self.source = f"{SOURCE_PREFIX}{os.getpid()}.{start_ticks(os.getpid())}"
        self.layers: dict[str, _Layer] = {}

    def open(self) -> None:
        why = missing()
        if why is not None:
            raise LazyFsError(why)
        package_root = str(Path(__file__).resolve().parent.parent)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH")))),
        }
        self.logs.mkdir(parents=True, exist_ok=True)
        for instance, folder in self.folders.items():
            folder.mkdir(parents=True, exist_ok=True)
            log = self.logs / f"lazyfs-{instance}.log"
            with log.open("ab") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "chaos.lazyfs", str(folder), "--name", self.source],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    bufsize=0,
                    env=env,
                    # A Ctrl-C meant for the runner must not unmount it under the subject.
                    start_new_session=True,
                )
            layer = self.layers[instance] = _Layer(folder, proc)
            if layer.line(READY_TIMEOUT_S) != "ready":
                raise LazyFsError(
                    f"the lazy layer over {folder} did not mount within {READY_TIMEOUT_S:.0f} s; see {log}"
                )

    def clear(self, instance: str) -> tuple[int, int]:
        """Drop what ``instance``'s files hold unsynced: (files, bytes) dropped."""
        layer = self.layers[instance]
        with layer._lock:
            assert layer.proc.stdin is not None
            try:
                layer.proc.stdin.write(b"clear\n")
            except OSError as exc:
                raise LazyFsError(f"the lazy layer over {layer.folder} is gone ({exc})") from None
            answer = layer.line(ANSWER_TIMEOUT_S) or ""
        words = answer.split()
        if len(words) != 3 or words[0] != "cleared":
            raise LazyFsError(f"the lazy layer over {layer.folder} answered {answer!r} to clear")
        return int(words[1]), int(words[2])

    def close(self) -> list[str]:
        """End every layer and unmount it; what failed, each why."""
        failed = []
        for layer in self.layers.values():
            with contextlib.suppress(OSError):
                assert layer.proc.stdin is not None
                layer.proc.stdin.close()  # the layer unmounts itself and exits
            try:
                layer.proc.wait(ANSWER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                layer.proc.kill()
                layer.proc.wait()
            if layer.proc.stdout is not None:
                layer.proc.stdout.close()
            if _mounted(layer.folder) and (why := unmount(layer.folder)) is not None:
                failed.append(f"{layer.folder}: {why}")
        self.layers.clear()
        return failed


def _mounted(point: Path) -> bool:
    from chaos.disk import _mounts

    return any(p == point.resolve() and s.startswith(SOURCE_PREFIX) for s, p in _mounts())


if __name__ == "__main__":
    sys.exit(main())
