"""The run directory: where one run keeps everything, and what ``run.json`` holds.

```
runs/20261121T120000Z-paranoid-pirate-kill-worker/
  run.json        what ran: scenario, manifest (promises included), times, processes
  history/        one <source>.jsonl per writing process (see contract/history.py)
  logs/           stdout+stderr of every process, <instance>.log
  locust/         Locust's CSV statistics (stats_stats.csv, stats_stats_history.csv, ...)
  verdict.json    written by the report pipeline
  junit.xml
  report.html
  .reserve        room held for the last run.json while the run goes on (make_reserve)
```

A report replaces ``verdict.json``, ``junit.xml`` and ``report.html`` whole, and marks the
ones it is about to replace stale first (``STALE`` in verdict.json, reports/pipeline.py): a
report killed half-way leaves the run saying "unknown, stale", never the old outcome for a
history that may now say otherwise. ``RunDir.read_verdict`` reads it for everyone else.

A writer of ours that could not write a file (a full disk) leaves an empty marker beside it,
``history/worker-1.jsonl.stopped-ENOSPC`` (contract/history.py ``mark_stopped``), which
``RunDir.disk_trouble`` finds with run.json's own ``disk_full``.

``run.json`` is written by the runner and read by the report pipeline, both through this
module: ``RunMeta`` below is its schema (the scenario as it ran, ``ScenarioMeta``; each
fault of the plan, ``PlanEntry``; each client kind, ``ClientMeta``), ``RunDir.write_meta``
and ``RunDir.read_meta`` the only ways in and out (``read_meta`` checks what a report needs
and names the file when it is not there). Every value is stored once: the seed, the
expected violations, notes and warnings in ``scenario``; a fault's parameters in ``plan``
(and, as written, in the raw TOML that only the replay record keeps); the client kinds in
``manifest``. A run.json of an older zchaos held some of them twice or three times
(``FORMAT`` 1): ``read_meta`` reads it into today's shape (``upgrade_meta``), so every
reader sees one shape. Standard library only: the report pipeline reads it too.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from contract.clock import ClocksMeta
from contract.errors import SetupError
from contract.faults import fault_class
from contract.history import STOPPED_SUFFIX, read_stopped

#: The shape of run.json this module writes: 2 stores every value once. A run.json without
#: ``format`` is of shape 1 (zchaos before 2026-12-01), read by ``upgrade_meta``.
FORMAT = 2


class ClientMeta(TypedDict, total=False):
    """One client kind of the load, as it ran (harness/manifest.py ``ClientKind.as_dict``)."""

    name: str
    adapter: str  # loadtests/adapters: the protocol client it runs
    endpoints: list[str]  # the endpoints it is given, in order (the first is its primary)
    options: dict[str, Any]  # the adapter's options, the scenario's overrides applied
    weight: int  # its share of the users
    users: int  # a fixed number of its users (0: by weight)
    in_order: bool  # its replies are promised in the order of its requests
    command: list[str]  # a user's client program (the external adapter), else empty


class LoadMeta(TypedDict, total=False):
    """The scenario's ``[load]`` as it ran; its client kinds are the manifest's (``ClientMeta``)."""

    users: int
    spawn_rate: float
    wait_ms: float
    payload_bytes: int
    processes: int
    phases: list[dict[str, Any]]  # harness/scenario.py ``LoadPhase.as_dict``


class ScenarioMeta(TypedDict, total=False):
    """The scenario as it ran (harness/scenario.py ``Scenario.as_dict``): overrides applied,
    defaults filled in. Its fault lines are the plan's (``PlanEntry``), as written the replay
    record's; the implementation is the manifest's ``name``."""

    name: str
    description: str
    path: str | None  # its file, when it has one (relative paths in it are from its folder)
    seed: int  # the seed its plan and request streams were drawn from
    duration_s: float  # of load
    drain_s: float
    #: "hosts": each process ran in a network namespace of its own (chaos/hosts.py); absent:
    #: every process on 127.0.0.1, as before the key existed
    network: str
    topology: dict[str, int]  # role -> instances
    #: role -> how its instances started ([topology] start): "together" or {"stagger_s": N};
    #: a role not here started in turn (absent in a run.json of an older zchaos)
    start: dict[str, Any]
    options: dict[str, Any]  # the manifest's options with the scenario's overrides
    load: LoadMeta
    baseline: dict[str, Any] | None  # [baseline]: label and ratios (reports/baseline.py)
    written_for: str  # the implementation its [expect] and own settings are about
    expect_violated: list[str]  # checks the scenario expects to fail (a known weakness)
    expect_set_aside: list[str]  # an [expect] about another implementation, not applied
    notes: list[str]  # what of the scenario did not apply to the implementation under test, and why
    warnings: list[str]  # what may make the run call a correct system wrong
    resolved: list[dict[str, Any]]  # each value given relative to the calibration: key, given, value


class PlanEntry(TypedDict):
    """One fault of the plan (chaos/nemesis.py ``PlannedFault.as_dict``) with its class
    (contract/faults.py): the one place a fault's parameters are recorded."""

    fault_id: int  # from 1, in time order; the history's fault events carry it
    at_s: float  # offset from the load's start
    kind: str
    target: str  # one instance or one link
    selector: str  # the target as the scenario wrote it: worker:random
    params: dict[str, Any]  # as its card read them: duration_s, restart_after_s ...
    fault_scope: str  # "process" or "link"
    fault_lossy: bool
    fault_harm: str  # outage or slowdown
    fault_stops: str  # all, connections or nothing (read_meta fills it in where it was not recorded)
    fault_lasting: bool  # it has a duration of its own (not a kill or a restart)


class ManifestMeta(TypedDict, total=False):
    """The manifest as recorded (harness/manifest.py ``Manifest.as_dict``); the keys read back."""

    name: str
    version: str  # the version of the system under test, '' when the manifest gives none
    family: str | None  # the protocol family the manifest says it speaks, if it says
    path: str  # the manifest file
    promises: dict[str, Any]  # contract/promises.py ``Promises.as_dict``: checks, bounds, extra
    options: dict[str, Any]  # the implementation's knobs
    endpoints: dict[str, str]  # endpoint name -> the role that binds it
    clients: list[ClientMeta]  # the client kinds, the scenario's overrides applied
    roles: dict[str, dict[str, Any]]  # role -> count, scalable, command, probe, service, records
    network: str  # "hosts" when the manifest says so (absent: the proxy, its default)


class ReplayMeta(TypedDict, total=False):
    """What ``zchaos run --replay RUN`` needs to run the same plan again (harness/replay.py),
    beside the scenario's seed and path and the manifest's path, which ``scenario`` and
    ``manifest`` hold."""

    scenario_data: dict[
        str, Any
    ]  # the scenario's TOML data as it ran, --set applied; its seed is scenario.seed
    sets: list[str]  # the --set KEY=VALUE given (already in scenario_data), for the commands
    scenario_text: str | None  # the scenario file's text when the run started
    manifest_text: str | None  # the manifest file's text when the run started
    zchaos_version: str  # the package version, +g<commit> in a git checkout
    commands: list[str]  # the commands that reproduce the run, as printed


class SeedsMeta(TypedDict, total=False):
    """Where a run stands among the runs of ``--seeds N`` (harness/seeds.py)."""

    base: int  # the scenario's own seed, from which the others are derived
    index: int  # 1..count
    count: int
    folder: str  # the group's folder (index.html, seeds.json)


#: A run.json that records no client budget (written before it was recorded): the longest a
#: request of the default Lazy Pirate client takes (2.5 s x 4 attempts).
DEFAULT_CLIENT_BUDGET_S = 10.0


class RunMeta(TypedDict, total=False):
    """What ``run.json`` holds: what ran, and how far it got. Times are ``time.time_ns()``."""

    format: int  # FORMAT
    scenario: ScenarioMeta
    manifest: ManifestMeta
    client_budget_s: float  # the longest a client may take over one request, retries included: the
    # adapter's own ``budget_s`` of its merged options, the largest of the load's client kinds
    client_attempt_s: float  # the longest one attempt waits for its reply (``attempt_s``, as above)
    calibration: dict[str, Any]  # contract/calibration.py ``Calibration.as_dict``: the system's own
    # numbers the scenario's relative values were resolved against (only when it gives some)
    plan: list[PlanEntry]  # the fault plan, in time order
    ports: dict[str, int]  # endpoint or link name -> port
    processes: dict[str, str]  # instance -> role
    started_ns: int
    load_started_ns: int  # the load's time zero, from which faults and phases count
    load_stopped_ns: int
    ended_ns: int
    phases_done: dict[str, int]  # phase -> its end; without load and drain the run was cut short
    fault_proxy: dict[str, Any]  # url, kind (zchaos or toxiproxy), links
    hosts: dict[str, str]  # network = "hosts": each host (instance, "load") -> its address
    faults_injected: int
    fault_errors: list[str]  # one line per fault that failed (chaos/nemesis.py)
    leftovers_removed: list[str]  # what an earlier, killed run had left and this one swept
    subject_version: str  # --subject-version: the version of the system under test (else the manifest's)
    replay: ReplayMeta
    seeds: SeedsMeta  # only in a run of ``--seeds N``
    disk_full: DiskFullMeta  # only when zchaos could not write in the run folder (disk_trouble)
    clocks: ClocksMeta  # the host's wall and monotonic clocks at the start and end (contract/clock.py)


class DiskFullMeta(TypedDict, total=False):
    """Disk trouble of a run (``RunDir.disk_trouble``): zchaos could not write all it had to in
    the run folder, so the run is incomplete. Times are ``time.time_ns()``."""

    at_ns: int  # the first time something of ours could not be written
    low_ns: int  # when the file system's free space fell below the runner's floor, if seen
    free_bytes: int  # what was free then
    stopped: dict[str, str]  # file (relative to the run folder) -> why its writer stopped


#: What ``RunDir.make_reserve`` holds: room for a last run.json (tens of kB) several times over.
RESERVE_BYTES = 256 * 1024


def disk_full_reason(trouble: DiskFullMeta, meta: RunMeta, folder: Path | str) -> str:
    """The incomplete run's reason: ``disk full at t = 3.2 s ...``, t from the load's start."""
    at = trouble.get("at_ns") or trouble.get("low_ns")
    origin = meta.get("load_started_ns") or meta.get("started_ns")
    when = f"t = {(at - origin) / 1e9:.1f} s" if at and origin else "an unknown time"
    stopped = trouble.get("stopped") or {}
    names = sorted(stopped)
    whats = sorted(set(stopped.values()))
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    lost = f": {shown} could not be written whole ({'; '.join(whats[:2])})" if names else ""
    # A disk that filled says "No space left on device" (or its quota's words); another write
    # error is named as what it was.
    full = not whats or any("space" in w.lower() or "quota" in w.lower() for w in whats)
    return (
        f"{'disk full' if full else 'a write failed'} at {when}: zchaos could not write all of the "
        f"run in {folder}{lost}; the history is not whole, so the run is incomplete (free space "
        "and run it again)"
    )


#: The UTC time in the name of every folder zchaos makes for its output (runs, suites,
#: many-seeds groups, shrinks): sorted by name is sorted by start.
STAMP = "%Y%m%dT%H%M%SZ"
#: How many folders of one name and second ``new_folder`` tries before it gives up.
MAX_SAME_NAME = 1000


def new_folder(base: str | Path, *, prefix: str = "", name: str = "") -> Path:
    """A new, empty folder under ``base`` that no other zchaos made or writes into:
    ``[<prefix>-]<UTC time>[-<name>]``, with ``-1``, ``-2`` ... added when one of that name
    exists. Every command's output folder is made here (run, suite, seeds, shrink).

    The folder is claimed by an exclusive mkdir, which the file system makes atomic: of two
    processes that start in the same second (two ``zchaos suite`` into one runs folder),
    one gets the plain name and the other the next suffix, and neither writes over the
    other's files. A name that exists is never reused, whoever made it."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    stem = "-".join(part for part in (prefix, time.strftime(STAMP, time.gmtime()), name) if part)
    for n in range(MAX_SAME_NAME):
        folder = base / (f"{stem}-{n}" if n else stem)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise SetupError(f"{MAX_SAME_NAME} folders named {stem}[-N] exist already; clear some out", where=base)


#: verdict.json's key of a verdict a report started to replace and did not (reports/verdict.py
#: ``stale_verdict``): since when, what it said, why it no longer stands.
STALE = "stale"


def stale_reason(verdict: dict[str, Any]) -> str | None:
    """Why a verdict (verdict.json's object) is stale, None when it is not."""
    stale = verdict.get(STALE)
    return str(stale.get("why") or "a report did not finish") if isinstance(stale, dict) else None


def upgrade_meta(raw: dict[str, Any]) -> RunMeta:
    """A run.json's data in today's shape (``FORMAT``), whatever zchaos wrote it.

    Shape 1 held a value in two or three places: the seed (``scenario``, ``replay`` and the
    replay's TOML data), the expected violations, notes and warnings (``scenario`` and the
    top level), the fault lines (``scenario.faults`` beside the plan and the TOML data), the
    client kinds (``scenario.load.clients`` beside the manifest's), the implementation
    (``scenario.implementation``, the manifest's name), the scenario's and the manifest's
    paths (``replay`` too). Each keeps its one place; where an old file lacks that one, the
    copy it has moves there. A plan entry written before ``fault_stops`` was gets it from
    its kind (contract/faults.py), in either shape. Anything else is kept as it is (a reader
    asks with ``get``)."""
    if raw.get("format") == FORMAT:
        return cast(RunMeta, _with_plan_classes(raw))
    meta = _with_plan_classes(dict(raw))
    scenario = dict(meta.get("scenario") or {})
    for key in ("expect_violated", "notes", "warnings"):
        if key in meta:
            scenario.setdefault(key, meta.pop(key))
    if scenario.get("load"):
        scenario["load"] = {k: v for k, v in scenario["load"].items() if k != "clients"}
    scenario.pop("faults", None)
    implementation = scenario.pop("implementation", None)
    manifest = dict(meta.get("manifest") or {})
    if implementation and not manifest.get("name"):
        manifest["name"] = implementation
    replay = meta.get("replay")
    if isinstance(replay, dict):
        replay = dict(replay)
        data = dict(replay.get("scenario_data") or {})
        for seed in (data.pop("seed", None), replay.pop("seed", None)):
            if seed is not None:
                scenario.setdefault("seed", seed)
        if "scenario_data" in replay:
            replay["scenario_data"] = data
        if (path := replay.pop("scenario_path", None)) is not None:
            scenario.setdefault("path", path)
        if (path := replay.pop("manifest_path", None)) is not None:
            manifest.setdefault("path", path)
        meta["replay"] = replay
    if raw.get("scenario") is not None or scenario:
        meta["scenario"] = scenario
    if raw.get("manifest") is not None or manifest:
        meta["manifest"] = manifest
    meta["format"] = FORMAT
    return cast(RunMeta, meta)


def _with_plan_classes(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with each plan entry's ``fault_stops``, from its kind where it lacks one."""
    plan = meta.get("plan")
    if not isinstance(plan, list) or all(not isinstance(f, dict) or "fault_stops" in f for f in plan):
        return meta
    entries = []
    for f in plan:
        if isinstance(f, dict) and "fault_stops" not in f:
            known = fault_class(str(f.get("kind")), str(f.get("target")), harm=f.get("fault_harm"))
            f = {**f, "fault_stops": known.stops}
        entries.append(f)
    return {**meta, "plan": entries}


#: The name of the history follower's log in ``logs/``.
FOLLOWER = "follower"


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def history(self) -> Path:
        return self.root / "history"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def locust(self) -> Path:
        return self.root / "locust"

    @property
    def locust_csv_prefix(self) -> Path:
        return self.locust / "stats"

    @property
    def load_origin(self) -> Path:
        """Written by Locust: the wall-clock ns of the load's time zero."""
        return self.locust / "origin"

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def verdict_json(self) -> Path:
        return self.root / "verdict.json"

    @property
    def junit_xml(self) -> Path:
        return self.root / "junit.xml"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def reserve(self) -> Path:
        """Space held for the last run.json of a run whose disk fills (``make_reserve``)."""
        return self.root / ".reserve"

    def log(self, instance: str) -> Path:
        return self.logs / f"{instance}.log"

    @property
    def follower_log(self) -> Path:
        """The history follower's log (reports/ingest/follow.py): zchaos's own process, not
        one of the system's, so no role of the manifest names it."""
        return self.log(FOLLOWER)

    @classmethod
    def create(cls, base: str | Path, scenario_name: str) -> RunDir:
        """A new, empty run directory under ``base``, named by UTC time and scenario."""
        run = cls(new_folder(base, name=scenario_name))
        for sub in (run.history, run.logs, run.locust):
            sub.mkdir()
        return run

    def write_meta(self, meta: RunMeta) -> None:
        """Replace ``run.json`` whole (written aside, then renamed: never half a file). An
        OSError (a full disk) leaves the run.json there was, and no file aside."""
        tmp = self.run_json.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
            tmp.replace(self.run_json)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise

    def make_reserve(self, size: int = RESERVE_BYTES) -> None:
        """Hold ``size`` bytes of the file system for the run's last run.json: when the disk
        fills during the run, ``release_reserve`` frees them at its end, so that run.json can
        still say so. Raises OSError when even that does not fit."""
        try:
            with self.reserve.open("wb") as fh:
                fh.write(bytes(size))
                fh.flush()
                os.fsync(fh.fileno())  # a lazily allocating file system takes the blocks now
        except OSError:
            self.reserve.unlink(missing_ok=True)
            raise

    def release_reserve(self) -> None:
        self.reserve.unlink(missing_ok=True)

    def stopped_files(self) -> dict[str, dict[str, Any]]:
        """The run's files whose writers of ours stopped (a full disk), by their path in the run
        folder (``history/worker-1.jsonl``): their stop markers (contract/history.py)."""
        found = {}
        for folder in (self.history, self.logs):
            for marker in sorted(folder.glob(f"*{STOPPED_SUFFIX}*")):
                name = marker.name.rpartition(STOPPED_SUFFIX)[0]
                found[f"{folder.name}/{name}"] = read_stopped(marker)
        return found

    def disk_trouble(self, meta: RunMeta) -> DiskFullMeta | None:
        """What of the run could not be written (run.json's ``disk_full``, and the stop markers
        in the folder, which a runner that could not write run.json leaves too); None when
        everything was."""
        found: DiskFullMeta = cast(DiskFullMeta, dict(meta.get("disk_full") or {}))
        stopped = dict(found.get("stopped") or {})
        times = [found["at_ns"]] if found.get("at_ns") else []
        for name, record in self.stopped_files().items():
            stopped.setdefault(name, record["error"] or "stopped")
            if record["ts"]:
                times.append(record["ts"])
        if not stopped and not times:
            return None
        found["stopped"] = stopped
        if times:
            found["at_ns"] = min(times)
        return found

    def read_verdict(self, *, fresh: bool = False) -> dict[str, Any]:
        """``verdict.json`` (SetupError naming the file when it is missing or unreadable);
        ``fresh``: also when it is stale, for what must not stand on an old verdict (a
        baseline, a comparison, a shrink)."""
        rebuild = f"`zchaos report {self.root}` builds it"
        try:
            verdict = json.loads(self.verdict_json.read_text())
        except FileNotFoundError:
            raise SetupError(
                f"no verdict.json: the run has no report yet ({rebuild})", where=self.verdict_json
            ) from None
        except (OSError, ValueError) as exc:
            raise SetupError(f"cannot read verdict.json: {exc}", where=self.verdict_json) from None
        if not isinstance(verdict, dict):
            raise SetupError(f"verdict.json should hold a JSON object ({rebuild})", where=self.verdict_json)
        if fresh and (why := stale_reason(verdict)) is not None:
            raise SetupError(f"verdict.json is stale: {why}", where=self.verdict_json)
        return cast(dict[str, Any], verdict)

    def read_meta(self) -> RunMeta:
        """``run.json``, checked for what a report needs (SetupError naming the file if not)."""
        try:
            meta = json.loads(self.run_json.read_text())
        except FileNotFoundError:
            raise SetupError("no run.json: not a run directory", where=self.run_json) from None
        except (OSError, ValueError) as exc:
            raise SetupError(f"cannot read run.json: {exc}", where=self.run_json) from None
        if not isinstance(meta, dict):
            raise SetupError("run.json should hold a JSON object", where=self.run_json)
        promises = (meta.get("manifest") or {}).get("promises")
        if not isinstance(promises, dict) or not isinstance(promises.get("checks"), list):
            raise SetupError(
                "run.json lacks manifest.promises.checks (the checks to run)", where=self.run_json
            )
        return upgrade_meta(meta)  # JSON that write_meta wrote, or an older run.json: keys may be missing
