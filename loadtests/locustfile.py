"""The locustfile zchaos runs: one user class per client kind of the load in ``ZCHAOS_LOAD``,
and, when the scenario gives ``[[load.phases]]``, the load shape that carries them out."""

from typing import Any

import gevent
from locust import events
from locust.runners import WorkerRunner

from loadtests.config import LoadConfig, start_clock
from loadtests.user import make_user_classes

_config = LoadConfig.from_env()


@events.init.add_listener
def _start_the_clock(environment: Any, **_kwargs: Any) -> None:
    # Fired once the runner exists, right before the users start: the load's time zero.
    start_clock(_config, announce=not isinstance(environment.runner, WorkerRunner))
    # Locust starts its --run-time timer next, from the time gevent's loop read when it last
    # turned: before this file's imports, seconds ago on a loaded machine, so the load ended
    # that much early (3.5 s asked, 2.8 s run under five test processes). Read it now.
    gevent.get_hub().loop.update_now()


# Locust finds the user classes, and a load shape, among this module's globals.
globals().update(make_user_classes(_config))
if _config.phases:
    from loadtests.shape import make_shape_class

    ZchaosPhases = make_shape_class(_config)
