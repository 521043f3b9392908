"""Scenarios an exploration makes by itself, and the mutations of them it learns with.

From a manifest (``Space``: its roles and links in its own topology, the fault kinds whose
card applies) and a seeded ``random.Random``, ``generate`` draws 1 to 4 faults, each on an
instance or a link of the topology, at a time within the load and with parameters from
its card's explore ranges (``Param.explore``; guided draws half its lengths around the
manifest's ``expiry_ms`` instead where a range misses it, NEAR_EXPIRY), and a load shape: steady, with an idle
stretch (one user, seconds between requests: faults that land there hit a system whose
workers hold nothing) or with a burst. Every client kind of the manifest takes part, as
its manifest weighs them; in some loads (NORESEND_SHARE) the kinds whose adapter can send
each request once and call it lost past a deadline (``reply_deadline_s = "auto"``) do so,
since a resend hides a request the system dropped. Faults may overlap or follow one
another, as the draw falls.

The result is the TOML data of a normal scenario (harness/scenario.py reads it with
``parse_scenario``): fault times as ``at_s`` and targets as instance names, so nothing is
drawn again from the run's seed and the written file replays the same plan. Its name ends
in a digest of what it does (``explore-3fa2b1c0``), so the results store never files two
different scenarios under one name. ``mutate``
changes a scenario of the corpus in one way (move, lengthen or shorten, retarget, another
kind on the same target, add or drop a fault, redraw a parameter, change the load), the
guided strategy's step; ``isolate`` keeps one of its faults alone, which guided runs once
for each fault in focus of a corpus entry before it mutates the entry (loop.py); ``unmask``
drops the faults that lose data from a run whose losses they excused, which guided runs
next (loop.py); ``bracket`` runs a freeze alone for a length below or above the
system's expiry, which guided runs after a role's first freeze (loop.py).

Which kind on which target: without a record of draws (``drawn`` None: ``--strategy
random``, memoryless as Jepsen's random nemesis, and the draw as it always was) 1 to 4
faults alike, each of a kind drawn uniformly, then a role (or link) uniformly, then one of
its instances. With one (``drawn``: how often each pair of a fault kind and a role or link,
``pair_of``, ran in this exploration so far; guided's draws, its added faults, its
retargets and its faults made another kind) the least-drawn pairs come first: a kind
uniformly among those with such a pair, then one of its least-drawn roles or links. So
every pair is drawn once before any is drawn twice, and a bug that needs one kind on one
role of 2-4 is not left to a draw among 15 kinds over and over. Guided counts each pair's
context too (``coverage_keys``: whether its fault started while the load was quiet, an idle
or calm stretch, or busy) and moves a fault whose pair ran more often in the context it
starts in to a time in the other (``_in_other_context``). Guided's faults of one
scenario each take a role or link of their own (where the topology has enough), so a kill
never lands on the role another fault of the run stalls (it would clear the state the
stall left), a fault that loses no data is drawn with none that does (``companions``,
``FaultKind.lossy``: a cut, a reset, a partition makes ``no_lost`` excuse what it may have
lost, and hid the request a worker's restart lost beside it), a fault that loses data with
others that do where it tries its pair again (a first try mixes: kept apart there too,
stall-queue's freeze came later), and its scenarios hold three or four faults more often
than one (GUIDED_FAULT_COUNT_WEIGHTS): with 40-odd pairs and 30 runs, a pair tried once per
exploration is all the breadth allows at two faults a run. Measured without running
anything (bench/explore_draws.py: the draws alone, 100 seeds, whether a subject's trigger
fault is drawn in 30 runs): ping-guard 85%, stall-hold-star 77%, tag-ring 97% of seeds with
one or two faults more often and faults stacked on a role; 95%, 90%, 100% now; random's
draw 83%, 83%, 97%.

A process that is killed is always started again (``restart_after_s``): one never started
again breaks any system, which is no finding. Each fault is placed to end, where the load
allows, ``recovery_bound_s`` plus a margin before the load stops, so that ``recovery``
can judge it rather than leave it unknown.

On hosts (``Space.network``: the manifest's own ``network``, or ``zchaos explore --network
hosts``) every generated scenario says ``network = "hosts"``: the packet faults between hosts
(``host_partition``, ``netem``) are drawn too, and a link fault only where its card has a form
on hosts (``on_hosts``).

With a calibration (``Space.calibrated``) the load is sized relative to the system's own
measured capacity (``users = "0.5x capacity, at most 8"``, contract/calibration.py); the
promises stay the manifest's own. Without one the users are a small absolute number.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.clock import find_library
from chaos.faults import FaultKind, Param, ParamProblem
from chaos.hosts import missing as hosts_missing
from chaos.kinds import FAULT_KINDS
from chaos.malformed import families
from contract.errors import SetupError
from contract.promises import OUTAGE, expiry_s
from harness.manifest import NETWORKS, Manifest, builtin_manifests, link_names
from harness.scenario import Scenario, binding_roles_on_hosts, parse_scenario

#: Between a role and its endpoint in junk's pairs: ``malformed queue@backend``.
AT = "@"
#: Faults per generated scenario.
MIN_FAULTS, MAX_FAULTS = 1, 4
#: How often a guided scenario gets 1, 2, 3 or 4 faults (weights), each on a role or link of
#: its own: more pairs tried a run. (Weighted (4, 3, 2, 1) against kills stacked on a stalled
#: role, of tag-ring's first 30 runs 17 killed the broker; distinct targets see to that now.)
GUIDED_FAULT_COUNT_WEIGHTS = (1, 1, 2, 2)
#: Seconds of load of each run by default: at 12 s, too little judged time was left after
#: the faults (steady_state called ping-guard's banned clients unknown).
RUN_S = 20.0
#: Seconds of load before the first fault may start: the clients are still starting, and
#: ``steady_state`` and ``availability`` judge nothing before (reports/checkers).
FIRST_FAULT_S = 2.5  # the checks' warm-up (2 s) and availability's 0.5 s before a fault
#: Seconds a fault is left, where the load allows, after its end beyond recovery_bound_s.
RECOVERY_MARGIN_S = 1.0
#: A fault is never shorter than this (seconds) when it is fitted into the load.
MIN_FAULT_LENGTH_S = 0.5
#: Where the card's range misses the system's own expiry (its manifest's ``expiry_ms``: how
#: long it takes to notice a silent peer) - our families' timers are 1 to 7.5 s, a stranger's
#: may be 50 s or 0.2 s - the share of guided's lengths drawn from NEAR_EXPIRY[0] to
#: NEAR_EXPIRY[1] times it instead, so that its stalls fall on both sides of its detector.
#: Not where the range holds that band: drawn so on every exploration (2026-12-04, c104c3e),
#: stall-hold-star's window (a freeze of 2-3 s, expiry 2 s) came in 37 of 100 seeds' first
#: 30 draws instead of 15, stall-queue's (2-5 s, expiry 5 s) in 54 instead of 53, and
#: ping-guard's (a stall of 2 s or more, expiry 1.5 s) in 83 instead of 97; explored, 3 seeds
#: each, stall-queue 2 found instead of 1, stall-hold-star 1 instead of 0, ping-guard 0
#: instead of 2. A bug at the detector's edge and one past it pull opposite ways.
NEAR_EXPIRY_SHARE = 0.5
NEAR_EXPIRY = (0.5, 1.5)
#: Users of a steady load without a calibration, and its most with one.
USERS_RANGE = (2, 6)
MAX_USERS = 8
#: Capacity shares a calibrated load is drawn at.
CAPACITY_SHARES = (0.3, 0.5, 0.8)
#: Pauses of a user between requests (ms) a steady or busy stretch is drawn with.
WAITS_MS = (0, 10, 20, 50)
#: An idle stretch: one user with this pause (ms) between requests.
IDLE_WAIT_MS = (1000, 2500)
LOAD_SHAPES = ("steady", "idle", "burst")
#: The phases of a drawn load in which the system is quiet: one user, seconds apart (idle),
#: or a user per client kind (the calm before a burst): its workers mostly wait for work.
QUIET_PHASES = frozenset({"idle", "calm"})
#: Where a fault can start in a load: while it is quiet, or while it is busy.
CONTEXTS = ("quiet", "busy")
#: The share of loads whose clients never resend, where an adapter of the manifest can.
NORESEND_SHARE = 0.3
#: The seeds a generated scenario is given for its request streams.
SEED_RANGE = 1_000_000
#: Tries of a generator step (a mutation that changed nothing, a target, a load) before it gives up.
VALIDATE_TRIES = 8
#: Draws of a fault's parameters before a kind's ``validate`` is given up on: slicer refuses
#: a quarter of its draws (size_variation not below average_size), so 8 tries failed once in
#: about 65,000 slicers drawn, and an exploration stopped with exit 2 (seen in the draws of
#: 100 seeds). A draw accepted within 8 tries is the same as before.
PARAM_TRIES = 64
MUTATIONS = ("move", "length", "retarget", "kind", "add", "drop", "param", "load")
#: The mutations that change one fault where it is (a focused mutation draws one of these).
FAULT_MUTATIONS = ("move", "length", "retarget", "kind", "param")
#: The chance a mutation with a focus changes a fault of a kind in focus (when it has one).
FOCUS_SHARE = 0.8
#: The share of its load a generated run's plan should leave ``steady_state`` to judge (the
#: check needs a fifth; a run judges less than its plan, as a restart waits for its process).
JUDGED_SHARE = 0.3
#: The longest a run's load is made for that, as a multiple of the exploration's run length.
LONGEST_RUN = 2.5
#: Parameters left at their default on hosts: a link fault there acts on every connection of
#: the link (harness/scenario.py refuses a toxicity below 1 with network = "hosts").
FIXED_ON_HOSTS = frozenset({"toxicity"})


@dataclass(frozen=True)
class Space:
    """What an exploration of one manifest may generate."""

    manifest: Manifest
    implementation: str  # as the scenario's ``implementation`` says it: a built-in's name or a path
    kinds: tuple[str, ...]  # the fault kinds to draw from, each applicable to the manifest
    duration_s: float = RUN_S  # seconds of load of each run
    calibrated: bool = False  # size the load relative to the system's measured capacity
    processes: dict[str, list[str]] = field(default_factory=dict)  # role -> instances
    links: tuple[str, ...] = ()  # every link of the topology (link:clients, link:worker-1, ...)
    binds: dict[str, tuple[str, ...]] = field(default_factory=dict)  # role -> endpoints it binds
    network: str = "proxy"  # what every generated scenario runs on (harness/scenario.py ``network``)

    @property
    def expiry_s(self) -> float | None:
        """The manifest's expiry_ms in seconds (None: it gives none)."""
        return expiry_s(self.manifest.promises.expiry_ms, self.manifest.options)

    @property
    def tail_s(self) -> float:
        """Seconds of load a fault should leave after its end for ``recovery`` to judge it,
        at most half the load (a short run still gets faults, some judged as unknown)."""
        bound = self.manifest.promises.recovery_bound_s or 0.0
        return min(bound + RECOVERY_MARGIN_S, self.duration_s / 2)

    @property
    def last_end_s(self) -> float:
        return self.duration_s - self.tail_s


def implementation_ref(manifest: Manifest) -> str:
    """A built-in by its name, a manifest of the user's by its absolute path: a generated
    scenario runs from any folder."""
    builtin = builtin_manifests().get(manifest.name)
    if builtin is not None and builtin.resolve() == manifest.path.resolve():
        return manifest.name
    return str(manifest.path.resolve())


def malformed_family(manifest: Manifest) -> str | None:
    """The family whose junk ``malformed`` sends to this manifest, as its card's ``validate``
    picks it (None: zchaos has no junk for it)."""
    known = families()
    if manifest.family is not None:
        return manifest.family if manifest.family in known else None
    return next((f for f in known if manifest.name == f or manifest.name.startswith(f + "-")), None)


def applicable_kinds(manifest: Manifest, topology: dict[str, int], network: str = "proxy") -> list[str]:
    """The fault kinds whose card applies to the manifest: process faults always (clock
    faults where libfaketime is installed; disk_full and lose_unsynced where a role keeps a
    data_dir and this machine can mount there), link faults when the topology has links,
    ``malformed`` where the family has junk and some role binds an endpoint; on hosts, the
    packet faults where the machine has what they need, and only the link faults that have
    a form there."""
    found = []
    for name, kind in FAULT_KINDS.items():
        if kind.target == "link" and not link_names(manifest, topology):
            continue
        if kind.target == "link" and network == "hosts" and kind.on_hosts is None:
            continue  # it needs the fault proxy, which hosts have not
        if name == "malformed" and (malformed_family(manifest) is None or not manifest.endpoints):
            continue
        if kind.clock and find_library() is None:  # libfaketime is not installed
            continue
        if (kind.disk or kind.lazy) and (not _data_roles(manifest) or _lacks(kind)):
            # It acts on a role's data_dir, on a file system the run mounts there (chaos/disk.py,
            # chaos/lazyfs.py): root, FUSE.
            continue
        if kind.hosts and (network != "hosts" or _lacks(kind)):
            continue  # it acts on packets between hosts (chaos/packets.py)
        found.append(name)
    return found


def make_space(
    manifest: Manifest,
    *,
    kinds: Sequence[str] = (),
    duration_s: float = RUN_S,
    calibrated: bool = False,
    network: str | None = None,
) -> Space:
    """The space of ``manifest`` in its own topology; ``kinds``: the ones allowed (default:
    every applicable kind); ``network``: the manifest's own unless given. A kind that does
    not exist or does not apply, or hosts this machine cannot make, is a SetupError."""
    topology = {name: role.count for name, role in manifest.roles.items()}
    network = network or manifest.network
    if network not in NETWORKS:
        raise SetupError(f"expected one of {', '.join(NETWORKS)}, got {network!r}", where="--network")
    if network == "hosts":
        _check_hosts(manifest, topology)
    applicable = applicable_kinds(manifest, topology, network)
    chosen = list(kinds) or applicable
    for name in chosen:
        if name not in FAULT_KINDS:
            raise SetupError(
                f"unknown fault kind {name!r} (known: {', '.join(FAULT_KINDS)})", where="--kinds"
            )
        if name not in applicable:
            raise SetupError(
                f"{name!r} does not apply to {manifest.name} (applicable: {', '.join(applicable)})",
                where="--kinds",
            )
    if duration_s < 4 or duration_s > 3600:
        raise SetupError(f"run length must be between 4 and 3600 s, got {duration_s:g}", where="--run-s")
    processes = {name: role.instance_names(topology[name]) for name, role in manifest.roles.items()}
    binds: dict[str, tuple[str, ...]] = {}
    for endpoint, role in manifest.endpoints.items():
        binds[role] = (*binds.get(role, ()), endpoint)
    return Space(
        manifest=manifest,
        implementation=implementation_ref(manifest),
        kinds=tuple(dict.fromkeys(chosen)),
        duration_s=float(duration_s),  # a resumed one reads it back as a float: one digest
        calibrated=calibrated,
        processes=processes,
        links=tuple(link_names(manifest, topology)),
        binds=binds,
        network=network,
    )


def _check_hosts(manifest: Manifest, topology: dict[str, int]) -> None:
    """Hosts this machine can make, for a topology hosts can hold (a scenario says the same
    of itself, harness/scenario.py: here it is said once, before any run)."""
    lacking = hosts_missing()
    if lacking is not None:
        raise SetupError(lacking, where="--network")
    for role_name, problem in binding_roles_on_hosts(manifest, topology):
        raise SetupError(
            f"{problem}; explore it through the proxy, or give the role 1 instance in its manifest",
            where=f"{manifest.path} [topology.{role_name}]",
        )


# --- drawing ---------------------------------------------------------------------------


def draw_value(
    spec: Param, rng: random.Random, longest: float | None = None, expiry: float | None = None
) -> Any:
    """A value from the parameter's explore range (or choices); numbers kept short, as a
    person would write them in a scenario. ``longest``: the most a length may be (what the
    load has room for), so that a short run gets faults of every length it can hold rather
    than many cut to the same one. ``expiry``: the system's (guided's draws): where the
    range misses the band around it, NEAR_EXPIRY_SHARE of the lengths are drawn in that
    band, as far as the run has room."""
    assert spec.explore, "a FIXED parameter is not drawn"
    if spec.choices or spec.type is str:
        return rng.choice(spec.explore)
    if spec.length and expiry and misses_expiry(spec, expiry) and rng.random() < NEAR_EXPIRY_SHARE:
        near_lo = max(expiry * NEAR_EXPIRY[0], spec.min or 0.0, 0.01)
        near_hi = expiry * NEAR_EXPIRY[1] if longest is None else min(expiry * NEAR_EXPIRY[1], longest)
        if near_lo < near_hi:
            return round(rng.uniform(near_lo, near_hi), 2)
    lo, hi = spec.explore
    if spec.length and longest is not None:
        hi = max(min(hi, longest), spec.min or 0.0)
        lo = min(lo, hi)
    if spec.type is int:
        return rng.randint(int(lo), int(hi))
    return round(rng.uniform(lo, hi), 2)


def misses_expiry(spec: Param, expiry: float) -> bool:
    """Whether a length's explore range leaves out part of NEAR_EXPIRY around ``expiry``."""
    assert spec.explore, "a FIXED parameter is not drawn"
    lo, hi = spec.explore
    return expiry * NEAR_EXPIRY[0] < lo or expiry * NEAR_EXPIRY[1] > hi


def length_of(kind: FaultKind, params: dict[str, Any]) -> float:
    """How long a fault lasts (its longest length parameter; 0 for an instant one)."""
    return max((float(params[n]) for n, s in kind.params.items() if s.length and n in params), default=0.0)


def _lacks(kind: FaultKind) -> bool:
    """Whether this machine lacks what the kind needs (its card's ``missing``)."""
    return kind.missing is not None and kind.missing() is not None


def _data_roles(manifest: Manifest) -> set[str]:
    """The roles that keep a data folder (``data_dir``): what a disk fault can fill."""
    return {name for name, role in manifest.roles.items() if role.data_dir}


def _fits(space: Space, kind: FaultKind, role: str) -> bool:
    """Whether ``kind`` can act on an instance of ``role``: junk goes to an endpoint the
    target binds, a full disk is the data folder it keeps."""
    if kind.name == "malformed":
        return bool(space.binds.get(role))
    if kind.disk or kind.lazy:
        return role in _data_roles(space.manifest)
    return True


def _wheres(space: Space, kind: FaultKind) -> list[str]:
    """The links, or the roles, a fault of ``kind`` can act on."""
    if kind.target == "link":
        return list(space.links)
    return [r for r in sorted(space.processes) if _fits(space, kind, r)]


def _pair_wheres(space: Space, kind: FaultKind) -> list[str]:
    """What a pair of ``kind`` is counted on: its roles or links, and for junk each endpoint
    of a role (``queue@backend``): junk at another endpoint reaches other code (a queue's
    frontend reads clients, its backend workers), so it is another pair to try."""
    if kind.name == "malformed":
        return [f"{role}{AT}{endpoint}" for role in _wheres(space, kind) for endpoint in space.binds[role]]
    return _wheres(space, kind)


def _targets_of(space: Space, kind: FaultKind, where: str) -> list[str]:
    """The targets of a role (its instances, ``where`` may name its endpoint) or a link (itself)."""
    return [where] if kind.target == "link" else list(space.processes[where.split(AT)[0]])


def _target(space: Space, kind: FaultKind, rng: random.Random) -> str:
    # A role first, then one of its instances: a single broker is as likely a target as
    # the three workers together.
    where = rng.choice(_wheres(space, kind))
    return where if kind.target == "link" else rng.choice(space.processes[where])


def _role_of(space: Space, instance: str) -> str:
    return next(role for role, names in space.processes.items() if instance in names)


def where_of(space: Space, kind_name: str, target: str) -> str:
    """The role (for an instance) or the link a fault acts on: ``worker``, ``link:worker-1``."""
    return target if FAULT_KINDS[kind_name].target == "link" else _role_of(space, target)


def pair_of(space: Space, kind_name: str, target: str, endpoint: str | None = None) -> str:
    """The pair a fault is counted as in an exploration's draws: its kind and the role (for
    an instance) or the link it acts on, ``"freeze worker"``, ``"partition link:worker-1"``;
    junk's with its ``endpoint``, ``"malformed queue@backend"``."""
    where = where_of(space, kind_name, target)
    if kind_name == "malformed" and endpoint:
        where += f"{AT}{endpoint}"
    return f"{FAULT_KINDS[kind_name].name} {where}"


def fault_pair(space: Space, fault: dict[str, Any]) -> str:
    """``pair_of`` a ``[[faults]]`` line."""
    return pair_of(space, fault["kind"], fault["target"], fault.get("endpoint"))


def pairs(space: Space) -> list[str]:
    """Every pair (``pair_of``) a fault of the space can be drawn as."""
    return [f"{name} {where}" for name in space.kinds for where in _pair_wheres(space, FAULT_KINDS[name])]


def _least_drawn(
    space: Space,
    kinds: Sequence[str],
    drawn: Counter[str],
    rng: random.Random,
    avoid: str | None = None,
    busy: Collection[str] = (),
) -> tuple[FaultKind, str, str | None]:
    """A kind of ``kinds`` and a target whose pair was drawn least often so far: the kind
    uniformly among those that have one, then such a role (one of its instances) or link,
    and for junk the endpoint of its pair.
    ``avoid``: a target not to return where another is left (a retarget); ``busy``: roles
    and links another fault of the scenario has, left out while any other is left."""
    options: dict[str, list[tuple[str, str]]] = {}
    for name in kinds:
        kind = FAULT_KINDS[name]
        pairs = [
            (w, t)
            for w in _pair_wheres(space, kind)
            if w.split(AT)[0] not in busy
            for t in _targets_of(space, kind, w)
            if t != avoid
        ]
        if pairs:
            options[name] = pairs
    if not options and busy:  # every role and link has a fault already: share one
        return _least_drawn(space, kinds, drawn, rng, avoid)
    if not options:  # the target to avoid is the only one: it stays
        assert avoid is not None
        return FAULT_KINDS[kinds[0]], avoid, None
    least = min(drawn[f"{k} {w}"] for k, pairs in options.items() for w, _ in pairs)
    kinds_left = [k for k, pairs in options.items() if any(drawn[f"{k} {w}"] == least for w, _ in pairs)]
    kind = FAULT_KINDS[rng.choice(kinds_left)]
    pairs = options[kind.name]
    where = rng.choice(list(dict.fromkeys(w for w, _ in pairs if drawn[f"{kind.name} {w}"] == least)))
    endpoint = where.split(AT)[1] if AT in where else None
    if kind.target == "link":
        return kind, where, endpoint
    return kind, rng.choice([t for w, t in pairs if w == where]), endpoint


def draw_params(
    space: Space,
    kind: FaultKind,
    target: str,
    rng: random.Random,
    endpoint: str | None = None,
    *,
    guided: bool = False,
) -> dict[str, Any]:
    """Every explored parameter of ``kind`` drawn, and those the kind's ``validate`` fills
    (malformed's family) filled; drawn again while ``validate`` refuses them. ``endpoint``:
    junk's, where the pair drawn says it (else drawn among those the target binds).
    ``guided``: lengths drawn around the system's expiry too (``draw_value``)."""
    expiry = space.expiry_s if guided else None
    for _ in range(PARAM_TRIES):
        room = max(space.last_end_s - FIRST_FAULT_S, MIN_FAULT_LENGTH_S)
        params = {n: draw_value(s, rng, room, expiry) for n, s in kind.params.items() if _drawn(space, n, s)}
        if kind.name == "malformed":
            params["endpoint"] = endpoint or rng.choice(space.binds[_role_of(space, target)])
        checked = dict(params)
        if kind.validate is not None:
            try:
                kind.validate(checked, target, space.manifest)
            except ParamProblem:
                continue
        return params
    raise SetupError(
        f"no parameters of {kind.name!r} that its card accepts were drawn in {PARAM_TRIES} tries"
    )


def _drawn(space: Space, name: str, spec: Param) -> bool:
    """Whether a parameter is drawn (its card gives it an explore range) in this space."""
    return bool(spec.explore) and not (space.network == "hosts" and name in FIXED_ON_HOSTS)


def _fit(space: Space, kind: FaultKind, fault: dict[str, Any]) -> None:
    """Place a fault in the load: start no earlier than FIRST_FAULT_S and end by the last
    end that leaves ``recovery`` time to judge it, shortening it if it cannot."""
    last_end = max(space.last_end_s, FIRST_FAULT_S + MIN_FAULT_LENGTH_S)
    lengths = [n for n, s in kind.params.items() if s.length and n in fault]
    room = last_end - FIRST_FAULT_S
    for name in lengths:
        fault[name] = round(max(min(float(fault[name]), room), 0.0 if kind.name == "restart" else 0.1), 2)
    at = float(fault["at_s"][0])
    at = min(max(at, FIRST_FAULT_S), last_end - length_of(kind, fault))
    fault["at_s"] = [round(max(at, FIRST_FAULT_S), 2)]


def draw_fault(
    space: Space,
    rng: random.Random,
    kind_name: str | None = None,
    drawn: Counter[str] | None = None,
    busy: Collection[str] = (),
    among: Sequence[str] = (),
) -> dict[str, Any]:
    """One ``[[faults]]`` line: a kind, a target, a time and its parameters. ``drawn``: the
    exploration's count of each pair drawn (least-drawn first), counted on with this one;
    with it, ``busy``: the roles and links the scenario's other faults have (``where_of``),
    not drawn again while another is left, and ``among``: the kinds to draw from (default:
    the space's)."""
    endpoint = None
    if drawn is None:
        kind = FAULT_KINDS[kind_name or rng.choice(space.kinds)]
        target = _target(space, kind, rng)
    else:
        kind, target, endpoint = _least_drawn(
            space, [kind_name] if kind_name else list(among or space.kinds), drawn, rng, busy=busy
        )
        drawn[pair_of(space, kind.name, target, endpoint)] += 1
    params = draw_params(space, kind, target, rng, endpoint, guided=drawn is not None)
    at = rng.uniform(FIRST_FAULT_S, max(space.last_end_s - length_of(kind, params), FIRST_FAULT_S))
    fault = {"kind": kind.name, "target": target, "at_s": [round(at, 2)], **params}
    _fit(space, kind, fault)
    return fault


def _users(space: Space, rng: random.Random) -> int | str:
    if space.calibrated:
        return f"{rng.choice(CAPACITY_SHARES)}x capacity, at most {MAX_USERS}"
    return rng.randint(*USERS_RANGE)


def draw_load(space: Space, rng: random.Random) -> dict[str, Any]:
    """A ``[load]`` table: steady, with an idle stretch, or with a burst; its phases add up
    to the run's length."""
    kinds = len(space.manifest.clients)
    shape = rng.choice(LOAD_SHAPES)
    load: dict[str, Any] = {"users": _users(space, rng), "spawn_rate": 10, "wait_ms": rng.choice(WAITS_MS)}
    if shape == "steady":
        return _maybe_noresend(space, rng, load)
    total = space.duration_s
    if shape == "idle":
        first = round(rng.uniform(0.15, 0.4) * total, 1)
        idle = round(rng.uniform(0.2, 0.4) * total, 1)
        phases = [
            {"name": "busy", "duration_s": first},
            {"name": "idle", "duration_s": idle, "users": 1, "wait_ms": rng.randint(*IDLE_WAIT_MS)},
            {"name": "busy-again", "duration_s": round(total - first - idle, 1)},
        ]
    else:
        first = round(rng.uniform(0.2, 0.5) * total, 1)
        burst = round(rng.uniform(0.1, 0.3) * total, 1)
        burst_users = MAX_USERS if space.calibrated else min(2 * USERS_RANGE[1], 12)
        phases = [
            {"name": "calm", "duration_s": first, "users": max(1, kinds)},
            {"name": "burst", "duration_s": burst, "users": max(burst_users, kinds), "wait_ms": 0},
            {"name": "after", "duration_s": round(total - first - burst, 1)},
        ]
    load["phases"] = phases
    return _maybe_noresend(space, rng, load)


def noresend_capable(space: Space) -> bool:
    """Whether a client kind of the manifest can send each request once (its adapter has
    ``reply_deadline_s``) and does not already."""
    from loadtests.adapters import adapter_class, adapter_names

    return any(
        "reply_deadline_s" in adapter_class(k.adapter).DEFAULTS and not k.options.get("reply_deadline_s")
        for k in space.manifest.clients
        if k.adapter in adapter_names()  # not a client program of the user's (EXTERNAL)
    )


def _maybe_noresend(space: Space, rng: random.Random, load: dict[str, Any]) -> dict[str, Any]:
    """``load``, in NORESEND_SHARE of the draws with every kind that can never resending.
    Drawn from a generator of its own, seeded by ``rng``'s state without advancing it: an
    exploration's seeds give the faults and loads they gave before this choice existed. The
    state's words alone (``getstate()[1]``, ints: their hash is the same in every process);
    the whole state holds ``None``, whose hash is its address in Python 3.11, so the same
    seed gave clients that never resend in one process and not in the next."""
    words = rng.getstate()[1]
    if noresend_capable(space) and random.Random(hash(words)).random() < NORESEND_SHARE:
        load["client"] = {"reply_deadline_s": "auto"}
    return load


def stretches(load: dict[str, Any], duration_s: float) -> list[tuple[str, float, float]]:
    """The load's stretches as (context, from s, to s): each phase quiet (QUIET_PHASES) or
    busy; a steady load is busy throughout."""
    phases = load.get("phases")
    if not phases:
        return [("busy", 0.0, duration_s)]
    found, at = [], 0.0
    for phase in phases:
        end = at + float(phase["duration_s"])
        found.append(("quiet" if phase.get("name") in QUIET_PHASES else "busy", at, end))
        at = end
    return found


def context_of(data: dict[str, Any], fault: dict[str, Any]) -> str:
    """Whether ``fault`` of the scenario ``data`` starts while its load is quiet or busy."""
    at = float(fault["at_s"][0])
    duration = float(data.get("duration_s") or 0.0)
    return next((c for c, lo, hi in stretches(data["load"], duration) if lo <= at < hi), "busy")


def coverage_keys(space: Space, data: dict[str, Any]) -> list[str]:
    """What a run of ``data`` adds to an exploration's coverage: each fault's pair
    (``fault_pair``), and the pair with the context it started in (``"restart worker while
    quiet"``), so that guided tries a pair once while quiet and once while busy."""
    keys = []
    for fault in data.get("faults") or []:
        pair = fault_pair(space, fault)
        keys += [pair, f"{pair} while {context_of(data, fault)}"]
    return keys


def _wanted(space: Space, data: dict[str, Any], drawn: Counter[str]) -> list[str | None]:
    """For each fault of ``data``: the other context, where its pair ran in it less often so
    far than in the one the fault starts in (None: it stays). A tie stays as drawn: moving
    half of the first draws to a quiet stretch cost the bugs that need a busy system more
    than it gave the idle ones (bench/explore_power.py's draws)."""
    wanted: list[str | None] = []
    for fault in data["faults"]:
        pair, here = fault_pair(space, fault), context_of(data, fault)
        other = CONTEXTS[1 - CONTEXTS.index(here)]
        wanted.append(other if drawn[f"{pair} while {other}"] < drawn[f"{pair} while {here}"] else None)
    return wanted


def _in_other_context(
    space: Space, data: dict[str, Any], drawn: Counter[str], rng: random.Random
) -> dict[str, Any]:
    """``data`` with each fault whose pair ran more often in the context it starts in than in
    the other moved to a time in a stretch of the other (kind, target and parameters as
    drawn), the load drawn again (``rng``, a few tries) where it has no quiet stretch and a
    fault wants one. A bug that needs a worker restarted while idle (mdp-idle-disconnect) or
    a queue frozen while busy gets its pair tried in both: random found the idle restart on 2
    of 2 seeds, guided on none, its two or three restarts of a worker all while busy."""
    load = data["load"]
    wanted = _wanted(space, data, drawn)
    if "quiet" in wanted:
        for _ in range(VALIDATE_TRIES):
            if any(c == "quiet" for c, _, _ in stretches(load, space.duration_s)):
                break
            load = draw_load(space, rng)
        data = {**data, "load": load}
        wanted = [
            w if w != context_of(data, f) else None for w, f in zip(wanted, data["faults"], strict=True)
        ]
    faults = []
    for fault, want in zip(data["faults"], wanted, strict=True):
        if want is not None:
            kind = FAULT_KINDS[fault["kind"]]
            last_start = space.last_end_s - length_of(kind, fault)
            room = [
                (max(lo, FIRST_FAULT_S), min(hi, last_start))
                for c, lo, hi in stretches(load, space.duration_s)
                if c == want and min(hi, last_start) > max(lo, FIRST_FAULT_S)
            ]
            if room:
                lo, hi = rng.choice(room)
                fault = {**fault, "at_s": [round(rng.uniform(lo, hi), 2)]}
                _fit(space, kind, fault)
        faults.append(fault)
    return {**data, "faults": faults}


def companions(space: Space, kind_name: str) -> list[str]:
    """The kinds guided draws beside a first fault of ``kind_name`` (``generate``): those
    that lose data (``FaultKind.lossy``: a link cut, a reset) if it does, the others if not."""
    lossy = FAULT_KINDS[kind_name].lossy
    return [k for k in space.kinds if FAULT_KINDS[k].lossy == lossy]


def generate(
    space: Space, rng: random.Random, *, name: str = "explore", drawn: Counter[str] | None = None
) -> dict[str, Any]:
    """A fresh scenario's TOML data: 1 to 4 faults and a load shape, all drawn from ``rng``.
    Given ``drawn`` (guided's draw): the pairs least drawn so far (draw_fault), each fault
    on a role or link of its own, three or four faults more often than one
    (GUIDED_FAULT_COUNT_WEIGHTS), and the others among the first fault's ``companions``
    where it loses no data or tries its pair again (a first try of a lossy pair mixes);
    without it (random's), as many faults of each count, on any target, as the draw always
    was."""
    if drawn is None:
        count = rng.randint(MIN_FAULTS, MAX_FAULTS)
        picked = [draw_fault(space, rng) for _ in range(count)]
        return _scenario(space, name, rng.randrange(1, SEED_RANGE), draw_load(space, rng), picked)
    count = rng.choices(range(MIN_FAULTS, MAX_FAULTS + 1), weights=GUIDED_FAULT_COUNT_WEIGHTS)[0]
    faults: list[dict[str, Any]] = []
    apart = False
    for _ in range(count):
        busy = {where_of(space, f["kind"], f["target"]) for f in faults}
        among = companions(space, faults[0]["kind"]) if apart else ()
        faults.append(draw_fault(space, rng, drawn=drawn, busy=busy, among=among))
        if len(faults) == 1:  # (drawn counts it: above 1, its pair ran before)
            apart = not FAULT_KINDS[faults[0]["kind"]].lossy or drawn[fault_pair(space, faults[0])] > 1
    data = _scenario(space, name, rng.randrange(1, SEED_RANGE), draw_load(space, rng), faults)
    # Moved with a generator of its own, seeded by ``rng``'s state without advancing it (as
    # ``_maybe_noresend``, whose seed this is not: + 1): every other draw of a seed stays
    # what it was. (No text in the hash: a str's hash differs from process to process.)
    side = random.Random(hash(rng.getstate()[1]) + 1)
    data = _in_other_context(space, data, drawn, side)
    return _scenario(space, name, data["seed"], data["load"], data["faults"])


def _scenario(
    space: Space, name: str, seed: int, load: dict[str, Any], faults: list[dict[str, Any]]
) -> dict[str, Any]:
    faults = sorted(faults, key=lambda f: (f["at_s"][0], f["kind"], f["target"]))
    what = "; ".join(f"{f['kind']} {f['target']} at {f['at_s'][0]:g} s" for f in faults)
    data: dict[str, Any] = {
        "name": name,
        "description": f"generated by zchaos explore: {what}",
        "implementation": space.implementation,
        "seed": seed,
        "load": load,
        "faults": faults,
    }
    if "phases" not in load:
        data["duration_s"] = space.duration_s
    if space.network == "hosts":  # said even when the manifest says it: the file replays anywhere
        data["network"] = "hosts"
    data["name"] = f"{name}-{content_digest(data)}"
    return data


def with_room_to_judge(space: Space, data: dict[str, Any], calibration: Any = None) -> dict[str, Any]:
    """``data``, or a copy whose load goes on calmly after its faults for as long as its plan
    needs to leave ``steady_state`` JUDGED_SHARE of the load to judge (the check's own rule,
    reports/checkers/core/steady.py ``calm_to_judge_s``), and, where its clients never
    resend, for their next requests after the last fault (``_room_to_ask_s``), up to
    LONGEST_RUN times the run length. Without an expiry_ms each fault excuses
    ``steady_grace_s`` after its stop: in 20 s runs with two to four faults, simple-pirate's
    steady_state was unknown in 14 of 15 runs and lazy-pirate's in 10, so explore could not
    see a steady-state bug of a system whose timers are long. The faults, their times and
    the draws stay as they were; a plan that no length helps (a fault never healed) is left
    as it is."""
    from harness.runner import planned_meta
    from harness.scenario import fault_plan
    from reports.checkers.core.steady import calm_to_judge_s

    scenario = to_scenario(space, data, calibration)
    meta = planned_meta(scenario, fault_plan(scenario))
    longest = LONGEST_RUN * space.duration_s
    calm = 0.0
    if "steady_state" in space.manifest.promises.checks:
        calm = calm_to_judge_s(meta, JUDGED_SHARE, longest, step_s=1.0) or 0.0
    ask = _room_to_ask_s(space, data, float(meta.get("client_budget_s") or 0.0), longest)
    added = max(calm, ask)
    if not added:
        return data
    longer = copy.deepcopy(data)
    if "phases" in longer["load"]:
        last = longer["load"]["phases"][-1]
        last["duration_s"] = round(float(last["duration_s"]) + added, 1)
    else:
        longer["duration_s"] = round(float(longer["duration_s"]) + added, 1)
    why = "for steady_state to judge" if calm >= ask else "for clients that never resend to ask again"
    longer["description"] += f"; load {added:g} s longer, {why}"
    prefix = longer["name"].rsplit("-", 1)[0]
    longer["name"] = f"{prefix}-{content_digest(longer)}"
    return longer


def _room_to_ask_s(space: Space, data: dict[str, Any], budget_s: float, longest_s: float) -> float:
    """Seconds of load to add (whole ones, 0 for none) so that clients that never resend
    (``reply_deadline_s``) can ask the system again after its last fault and be answered
    in time for ``recovery`` to judge: a request they had in flight as the fault struck
    waits out its deadline (``budget_s``, the run's ``client_budget_s``) before the next
    is sent. Explore, stall-hold-star seed 2: the primary frozen 1.8 s held every client's
    request (its planted bug), the deadlines were 14 s, the load stopped 12 s after the
    freeze, and recovery had nothing to judge: unknown, where a longer load showed the bug.
    The same for a manifest whose own client kinds never resend (a deadline of their own;
    titanic's clients have one too, but poll until it, NO_RESEND_DEADLINE)."""
    from loadtests.adapters import adapter_class, adapter_names

    drawn = (data["load"].get("client") or {}).get("reply_deadline_s")
    own = any(
        k.options.get("reply_deadline_s") and adapter_class(k.adapter).NO_RESEND_DEADLINE
        for k in space.manifest.clients
        if k.adapter in adapter_names()  # a client program of the user's: its ways unknown
    )
    if not (drawn or own) or not data.get("faults"):
        return 0.0
    last_end = max(float(f["at_s"][0]) + length_of(FAULT_KINDS[f["kind"]], f) for f in data["faults"])
    phases = data["load"].get("phases")
    load_s = sum(float(p["duration_s"]) for p in phases) if phases else float(data["duration_s"])
    wanted = last_end + budget_s + space.tail_s
    return float(math.ceil(min(wanted, longest_s) - load_s)) if wanted > load_s else 0.0


def content_digest(data: dict[str, Any]) -> str:
    """8 hex digits of what a generated scenario does (implementation, load, faults, network; not its
    seed or name): its runs' name in the results store and the matrix, where one name must be
    one scenario, across explorations too."""
    what = {k: data.get(k) for k in ("implementation", "duration_s", "load", "faults")}
    if data.get("network"):  # the same faults on hosts are another scenario (proxy names kept as they were)
        what["network"] = data["network"]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:8]


# --- mutating --------------------------------------------------------------------------


def mutate(
    space: Space,
    data: dict[str, Any],
    rng: random.Random,
    *,
    name: str = "explore",
    focus: Collection[str] = (),
    drawn: Counter[str] | None = None,
) -> tuple[dict[str, Any], str]:
    """``data`` (a generated scenario, left as it is) changed in one way, and what changed:
    a fault moved, lengthened or shortened, retargeted, made another kind, added, dropped,
    one of its parameters drawn again, or the load changed. A change that changes nothing (a fault
    lengthened that was already as long as the load allows, a single target) is drawn again.

    ``focus``: fault kinds whose faults showed something new in ``data``'s run; a fault of
    one of them is the one changed (where it is, how long, its target, kind or a parameter)
    in FOCUS_SHARE of the mutations, as a fuzzer mutates the bytes that reached new code.

    ``drawn``: the exploration's count of each pair drawn (draw_fault): a fault added, moved
    to another target or made another kind takes a pair drawn least often so far."""
    for _ in range(VALIDATE_TRIES):
        child, change = _mutate_once(space, data, rng, name, focus, drawn)
        if child["faults"] != data.get("faults") or child["load"] != data["load"]:
            return child, change
    return generate(space, rng, name=name, drawn=drawn), "fresh (no mutation changed anything)"


def _mutate_once(
    space: Space,
    data: dict[str, Any],
    rng: random.Random,
    name: str,
    focus: Collection[str] = (),
    drawn: Counter[str] | None = None,
) -> tuple[dict[str, Any], str]:
    faults = copy.deepcopy(list(data.get("faults") or []))
    load = copy.deepcopy(data["load"])
    choices = [m for m in MUTATIONS if (faults or m in ("add", "load"))]
    if len(faults) >= MAX_FAULTS:
        choices.remove("add")
    if len(faults) <= MIN_FAULTS and "drop" in choices:
        choices.remove("drop")
    focused = [i for i, f in enumerate(faults) if f["kind"] in focus]
    if focused and rng.random() < FOCUS_SHARE:
        how, index = rng.choice(FAULT_MUTATIONS), rng.choice(focused)
    else:
        how = rng.choice(choices)
        index = rng.randrange(len(faults)) if faults else 0
    if how == "add":
        busy = {where_of(space, f["kind"], f["target"]) for f in faults} if drawn is not None else ()
        faults.append(draw_fault(space, rng, drawn=drawn, busy=busy))
        change = f"added {faults[-1]['kind']} on {faults[-1]['target']}"
    elif how == "drop":
        gone = faults.pop(index)
        change = f"dropped {gone['kind']} on {gone['target']}"
    elif how == "load":
        load = draw_load(space, rng)
        change = "new load: " + "/".join(p["name"] for p in load.get("phases", [{"name": "steady"}]))
    elif how == "kind":
        # Another kind on the same target, at the same time: a stall of the queue that a
        # starve did not make, a freeze may.
        old = faults[index]
        scope = FAULT_KINDS[old["kind"]].target
        others = [k for k in space.kinds if k != old["kind"] and FAULT_KINDS[k].target == scope]
        if scope != "link":
            role = _role_of(space, old["target"])
            others = [k for k in others if _fits(space, FAULT_KINDS[k], role)]
        if not others:
            return _scenario(space, name, rng.randrange(1, SEED_RANGE), load, faults), "unchanged"
        if drawn is not None:  # a kind drawn least often on this role or link

            def count(k: str) -> int:  # junk's: its least-drawn endpoint's
                ends = space.binds.get(_role_of(space, old["target"]), ()) if k == "malformed" else ()
                return min(drawn[pair_of(space, k, old["target"], e)] for e in ends or [None])

            least = min(count(k) for k in others)
            others = [k for k in others if count(k) == least]
        kind = FAULT_KINDS[rng.choice(others)]
        fault = {"kind": kind.name, "target": old["target"], "at_s": list(old["at_s"])}
        fault.update(draw_params(space, kind, old["target"], rng, guided=True))
        _fit(space, kind, fault)
        faults[index] = fault
        change = f"{old['kind']} on {old['target']} made {kind.name}"
    else:
        fault = faults[index]
        kind = FAULT_KINDS[fault["kind"]]
        if how == "move":
            fault["at_s"] = [round(fault["at_s"][0] + rng.uniform(-3.0, 3.0), 2)]
            change = f"moved {kind.name} on {fault['target']}"
        elif how == "length":
            lengths = [n for n, s in kind.params.items() if s.length and n in fault]
            if lengths:
                length = rng.choice(lengths)
                longest = float((kind.params[length].explore or (0, math.inf))[-1])
                if space.expiry_s:  # a stranger's expiry may lie beyond the card's range
                    longest = max(longest, space.expiry_s * NEAR_EXPIRY[1])
                fault[length] = round(
                    min(float(fault[length]) * rng.choice((0.5, 1.5, 2.0, 3.0)), longest), 2
                )
            change = f"{kind.name} on {fault['target']} made longer or shorter"
        elif how == "retarget":
            before = fault["target"]
            if drawn is not None:  # another target, of a pair drawn least often
                _, fault["target"], endpoint = _least_drawn(space, [kind.name], drawn, rng, avoid=before)
                if endpoint:
                    fault["endpoint"] = endpoint
            else:
                for _ in range(VALIDATE_TRIES):  # another target, where the topology has one
                    fault["target"] = _target(space, kind, rng)
                    if fault["target"] != before:
                        break
            binds = space.binds[_role_of(space, fault["target"])] if kind.name == "malformed" else ()
            if binds and (drawn is None or fault.get("endpoint") not in binds):
                fault["endpoint"] = rng.choice(binds)
            change = f"{kind.name} moved to {fault['target']}"
        else:  # param
            redrawn = [n for n, s in kind.params.items() if _drawn(space, n, s) and not s.length]
            if redrawn:
                pname = rng.choice(redrawn)
                fault[pname] = draw_value(kind.params[pname], rng)
                change = f"{kind.name} on {fault['target']}: {pname} = {fault[pname]}"
            else:
                fault["target"] = _target(space, kind, rng)
                change = f"{kind.name} moved to {fault['target']}"
        _fit(space, kind, fault)
    return _scenario(space, name, rng.randrange(1, SEED_RANGE), load, faults), change


def isolate(
    space: Space, data: dict[str, Any], index: int, rng: random.Random, *, name: str, drawn: Counter[str]
) -> tuple[dict[str, Any], str]:
    """``data`` with its fault ``index`` alone (the others dropped, the load kept), moved to
    the other context where its pair ran there less (``_in_other_context``): guided's step
    that lets a fault show its bug alone. Beside two or three other faults a trigger's bug
    hid: in mdp-idle-disconnect's explorations, of 8 runs (random's and guided's) that
    restarted a worker, the 2 that showed the bug had it while quiet with no fault that lost
    data; a link fault that does makes no_lost excuse the request the bug sent to nobody."""
    kept = data["faults"][index]
    alone = _scenario(space, name, rng.randrange(1, SEED_RANGE), copy.deepcopy(data["load"]), [dict(kept)])
    side = random.Random(hash(rng.getstate()[1]) + 1)  # as generate's move: rng's draws stay
    moved = _in_other_context(space, alone, drawn, side)
    return _scenario(space, name, moved["seed"], moved["load"], moved["faults"]), (
        f"isolated {kept['kind']} on {kept['target']}"
    )


def lossless_and_lossy(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A scenario's faults that lose no data, and those that do (``FaultKind.lossy``)."""
    faults = data.get("faults") or []
    return [f for f in faults if not FAULT_KINDS[f["kind"]].lossy], [
        f for f in faults if FAULT_KINDS[f["kind"]].lossy
    ]


def unmask(space: Space, data: dict[str, Any], *, name: str) -> tuple[dict[str, Any], str] | None:
    """``data`` without its faults that lose data (``FaultKind.lossy``), its load and seed
    kept: guided's step after a run whose ``no_lost`` excused requests as dropped by a link
    fault. An excuse is where a bug can hide: the request a bug sent to nobody is "in flight
    as a link fault dropped data" beside any cut (mdp-idle-disconnect's explorations: 6 of 9
    quiet restarts of a worker that held had its loss excused so). On a correct system the
    losses go with the cuts. None where nothing would be left, or nothing dropped."""
    kept, dropped = lossless_and_lossy(data)
    if not kept or not dropped:
        return None
    what = ", ".join(f"{f['kind']} on {f['target']}" for f in dropped)
    return _scenario(space, name, data["seed"], copy.deepcopy(data["load"]), copy.deepcopy(kept)), (
        f"without {what}, whose losses no_lost excused"
    )


def pauses(kind: FaultKind) -> bool:
    """Whether a fault of ``kind`` silences its process for its whole length and leaves it
    as it was (a freeze): what its peers make of it depends on that length against their
    timers, and nothing else of the process changes."""
    return (
        kind.target == "process"
        and kind.harm == OUTAGE
        and kind.stops is None
        and not (kind.lossy or kind.disk or kind.lazy or kind.clock or kind.hosts)
        and "duration_s" in kind.params
    )


#: The sides of the system's expiry a pause is run alone on after its pair's first run.
SIDES = ("below", "above")


def sides_to_bracket(data: dict[str, Any], index: int, expiry: float) -> list[str]:
    """The sides of ``expiry`` (SIDES) to run ``data``'s fault ``index`` alone on: both,
    but the side its own length was on where it ran alone already."""
    faults = data.get("faults") or []
    if len(faults) > 1:
        return list(SIDES)
    return [SIDES[1] if float(faults[index]["duration_s"]) < expiry else SIDES[0]]


def bracket(
    space: Space, data: dict[str, Any], index: int, side: str, rng: random.Random, *, name: str
) -> tuple[dict[str, Any], str] | None:
    """``data``'s fault ``index`` (a pause, ``pauses``) alone, at its time, in its load,
    lasting a length on one ``side`` of the system's expiry (the manifest's ``expiry_ms``):
    "below", from NEAR_EXPIRY[0] times the expiry up to it, or "above", from it up to
    NEAR_EXPIRY[1] times it. Guided's steps after a pair of a pause ran first: a stalled
    process's bug lives between two of the system's timers, on one side of its detector
    (stall-queue: a queue frozen 1.5-5 s, its workers' patience 5 s; stall-hold-star: a
    server frozen 1.5-3 s, its peer's 2 s), a first length drawn from 0.5-8 s lands on the
    wrong side as often as not, and beside other faults it may show nothing on the right one
    (stall-queue: frozen 4 s while its workers' links were cut, which made them say READY
    again). None without an expiry, or without room in the load for that side."""
    expiry = space.expiry_s
    fault = copy.deepcopy(data["faults"][index])
    kind = FAULT_KINDS[fault["kind"]]
    if not expiry or not pauses(kind):
        return None
    lo, hi = (expiry * NEAR_EXPIRY[0], expiry) if side == SIDES[0] else (expiry, expiry * NEAR_EXPIRY[1])
    lo = max(lo, kind.params["duration_s"].min or 0.0, 0.01)
    hi = min(hi, space.last_end_s - FIRST_FAULT_S)
    if hi <= lo:
        return None
    fault["duration_s"] = round(rng.uniform(lo, hi), 2)
    _fit(space, kind, fault)
    alone = _scenario(space, name, rng.randrange(1, SEED_RANGE), copy.deepcopy(data["load"]), [fault])
    return alone, (
        f"{kind.name} on {fault['target']} alone for {fault['duration_s']:g} s, {side} the "
        f"system's expiry ({expiry:g} s)"
    )


def to_scenario(space: Space, data: dict[str, Any], calibration: Any = None) -> Scenario:
    """The scenario of generated data, read as any scenario file is (a SetupError is a bug
    of the generator's: every generated scenario must parse)."""
    return parse_scenario(
        data, None, where=f"<{data['name']}>", manifest=space.manifest, calibration=calibration
    )


def fault_kinds_of(data: dict[str, Any]) -> list[str]:
    return sorted({f["kind"] for f in data.get("faults") or []})
