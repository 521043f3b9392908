"""Packet faults between the hosts of a ``network = "hosts"`` run (chaos/hosts.py): a
partition made of iptables rules (``host_partition``), tc's netem on a host's link
(``netem``), and the link cards ``latency`` and ``bandwidth`` on a link's own flows.

Where the kernel has no netem (``CONFIG_NET_SCH_NETEM``: this project's CI machine's has
not), ``netem`` is built of what such a kernel has (``add_emulated``): loss is an iptables
``statistic`` rule that drops, duplication one that copies (``TEE``), a rate limit tc's
``tbf``, and delay, jitter, reordering and corruption a userspace packet queue
(chaos/packet_queue.py, one process per fault and host, fed by an ``NFQUEUE`` rule). The
link cards use the same queue on the link's own TCP flows (``add_link_shaping``).

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
import json
import math
import os
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
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


#: The packet queue's program, run by its path inside a host (standard library only).
QUEUE_PROGRAM = Path(__file__).with_name("packet_queue.py")
#: How long a packet queue may take to bind its queue and say so.
QUEUE_READY_S = 10.0


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


def packet_faults_missing() -> str | None:
    """What this machine lacks for ``netem`` (one line), or None: tc's netem, or else what
    ``add_emulated`` builds it of (root, iptables, tc)."""
    if netem_missing() is None:
        return None
    if os.geteuid() != 0:
        return "netem needs root to change the run's links and rules"
    if shutil.which("tc") is None or shutil.which("ip") is None:
        return "netem needs iproute2's tc and ip commands (Debian package iproute2)"
    if shutil.which("iptables") is None:
        return "netem without the kernel's netem needs the iptables command (Debian package iptables)"
    return None


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


def rule_argv(op: str, rule: list[str]) -> list[str]:
    """``iptables -w <op> ...`` for a rule spec, whose table (``-t mangle``) may lead it."""
    table, rest = (rule[:2], rule[2:]) if rule[:1] == ["-t"] else ([], rule)
    return ["iptables", "-w", *table, op, *rest]


@dataclass
class Queue:
    """A packet queue (chaos/packet_queue.py) running in a host for a fault."""

    ns: str
    number: int
    proc: subprocess.Popen[str]

    def stop(self) -> tuple[dict[str, int] | None, str | None]:
        """Stop it (it lets what it holds go): its counts, or why it failed."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, err = self.proc.communicate(timeout=QUEUE_READY_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        lines = out.strip().splitlines()
        with contextlib.suppress(ValueError, IndexError):
            if self.proc.returncode == 0:
                return json.loads(lines[-1]), None
        why = err.strip() or f"exit {self.proc.returncode}"
        return None, f"the packet queue {self.number} in {self.ns} ended badly: {why}"


def start_queue(ns: str, number: int, args: list[str], seed: int) -> Queue:
    """Start a packet queue in namespace ``ns`` bound to ``number``; back once it is."""
    argv = [sys.executable, "-I", str(QUEUE_PROGRAM), "--queue", str(number), "--seed", str(seed)]
    argv += ["--parent", str(os.getpid()), *args]
    proc = subprocess.Popen(
        in_ns(ns, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], QUEUE_READY_S)
    if ready and proc.stdout.readline().strip() == "ready":
        return Queue(ns, number, proc)
    proc.kill()
    _, err = proc.communicate()
    raise HostsError(f"the packet queue did not start in {ns}: {err.strip() or 'no word in time'}")


@dataclass
class Applied:
    """Rules, qdiscs and packet queues in place, by namespace ('' for the root namespace's
    veth ends); ``remove`` takes them away (idempotent, every one tried), the rules first so
    that no packet goes to a queue that is gone."""

    rules: list[tuple[str, list[str]]] = field(default_factory=list)  # (namespace, rule spec)
    qdiscs: list[tuple[str, str]] = field(default_factory=list)  # (namespace or '', device)
    queues: list[Queue] = field(default_factory=list)
    #: What the queues did, summed, once they stopped (``remove``).
    counts: dict[str, int] = field(default_factory=dict)

    def add_rule(self, ns: str, rule: list[str]) -> None:
        run_cmd(in_ns(ns, rule_argv("-A", rule)))
        self.rules.append((ns, rule))

    def remove(self) -> list[str]:
        failed = []
        while self.rules:
            ns, rule = self.rules.pop()
            try:
                run_cmd(in_ns(ns, rule_argv("-D", rule)))
            except HostsError as exc:
                failed.append(str(exc))
        while self.qdiscs:
            ns, dev = self.qdiscs.pop()
            argv = ["tc", "qdisc", "del", "dev", dev, "root"]
            try:
                run_cmd(in_ns(ns, argv) if ns else argv)
            except HostsError as exc:
                failed.append(str(exc))
        while self.queues:
            counts, why = self.queues.pop().stop()
            for key, n in (counts or {}).items():
                self.counts[key] = (
                    max(self.counts.get(key, 0), n) if key == "max_held" else self.counts.get(key, 0) + n
                )
            if why is not None:
                failed.append(why)
        return failed

    def summary(self) -> str:
        """What the packet queues did, in words ('' without one)."""
        c = self.counts
        if not c:
            return ""
        return (
            f"packet queue: {c.get('packets', 0)} packets, {c.get('delayed', 0)} delayed, "
            f"{c.get('corrupted', 0)} corrupted, at most {c.get('max_held', 0)} held at once"
        )


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
            applied.add_rule(hosts.ns(host), rule)
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


def paths_of(hosts: Hosts, target: str) -> dict[str, LinkPath]:
    """The links ``target`` covers (a link, or every link of an instance), by name."""
    from contract.links import covers

    paths = {name: path for name, path in hosts.links.items() if covers(target, name)}
    if not paths:
        known = ", ".join(sorted(hosts.links)) or "none"
        raise HostsError(f"no link for target {target!r} (links: {known})")
    return paths


def add_link_cut(hosts: Hosts, fault_id: int, target: str, how: str, direction: str) -> tuple[Applied, str]:
    """Cut the links ``target`` covers (a link, or every link of an instance) by rules."""
    paths = paths_of(hosts, target)
    address = {n: hosts.address(n) for n in hosts.hosts}
    applied = Applied()
    try:
        for path in paths.values():
            for host, rule in link_rules(path, how, direction, address, f"zchaos-fault-{fault_id}"):
                applied.add_rule(hosts.ns(host), rule)
    except HostsError:
        applied.remove()
        raise
    what = "; ".join(f"{p.connector} -> {p.binder}:{p.port}" for p in paths.values())
    word = "packets dropped" if how == "drop" else "TCP reset"
    return applied, f"{', '.join(paths)} cut at the IP level ({word}, {direction}): {what}"


def shaping_rules(
    path: LinkPath, direction: str, address: dict[str, str], tag: str, queue: int
) -> list[list[str]]:
    """The rules (in the binder's namespace) that hand one link's TCP packets to a packet
    queue: ``upstream`` as they arrive from the connector, ``downstream`` as they leave for it
    (the mangle table: a packet the queue lets go passes the filter table's rules after it)."""
    jump = ["-m", "comment", "--comment", tag, "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
    rules = []
    if direction in ("both", "upstream"):
        flow = ["-s", address[path.connector], "-p", "tcp", "--dport", str(path.port)]
        rules.append(["-t", "mangle", "PREROUTING", "-i", "eth0", *flow, *jump])
    if direction in ("both", "downstream"):
        flow = ["-d", address[path.connector], "-p", "tcp", "--sport", str(path.port)]
        rules.append(["-t", "mangle", "POSTROUTING", "-o", "eth0", *flow, *jump])
    return rules


def add_link_shaping(
    hosts: Hosts, fault_id: int, target: str, direction: str, queue_args: list[str]
) -> tuple[Applied, str]:
    """Delay (or rate-limit) the links ``target`` covers: their TCP flows go through a
    packet queue with ``queue_args`` in each binder's host (one queue per host)."""
    paths = paths_of(hosts, target)
    address = {n: hosts.address(n) for n in hosts.hosts}
    number = fault_id & 0xFFFF
    applied = Applied()
    try:
        for binder in dict.fromkeys(p.binder for p in paths.values()):
            applied.queues.append(start_queue(hosts.ns(binder), number, queue_args, fault_id))
        for path in paths.values():
            for rule in shaping_rules(path, direction, address, f"zchaos-fault-{fault_id}", number):
                applied.add_rule(hosts.ns(path.binder), rule)
    except HostsError:
        applied.remove()
        raise
    what = "; ".join(f"{p.connector} -> {p.binder}:{p.port}" for p in paths.values())
    return applied, f"{', '.join(paths)} through a packet queue ({' '.join(queue_args)}, {direction}): {what}"


def hold_link(nemesis: FaultRun, fault: PlannedFault, how: str) -> None:
    """A link card in hosts mode, on the link's own flows for duration_s: ``partition`` and
    ``disconnect`` cut them by rules (``how`` drop or reset); ``latency`` (delay) and
    ``bandwidth`` (rate) pass them through a packet queue, a rate of 0 being a stall (drop)."""
    hosts, params = _hosts_of(nemesis), fault.params
    direction = params.get("direction", "both")
    if how == "delay":
        args = ["--delay-ms", str(params["latency_ms"]), "--jitter-ms", str(params.get("jitter_ms", 0))]
        applied, what = add_link_shaping(hosts, fault.fault_id, fault.target, direction, args)
    elif how == "rate" and params["rate_kb_s"] > 0:
        args = ["--rate-kbit", str(params["rate_kb_s"] * 8), "--per-flow"]  # KB/s of 1000 bytes
        applied, what = add_link_shaping(hosts, fault.fault_id, fault.target, direction, args)
    else:
        applied, what = add_link_cut(
            hosts, fault.fault_id, fault.target, "drop" if how == "rate" else how, direction
        )
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


def add_netem(hosts: Hosts, target: str, params: dict[str, Any], fault_id: int = 0) -> tuple[Applied, str]:
    """netem on ``target``'s link: its ``eth0`` (what it sends), its veth's end on the bridge
    (what it receives), or both; built without netem (``add_emulated``) where the kernel has none."""
    if netem_missing() is not None:
        return add_emulated(hosts, fault_id, target, params)
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


#: The packet queue's options for the netem parameters it carries out.
QUEUE_OPTIONS = {
    "delay_ms": "--delay-ms",
    "jitter_ms": "--jitter-ms",
    "correlation_pct": "--correlation-pct",
    "reorder_pct": "--reorder-pct",
    "corrupt_pct": "--corrupt-pct",
}


def emulated_rules(
    hosts: Hosts, target: str, params: dict[str, Any], tag: str, queue: int
) -> list[tuple[str, list[str]]]:
    """(namespace, rule) for netem's loss, duplication and the packet queue without netem.
    Each acts where a packet arrives when it can: a packet the sender's own OUTPUT chain
    drops fails its send at once (EPERM) and TCP sends it again at once, no loss at all; so
    the loss of what the target sends is in its peers' INPUT. The bridge's own address (the
    runner: readiness, the ``malformed`` junk) is left alone, as a partition leaves it."""
    direction = params.get("direction", "out")
    host = hosts.hosts[target]
    peers = [h for n, h in hosts.hosts.items() if n != target]
    tagged = ["-m", "comment", "--comment", tag]
    ins, outs = direction in ("in", "both"), direction in ("out", "both")
    rules: list[tuple[str, list[str]]] = []

    def chance(key: str) -> list[str]:
        return ["-m", "statistic", "--mode", "random", "--probability", f"{params[key] / 100:.6f}"]

    inbound = ["INPUT", "-i", "eth0", "!", "-s", hosts.gateway]
    if params.get("loss_pct"):
        if ins:
            rules.append((host.ns, [*inbound, *chance("loss_pct"), *tagged, "-j", "DROP"]))
        if outs:
            rules += [
                (p.ns, ["INPUT", "-s", host.address, *chance("loss_pct"), *tagged, "-j", "DROP"])
                for p in peers
            ]
    if params.get("duplicate_pct"):
        # TEE sends a copy to a next hop of its own: a peer for what the target sends, the
        # target itself (over its loopback, past the queue: the copy of a delayed packet
        # is made after its delay) for what it receives
        if ins:
            rules.append(
                (
                    host.ns,
                    [*inbound, *chance("duplicate_pct"), *tagged, "-j", "TEE", "--gateway", host.address],
                )
            )
        if outs:
            for p in peers:
                tee = ["-j", "TEE", "--gateway", p.address]
                rules.append(
                    (
                        host.ns,
                        ["OUTPUT", "-o", "eth0", "-d", p.address, *chance("duplicate_pct"), *tagged, *tee],
                    )
                )
    if any(params.get(k) for k in QUEUE_OPTIONS):
        jump = [*tagged, "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
        if ins:
            rules.append(
                (host.ns, ["-t", "mangle", "PREROUTING", "-i", "eth0", "!", "-s", hosts.gateway, *jump])
            )
        if outs:
            rules.append(
                (host.ns, ["-t", "mangle", "POSTROUTING", "-o", "eth0", "!", "-d", hosts.gateway, *jump])
            )
    return rules


def tbf_args(rate_kbit: int) -> list[str]:
    """tc-tbf(8)'s arguments for a rate limit like netem's: a burst of a few packets, and a
    queue of two seconds of the rate (at least 64 KiB) before it drops."""
    rate_bytes = rate_kbit * 1000 // 8
    return [
        "tbf", "rate", f"{rate_kbit}kbit", "burst", str(max(3200, rate_bytes // 100)),
        "limit", str(max(65536, 2 * rate_bytes)),
    ]  # fmt: skip


def add_emulated(hosts: Hosts, fault_id: int, target: str, params: dict[str, Any]) -> tuple[Applied, str]:
    """netem's effects without netem on ``target``'s link: iptables rules (loss, duplication,
    the packet queue's feed), a packet queue in the target's host (delay, jitter, reordering,
    corruption) and tbf (the rate), each where ``direction`` asks."""
    direction = params.get("direction", "out")
    host = hosts.hosts[target]
    number = fault_id & 0xFFFF
    queue_args = [
        arg for key, opt in QUEUE_OPTIONS.items() if params.get(key) for arg in (opt, f"{params[key]:g}")
    ]
    applied = Applied()
    try:
        if queue_args:
            applied.queues.append(start_queue(host.ns, number, queue_args, fault_id))
        for ns, rule in emulated_rules(hosts, target, params, f"zchaos-fault-{fault_id}", number):
            applied.add_rule(ns, rule)
        if params.get("rate_kbit"):
            places = ([(host.ns, "eth0")] if direction in ("out", "both") else []) + (
                [("", host.veth)] if direction in ("in", "both") else []
            )
            for ns, dev in places:
                argv = ["tc", "qdisc", "add", "dev", dev, "root", *tbf_args(params["rate_kbit"])]
                run_cmd(in_ns(ns, argv) if ns else argv)
                applied.qdiscs.append((ns, dev))
    except HostsError:
        applied.remove()
        raise
    args = " ".join(netem_args(params))
    return applied, f"{args} on {target}'s link ({direction}; without netem: iptables, a packet queue, tbf)"


def hold_netem(nemesis: FaultRun, fault: PlannedFault) -> None:
    """Carry out ``netem``: the qdisc (or what stands in for it) for duration_s, then removed."""
    applied, what = add_netem(_hosts_of(nemesis), fault.target, fault.params, fault.fault_id)
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
        said = "; ".join([*failed, *filter(None, [applied.summary()])])
        nemesis.stopped(fault, **({"detail": said} if said else {}))
        if failed:
            raise HostsError(f"could not remove all of {what}: {'; '.join(failed)}")


def rules_in(ns: str) -> str:
    """The iptables rules of namespace ``ns`` (for tests and the check that none is left)."""
    done = subprocess.run(in_ns(ns, ["iptables-save"]), capture_output=True, text=True, check=False)
    return done.stdout
