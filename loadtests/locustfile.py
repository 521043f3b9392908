"""The locustfile zchaos runs: one user class per client kind of the load in ``ZCHAOS_LOAD``,
and, when the scenario gives ``[[load.phases]]``, the load shape that carries them out."""

from loadtests.config import LoadConfig
from loadtests.user import make_user_classes

_config = LoadConfig.from_env()
# Locust finds the user classes, and a load shape, among this module's globals.
globals().update(make_user_classes(_config))
if _config.phases:
    from loadtests.shape import make_shape_class

    ZchaosPhases = make_shape_class(_config)
