"""A protocol family's card: everything a family contributes to zchaos besides the system
itself, in one place.

Each package under ``implementations/`` is one family and defines ``CARD = Family(...)`` in
its ``card.py``; ``implementations.families()`` finds them. The card names the family (the
name of its built-in manifest, and the ``family`` of the ``malformed`` fault), and holds:

- its **probe worker** (``Probe``): the family's instrumented worker that a user's broker
  can be run with (``probe = "NAME"`` in a manifest role), with its options;
- its **junk** (``Junk``): the protocol-aware cases the ``malformed`` fault sends to its
  broker's client and worker sides (chaos/malformed.py adds the generic ones);
- its **client adapters** (``loadtests/adapters/<name>.py``) and its **checker modules**
  (``reports/checkers/<name>.py``), by name, so that a test can tell a family that is
  registered only in part;
- its history **event kinds**: declared with every other in contract/history.py
  (``FAMILY_EVENTS[name]``), read here through ``events``.

Standard library only, like the rest of the contract: the card's types are read by the
harness, the fault injector and the tests alike.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contract.history import CORE_EVENTS, FAMILY_EVENTS, EventKind


@dataclass(frozen=True)
class ProbeOption:
    flag: str  # the worker's command-line flag
    default: int | float | str
    doc: str


@dataclass(frozen=True)
class Probe:
    """A probe worker: the family's worker that records ``exec``/``done`` for every request,
    run instead of a user's own workers (harness/manifest.py builds its command)."""

    name: str  # what a manifest names (probe = "majordomo")
    speaks: str  # the protocol side it speaks, for `zchaos list`
    module: str  # run as `python -m MODULE`
    use: str  # what it is run with
    options: dict[str, ProbeOption] = field(default_factory=dict)
    #: it may connect to several endpoints at once (a WMP worker serves several managers)
    multi_connect: bool = False
    #: the flag that binds an endpoint instead of connecting (a REP server is the server itself)
    bind_flag: str | None = None
    #: the option naming the service it serves (Majordomo), for mmi_service
    service_option: str | None = None
    ready: str = "log:ready"


def work_option() -> ProbeOption:
    """The simulated work per request every probe takes (a slow worker)."""
    return ProbeOption("--work-ms", 0, "simulated work per request, ms (a slow worker)")


#: A junk case does its harm on a wire (chaos.malformed.Wire: DEALER peers of one endpoint),
#: drawing from a seeded random generator; the bytes are the service a Majordomo worker
#: registers for.
JunkCase = Callable[[Any, random.Random, bytes], None]


@dataclass(frozen=True)
class Junk:
    """The family-specific junk cases for each side of its broker, by a name for the report."""

    doc: str
    client: dict[str, JunkCase] = field(default_factory=dict)
    worker: dict[str, JunkCase] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """One protocol family's card (the module doc says what each part is for)."""

    name: str  # the family: its built-in manifest's name, the malformed fault's family
    doc: str
    probe: Probe | None = None
    junk: Junk | None = None
    adapters: tuple[str, ...] = ()  # loadtests/adapters/<name>.py it brought
    checkers: tuple[str, ...] = ()  # reports/checkers/<name>.py it brought (or shares)

    @property
    def events(self) -> dict[str, EventKind]:
        """The event kinds only this family writes (contract/history.py FAMILY_EVENTS)."""
        return FAMILY_EVENTS.get(self.name, {})

    @property
    def probe_records(self) -> tuple[str, ...]:
        """The event kinds its probe worker records: every worker's (``exec``, ``done``) and
        the family's that a worker writes (contract/history.py says who writes each)."""
        kinds = [k for k, e in CORE_EVENTS.items() if e.writer == "worker"]
        return tuple(kinds + [k for k, e in self.events.items() if e.writer in ("worker", "any")])
