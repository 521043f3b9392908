"""Network faults on the links of a run, through a Toxiproxy server.

``NetworkFaults`` puts one proxy in front of each link (``add_link`` returns the address
the connecting side must use instead of the endpoint) and starts a link fault on it:
``poison`` adds the toxic a fault kind's card declares (chaos/kinds/: its type, its
attribute mapping, its default direction as the ``direction`` parameter's default),
``disable`` turns the proxy off; ``ActiveFault.revert`` undoes either. ``toxic_fault`` is
the ``run`` handler of the cards made of a toxic, ``hold`` the part every link fault shares
(record the start, wait out the duration, revert, record the stop).

A fault's target is a link name (``link:worker-1``) or an instance (``worker-1``: every
link it connects over).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.toxiproxy_client import NotFound, ToxiproxyClient
from contract.links import PREFIX, covers

if TYPE_CHECKING:
    from chaos.faults import FaultKind, FaultRun
    from chaos.nemesis import PlannedFault

DIRECTIONS = {"both": ("upstream", "downstream"), "upstream": ("upstream",), "downstream": ("downstream",)}


class NetworkFaultError(Exception):
    """A network fault cannot be applied (unknown link, bad parameter, server error)."""


@dataclass
class ActiveFault:
    """A network fault in place; ``revert`` ends it (idempotent)."""

    net: NetworkFaults
    kind: str
    proxies: list[str]
    toxics: list[tuple[str, str]] = field(default_factory=list)  # (proxy, toxic name)
    disabled: bool = False  # the proxies are off (disable), to be turned on again
    reverted: bool = False

    def describe(self) -> str:
        what = ", ".join(f"{p}/{t}" for p, t in self.toxics) or ", ".join(self.proxies)
        return f"{self.kind} on {what}"

    def revert(self) -> None:
        if self.reverted:
            return
        self.reverted = True
        client = self.net.client
        if self.disabled:
            for proxy in self.proxies:
                client.set_enabled(proxy, True)
        for proxy, toxic in self.toxics:
            with contextlib.suppress(NotFound):  # removed by a /reset meanwhile
                client.remove_toxic(proxy, toxic)


class NetworkFaults:
    """The proxies of one run's links on one Toxiproxy server, and the faults applied to them."""

    def __init__(self, client: ToxiproxyClient, prefix: str = "zchaos") -> None:
        self.client = client
        self.prefix = prefix
        self.links: dict[str, str] = {}  # link name -> proxy name
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def proxy_name(self, link: str) -> str:
        return f"{self.prefix}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", link.removeprefix(PREFIX))

    def add_link(self, link: str, upstream_port: int, listen_port: int = 0) -> str:
        """A proxy for ``link`` (a ``link:`` name) onto 127.0.0.1:upstream_port,
        listening on ``listen_port`` (0: any free port); the ``tcp://`` address to connect to instead.

        Give it a port from the run's allocator: a port the OS picks now may be one the run
        allocated to an endpoint whose process has not bound it yet."""
        name = self.proxy_name(link)
        if self.client.get_proxy(name) is not None:
            self.client.destroy(name)  # left over from an earlier run on an external server
        proxy = self.client.create(name, f"127.0.0.1:{upstream_port}", listen=f"127.0.0.1:{listen_port}")
        self.links[link] = name
        return f"tcp://{proxy.listen}"

    def close(self) -> None:
        """Delete the proxies this object created."""
        for name in self.links.values():
            with contextlib.suppress(NotFound):
                self.client.destroy(name)
        self.links.clear()

    def proxies_for(self, target: str) -> list[str]:
        found = [name for link, name in self.links.items() if covers(target, link)]
        if not found:
            known = ", ".join(sorted(self.links)) or "none"
            raise NetworkFaultError(f"no proxied link for target {target!r} (links: {known})")
        return found

    def disable(self, target: str) -> ActiveFault:
        """Disable the proxies of ``target``'s links (connections closed, new ones refused)."""
        fault = ActiveFault(self, "disconnect", self.proxies_for(target), disabled=True)
        for proxy in fault.proxies:
            self.client.set_enabled(proxy, False)
        return fault

    def poison(self, kind: FaultKind, target: str, params: dict[str, Any]) -> ActiveFault:
        """Add the toxic of fault ``kind`` (its card's ``toxic``) to ``target``'s links."""
        proxies = self.proxies_for(target)
        if kind.toxic is None:
            raise NetworkFaultError(f"fault kind {kind.name!r} is not made of a toxic")
        direction = params.get("direction", kind.params["direction"].default)  # every toxic card has one
        if direction not in DIRECTIONS:
            raise NetworkFaultError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        attributes = {
            attr: int(params[p]) for p, attr in kind.toxic.attributes.items() if params.get(p) is not None
        }
        attributes.update(kind.toxic.fixed)
        fault = ActiveFault(self, kind.name, proxies)
        with self._lock:
            n = next(self._ids)
        try:
            for proxy in proxies:
                for stream in DIRECTIONS[direction]:
                    name = f"{kind.name}-{n}-{stream}"
                    self.client.add_toxic(
                        proxy,
                        kind.toxic.type,
                        stream=stream,
                        name=name,
                        toxicity=float(params.get("toxicity", 1.0)),
                        attributes=attributes,
                    )
                    fault.toxics.append((proxy, name))
        except Exception:
            fault.revert()
            raise
        return fault


def network_of(nemesis: FaultRun) -> NetworkFaults:
    """The run's links behind the fault proxy; an error when the run has none."""
    if nemesis.network is None:
        raise RuntimeError("network faults need the run's links routed through the fault proxy")
    return nemesis.network


def hold(nemesis: FaultRun, fault: PlannedFault, active: ActiveFault) -> None:
    """A link fault under way: record its start, wait out its duration, revert it, record its stop."""
    try:
        nemesis.started(fault, detail=active.describe())
        nemesis.wait(fault.params["duration_s"])
    finally:
        active.revert()
        nemesis.stopped(fault)


def toxic_fault(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    """The ``run`` of a card made of a toxic: add it to the target's links for the duration
    (in hosts mode, the card's rules instead: ``on_hosts``)."""
    if nemesis.hosts is not None and kind.on_hosts is not None:
        from chaos.packets import hold_link

        hold_link(nemesis, fault, kind.on_hosts)
        return
    hold(nemesis, fault, network_of(nemesis).poison(kind, fault.target, fault.params))
