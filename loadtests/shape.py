"""Load shapes: a scenario's ``[[load.phases]]`` carried out with Locust's LoadTestShape.

Locust calls the shape's ``tick`` about once a second; it answers with the phase's user
count and spawn rate, and with None once the last phase is over, which ends the load.
Each user's pause between requests follows the phase too (``wait_time_for`` and the phase
lookup live in ``loadtests/config.py``, which imports no Locust). Both read the
clock against the same origin (the runner's start of the load, in ``LoadConfig``), in
every Locust process, so phases line up with the fault schedule. Phase changes are seen
within about a second (Locust's tick).
"""

from __future__ import annotations

from locust import LoadTestShape

from loadtests.config import LoadConfig, phase_at


def make_shape_class(config: LoadConfig) -> type[LoadTestShape]:
    """A LoadTestShape that runs the phases of ``config`` and then stops the load."""

    def tick(self: LoadTestShape) -> tuple[int, float] | None:
        phase = phase_at(config)
        return None if phase is None else (phase["users"], phase["spawn_rate"])

    return type("ZchaosPhases", (LoadTestShape,), {"tick": tick, "abstract": False})
