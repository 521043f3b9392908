"""A deliberately faulty Paranoid Pirate worker, kept to show that the checkers fail.

It behaves like the real worker, except that it never answers every Nth request
(``--drop-every``) and answers every Mth request with the body of the request it served
before (``--stale-every``: the classic reused-buffer bug). It runs by path from its own
manifest, like a user's implementation outside zchaos.

(A worker that merely sends a reply twice would not do: the client's REQ socket drops a
second reply before its next request, so no client could ever see it.)

With ``--rejoin-delay-s N`` it is a slow twin instead, correct but slow to recover: started
again in the same run (after a kill), it says it is ready at once but joins the queue only N
seconds later. Its first start (no ``<instance>.started`` mark in ``--marks``) joins at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from implementations.paranoid_pirate.protocol import Enveloped
from implementations.paranoid_pirate.worker import Worker, main
from implementations.runtime import announce_ready

faults = argparse.ArgumentParser(add_help=False)
faults.add_argument("--drop-every", type=int, default=0)
faults.add_argument("--stale-every", type=int, default=0)
faults.add_argument("--rejoin-delay-s", type=float, default=0.0)
faults.add_argument("--marks", help="a folder for the mark of a first start")
FAULTS, REST = faults.parse_known_args(sys.argv[1:])


class FaultyWorker(Worker):
    handled = 0
    previous_body: list[bytes] | None = None
    joined = False

    def connect(self) -> None:
        if FAULTS.rejoin_delay_s and FAULTS.marks and not self.joined:
            mark = Path(FAULTS.marks) / f"{self.args.identity}.started"
            if mark.exists():  # a restart: ready for the supervisor now, in the queue only later
                announce_ready(self.log, self.args.identity)
                time.sleep(FAULTS.rejoin_delay_s)
            mark.touch()
        self.joined = True
        super().connect()

    def handle(self, request: Enveloped) -> list[list[bytes]]:
        self.handled += 1
        previous, self.previous_body = self.previous_body, request.body
        if FAULTS.drop_every and self.handled % FAULTS.drop_every == 0:
            return []
        if FAULTS.stale_every and self.handled % FAULTS.stale_every == 0 and previous is not None:
            return [Enveloped(request.envelope, previous).frames()]
        return [request.frames()]


if __name__ == "__main__":
    main(REST, worker_class=FaultyWorker)
