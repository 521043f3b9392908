"""The load's configuration, as the runner hands it to Locust (JSON in ``ZCHAOS_LOAD``).

Kept apart from ``loadtests/user.py`` because importing Locust monkey-patches the whole
process for gevent: the runner and the benchmarks must be able to build a LoadConfig
without that.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

ENV_LOAD = "ZCHAOS_LOAD"


@dataclass(frozen=True)
class ClientLoad:
    """One client kind of the load: a Locust user class."""

    name: str  # the kind, recorded on its events (and Locust's request type)
    adapter: str
    endpoints: list[str]  # addresses, in the kind's order
    endpoint_names: list[str] = field(default_factory=list)  # the manifest's names of those endpoints
    options: dict[str, Any] = field(default_factory=dict)
    weight: int = 1
    users: int = 0  # a fixed number of users (Locust's fixed_count); 0: by weight
    command: list[str] = field(default_factory=list)  # an external client's program

    def endpoint_name(self, address: str | None) -> str | None:
        """The manifest's name of an endpoint address (the address itself if it is not one)."""
        if address is None:
            return None
        if address in self.endpoints and len(self.endpoint_names) == len(self.endpoints):
            return self.endpoint_names[self.endpoints.index(address)]
        return address


@dataclass
class LoadConfig:
    clients: list[ClientLoad]
    history_dir: str  # "" records nothing (benchmarks of the recording cost)
    log_dir: str = ""  # where external client programs' stderr goes ("": discarded)
    payload_bytes: int = 32
    wait_ms: float = 20.0
    seed: int = 1
    name: str = "request"  # the request name in Locust's statistics
    # The load's phases (harness.scenario.LoadPhase.as_dict), empty for one steady load,
    # and the wall-clock time (ns) they count from. The runner's estimate is replaced by
    # the moment Locust is ready to start its users (``start_clock``), which Locust writes
    # to ``origin_file`` for the runner: faults and phases then count from the same zero,
    # however long Locust's start-up took (seconds on a loaded machine).
    phases: list[dict[str, Any]] = field(default_factory=list)
    origin_ns: int = 0
    origin_file: str = ""

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> LoadConfig:
        text = os.environ.get(ENV_LOAD)
        if not text:
            raise SystemExit(
                f"loadtests/locustfile.py is run by zchaos, which sets {ENV_LOAD}; "
                "use `zchaos load IMPL` or `zchaos run SCENARIO`"
            )
        data = json.loads(text)
        data["clients"] = [ClientLoad(**c) for c in data["clients"]]
        return cls(**data)


def start_clock(config: LoadConfig, *, announce: bool) -> int:
    """Make now the load's time zero in this Locust process; with ``announce``, tell the
    runner through ``config.origin_file`` (written whole, then renamed into place)."""
    config.origin_ns = time.time_ns()
    if announce and config.origin_file:
        tmp = f"{config.origin_file}.tmp"
        with open(tmp, "w") as fh:
            fh.write(str(config.origin_ns))
        os.replace(tmp, config.origin_file)
    return config.origin_ns


def read_origin(path: str | os.PathLike[str]) -> int | None:
    """The load's time zero Locust wrote (``start_clock``), or None while it has not."""
    try:
        with open(path) as fh:
            return int(fh.read())
    except (FileNotFoundError, ValueError):
        return None


def phase_at(config: LoadConfig, now_ns: int | None = None) -> dict[str, Any] | None:
    """The load phase ``config`` is in now; None after the last one (or when there are none).

    Here rather than in ``loadtests/shape.py`` so that it can be used (and tested) without
    importing Locust, which patches the whole process for gevent.
    """
    elapsed = ((time.time_ns() if now_ns is None else now_ns) - config.origin_ns) / 1e9
    for phase in config.phases:
        if elapsed < phase["start_s"] + phase["duration_s"]:
            return phase
    return None


def wait_time_for(config: LoadConfig) -> Callable[[Any], float]:
    """A Locust ``wait_time``: the current phase's pause (the last phase's after the end)."""
    steady = config.wait_ms / 1000

    def wait(_user: Any) -> float:
        if not config.phases:
            return steady
        phase = phase_at(config) or config.phases[-1]
        return phase["wait_ms"] / 1000

    return wait
