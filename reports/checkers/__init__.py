"""The checkers: one function per invariant, registered by name.

A checker takes a ``CheckContext`` (the run's history as a Spark DataFrame, the run's
metadata, the fault windows) and returns a ``CheckResult`` built by ``toolkit.result``
(the registry fills in its name). Manifests name the checks an implementation promises
(``[promises] checks``); the pipeline runs exactly those. Every module of this package is
imported by ``registry()``, so a protocol family adds its own checkers in
``reports/checkers/<family>.py`` with the ``@checker`` decorator and nothing else to edit;
a check module imports from ``reports.checkers.toolkit`` alone.

Outcomes follow Jepsen: ``held``, ``violated`` or ``unknown`` (the history cannot say,
e.g. no requests at all); results combine as violated > unknown > held.

A checker that reads events only the system under test writes (``exec`` from workers,
``dispatch`` from a broker) declares them in ``needs``. A user's broker and workers write
nothing, so on a run whose history has none of a needed kind the checker is not run: it
is UNKNOWN, with a reason naming the missing events and how to get them (zchaos's probe
workers write the worker-side ones; only the broker itself can write its own).
``zchaos list`` marks these checks.

What the plan alone decides, ``zchaos check`` says before any run (``Checker.forecast``): a
needed event that no role of the manifest records (run.json's roles say what each
records), and a check's own rule for an unknown that run.json decides (``foresee``: the
check applies the same function to a run), such as ``in_order`` listed but not promised.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.faults import fault_class
from contract.links import Link, parse_link
from contract.promises import OUTAGE, STOPS_ALL, STOPS_NOTHING
from contract.rundir import RunMeta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HELD, VIOLATED, UNKNOWN = "held", "violated", "unknown"
NS = 1_000_000_000
MAX_EXAMPLES = 10


def shown_first(examples: list[dict[str, Any]], n: int) -> list[int]:
    """Which ``n`` of a check's examples (in time order) to show (their indices, in time
    order): the first of each kind of problem, so that every way the check broke is shown
    however many of one kind came earlier, then the earliest others."""
    first_of_kind: dict[Any, int] = {}
    for i, ex in enumerate(examples):
        first_of_kind.setdefault(ex.get("problem"), i)
    picked = list(first_of_kind.values())[:n]
    chosen = set(picked)
    picked += [i for i in range(len(examples)) if i not in chosen][: n - len(picked)]
    return sorted(picked)


@dataclass(frozen=True)
class FaultWindow:
    """One fault, from its ``fault_start`` to its ``fault_stop`` (ns), with its class.

    ``scope`` ("process" or "link"), ``lossy``, ``harm``, ``lasting`` and ``stops`` are what
    ``fault_start`` recorded from the kind's card; what a history written before they were
    recorded lacks comes from contract/faults.py, so that no checker keeps a list of fault
    kinds of its own.
    """

    fault_id: int
    fault: str
    target: str
    start_ns: int
    stop_ns: int | None  # None: it never healed before the run ended
    scope: str | None = None  # "process" or "link"; None: not recorded
    lossy: bool | None = None  # loses what is sent (a partition), not only delays it
    harm: str | None = None  # outage or slowdown (contract/promises.py HARMS)
    lasting: bool | None = None  # has a duration of its own (not a kill or a restart)
    stops: str | None = None  # what of the target's traffic it stops (contract/promises.py STOPS)

    def __post_init__(self) -> None:
        recorded = (self.scope, self.lossy, self.harm, self.lasting, self.stops)
        known = fault_class(self.fault, self.target, *recorded)
        for name in ("scope", "lossy", "harm", "lasting", "stops"):
            object.__setattr__(self, name, getattr(known, name))

    @property
    def on_link(self) -> bool:
        """The fault acts on a network link (the target's links), not on a process."""
        return self.scope == "link" or parse_link(self.target) is not None

    @property
    def link(self) -> Link | None:
        """The link a network fault acts on (for a target that names an instance, every
        link it connects over: no endpoint); None for a fault on a process."""
        if not self.on_link:
            return None
        return parse_link(self.target) or Link(self.target)

    @property
    def outage(self) -> bool:
        """Its target cannot serve while it acts (a freeze, a partition), as its ``harm``
        says; a slowdown (a starved process, a slow link) still serves."""
        return self.harm == OUTAGE

    @property
    def stops_all(self) -> bool:
        """Nothing reaches its target while it acts (a killed or frozen process, a blackholed
        link), as its ``stops`` says; an outage that cuts connections one by one (reset,
        limit_data) lets its target be heard between the cuts."""
        return self.outage and self.stops == STOPS_ALL

    @property
    def loses_service(self) -> bool:
        """A correct target loses requests to it: an outage that stops all of its traffic or
        its connections; not junk sent beside the good requests, which a correct target
        drops and serves on (malformed), nor a slowdown."""
        return self.outage and self.stops != STOPS_NOTHING


@dataclass(frozen=True)
class Profile:
    """What a history holds, counted while it is read: events per source and kind, and the
    first and last event time. Checks use it instead of querying for it again."""

    sources: dict[str, dict[str, int]]  # src -> ev -> events ("?" for a missing src)
    first_ts: int
    last_ts: int

    @property
    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for per_kind in self.sources.values():
            for ev, n in per_kind.items():
                out[ev] = out.get(ev, 0) + n
        return dict(sorted(out.items()))

    @property
    def events(self) -> int:
        return sum(n for per_kind in self.sources.values() for n in per_kind.values())

    def has(self, *kinds: str) -> bool:
        """Whether the history holds an event of one of these kinds."""
        present = self.kinds
        return any(present.get(k) for k in kinds)

    @classmethod
    def from_rows(cls, rows: list[Any]) -> Profile:
        """From rows of (src, ev, n, first, last)."""
        sources: dict[str, dict[str, int]] = {}
        for r in rows:
            per_kind = sources.setdefault(r["src"] or "?", {})
            per_kind[r["ev"] or "?"] = per_kind.get(r["ev"] or "?", 0) + int(r["n"])
        first = min((r["first"] for r in rows if r["first"] is not None), default=0)
        last = max((r["last"] for r in rows if r["last"] is not None), default=0)
        return cls({k: dict(sorted(v.items())) for k, v in sorted(sources.items())}, int(first), int(last))

    def as_dict(self) -> dict[str, Any]:
        return {"sources": self.sources, "first_ts": self.first_ts, "last_ts": self.last_ts}

    @classmethod
    def of(cls, stored: dict[str, Any] | None) -> Profile | None:
        """A stored profile (as_dict), or None when there is none."""
        if not isinstance(stored, dict) or "sources" not in stored:
            return None
        return cls(stored["sources"], int(stored["first_ts"]), int(stored["last_ts"]))


@dataclass
class CheckContext:
    """What a checker reads. Checks may run in several threads at once (reports/parallel.py):
    the frames they share are built under a lock per name, once."""

    spark: SparkSession
    events: DataFrame  # every history event, with the columns of contract.history.FIELD_TYPES
    meta: RunMeta  # run.json
    faults: list[FaultWindow]
    run_dir: Path | None = None  # the run directory, for checkers that read logs/ (None in unit tests)
    profile: Profile | None = None  # None: not counted (unit tests), ask the events
    #: The run's control events (reports/run_facts.py control_events: phases, faults, process
    #: starts and exits) as read once for the report, in time order; None: ask the events.
    control: list[Any] | None = None
    _kinds: frozenset[str] | None = field(default=None, init=False, repr=False)
    _shared: dict[str, DataFrame] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _building: dict[str, threading.RLock] = field(default_factory=dict, init=False, repr=False)

    def shared(self, name: str, build: Callable[[CheckContext], DataFrame]) -> DataFrame:
        """A frame several checks read (one row per request, say): built by ``build`` and
        cached on first use, so its shuffle runs once per report, not once per check.

        Thread-safe: a thread asking for a frame another is building waits for it. The lock
        is per name, so a builder may ask for another shared frame (builders do not ask in a
        circle: that would recurse for ever even in one thread).
        """
        with self._lock:
            if name in self._shared:
                return self._shared[name]
        with self._lock_of(name):
            with self._lock:
                if name in self._shared:  # built while this thread waited
                    return self._shared[name]
            frame = build(self).cache()
            with self._lock:
                self._shared[name] = frame
            return frame

    def _lock_of(self, name: str) -> threading.RLock:
        """The lock held while ``name`` is built (made on first use)."""
        with self._lock:
            return self._building.setdefault(name, threading.RLock())

    def release(self) -> None:
        """Drop the cached shared frames."""
        with self._lock:
            frames = list(self._shared.values())
            self._shared.clear()
        for frame in frames:
            frame.unpersist()

    @property
    def promises(self) -> dict[str, Any]:
        return self.meta["manifest"]["promises"]

    def event_kinds(self) -> frozenset[str]:
        """The kinds of event (``ev``) the history holds at least one of (one query per run,
        none when the reader counted them)."""
        with self._lock_of(" event kinds"):
            if self._kinds is None and self.profile is not None:
                self._kinds = frozenset(k for k, n in self.profile.kinds.items() if n)
            if self._kinds is None:
                self._kinds = frozenset(r[0] for r in self.events.select("ev").distinct().collect())
            return self._kinds


def events_of(ctx: CheckContext, *kinds: str) -> DataFrame:
    """The history's events of the given kinds (``ev``). Kinds the history does not hold
    give an empty frame that Spark answers without reading anything."""
    from pyspark.sql import functions as F

    if ctx.profile is not None and not ctx.profile.has(*kinds):
        return ctx.events.limit(0)
    return ctx.events.filter(F.col("ev").isin(*kinds))


def control_rows(
    events: DataFrame, control: list[Any] | None, kinds: tuple[str, ...], columns: tuple[str, ...]
) -> list[Any]:
    """The history's events of ``kinds`` in time order: picked from ``control`` (the run's
    control events as the report read them once, reports/run_facts.py) when given, else read
    (their ``columns``, one query)."""
    from pyspark.sql import functions as F

    if control is not None:
        return [r for r in control if r["ev"] in kinds]
    return events.filter(F.col("ev").isin(*kinds)).select(*columns).orderBy("ts").collect()


@dataclass
class CheckResult:
    name: str
    status: str  # HELD, VIOLATED or UNKNOWN
    violations: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # first offending events
    summary: str = ""  # one line with the figures, for the verdict table
    figures: dict[str, Any] = field(default_factory=dict)  # numbers worth showing
    #: For UNKNOWN: what was missing and how to get it ("needs exec events from the workers:
    #: run the subject with probe workers, see README"); shown in every output.
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.status != VIOLATED


def planned_windows(meta: RunMeta, *, timed: bool = True) -> list[FaultWindow]:
    """The faults of a plan (run.json's ``plan``) as windows with their class: from their
    time (``at_s`` after a load starting at 0) for their own ``duration_s`` (a fault with no
    duration of its own, a kill, for none); ``timed=False``: no times (0, None)."""
    windows = []
    for f in meta.get("plan") or []:
        start = int(float(f.get("at_s") or 0) * NS) if timed else 0
        window = FaultWindow(
            int(f.get("fault_id") or 0),
            str(f.get("kind")),
            str(f.get("target")),
            start,
            start if timed else None,
            f.get("fault_scope"),
            f.get("fault_lossy"),
            f.get("fault_harm"),
            f.get("fault_lasting"),
            f.get("fault_stops"),
        )
        lasts = (f.get("params") or {}).get("duration_s") if timed and window.lasting else None
        windows.append(replace(window, stop_ns=start + int(float(lasts) * NS)) if lasts else window)
    return windows


STANDS = ("violations", "holds", "neither")


@dataclass(frozen=True)
class OnDamage:
    """What a check makes of a damaged history (a load client's history file cut, lines that
    cannot be read): the damaged clients' requests are left out, and what the check found for
    the rest may or may not stand for the whole run."""

    #: it reads the load clients' events (directly or through the requests they sent); one
    #: that reads only the subject's, the probes' and the harness's events is judged as usual
    reads_clients: bool = True
    #: what still stands with some requests left out: "violations" for a check of each
    #: request (a violation found among the others is one), "holds" for one that some reply
    #: shows (recovery), "neither" for one of shares or whole sequences (then unknown)
    stands: str = "neither"

    def __post_init__(self) -> None:
        if self.stands not in STANDS:
            raise ValueError(f"OnDamage.stands must be one of {', '.join(STANDS)}, got {self.stands!r}")


#: The default, and the safe choice for a new check: with requests left out it is unknown.
WHOLE_RUN = OnDamage()
#: A check of each request: a violation found among the other requests stands.
EACH_REQUEST = OnDamage(stands="violations")
#: A check that some reply satisfies (recovery): a pass found with the others stands.
SOME_REPLY = OnDamage(stands="holds")
#: A check that reads no client's events: a damaged client history leaves it whole.
SUBJECT_EVENTS = OnDamage(reads_clients=False)


@dataclass(frozen=True)
class Checker:
    name: str
    doc: str
    fn: Callable[[CheckContext], CheckResult]
    #: event kinds only the subject writes, each needed at least once (see the module doc)
    needs: tuple[str, ...] = ()
    #: what it makes of a damaged client history (``OnDamage``; by default nothing stands)
    on_damage: OnDamage = WHOLE_RUN
    #: the shared aggregates it reads (toolkit.shared.SHARED), planned before the checks start
    shares: tuple[str, ...] = ()
    #: event kinds it reads when the history has them, judging more (titanic_durable counts
    #: executions where workers record exec): a damaged writer of one makes it unknown too
    reads: tuple[str, ...] = ()
    #: what the run's plan alone says of it, before any run (``zchaos check``): the reason a
    #: run of that plan can only leave it unknown, else ''. It gets run.json as the runner
    #: writes it before the load (scenario, manifest, plan) and applies the check's own rule
    #: for that unknown, the one the check applies to a run.
    foresee: Callable[[RunMeta], str] | None = None

    def forecast(self, meta: RunMeta) -> str:
        """Why a run of the plan ``meta`` can only leave this check unknown ('' when it may
        be judged): events it needs that no role of the manifest records (run.json's roles
        say what each records; a role without that word, zchaos's own program, may record
        any), then its own rule (``foresee``)."""
        roles = (meta.get("manifest") or {}).get("roles") or {}
        recorded: set[str] = set()
        for role in roles.values():
            if role.get("records") is None:
                return self.foresee(meta) if self.foresee is not None else ""
            recorded.update(role["records"])
        missing = [kind for kind in self.needs if kind not in recorded]
        if missing:
            return (
                f"{missing_reason(missing)} (a program of yours that writes them into zchaos's history "
                "says so: records = [...] in its [roles.NAME])"
            )
        return self.foresee(meta) if self.foresee is not None else ""

    def run(self, ctx: CheckContext) -> CheckResult:
        """The check's result, named; UNKNOWN without running it when the history lacks what it
        needs."""
        if self.needs:
            missing = [kind for kind in self.needs if kind not in ctx.event_kinds()]
            if missing:
                return CheckResult(
                    self.name,
                    UNKNOWN,
                    summary=f"no {', '.join(missing)} events in the history",
                    reason=missing_reason(missing),
                    figures={"missing_events": missing},
                )
        return replace(self.fn(ctx), name=self.name)

    def needs_text(self) -> str:
        """``exec (workers: probe workers write it), dispatch (broker)`` for `zchaos list`."""
        return ", ".join(f"{k} ({_writer_hint(k)})" for k in self.needs)


def _writer(kind: str) -> str:
    from contract.history import EVENTS

    return EVENTS[kind].writer


def _writer_hint(kind: str) -> str:
    writer = _writer(kind)
    if writer == "worker":
        return "workers: probe workers write it"
    return "the subject only" if writer == "any" else f"{writer} only"


def missing_reason(missing: list[str]) -> str:
    """What an UNKNOWN check lacked and how to get it, for the events ``missing``."""
    from_workers = [k for k in missing if _writer(k) == "worker"]
    from_subject = [k for k in missing if _writer(k) != "worker"]
    parts = []
    if from_workers:
        parts.append(
            f"needs {', '.join(from_workers)} events from the workers and the history has none "
            "(your workers record nothing): run your broker with zchaos's probe workers, "
            '[roles.<worker role>] probe = "<family>" in the manifest (`zchaos list` shows them, '
            "README: Testing your own broker)"
        )
    if from_subject:
        writers = sorted({_writer(k).replace("any", "system") for k in from_subject})
        parts.append(
            f"needs {', '.join(from_subject)} events, which only the {'/'.join(writers)} itself can "
            "write (declared in contract/history.py), and the history has none: a black box cannot be "
            "judged on this; have it record them, or drop the check from [promises] checks"
        )
    return "; ".join(parts)


_REGISTRY: dict[str, Checker] = {}
_LOADED = False


def checker(
    name: str,
    doc: str,
    *,
    needs: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    on_damage: OnDamage = WHOLE_RUN,
    shares: tuple[str, ...] = (),
    foresee: Callable[[RunMeta], str] | None = None,
) -> Callable[[Callable[[CheckContext], CheckResult]], Callable]:
    """Register ``fn`` as the checker ``name``, documented by ``doc``. What it reads:
    ``needs``, event kinds only the subject writes (without them it is unknown) and ``reads``,
    kinds it judges more with when present (``Checker.reads``); what it makes of a damaged
    history: ``on_damage`` (``OnDamage``: WHOLE_RUN by default, EACH_REQUEST, SOME_REPLY,
    SUBJECT_EVENTS); how it is scheduled: ``shares``, the shared aggregates it reads
    (``toolkit.shared.SHARED``), planned before the checks start; and ``foresee``, its rule
    for an unknown that the plan alone decides (``Checker.foresee``, for ``zchaos check``).

    The check returns ``toolkit.result(...)``; the registry names it ``name``."""
    from contract.history import EVENTS

    unknown = [k for k in (*needs, *reads) if k not in EVENTS]
    if unknown:
        raise ValueError(f"checker {name!r} needs undeclared event kind(s) {unknown}")

    def register(fn: Callable[[CheckContext], CheckResult]) -> Callable[[CheckContext], CheckResult]:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"checker {name!r} registered twice")
        _REGISTRY[name] = Checker(
            name, doc, fn, tuple(needs), on_damage, tuple(shares), tuple(reads), foresee
        )
        return fn

    return register


def registry() -> dict[str, Checker]:
    """Every checker, by name (imports each module of this package and its packages once)."""
    global _LOADED
    if not _LOADED:
        for module in pkgutil.walk_packages(__path__, f"{__name__}."):
            importlib.import_module(module.name)
        _LOADED = True
    return dict(_REGISTRY)
