"""Load shapes: a scenario's ``[[load.phases]]`` carried out with Locust's LoadTestShape.

Locust calls the shape's ``tick`` about once a second; it answers with the phase's user
count and spawn rate, and with None once the last phase is over, which ends the load.
Each user's pause between requests follows the phase too (``wait_time``). Both read the
clock against the same origin (the runner's start of the load, in ``LoadConfig``), in
every Locust process, so phases line up with the fault schedule. Phase changes are seen
within about a second (Locust's tick).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from locust import LoadTestShape

from loadtests.config import LoadConfig


def phase_at(config: LoadConfig, now_ns: int | None = None) -> dict[str, Any] | None:
    """The phase the load is in now; None after the last one (or when there are none)."""
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


def make_shape_class(config: LoadConfig) -> type[LoadTestShape]:
    """A LoadTestShape that runs the phases of ``config`` and then stops the load."""

    def tick(self: LoadTestShape) -> tuple[int, float] | None:
        phase = phase_at(config)
        return None if phase is None else (phase["users"], phase["spawn_rate"])

    return type("ZchaosPhases", (LoadTestShape,), {"tick": tick, "abstract": False})
