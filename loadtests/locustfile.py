"""The locustfile zchaos runs: one user class, bound to the load given in ``ZCHAOS_LOAD``."""

from loadtests.config import LoadConfig
from loadtests.user import make_user_class

ZchaosClient = make_user_class(LoadConfig.from_env())
