"""Packet faults between the hosts of a ``network = "hosts"`` run (chaos/hosts.py): a
partition made of iptables rules (``host_partition``) and tc's netem on a host's link
(``netem``).

Every rule and queueing discipline is put in a host's own namespace (its iptables tables,
the qdisc of its ``eth0``), or on its veth's end on the run's bridge for what comes in: the
fault removes them at its end, and what a killed run leaves goes with its namespaces and
links (``chaos.hosts.remove_leftovers``). The root namespace's tables are never touched.
A rule names peers by address, never the bridge's own (the runner's readiness checks and
the ``malformed`` junk come from there), so a host restarted under a partition still
comes up.

The partition's shapes are Jepsen's: ``isolate`` (the target against its peers, the load's
host among them by default), ``halves`` (the instances' hosts in two halves, the target's
first) and ``ring`` (majorities in a ring: each instance's host keeps the hosts nearest it on
both sides, a majority with itself, and loses the rest); as in Jepsen the clients (the load)
keep reaching every node in those two.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.hosts import LOAD_HOST, Hosts, HostsError, LinkPath, in_ns, run_cmd

if TYPE_CHECKING:
    from chaos.faults import FaultRun
    from chaos.nemesis import PlannedFault

SHAPES = ("isolate", "halves", "ring")
HOWS = ("drop", "reset")
#: A partition's direction, seen from the target (or from the target's group): ``in``: it
#: hears nothing from the others; ``out``: what it sends them is lost.
DIRECTIONS = ("both", "in", "out")
NETEM_DIRECTIONS = ("out", "in", "both")
#: A rule's match and target that answer TCP with a reset, a reset itself excepted: cut both
#: ways, the reset one side's rule sends was lost at the other's rule, and a connect hung as at
#: a silent partition (measured: a connect timed out under how = "reset", direction = "both").
RESET = ["!", "--tcp-flags", "RST", "RST", "-j", "REJECT", "--reject-with", "tcp-reset"]


def iptables_missing() -> str | None:
    """What this machine lacks for ``host_partition`` (one line), or None."""
    if os.geteuid() != 0:
        return "host_partition needs root to add iptables rules in the run's network namespaces"
    if shutil.which("iptables") is None:
        return "host_partition needs the iptables command (Debian package iptables)"
    return None


_NETEM_PROBE: list[str | None] = []  # asked once per process: the kernel does not change


def netem_missing() -> str | None:
    """What this machine lacks for ``netem`` (one line), or None: tc, and the kernel's netem
    queueing discipline (tried on the loopback of a scratch namespace)."""
    if os.geteuid() != 0:
        return "netem needs root to change the queueing discipline of the run's links"
    if shutil.which("tc") is None or shutil.which("ip") is None:
        return "netem needs iproute2's tc and ip commands (Debian package iproute2)"
    if not _NETEM_PROBE:
        scratch = f"zchaos-netem-probe-{os.getpid()}"
        why = None
        try:
            run_cmd(["ip", "netns", "add", scratch])
            run_cmd(in_ns(scratch, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]))
        except HostsError as exc:
            why = (
                "netem is not available on this machine's kernel "
                f"(CONFIG_NET_SCH_NETEM, module sch_netem): {exc}"
            )
        finally:
            with contextlib.suppress(HostsError):
                run_cmd(["ip", "netns", "delete", scratch], check=False)
        _NETEM_PROBE.append(why)
    return _NETEM_PROBE[0]


# --- the partition ---------------------------------------------------------------------


def groups(shape: str, target: str, names: list[str]) -> list[tuple[str, list[str]]]:
    """For each host that gets rules, the hosts it is cut from (every host in ``names``,
    ``target`` among them): one entry per host whose namespace holds the rules."""
    others = [n for n in names if n != target]
    if shape == "isolate":
        return [(target, others)]
    # the target first, then the others in the run's order: the groups follow the target
    i = names.index(target)
    ring = names[i:] + names[:i]
    n = len(ring)
    if shape == "halves":
        mine, theirs = ring[: math.ceil(n / 2)], ring[math.ceil(n / 2) :]
        return [(host, theirs) for host in mine] if theirs else []
    # ring: each keeps the hosts within ``reach`` on both sides (itself and them a majority)
    reach = math.ceil((n // 2) / 2)
    cut = []
    for a in range(n):
        lost = [ring[b] for b in range(n) if min((a - b) % n, (b - a) % n) > reach]
        if lost:
            cut.append((ring[a], lost))
    return cut


def shape_cut(shape: str, target: str, names: list[str], peers: str = "all") -> list[tuple[str, list[str]]]:
    """``groups`` over the run's hosts: ``isolate`` against the ``peers`` named; ``halves`` and
    ``ring`` over the instances' hosts only (Jepsen's clients keep reaching every node)."""
    if shape == "isolate":
        chosen = set(_peer_names(peers, names, target))
        return groups(shape, target, [target, *(n for n in names if n in chosen)])
    return groups(shape, target, [n for n in names if n != LOAD_HOST])


def partition_rules(how: str, sources: list[str], tag: str) -> list[list[str]]:
    """The iptables rule specs (after ``-A``/``-D``) that lose what comes in from ``sources``
    (addresses). Always where a packet arrives, never where it leaves: a packet a host's own
    OUTPUT chain drops fails its send at once (EPERM), and TCP retries it within half a
    second, so a connect would not hang as it does when the network loses its SYN."""
    rules = []
    for source in sources:
        base = ["INPUT", "-s", source, "-m", "comment", "--comment", tag]
        if how == "reset":
            # TCP is answered with a reset, the rest (none of ZeroMQ's) dropped
            rules.append([*base, "-p", "tcp", *RESET])
            rules.append([*base, "!", "-p", "tcp", "-j", "DROP"])
        else:
            rules.append([*base, "-j", "DROP"])
    return rules


def cut_rules(
    cut: list[tuple[str, list[str]]], how: str, direction: str, address: dict[str, str], tag: str
) -> list[tuple[str, list[str]]]:
    """(host whose namespace holds it, rule) for each host cut from its lost hosts: ``in``: it
    hears nothing from them (its own INPUT); ``out``: what it sends them is lost (theirs)."""
    found: dict[tuple[str, tuple[str, ...]], None] = {}
    for host, lost in cut:
        if direction in ("both", "in"):
            for rule in partition_rules(how, [address[n] for n in lost], tag):
                found[(host, tuple(rule))] = None
        if direction in ("both", "out"):
            for other in lost:
                for rule in partition_rules(how, [address[host]], tag):
                    found[(other, tuple(rule))] = None
    return [(host, list(rule)) for host, rule in found]


@dataclass
class Applied:
    """Rules and qdiscs in place, by namespace ('' for the root namespace's veth ends);
    ``remove`` takes them away (idempotent, every one tried)."""

    rules: list[tuple[str, list[str]]] = field(default_factory=list)  # (namespace, rule spec)
    qdiscs: list[tuple[str, str]] = field(default_factory=list)  # (namespace or '', device)

    def remove(self) -> list[str]:
        failed = []
        while self.rules:
            ns, rule = self.rules.pop()
            try:
                run_cmd(in_ns(ns, ["iptables", "-w", "-D", *rule]))
            except HostsError as exc:
                failed.append(str(exc))
        while self.qdiscs:
            ns, dev = self.qdiscs.pop()
            argv = ["tc", "qdisc", "del", "dev", dev, "root"]
            try:
                run_cmd(in_ns(ns, argv) if ns else argv)
            except HostsError as exc:
                failed.append(str(exc))
        return failed


def add_partition(hosts: Hosts, fault_id: int, target: str, params: dict[str, Any]) -> tuple[Applied, str]:
    """Put ``host_partition``'s rules in place: what was applied, and a description."""
    names = list(hosts.hosts)
    shape = params.get("shape", "isolate")
    cut = shape_cut(shape, target, names, params.get("peers", "all"))
    tag = f"zchaos-fault-{fault_id}"
    how, direction = params.get("how", "drop"), params.get("direction", "both")
    address = {n: hosts.address(n) for n in names}
    applied = Applied()
    try:
        for host, rule in cut_rules(cut, how, direction, address, tag):
            run_cmd(in_ns(hosts.ns(host), ["iptables", "-w", "-A", *rule]))
            applied.rules.append((hosts.ns(host), rule))
    except HostsError:
        applied.remove()
        raise
    what = "; ".join(f"{host} cut from {', '.join(lost)}" for host, lost in cut) or "no host cut"
    return applied, f"{shape} ({how}, {direction}): {what}"


def _peer_names(peers: str, names: list[str], target: str) -> list[str]:
    """``peers`` ("all", or role and host names, comma-separated) as host names."""
    if peers.strip() == "all":
        return [n for n in names if n != target]
    wanted = [p.strip() for p in peers.split(",") if p.strip()]
    return [n for n in names if n != target and any(n == w or n.rsplit("-", 1)[0] == w for w in wanted)]


def hold_partition(nemesis: FaultRun, fault: PlannedFault) -> None:
    """Carry out ``host_partition``: the rules for duration_s, then removed."""
    hosts = _hosts_of(nemesis)
    applied, what = add_partition(hosts, fault.fault_id, fault.target, fault.params)
    _hold(nemesis, fault, applied, what)


# --- a link's cut: the proxy's partition and disconnect, at the IP level ------------------


def link_rules(
    path: LinkPath, how: str, direction: str, address: dict[str, str], tag: str
) -> list[tuple[str, list[str]]]:
    """(host whose namespace holds it, rule) that cut one link's TCP flows and nothing else
    between the two hosts: ``upstream`` (what the connector sends the endpoint) in the binder's
    INPUT, ``downstream`` (what comes back) in the connector's, as the proxy's directions."""
    jump = RESET if how == "reset" else ["-j", "DROP"]
    found = []
    tagged = ["-m", "comment", "--comment", tag]
    if direction in ("both", "upstream"):
        flow = ["-s", address[path.connector], "-p", "tcp", "--dport", str(path.port)]
        found.append((path.binder, ["INPUT", *flow, *tagged, *jump]))
    if direction in ("both", "downstream"):
        flow = ["-s", address[path.binder], "-p", "tcp", "--sport", str(path.port)]
        found.append((path.connector, ["INPUT", *flow, *tagged, *jump]))
    return found


def add_link_cut(hosts: Hosts, fault_id: int, target: str, how: str, direction: str) -> tuple[Applied, str]:
    """Cut the links ``target`` covers (a link, or every link of an instance) by rules."""
    from contract.links import covers

    paths = {name: path for name, path in hosts.links.items() if covers(target, name)}
    if not paths:
        known = ", ".join(sorted(hosts.links)) or "none"
        raise HostsError(f"no link for target {target!r} (links: {known})")
    address = {n: hosts.address(n) for n in hosts.hosts}
    applied = Applied()
    try:
        for path in paths.values():
            for host, rule in link_rules(path, how, direction, address, f"zchaos-fault-{fault_id}"):
                run_cmd(in_ns(hosts.ns(host), ["iptables", "-w", "-A", *rule]))
                applied.rules.append((hosts.ns(host), rule))
    except HostsError:
        applied.remove()
        raise
    what = "; ".join(f"{p.connector} -> {p.binder}:{p.port}" for p in paths.values())
    word = "packets dropped" if how == "drop" else "TCP reset"
    return applied, f"{', '.join(paths)} cut at the IP level ({word}, {direction}): {what}"


def hold_link(nemesis: FaultRun, fault: PlannedFault, how: str) -> None:
    """A link card (``partition``, ``disconnect``) in hosts mode: the link's flows cut by rules
    for duration_s, then whole again."""
    direction = fault.params.get("direction", "both")
    applied, what = add_link_cut(_hosts_of(nemesis), fault.fault_id, fault.target, how, direction)
    _hold(nemesis, fault, applied, what)


# --- netem -----------------------------------------------------------------------------


def netem_args(params: dict[str, Any]) -> list[str]:
    """netem's arguments for the parameters given (tc-netem(8)); the unset ones left out."""
    args: list[str] = []
    delay, jitter = params.get("delay_ms", 0), params.get("jitter_ms", 0)
    correlation = params.get("correlation_pct", 0)
    if delay or jitter:
        args += ["delay", f"{delay:g}ms"]
        if jitter:
            args += [f"{jitter:g}ms"] + ([f"{correlation:g}%"] if correlation else [])
    for key, word in (("loss_pct", "loss"), ("duplicate_pct", "duplicate"), ("corrupt_pct", "corrupt")):
        if params.get(key):
            args += [word, f"{params[key]:g}%"]
    if params.get("reorder_pct"):
        args += ["reorder", f"{params['reorder_pct']:g}%"]
    if params.get("rate_kbit"):
        args += ["rate", f"{params['rate_kbit']}kbit"]
    return args


def add_netem(hosts: Hosts, target: str, params: dict[str, Any]) -> tuple[Applied, str]:
    """netem on ``target``'s link: its ``eth0`` (what it sends), its veth's end on the bridge
    (what it receives), or both."""
    args = netem_args(params)
    direction = params.get("direction", "out")
    host = hosts.hosts[target]
    places = []
    if direction in ("out", "both"):
        places.append((host.ns, "eth0"))
    if direction in ("in", "both"):
        places.append(("", host.veth))
    applied = Applied()
    try:
        for ns, dev in places:
            argv = ["tc", "qdisc", "add", "dev", dev, "root", "netem", *args]
            run_cmd(in_ns(ns, argv) if ns else argv)
            applied.qdiscs.append((ns, dev))
    except HostsError:
        applied.remove()
        raise
    return applied, f"netem {' '.join(args)} on {target}'s link ({direction})"


def hold_netem(nemesis: FaultRun, fault: PlannedFault) -> None:
    """Carry out ``netem``: the qdisc for duration_s, then removed."""
    applied, what = add_netem(_hosts_of(nemesis), fault.target, fault.params)
    _hold(nemesis, fault, applied, what)


# --- shared ----------------------------------------------------------------------------


def _hosts_of(nemesis: FaultRun) -> Hosts:
    if nemesis.hosts is None:
        raise HostsError('packet faults need the run\'s hosts (network = "hosts")')
    return nemesis.hosts


def _hold(nemesis: FaultRun, fault: PlannedFault, applied: Applied, what: str) -> None:
    """Record the start, wait out the duration (or the run's end), remove, record the stop.
    The start names the pid in the target's host when one runs there, as a process fault's
    does (evidence); none is no miss: the host is cut whether its process runs or not, and
    one started during the fault is cut too."""
    from contract.links import CLIENTS, target_instance

    instance = target_instance(fault.target)
    pid = nemesis.control.running(instance) if instance != CLIENTS else None
    try:
        nemesis.started(fault, detail=what, **({"pid": pid} if pid is not None else {}))
        nemesis.wait(float(fault.params["duration_s"]))
    finally:
        failed = applied.remove()
        nemesis.stopped(fault, **({"detail": "; ".join(failed)} if failed else {}))
        if failed:
            raise HostsError(f"could not remove all of {what}: {'; '.join(failed)}")


def rules_in(ns: str) -> str:
    """The iptables rules of namespace ``ns`` (for tests and the check that none is left)."""
    done = subprocess.run(in_ns(ns, ["iptables-save"]), capture_output=True, text=True, check=False)
    return done.stdout
