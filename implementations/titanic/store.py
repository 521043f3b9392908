"""Titanic's durable store: one file per request and per reply in one directory.

A request is ``<uuid>.req``, its reply ``<uuid>.rep`` (the uuid: 32 lowercase hex digits,
the only names ever made into paths, so no client text reaches the file system). Each
file is written to a temporary name, fsynced, renamed into place and the directory is
fsynced, so once ``put_request`` returns the request survives a crash of the process or
of the machine; a crash half-way leaves only a temporary file, removed on the next start.
``close`` unlinks both files and fsyncs the directory before it returns, so a closed UUID
cannot come back after a restart.

Which requests still wait for a reply is kept in memory (a FIFO of uuids) and rebuilt
from the directory on start (requests without a reply, oldest first): unlike the guide's
queue file, which every dispatcher pass reads whole and which grows forever, nothing is
scanned while running and nothing is left behind by a closed request.

Frames are stored as ``TSP1`` + (4-byte big-endian length, bytes) per frame; a file that
does not decode (written by something else) is renamed ``*.bad`` on start and logged.
Every method is safe to call from several threads (one lock).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import threading
import uuid as uuidlib
from collections import deque
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger("titanic.store")

MAGIC = b"TSP1"
UUID_RE = re.compile(r"^[0-9a-f]{32}$")


class StoreError(ValueError):
    """A stored file that does not decode."""


def encode(frames: list[bytes]) -> bytes:
    return MAGIC + b"".join(struct.pack(">I", len(f)) + f for f in frames)


def decode(data: bytes) -> list[bytes]:
    if not data.startswith(MAGIC):
        raise StoreError("no TSP1 header")
    frames, at = [], len(MAGIC)
    while at < len(data):
        if at + 4 > len(data):
            raise StoreError("truncated length")
        (n,) = struct.unpack_from(">I", data, at)
        at += 4
        if at + n > len(data):
            raise StoreError("truncated frame")
        frames.append(data[at : at + n])
        at += n
    return frames


def valid_uuid(text: str) -> bool:
    return bool(UUID_RE.match(text))


class Store:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.pending: deque[tuple[str, str]] = deque()  # (uuid, service), oldest first
        self._load()

    def _load(self) -> None:
        for tmp in self.dir.glob("*.tmp"):
            tmp.unlink()  # a write cut short by a crash: it was never acknowledged
        waiting = []
        for req in self.dir.glob("*.req"):
            uuid = req.stem
            try:
                if not valid_uuid(uuid):
                    raise StoreError("not a uuid name")
                service = decode(req.read_bytes())[0].decode()
            except (StoreError, OSError, IndexError, UnicodeDecodeError) as exc:
                log.warning("unreadable request file %s (%s): renamed .bad", req.name, exc)
                req.rename(req.with_suffix(".req.bad"))
                continue
            if not (self.dir / f"{uuid}.rep").exists():
                waiting.append((req.stat().st_mtime_ns, uuid, service))
        for rep in self.dir.glob("*.rep"):
            if not (self.dir / f"{rep.stem}.req").exists():
                rep.unlink()  # its close removed the request and died before the reply
        self.pending.extend((uuid, service) for _, uuid, service in sorted(waiting))
        self._sync_dir()
        log.info("store %s: %d request(s) waiting for a reply", self.dir, len(self.pending))

    def _sync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write(self, name: str, frames: list[bytes]) -> None:
        """Write ``name`` durably: temporary file, fsync, rename, fsync the directory."""
        path = self.dir / name
        tmp = self.dir / f"{name}.tmp"
        data = encode(frames)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                done = 0
                while done < len(data):  # a nearly full disk takes part of a write and says so
                    done += os.write(fd, data[done:])
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()  # never acknowledged: nothing half-written stays
            raise
        os.rename(tmp, path)
        self._sync_dir()

    def put_request(self, service: str, body: list[bytes]) -> str:
        """Store a request durably and queue it for dispatch; its new uuid."""
        uuid = uuidlib.uuid4().hex
        with self.lock:
            self._write(f"{uuid}.req", [service.encode(), *body])
            self.pending.append((uuid, service))
        return uuid

    def next_pending(self, skip: Collection[str] = ()) -> tuple[str, str, list[bytes]] | None:
        """The oldest request waiting for dispatch to a service not in ``skip``, taken off the
        queue: (uuid, service, body)."""
        with self.lock:
            i = next((i for i, (_, service) in enumerate(self.pending) if service not in skip), None)
            if i is None:
                return None
            uuid, service = self.pending[i]
            del self.pending[i]
            try:
                frames = decode((self.dir / f"{uuid}.req").read_bytes())
            except FileNotFoundError:
                return None  # closed meanwhile; the dispatcher asks again on its next turn
            return uuid, service, frames[1:]

    def requeue(self, uuid: str, service: str) -> None:
        """A dispatch that failed: the request waits again (at the back)."""
        with self.lock:
            if (self.dir / f"{uuid}.req").exists():
                self.pending.append((uuid, service))

    def put_reply(self, uuid: str, body: list[bytes]) -> bool:
        """Store the reply durably, unless the request was closed meanwhile (False)."""
        with self.lock:
            if not (self.dir / f"{uuid}.req").exists():
                return False
            self._write(f"{uuid}.rep", body)
            return True

    def reply(self, uuid: str) -> tuple[str, list[bytes]]:
        """(status, reply frames): 200 with the reply, 300 pending, 400 unknown (or closed)."""
        if not valid_uuid(uuid):
            return "400", []
        with self.lock:
            try:
                return "200", decode((self.dir / f"{uuid}.rep").read_bytes())
            except FileNotFoundError:
                pass
            return ("300", []) if (self.dir / f"{uuid}.req").exists() else ("400", [])

    def close(self, uuid: str) -> None:
        """Forget a request and its reply, durably (idempotent; unknown uuids are fine)."""
        if not valid_uuid(uuid):
            return
        with self.lock:
            removed = False
            for suffix in (".rep", ".req"):
                try:
                    (self.dir / f"{uuid}{suffix}").unlink()
                    removed = True
                except FileNotFoundError:
                    pass
            if removed:
                self._sync_dir()
