"""The locustfile zchaos runs: one user class, bound to the load given in ``ZCHAOS_LOAD``,
and, when the scenario gives ``[[load.phases]]``, the load shape that carries them out."""

from loadtests.config import LoadConfig
from loadtests.user import make_user_class

_config = LoadConfig.from_env()
ZchaosClient = make_user_class(_config)
if _config.phases:
    from loadtests.shape import make_shape_class

    ZchaosPhases = make_shape_class(_config)
