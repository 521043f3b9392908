"""Network link names: ``link:<instance>[:<endpoint>]``, written and read in this one place.

A run's links are named by their connecting side (harness/topology.py): ``link:worker-1``
for an instance that connects to one endpoint, ``link:worker-1:backend`` for one that
connects to several, and ``link:clients`` (``link:clients:<endpoint>`` when the load's
clients connect to several endpoints) for the load. A network fault names one link, or
an instance (``worker-1``, ``clients``) meaning every link it connects over; so does a
link name without the endpoint of an instance that connects to several (``link:clients``
for ``link:clients:primary`` and ``link:clients:backup``). The runner builds names with
``link_name``; the scenario reader, the nemesis and the checkers read them with
``parse_link`` / ``target_instance`` / ``covers``, so a name is never split by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "link:"
#: The connecting side of the load's links: a link-fault target for all of them.
CLIENTS = "clients"


@dataclass(frozen=True)
class Link:
    """A link, or every link of an instance when ``endpoint`` is None."""

    instance: str  # the side that connects: worker-1, or clients for the load
    endpoint: str | None = None  # the endpoint it connects to, when the name gives it

    def __str__(self) -> str:
        return link_name(self.instance, self.endpoint)

    @property
    def clients(self) -> bool:
        """A link of the load's clients."""
        return self.instance == CLIENTS


def link_name(instance: str, endpoint: str | None = None) -> str:
    """``link:worker-1``, or ``link:worker-1:backend`` when the endpoint is named."""
    return f"{PREFIX}{instance}" + (f":{endpoint}" if endpoint else "")


def parse_link(target: str) -> Link | None:
    """The link a ``link:...`` name names; None when ``target`` is not a link name.

    >>> parse_link("link:worker-1:backend")
    Link(instance='worker-1', endpoint='backend')
    >>> parse_link("worker-1") is None
    True
    """
    if not target.startswith(PREFIX):
        return None
    instance, _, endpoint = target.removeprefix(PREFIX).partition(":")
    return Link(instance, endpoint or None)


def target_instance(target: str) -> str:
    """The instance a fault target acts on: ``worker-1`` for ``worker-1``, ``link:worker-1``
    and ``link:worker-1:backend`` alike (``clients`` for the load's links)."""
    link = parse_link(target)
    return target if link is None else link.instance


def covers(target: str, link: str) -> bool:
    """Whether a network fault on ``target`` acts on the link named ``link``: the link
    itself; an instance (``clients``); or the instance's link named without its endpoint
    (``link:clients`` covers ``link:clients:backup``: the whole client side).

    >>> covers("link:clients", "link:clients:backup"), covers("clients", "link:clients:backup")
    (True, True)
    >>> covers("link:clients:primary", "link:clients:backup")
    False
    """
    named = parse_link(link)
    if named is None:
        return False
    if target == link:
        return True
    wanted = parse_link(target)
    if wanted is None:
        return target == named.instance
    return wanted.endpoint is None and wanted.instance == named.instance
