"""The systems under test, one package per protocol family, each with its manifest.

Every role runs alone as ``python -m implementations.<family>.<role>``; the only thing
they take from zchaos is ``contract.history`` (standard library only), to record the
events the checkers need when the runner asks them to.

Each family's package also holds its card (``card.py``: ``CARD``, a
``contract.family.Family``): what the family contributes besides the system itself, its
probe worker, its junk for the ``malformed`` fault, its client adapters and checker
modules by name. ``families()`` finds every card; a role never imports them.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from contract.family import Family, Junk, Probe


@functools.cache
def families() -> dict[str, Family]:
    """Every family's card by family name, from ``implementations/<package>/card.py``."""
    found: dict[str, Family] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}.card")
        card = getattr(module, "CARD", None)
        if not isinstance(card, Family):
            raise TypeError(f"{module.__name__} defines no CARD (a contract.family.Family)")
        if card.name in found:
            raise TypeError(f"family {card.name!r} has two cards")
        found[card.name] = card
    return found


def probes() -> dict[str, Probe]:
    """Every probe worker by the name a manifest gives it (``probe = "majordomo"``), in order."""
    return dict(sorted((f.probe.name, f.probe) for f in families().values() if f.probe is not None))


def family_junk() -> dict[str, Junk]:
    """Every family's junk for the ``malformed`` fault, by family name (the cases' building
    blocks are in implementations/junk.py)."""
    return {name: f.junk for name, f in families().items() if f.junk is not None}
