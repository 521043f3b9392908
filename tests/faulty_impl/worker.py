"""A deliberately faulty Paranoid Pirate worker, kept to show that the checkers fail.

It behaves like the real worker, except that it sends every Nth reply twice
(``--duplicate-every``) and never answers every Mth request (``--drop-every``). It is
run by path from its own manifest, like a user's implementation outside zchaos.
"""

from __future__ import annotations

import argparse
import sys

from implementations.paranoid_pirate.protocol import Enveloped
from implementations.paranoid_pirate.worker import Worker, main

faults = argparse.ArgumentParser(add_help=False)
faults.add_argument("--duplicate-every", type=int, default=0)
faults.add_argument("--drop-every", type=int, default=0)
FAULTS, REST = faults.parse_known_args(sys.argv[1:])


class FaultyWorker(Worker):
    handled = 0

    def handle(self, request: Enveloped) -> list[list[bytes]]:
        self.handled += 1
        if FAULTS.drop_every and self.handled % FAULTS.drop_every == 0:
            return []
        if FAULTS.duplicate_every and self.handled % FAULTS.duplicate_every == 0:
            return [request.frames(), request.frames()]
        return [request.frames()]


if __name__ == "__main__":
    main(REST, worker_class=FaultyWorker)
