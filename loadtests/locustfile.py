"""The locustfile zchaos runs: one user class per client kind of the load in ``ZCHAOS_LOAD``."""

from loadtests.config import LoadConfig
from loadtests.user import make_user_classes

# Locust finds the user classes among this module's globals.
globals().update(make_user_classes(LoadConfig.from_env()))
