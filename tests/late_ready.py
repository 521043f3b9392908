"""A process that says it is ready only a while after it starts (standard library only).

It prints ``starting pid=…`` at once and ``ready pid=… ts=…`` (``time.time_ns()``) after
``--delay`` seconds, then idles until it is stopped: a subject whose readiness line comes
late, so a supervisor that matches an earlier incarnation's line shows up.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=1.0)
    args = parser.parse_args()
    print(f"starting pid={os.getpid()}", flush=True)
    time.sleep(args.delay)  # the slow start-up this subject stands for
    print(f"ready pid={os.getpid()} ts={time.time_ns()}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
