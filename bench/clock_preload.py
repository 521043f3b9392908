"""What the clock faults' preload costs a process while its clock is still true: a hand-off
between two Python threads (a queue round trip: a lock and the GIL each way), in a child
process with no preload, under zchaos's preload (its shim, then libfaketime, as a clock
fault's role gets), and under libfaketime with no shim, measured in the same run.

    python bench/clock_preload.py [--round-trips 2000] [--repeats 3]

Prints each child's seconds (the best of the repeats) and its ratio to the one without a
preload. libfaketime 0.9.10 takes every pthread_cond_timedwait through its own, and the
GIL is one: chaos/clock.py's shim sends the monotonic clock's waits straight to the C
library. Needs libfaketime and cc (chaos.clock.missing() says what lacks).

2026-12-02 15:00 UTC, load 3.8 (explorations beside it), 2000 round trips, best of 3: no
preload 0.089 s; zchaos's preload 0.122 s (ratio 1.36); libfaketime with no shim 4.103 s
(ratio 45.9), which is what every wait met before the shim took the condition variables.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chaos import clock  # noqa: E402

CHILD = """
import queue, sys, threading, time
n = int(sys.argv[1])
there, back = queue.Queue(), queue.Queue()
def echo():
    for _ in range(n):
        back.put(there.get(timeout=10))
thread = threading.Thread(target=echo)
thread.start()
start = time.perf_counter()
for i in range(n):
    there.put(i)
    back.get(timeout=10)
print(time.perf_counter() - start)
thread.join()
"""


def timed(env: dict[str, str], round_trips: int, repeats: int) -> float:
    """The best of ``repeats`` children's seconds for ``round_trips`` hand-offs."""
    best = float("inf")
    for _ in range(repeats):
        child = [sys.executable, "-c", CHILD, str(round_trips)]
        out = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
        best = min(best, float(out.stdout.strip()))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lacking = clock.missing()
    if lacking is not None:
        print(f"clock_preload: {lacking}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="zchaos-bench-clock-") as tmp:
        clocks = clock.Clocks(Path(tmp) / "clock", ["x"])
        clocks.open()
        try:
            ours = {**os.environ, **clocks.env("x")}
            libraries = [p for p in ours["LD_PRELOAD"].split() if "clock-shim" not in p]
            alone = {**ours, "LD_PRELOAD": " ".join(libraries)}
            plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            base = timed(plain, args.round_trips, args.repeats)
            load = os.getloadavg()[0]
            print(f"load average {load:.1f}; {args.round_trips} round trips, best of {args.repeats}")
            print(f"  no preload                  {base:7.3f} s")
            for name, env in (("zchaos's preload (shim first)", ours), ("libfaketime, no shim", alone)):
                took = timed(env, args.round_trips, args.repeats)
                print(f"  {name:<28}{took:7.3f} s   ratio {took / base:6.2f}")
        finally:
            clocks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
