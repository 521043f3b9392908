"""Client adapters, one module per protocol; a manifest names one by module name.

Every module of this package but ``base`` is an adapter (``ADAPTER = TheClass``); the
class declares its options (``DEFAULTS``), how many endpoints it takes and a one-line
summary, which manifest validation and ``zchaos list`` read from here.
"""

from __future__ import annotations

import importlib
import pkgutil

from loadtests.adapters.base import ClientAdapter

NOT_ADAPTERS = ("base",)


def adapter_names() -> list[str]:
    """The name of every adapter (the modules of this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in NOT_ADAPTERS)


def adapter_class(name: str) -> type[ClientAdapter]:
    """The adapter class of ``loadtests/adapters/<name>.py`` (its ``ADAPTER``).

    Raises KeyError, naming the known adapters, for a name that is not one.
    """
    if name not in adapter_names():
        raise KeyError(f"unknown client adapter {name!r} (known: {', '.join(adapter_names())})")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.ADAPTER
