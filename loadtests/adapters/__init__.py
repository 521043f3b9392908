"""Client adapters, one module per protocol; a manifest names one by module name."""

from __future__ import annotations

import importlib

from loadtests.adapters.base import ClientAdapter


def adapter_class(name: str) -> type[ClientAdapter]:
    """The adapter class of ``loadtests/adapters/<name>.py`` (its ``ADAPTER``)."""
    module = importlib.import_module(f"{__name__}.{name}")
    return module.ADAPTER
