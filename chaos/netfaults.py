"""Network faults on the links of a run, through a Toxiproxy server.

``NetworkFaults`` puts one proxy in front of each link (``add_link`` returns the address
the connecting side must use instead of the endpoint) and turns a fault kind of
``chaos.faults`` into Toxiproxy operations that ``apply`` starts and ``ActiveFault.revert``
undoes:

=========== ================================================================================
partition   ``timeout`` toxic with timeout 0 (data blackholed), both directions or one;
            removing it closes the connections, as Toxiproxy does, so peers reconnect
disconnect  the proxy disabled (connections closed with FIN, new ones refused), then enabled
reset       ``reset_peer``: connections opened during the fault are reset (RST) on their
            first data; ones already open are closed (Toxiproxy can set SO_LINGER 0 only
            when a connection starts)
latency     ``latency`` (+ ``jitter``) in ms
bandwidth   ``bandwidth`` in KB/s (0 blocks the direction)
slicer      ``slicer``: data cut in pieces of about ``average_size`` bytes, ``delay_us`` apart
limit_data  ``limit_data``: each connection closed after ``bytes`` bytes in that direction
=========== ================================================================================

A fault's target is a link name (``link:worker-1``) or an instance (``worker-1``: every
link it connects over).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from chaos.toxiproxy_client import NotFound, ToxiproxyClient
from contract.links import PREFIX

DIRECTIONS = {"both": ("upstream", "downstream"), "upstream": ("upstream",), "downstream": ("downstream",)}

#: fault kind -> (toxic type, {fault param: toxic attribute}, default direction)
TOXIC_FAULTS: dict[str, tuple[str, dict[str, str], str]] = {
    "partition": ("timeout", {}, "both"),
    "reset": ("reset_peer", {"timeout_ms": "timeout"}, "upstream"),
    "latency": ("latency", {"latency_ms": "latency", "jitter_ms": "jitter"}, "downstream"),
    "bandwidth": ("bandwidth", {"rate_kb_s": "rate"}, "downstream"),
    "slicer": (
        "slicer",
        {"average_size": "average_size", "size_variation": "size_variation", "delay_us": "delay"},
        "downstream",
    ),
    "limit_data": ("limit_data", {"bytes": "bytes"}, "downstream"),
}
KINDS = (*TOXIC_FAULTS, "disconnect")


class NetworkFaultError(Exception):
    """A network fault cannot be applied (unknown link, bad parameter, server error)."""


@dataclass
class ActiveFault:
    """A network fault in place; ``revert`` ends it (idempotent)."""

    net: NetworkFaults
    kind: str
    proxies: list[str]
    toxics: list[tuple[str, str]] = field(default_factory=list)  # (proxy, toxic name)
    reverted: bool = False

    def describe(self) -> str:
        what = ", ".join(f"{p}/{t}" for p, t in self.toxics) or ", ".join(self.proxies)
        return f"{self.kind} on {what}"

    def revert(self) -> None:
        if self.reverted:
            return
        self.reverted = True
        client = self.net.client
        if self.kind == "disconnect":
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
        self.links: dict[str, tuple[str, str]] = {}  # link name -> (proxy name, instance)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def proxy_name(self, link: str) -> str:
        return f"{self.prefix}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", link.removeprefix(PREFIX))

    def add_link(self, link: str, instance: str, upstream_port: int, listen_port: int = 0) -> str:
        """A proxy for ``link`` (whose connecting side is ``instance``) onto 127.0.0.1:upstream_port,
        listening on ``listen_port`` (0: any free port); the ``tcp://`` address to connect to instead.

        Give it a port from the run's allocator: a port the OS picks now may be one the run
        allocated to an endpoint whose process has not bound it yet."""
        name = self.proxy_name(link)
        if self.client.get_proxy(name) is not None:
            self.client.destroy(name)  # left over from an earlier run on an external server
        proxy = self.client.create(name, f"127.0.0.1:{upstream_port}", listen=f"127.0.0.1:{listen_port}")
        self.links[link] = (name, instance)
        return f"tcp://{proxy.listen}"

    def close(self) -> None:
        """Delete the proxies this object created."""
        for name, _ in self.links.values():
            with contextlib.suppress(NotFound):
                self.client.destroy(name)
        self.links.clear()

    def proxies_for(self, target: str) -> list[str]:
        if target in self.links:
            return [self.links[target][0]]
        found = [name for name, instance in self.links.values() if instance == target]
        if not found:
            known = ", ".join(sorted(self.links)) or "none"
            raise NetworkFaultError(f"no proxied link for target {target!r} (links: {known})")
        return found

    def apply(self, kind: str, target: str, params: dict[str, Any]) -> ActiveFault:
        """Start fault ``kind`` on ``target``; the handle that reverts it."""
        proxies = self.proxies_for(target)
        if kind == "disconnect":
            fault = ActiveFault(self, kind, proxies)
            for proxy in proxies:
                self.client.set_enabled(proxy, False)
            return fault
        if kind not in TOXIC_FAULTS:
            raise NetworkFaultError(f"unknown network fault {kind!r} (known: {', '.join(KINDS)})")
        toxic_type, mapping, default_direction = TOXIC_FAULTS[kind]
        direction = params.get("direction", default_direction)
        if direction not in DIRECTIONS:
            raise NetworkFaultError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        attributes = {attr: int(params[p]) for p, attr in mapping.items() if params.get(p) is not None}
        if toxic_type == "timeout":
            attributes["timeout"] = 0
        fault = ActiveFault(self, kind, proxies)
        with self._lock:
            n = next(self._ids)
        try:
            for proxy in proxies:
                for stream in DIRECTIONS[direction]:
                    name = f"{kind}-{n}-{stream}"
                    self.client.add_toxic(
                        proxy,
                        toxic_type,
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
