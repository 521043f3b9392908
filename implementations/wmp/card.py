"""The Worker-Manager Protocol (14/WMP) family's card: its probe worker, its junk, its checks."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from contract.family import Family, Junk, JunkCase, Probe, ProbeOption
from implementations.junk import once, req_client_cases
from implementations.wmp import wire


def _wmp(command: str, **headers: Any) -> Callable[[random.Random], list[bytes]]:
    return lambda rng: wire.encode(wire.make(command, "junk-" + rng.randbytes(3).hex(), **headers))


WMP_WORKER: dict[str, JunkCase] = {
    "READY from a stranger": once(_wmp("READY", slots="2")),
    "READY with a huge slot count": once(_wmp("READY", slots="1000000000")),
    "READY with a negative slot count": once(_wmp("READY", slots="-1")),
    "GIVE with an unknown lock": once(_wmp("GIVE", lock="nolock")),
    "DONE for an unknown job": once(_wmp("DONE", job="nojob")),
    "TAKE towards a manager": once(_wmp("TAKE", lock="l", job="j", manager="m")),
    "READY without its header": once(_wmp("READY")),
    "bad version": once(lambda rng: [b"WMP\x09", wire.READY, b"path=junk\nslots=1"]),
    "unknown command": once(lambda rng: [wire.VERSION, bytes([rng.randrange(7, 256)]), b"path=junk"]),
    "header not ASCII": once(lambda rng: [wire.VERSION, wire.READY, b"path=\xff\xfe"]),
    "oversized header": once(lambda rng: [wire.VERSION, wire.READY, b"path=" + b"a" * 5000]),
    "too many hops": once(
        lambda rng: [wire.VERSION, wire.DONE, b"path=" + b" ".join([b"h"] * 40) + b"\njob=j"]
    ),
    "unknown header": once(lambda rng: [wire.VERSION, wire.READY, b"path=junk\nslots=1\ncolour=red"]),
}

CARD = Family(
    "wmp",
    "Worker-Manager Protocol (14/WMP): managers, devices and workers with a capacity",
    probe=Probe(
        "wmp",
        "Worker-Manager Protocol (14/WMP) worker: READY/WAKE/GIVE/TAKE/DONE with a capacity",
        "implementations.wmp.worker",
        "for WMP managers or devices",
        {
            "capacity": ProbeOption("--capacity", 2, "jobs (held or locked) at once"),
            "work_ms": ProbeOption("--work-ms", 0, "simulated work per job, ms"),
            "lock_timeout_ms": ProbeOption("--lock-timeout-ms", 1000, "a lock's timeout"),
            "ready_min_ms": ProbeOption("--ready-min-ms", 250, "READY back-off start"),
            "ready_max_ms": ProbeOption("--ready-max-ms", 2000, "READY back-off ceiling"),
        },
        multi_connect=True,
    ),
    junk=Junk(
        "WMP manager: REQ clients, workers speaking implementations/wmp's encoding",
        req_client_cases(b"READY"),
        WMP_WORKER,
    ),
    checkers=("wmp",),
)
