"""The topology of a run: which processes, on which ports, linked how.

It turns a scenario (with its manifest) into the processes to start, each with its
command line filled in (placeholders of ``harness/manifest.py``), and names every
network link a fault may cut: ``link:clients`` (the load clients to the client
endpoint; ``link:clients:<endpoint>`` for each when the clients connect to several) and
``link:<instance>`` for each instance that connects to an endpoint
(``link:<instance>:<endpoint>`` when it connects to several). A link is direct unless
the runner routes it through a fault proxy with ``route``.

With ``network = "hosts"`` (``use_hosts``) every instance, and the load (``LOAD_HOST``), runs
in a host of its own (chaos/hosts.py): an endpoint's address is the address of the
instance that binds it, and each process starts in its host's namespace.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.hosts import LOAD_HOST, LinkPath
from contract.history import ENV_HISTORY_DIR, ENV_SOURCE
from contract.links import CLIENTS
from contract.ports import PortAllocator
from contract.rundir import RunDir
from harness.manifest import PLACEHOLDER, ClientKind, client_endpoints, client_link_name, instance_link_name
from harness.scenario import Scenario
from harness.stock import checkout_root
from harness.supervisor import ProcSpec

if TYPE_CHECKING:
    from chaos.hosts import Hosts

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages once installed


@dataclass(frozen=True)
class Link:
    name: str  # link:worker-1
    instance: str  # who connects ("clients" for the load)
    endpoint: str  # to which endpoint
    upstream_port: int  # the port the endpoint is bound on


class Topology:
    def __init__(self, scenario: Scenario, run: RunDir, ports: PortAllocator) -> None:
        self.scenario = scenario
        self.manifest = scenario.manifest
        self.run = run
        self.ports = {endpoint: ports.allocate() for endpoint in self.manifest.endpoints}
        self._routes: dict[str, str] = {}
        #: More environment for some instances: a clock fault's preload (chaos/clock.py).
        self.extra_env: dict[str, dict[str, str]] = {}
        self.hosts: Hosts | None = None  # network = "hosts": each instance's namespace and address

    def host_names(self) -> list[str]:
        """Every host of a hosts-mode run: each instance, in start order, then the load."""
        return [i for role in self.start_order() for i in self.scenario.instances(role)] + [LOAD_HOST]

    def use_hosts(self, hosts: Hosts) -> None:
        """Run every process in its host (made by the runner): endpoints at their binder's address."""
        self.hosts = hosts

    def binder(self, endpoint: str) -> str | None:
        """The instance that binds ``endpoint`` (the first of its role's: a scenario in hosts
        mode refuses a binding role of several), None if none does."""
        for role in self.manifest.roles.values():
            if endpoint in role.binds:
                return self.scenario.instances(role.name)[0]
        return None

    def host_address(self, endpoint: str) -> str:
        """The IP address ``endpoint`` is bound on: 127.0.0.1, or its binder's host's."""
        binder = self.binder(endpoint)
        if self.hosts is None or binder is None:
            return "127.0.0.1"
        return self.hosts.address(binder)

    def link_paths(self) -> dict[str, LinkPath]:
        """Hosts mode: each link's connecting host, its endpoint's binder's host and port (the
        link cards made of rules cut these flows, chaos/packets.py ``hold_link``)."""
        paths = {}
        for link in self.links():
            binder = self.binder(link.endpoint)
            if binder is not None:
                connector = LOAD_HOST if link.instance == CLIENTS else link.instance
                paths[link.name] = LinkPath(connector, binder, link.upstream_port)
        return paths

    # -- addresses and links --------------------------------------------------------

    def bind_address(self, endpoint: str) -> str:
        return f"tcp://{self.host_address(endpoint)}:{self.ports[endpoint]}"

    def links(self) -> list[Link]:
        """Every link of the topology, the clients' first."""
        found = [
            Link(client_link_name(self.manifest, e), CLIENTS, e, self.ports[e])
            for e in client_endpoints(self.manifest)
        ]
        for role in self.manifest.roles.values():
            for instance in self.scenario.instances(role.name):
                for endpoint in role.connects:
                    found.append(
                        Link(
                            instance_link_name(instance, endpoint, role),
                            instance,
                            endpoint,
                            self.ports[endpoint],
                        )
                    )
        return found

    def route(self, link: str, address: str) -> None:
        """Send the traffic of ``link`` to ``address`` (a fault proxy) instead of straight on."""
        self._routes[link] = address

    def link_address(self, link: Link) -> str:
        return self._routes.get(link.name, self.bind_address(link.endpoint))

    def public_address(self, endpoint: str) -> str:
        """The address the load clients reach ``endpoint`` at (its bind address if they do not)."""
        for link in self.links():
            if link.instance == CLIENTS and link.endpoint == endpoint:
                return self.link_address(link)
        return self.bind_address(endpoint)

    def client_addresses(self, kind: ClientKind) -> list[str]:
        """The addresses a client kind connects to, in its order (fault proxies when routed)."""
        links = {lk.endpoint: lk for lk in self.links() if lk.instance == CLIENTS}
        return [self.link_address(links[e]) for e in kind.endpoints]

    def client_command(self, kind: ClientKind) -> list[str]:
        """An external client's command line, its placeholders filled in."""
        values = {
            "python": sys.executable,
            "manifest_dir": str(self.manifest.directory),
            "run_dir": str(self.run.root),
        }
        return [PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in kind.command]

    # -- processes ------------------------------------------------------------------

    def start_order(self) -> list[str]:
        """Roles that bind endpoints first, so that connecting roles find them ready."""
        roles = list(self.manifest.roles.values())
        return [r.name for r in roles if r.binds] + [r.name for r in roles if not r.binds]

    def base_env(self) -> dict[str, str]:
        from reports.connect import CLIENT_ENV

        # not the report's Spark Connect token (a suite's earlier report set it here)
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
        if checkout_root() is not None:
            # A checkout's packages for a role run by {python} (tests import them from there).
            # Not site-packages once installed: our interpreter finds its packages itself, and a
            # user's program run by another Python would import our dependencies (pyzmq built
            # for our Python) before its own.
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env[ENV_HISTORY_DIR] = str(self.run.history)
        return env

    def data_dir(self, role_name: str, instance: str) -> str:
        """The folder ``instance`` keeps its data in (its role's ``data_dir`` filled in), '' for
        a role that declares none."""
        role = self.manifest.roles[role_name]
        if role.data_dir is None:
            return ""
        index = instance.rsplit("-", 1)[1] if instance != role.name else "1"
        simple = {
            "python": sys.executable,
            "role": role.name,
            "instance": instance,
            "index": index,
            "manifest_dir": str(self.manifest.directory),
            "run_dir": str(self.run.root),
        }
        return PLACEHOLDER.sub(lambda m: simple[m.group(1)], role.data_dir)

    def proc_spec(self, role_name: str, instance: str) -> ProcSpec:
        role = self.manifest.roles[role_name]
        index = instance.rsplit("-", 1)[1] if instance != role_name else "1"
        links = {lk.endpoint: lk for lk in self.links() if lk.instance == instance}
        simple = {
            "python": sys.executable,
            "role": role_name,
            "instance": instance,
            "index": index,
            "manifest_dir": str(self.manifest.directory),
            "run_dir": str(self.run.root),
        }
        if role.data_dir is not None:
            simple["data_dir"] = self.data_dir(role_name, instance)

        def fill(match: re.Match[str]) -> str:
            head, sub = match.group(1), match.group(2)
            if sub is None:
                return simple[head]
            if head == "bind":
                return self.bind_address(sub)
            if head == "connect":
                return self.link_address(links[sub]) if sub in links else self.bind_address(sub)
            if head == "public":
                return self.public_address(sub)
            return str(self.scenario.options[sub])

        argv = [PLACEHOLDER.sub(fill, arg) for arg in role.command]
        ready_port = self.ports[role.ready.arg] if role.ready.kind == "port" else None
        ready_line = role.ready.arg if role.ready.kind == "log" else None
        return ProcSpec(
            instance=instance,
            role=role_name,
            argv=argv,
            log=self.run.log(instance),
            env={
                **{var: PLACEHOLDER.sub(fill, value) for var, value in role.env.items()},
                ENV_SOURCE: instance,
                **self.extra_env.get(instance, {}),
            },
            ready_port=ready_port,
            ready_line=ready_line,
            stop_signal=getattr(signal, role.stop_signal),
            binds={endpoint: self.ports[endpoint] for endpoint in role.binds},
            captured=True,
            events=tuple((e.kind, e.pattern) for e in role.events),
            events_history=self.run.history / f"{instance}.lines.jsonl" if role.events else None,
            netns=self.hosts.ns(instance) if self.hosts is not None else None,
            address=self.hosts.address(instance) if self.hosts is not None else "127.0.0.1",
        )
