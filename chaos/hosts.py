"""Hosts: each process of a run in a network namespace of its own, on a bridge the run
makes, so that a subject binds and connects real addresses with no proxy between them, and
packet-level faults (``host_partition``: iptables rules; ``netem``: tc's netem queueing
discipline) act on the packets between them (scenario ``network = "hosts"``).

``Hosts.open`` makes a Linux bridge in the root namespace (address ``10.A.B.1/24``, so the
runner reaches every host for readiness and the ``malformed`` junk), and for each host a
namespace, a veth pair (``eth0`` inside, enslaved to the bridge outside) and the address
``10.A.B.N/24``, loopback up. The supervisor starts a host's process in its namespace
(``enter``, called between fork and exec: setns, nothing else changes, so process groups,
PR_SET_PDEATHSIG and the owner mark stay as they are). A fault's rules live in the hosts'
own namespaces (their iptables tables, their qdiscs): removing a namespace removes them,
and the root namespace's tables are never touched.

A namespace or a link cannot remove itself when the runner is SIGKILLed, so every one
carries its runner's mark (``zchaos-<PID>.<START>``, chaos/host_marks.py): a namespace in
its name, the bridge and the veths in their alias (an interface's name has 15 characters);
``close`` removes the run's own at its end and ``remove_leftovers`` those whose runner is
gone, at the next run's start (and any process still inside one, a packet fault's queue).
Needs root and iproute2's ``ip`` (``missing``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from chaos.host_marks import runner_alive, start_ticks

NETNS_DIR = Path("/run/netns")
#: The host the load (Locust, and the client programs it starts) runs in.
LOAD_HOST = "load"
#: The mark of a runner's namespaces and links: ``zchaos-<pid>.<start ticks>``.
MARK = re.compile(r"zchaos-(\d+)\.(\d+)")
_CLONE_NEWNET = 0x40000000
#: The private range the runs' subnets are taken from: 10.96.0.0 - 10.111.255.0, one /24 each.
SUBNET_FIRST, SUBNETS = (10 << 24) | (96 << 16), 16 * 256
COMMAND_TIMEOUT_S = 20.0


class HostsError(Exception):
    """The run cannot make its hosts (not root, no ``ip``, a command that failed)."""


def missing() -> str | None:
    """What this machine lacks for ``network = "hosts"`` (one line), or None."""
    if os.geteuid() != 0:
        return 'network = "hosts" needs root to create network namespaces and a bridge'
    if shutil.which("ip") is None:
        return 'network = "hosts" needs iproute2\'s ip command (Debian package iproute2)'
    return None


def run_cmd(argv: list[str], *, check: bool = True) -> str:
    """Run an ``ip``/``iptables``/``tc`` command; its output, or HostsError with its message."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostsError(f"{' '.join(argv)}: {exc}") from None
    if check and done.returncode != 0:
        why = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise HostsError(f"{' '.join(argv)}: {why}")
    return done.stdout


def in_ns(ns: str, argv: list[str]) -> list[str]:
    """``argv`` run inside namespace ``ns`` (``ip netns exec``: iptables and tc act on its own tables)."""
    return ["ip", "netns", "exec", ns, *argv]


def enter(ns: str) -> None:
    """Move the calling process into namespace ``ns`` (between fork and exec: its network only)."""
    fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
    finally:
        os.close(fd)


def _used_subnets() -> set[int]:
    """The /24s the root namespace has an address in (as ints of their network address)."""
    used: set[int] = set()
    try:
        links = json.loads(run_cmd(["ip", "-j", "-4", "addr", "show"]) or "[]")
    except (HostsError, ValueError):
        return used
    for link in links:
        for info in link.get("addr_info", []):
            with contextlib.suppress(ValueError, KeyError):
                used.add(int(ipaddress.ip_address(info["local"])) & ~0xFF)
    return used


def pick_subnet(seed: int, used: set[int]) -> str:
    """A free ``10.A.B`` prefix, the first from ``seed`` on that no root address uses."""
    for k in range(SUBNETS):
        net = SUBNET_FIRST + ((seed + k) % SUBNETS) * 256
        if net not in used:
            return str(ipaddress.ip_address(net)).rpartition(".")[0]
    raise HostsError("no free /24 left in 10.96.0.0/12 for the run's hosts")


@dataclass(frozen=True)
class Host:
    name: str  # the instance (or "load")
    ns: str  # its namespace
    address: str  # its address on the bridge
    veth: str  # the veth's end on the bridge (root namespace); ``eth0`` inside


@dataclass(frozen=True)
class LinkPath:
    """A link of a hosts-mode run (harness/topology.py names them): the host that connects,
    the host of the endpoint's binder, and the endpoint's port."""

    connector: str
    binder: str
    port: int


class Hosts:
    """The namespaces, bridge and links of one run: ``open`` before anything starts,
    ``close`` after every process stopped."""

    def __init__(self, names: list[str]) -> None:
        pid = os.getpid()
        self.mark = f"zchaos-{pid}.{start_ticks(pid)}"
        self.bridge = f"zc{pid}b"
        self.prefix = pick_subnet(pid, _used_subnets())
        if len(names) > 250:
            raise HostsError(f"{len(names)} hosts do not fit in one /24")
        self.hosts = {
            name: Host(name, f"{self.mark}-{i}", f"{self.prefix}.{i + 2}", f"zc{pid}v{i}")
            for i, name in enumerate(names)
        }
        self._made: list[tuple[str, str]] = []  # ("ns"|"link", name) in the order made
        #: The run's links by name (``link:worker-1``), for the link cards carried out by rules
        #: (chaos/packets.py ``hold_link``): the runner fills it from its topology.
        self.links: dict[str, LinkPath] = {}

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    def address(self, name: str) -> str:
        return self.hosts[name].address

    def ns(self, name: str) -> str:
        return self.hosts[name].ns

    def open(self) -> None:
        why = missing()
        if why is not None:
            raise HostsError(why)
        run_cmd(["ip", "link", "add", self.bridge, "type", "bridge"])
        self._made.append(("link", self.bridge))
        run_cmd(["ip", "link", "set", self.bridge, "alias", self.mark])
        run_cmd(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
        run_cmd(["ip", "link", "set", self.bridge, "up"])
        for host in self.hosts.values():
            run_cmd(["ip", "netns", "add", host.ns])
            self._made.append(("ns", host.ns))
            run_cmd(
                ["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.ns]
            )
            self._made.append(("link", host.veth))
            run_cmd(["ip", "link", "set", host.veth, "alias", self.mark])
            run_cmd(["ip", "link", "set", host.veth, "master", self.bridge, "up"])
            run_cmd(["ip", "-n", host.ns, "addr", "add", f"{host.address}/24", "dev", "eth0"])
            run_cmd(["ip", "-n", host.ns, "link", "set", "eth0", "up"])
            run_cmd(["ip", "-n", host.ns, "link", "set", "lo", "up"])

    def close(self) -> list[str]:
        """Remove what ``open`` made (the rules and qdiscs inside go with the namespaces);
        what could not be removed, each why."""
        failed = []
        for what, name in reversed(self._made):
            argv = ["ip", "netns", "delete", name] if what == "ns" else ["ip", "link", "delete", name]
            try:
                run_cmd(argv)
            except HostsError as exc:
                # a veth goes with its namespace's end: one already gone is not a failure
                if what == "ns" or _link_exists(name):
                    failed.append(str(exc))
        self._made.clear()
        return failed


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _dead(mark: str) -> bool:
    m = MARK.fullmatch(mark)
    return m is not None and not runner_alive(int(m[1]), int(m[2]))


def remove_leftovers() -> tuple[list[str], list[str]]:
    """Remove the namespaces and links of runners that are gone: (removed, failed with why)."""
    removed: list[str] = []
    failed: list[str] = []
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return removed, failed
    try:
        names = sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        names = []
    for name in names:
        if _dead(name.rpartition("-")[0]):
            # a process still inside (a packet fault's queue) would keep the namespace
            # alive, nameless, after its deletion: it goes first
            for pid in run_cmd(["ip", "netns", "pids", name], check=False).split():
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
                    removed.append(f"process {pid} in network namespace {name}")
            try:
                run_cmd(["ip", "netns", "delete", name])
                removed.append(f"network namespace {name}")
            except HostsError as exc:
                # another run's sweep may have taken it first (CI, test_hosts: "Cannot remove
                # namespace file ... No such file or directory"): gone is what was wanted
                if (NETNS_DIR / name).exists():
                    failed.append(str(exc))
    try:
        links = json.loads(run_cmd(["ip", "-d", "-j", "link", "show"]) or "[]")
    except (HostsError, ValueError):
        links = []
    # veths first: a bridge deleted first would leave them, unenslaved
    for link in sorted(links, key=lambda lk: lk.get("linkinfo", {}).get("info_kind") == "bridge"):
        alias, name = link.get("ifalias", ""), link.get("ifname", "")
        if alias and _dead(alias) and _link_exists(name):
            try:
                run_cmd(["ip", "link", "delete", name])
                removed.append(f"link {name} ({alias})")
            except HostsError as exc:
                if _link_exists(name):
                    failed.append(str(exc))
    return removed, failed
