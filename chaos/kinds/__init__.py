"""The fault kinds, one card per module: ``chaos/kinds/<kind>.py`` defines ``KIND``, a
``chaos.faults.FaultKind`` (its parameters, how it runs, its harm, scope and lossiness, its
``validate`` hook). Every module of this package is imported here, so adding a kind is
adding its module; the scenario reader, ``zchaos list``, the nemesis and the runner all
read ``FAULT_KINDS``.
"""

from __future__ import annotations

import importlib
import pkgutil

from chaos.faults import FaultKind


def _discover() -> dict[str, FaultKind]:
    found: dict[str, FaultKind] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if not isinstance(kind, FaultKind):
            raise TypeError(f"{__name__}.{info.name} defines no KIND (a chaos.faults.FaultKind)")
        if kind.name in found:
            raise TypeError(f"fault kind {kind.name!r} is declared twice")
        found[kind.name] = kind
    return found


#: Every fault kind by name, as ``zchaos list`` shows them: process faults first, then link faults.
FAULT_KINDS: dict[str, FaultKind] = dict(
    sorted(_discover().items(), key=lambda item: (item[1].target != "process", item[0]))
)
