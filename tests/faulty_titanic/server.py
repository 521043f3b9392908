"""A deliberately faulty Titanic server, kept to show that the Titanic checks fail.

It is implementations/titanic's server with one change, chosen by ``--fault``:

- ``write-behind`` (fails ``titanic_durable``): it answers ``titanic.request`` with the
  uuid at once and writes the request to disk only when its reply has come back (a
  classic shortcut). Until then the request lives in memory only, so a crash loses every
  acknowledged request still waiting for its reply, and after the restart
  ``titanic.reply`` answers 400 for uuids the clients were given.
- ``no-fsync`` (fails ``titanic_durable`` under ``lose_unsynced``): it writes each file and
  renames it into place as ours does, but never fsyncs the file or the folder, and answers
  once ``write`` returned. The request is then in the page cache only: a plain crash of the
  process keeps it, a crash that loses the unsynced writes leaves an empty file (renamed
  ``.bad`` on the next start), and ``titanic.reply`` answers 400 for a uuid given out.
- ``keep-closed`` (fails ``titanic_closed_stay_closed``): ``titanic.close`` answers 200
  and forgets nothing, so a closed uuid's reply is still served.
- ``pending-unknown`` (fails ``titanic_no_phantom_reply`` and ``titanic_closed_stay_closed``):
  ``titanic.reply`` answers 300 (pending) for any uuid it does not hold, instead of 400,
  so a client waits forever for a request that does not exist.

It runs by path from its own manifest, like a user's server outside zchaos.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid as uuidlib
from collections.abc import Collection

from implementations.titanic.server import main
from implementations.titanic.store import Store, encode


class WriteBehindStore(Store):
    def __init__(self, directory: str) -> None:
        self.memory: dict[str, list[bytes]] = {}
        super().__init__(directory)

    def put_request(self, service: str, body: list[bytes]) -> str:
        uuid = uuidlib.uuid4().hex
        with self.lock:
            self.memory[uuid] = [service.encode(), *body]  # the bug: nothing on disk yet
            self.pending.append((uuid, service))
        return uuid

    def next_pending(self, skip: Collection[str] = ()) -> tuple[str, str, list[bytes]] | None:
        with self.lock:
            for i, (uuid, service) in enumerate(self.pending):
                if service not in skip and uuid in self.memory:
                    del self.pending[i]
                    return uuid, service, self.memory[uuid][1:]
        return super().next_pending(skip)

    def put_reply(self, uuid: str, body: list[bytes]) -> bool:
        with self.lock:
            frames = self.memory.pop(uuid, None)
            if frames is not None:
                self._write(f"{uuid}.req", frames)
        return super().put_reply(uuid, body)

    def reply(self, uuid: str) -> tuple[str, list[bytes]]:
        with self.lock:
            if uuid in self.memory:
                return "300", []
        return super().reply(uuid)

    def close(self, uuid: str) -> None:
        with self.lock:
            self.memory.pop(uuid, None)
        super().close(uuid)


class NoFsyncStore(Store):
    def _write(self, name: str, frames: list[bytes]) -> None:
        tmp = self.dir / f"{name}.tmp"
        tmp.write_bytes(encode(frames))  # the bug: no fsync before the rename and the answer
        os.rename(tmp, self.dir / name)

    def _sync_dir(self) -> None:
        pass  # nor of the folder


class KeepClosedStore(Store):
    def close(self, uuid: str) -> None:
        pass  # the bug: "closed" without removing anything


class PendingUnknownStore(Store):
    def reply(self, uuid: str) -> tuple[str, list[bytes]]:
        status, frames = super().reply(uuid)
        return ("300", []) if status == "400" else (status, frames)  # the bug: never "unknown"


STORES = {
    "write-behind": WriteBehindStore,
    "no-fsync": NoFsyncStore,
    "keep-closed": KeepClosedStore,
    "pending-unknown": PendingUnknownStore,
}

if __name__ == "__main__":
    faults = argparse.ArgumentParser(add_help=False)
    faults.add_argument("--fault", choices=sorted(STORES), default="write-behind")
    FAULT, REST = faults.parse_known_args(sys.argv[1:])
    main(REST, store_class=STORES[FAULT.fault])
