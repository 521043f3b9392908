"""Implementation manifests: how to start a system under test and what it promises.

A manifest is a TOML file: the built-in implementations keep theirs beside their code
(``implementations/<family>/manifest.toml``), a user's own implementation has one anywhere
and is run by path. Its format, for users, is docs/manifest.md; this module reads and checks
it (every error names the file and key) and its command placeholders.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.kinds import FAULT_KINDS
from contract.errors import SetupError
from contract.links import CLIENTS, link_name
from contract.promises import (
    AUTO_DEADLINE,
    DEFAULT_AVAILABILITY_FLOOR,
    DEFAULT_AVAILABILITY_WINDOW_S,
    DEFAULT_LATENCY_P99_MS,
    DEFAULT_RECOVERY_BOUND_S,
    DEFAULT_SURVIVES,
    EXECUTIONS,
    UNRECOVERED_KEYS,
    Promises,
    expiry_s,
    survive_rule,
)
from contract.rundir import ClientMeta, ManifestMeta
from harness.config import MAX_INSTANCES, MAX_USERS, Table, load_toml
from implementations import probes

IMPLEMENTATIONS_DIR = Path(__file__).resolve().parent.parent / "implementations"
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?:\.([A-Za-z0-9_]+))?\}")
SIMPLE_PLACEHOLDERS = ("python", "role", "instance", "index", "manifest_dir", "run_dir")
#: The size of the file system a ``disk_full`` fault mounts at a role's data_dir (MB).
DEFAULT_DATA_SIZE_MB = 32
SIGNALS = ("SIGTERM", "SIGINT", "SIGQUIT", "SIGKILL")
CLIENT_PLACEHOLDERS = ("python", "manifest_dir", "run_dir")
EXTERNAL = "external"  # the adapter that speaks JSON lines with a user's client program
#: ``network``: every process on 127.0.0.1, links through the fault proxy when a link fault
#: is planned (the default); or each in a host of its own (chaos/hosts.py). A manifest may
#: say it (a system that only makes sense on hosts), a scenario overrides it.
NETWORKS = ("proxy", "hosts")


@dataclass(frozen=True)
class Readiness:
    """How to tell a started process is ready: a port that accepts, or a line in its log."""

    kind: str  # "port", "log" or "none"
    arg: str = ""

    @classmethod
    def parse(cls, text: str, table: Table, endpoints: dict[str, str], role: str) -> Readiness:
        kind, _, arg = text.partition(":")
        if kind == "none" and not arg:
            return cls("none")
        if kind == "port" and endpoints.get(arg) == role:
            return cls("port", arg)
        if kind == "port" and arg in endpoints:
            # The readiness waits for a listener of this role's own process on that port.
            raise table.error(
                "ready",
                f"{arg!r} is bound by role {endpoints[arg]!r}, not by {role!r}: a role is ready on a port "
                f"it listens on (one of {sorted(e for e, r in endpoints.items() if r == role)}), "
                "or on a line of its log ('log:REGEX')",
            )
        if kind == "log" and arg:
            try:
                re.compile(arg)
            except re.error as exc:
                raise table.error("ready", f"bad regular expression {arg!r}: {exc}") from None
            return cls("log", arg)
        raise table.error(
            "ready",
            f"expected 'port:ENDPOINT' (one of {sorted(endpoints)}), 'log:REGEX' or 'none'; got {text!r}",
        )


@dataclass(frozen=True)
class LogEvent:
    """A history event made from a role's output line: ``kind`` when ``pattern`` matches it
    (searched in the line as the program wrote it); its named groups give the event's fields."""

    kind: str
    pattern: str


#: Who may write an event kind that a role's output lines make: the subject's processes,
#: not zchaos's clients, nemesis or runner (whose events would then be forged).
LOG_EVENT_WRITERS = ("worker", "broker", "server", "scheduler", "manager", "any")


def log_event_kinds() -> list[str]:
    """The event kinds a role's output lines may make: the subject's, whose required fields
    are all text (a regex group gives text; ``worker`` may be left to the instance)."""
    from contract.history import EVENTS, FIELD_TYPES

    return sorted(
        k
        for k, e in EVENTS.items()
        if e.writer in LOG_EVENT_WRITERS and all(FIELD_TYPES[f] == "string" for f in e.required)
    )


def _parse_log_events(rt: Table) -> tuple[LogEvent, ...]:
    """``[roles.X.events]``: event kind -> regex with named groups for its fields. The
    instance fills ``worker`` when the pattern has no group of that name; every other
    required field needs a group; a group must name a text field the kind carries."""
    from contract.history import EVENTS, FIELD_TYPES

    et = rt.table("events")
    found = []
    for kind in list(et.data):
        text = et.get(kind, str)
        spec = EVENTS.get(kind)
        usable = log_event_kinds()
        if spec is None or kind not in usable:
            close = difflib.get_close_matches(kind, usable, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise et.error(
                kind, f"{kind!r} is not an event a role's output may make ({hint}one of {', '.join(usable)})"
            )
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise et.error(kind, f"bad regular expression {text!r}: {exc}") from None
        groups = set(pattern.groupindex)
        missing = [f for f in spec.required if f not in groups and f != "worker"]
        if missing:
            need = ", ".join(f"(?P<{f}>...)" for f in missing)
            raise et.error(kind, f"a {kind!r} event needs {need} in its pattern {text!r}")
        for group in sorted(groups):
            if group not in spec.allowed or FIELD_TYPES.get(group) != "string":
                texts = sorted(f for f in spec.allowed if FIELD_TYPES.get(f) == "string")
                raise et.error(
                    kind, f"group {group!r} is not a field of {kind!r} (its text fields: {', '.join(texts)})"
                )
        found.append(LogEvent(kind, text))
    et.done()
    return tuple(found)


@dataclass(frozen=True)
class Role:
    name: str
    command: tuple[str, ...]
    count: int
    scalable: bool
    ready: Readiness
    env: dict[str, str]
    stop_signal: str
    binds: tuple[str, ...]  # endpoints this role binds
    connects: tuple[str, ...]  # endpoints its command connects to
    probe: str | None = None  # the probe worker it runs (its family's card), if it runs one
    service: str | None = None  # the Majordomo service its workers serve (for mmi_service)
    #: the history event kinds its program records (a probe's, or what the manifest says of
    #: a program of the user's); None: zchaos's own program, which records its family's
    records: tuple[str, ...] | None = None
    #: history events made from its output lines (``[roles.X.events]``): kind and pattern
    events: tuple[LogEvent, ...] = ()
    #: the folder it keeps its data in (``data_dir``, simple placeholders: ``{run_dir}/store``;
    #: its commands say ``{data_dir}``): a ``disk_full`` fault mounts a file system of
    #: ``data_size_mb`` there and fills it (chaos/disk.py)
    data_dir: str | None = None
    data_size_mb: int = DEFAULT_DATA_SIZE_MB

    def instance_names(self, count: int | None = None) -> list[str]:
        """``queue`` for a single instance; ``worker-1`` … ``worker-N`` otherwise."""
        n = self.count if count is None else count
        if n == 1 and not self.scalable:
            return [self.name]
        return [f"{self.name}-{i}" for i in range(1, n + 1)]


@dataclass(frozen=True)
class ClientKind:
    """One kind of load client: its adapter, the endpoints it is given, its options and users."""

    name: str
    adapter: str
    endpoints: tuple[str, ...]  # endpoint names of the manifest, in the order the client gets them
    options: dict[str, Any]
    weight: int = 1  # share of the Locust users
    users: int = 0  # a fixed number of Locust users instead of a share (0: by weight)
    in_order: bool = True  # replies to one client of this kind arrive in order (checked where true)
    command: tuple[str, ...] = ()  # the program of an external client

    def as_dict(self) -> ClientMeta:
        return {
            "name": self.name,
            "adapter": self.adapter,
            "endpoints": list(self.endpoints),
            "options": self.options,
            "weight": self.weight,
            "users": self.users,
            "in_order": self.in_order,
            "command": list(self.command),
        }


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    path: Path
    clients: tuple[ClientKind, ...]
    options: dict[str, Any]
    endpoints: dict[str, str]  # endpoint -> role that binds it
    roles: dict[str, Role]
    promises: Promises
    version: str = ""  # the version of the system under test, when the manifest gives one
    #: the protocol family it speaks (implementations/<family>/card.py), when it says so: the
    #: ``malformed`` fault's junk and ``probe = true`` follow it
    family: str | None = None
    #: what is valid but likely a mistake (a misspelt option passed to a client program):
    #: ``zchaos check`` and the start of a run print them
    warnings: tuple[str, ...] = field(default=(), compare=False)
    #: the network its runs get unless their scenario says (``NETWORKS``)
    network: str = "proxy"

    @property
    def directory(self) -> Path:
        return self.path.parent

    def as_dict(self) -> ManifestMeta:
        return {
            "name": self.name,
            "version": self.version,
            "family": self.family,
            "path": str(self.path),
            "clients": [c.as_dict() for c in self.clients],
            "options": self.options,
            "endpoints": self.endpoints,
            "roles": {
                name: {
                    "count": r.count,
                    "scalable": r.scalable,
                    "command": list(r.command),
                    "probe": r.probe,
                    "service": r.service,
                    "records": None if r.records is None else list(r.records),
                    "events": {e.kind: e.pattern for e in r.events},
                    **({"data_dir": r.data_dir, "data_size_mb": r.data_size_mb} if r.data_dir else {}),
                }
                for name, r in self.roles.items()
            },
            "promises": self.promises.as_dict(),
            # only when it says hosts: a proxy manifest's record stays as an older zchaos wrote it
            **({"network": self.network} if self.network != "proxy" else {}),
        }


def _check_placeholders(
    role: Table, command: list[str], endpoints: dict[str, str], options: dict[str, Any], key: str = "command"
) -> None:
    for arg in command:
        for m in PLACEHOLDER.finditer(arg):
            head, sub = m.group(1), m.group(2)
            if sub is None and head in SIMPLE_PLACEHOLDERS:
                continue
            if sub is None and head == "data_dir" and role.has("data_dir"):
                continue
            if head in ("bind", "connect", "public") and sub in endpoints:
                continue
            if head == "opt" and sub in options:
                continue
            known = [*SIMPLE_PLACEHOLDERS, *(f"bind.{e}" for e in endpoints)]
            known += [f"connect.{e}" for e in endpoints] + [f"public.{e}" for e in endpoints]
            known += [f"opt.{o}" for o in options]
            raise role.error(key, f"unknown placeholder {m.group(0)} (known: {', '.join(known)})")


def _probe_name(rt: Table, family: str | None) -> str:
    """The probe a role names, or its manifest's family's for ``probe = true``."""
    name = rt.get("probe", (str, bool))
    if isinstance(name, str):
        return name
    if name is False:
        raise rt.error("probe", "give the probe's name, or true for the manifest's family's probe")
    from implementations import families

    card = families().get(family or "")
    if card is None or card.probe is None:
        with_probe = ", ".join(sorted(f for f, c in families().items() if c.probe))
        why = "the manifest names no family" if family is None else f"family {family!r} has no probe worker"
        raise rt.error("probe", f"true takes the family's probe, but {why} (families with one: {with_probe})")
    return card.probe.name


def _probe_command(
    rt: Table, binds: tuple[str, ...], endpoints: dict[str, str], options: dict[str, Any], family: str | None
) -> tuple[list[str], str, str | None, str]:
    """The command of a role that runs a probe worker: (command, probe, service, default ready)."""
    name = _probe_name(rt, family)
    available = probes()
    probe = available.get(name)
    if probe is None:
        raise rt.error("probe", f"unknown probe worker {name!r} (known: {', '.join(available)})")
    if rt.has("service"):
        raise rt.error("service", 'a probe worker\'s service is its option: options = { service = "..." }')
    given = rt.get("options", dict, {})
    for key, value in given.items():
        if key not in probe.options:
            known = ", ".join(probe.options) or "none"
            raise rt.error("options", f"probe {name!r} has no option {key!r} (known: {known})")
        default = probe.options[key].default
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if not (numeric if isinstance(default, int | float) else isinstance(value, str)):
            kind = "a number" if isinstance(default, int | float) else "a string"
            raise rt.error("options", f"{key} should be {kind} (like {default!r}), got {value!r}")
    command = ["{python}", "-m", probe.module, "--identity", "{instance}"]
    if binds:
        if probe.bind_flag is None or len(binds) > 1 or rt.has("connect"):
            raise rt.error(
                "probe",
                f"probe {name!r} connects to its broker; it cannot bind {', '.join(binds)} "
                "(map the endpoint to the broker's role in [endpoints])",
            )
        command += [probe.bind_flag, f"{{bind.{binds[0]}}}"]
    else:
        default_connect = "backend" if "backend" in endpoints else None
        connect = rt.get("connect", (str, list), default_connect)
        if connect is None:
            raise rt.error(
                "connect", f"missing: the endpoint the probe connects to (one of {sorted(endpoints)})"
            )
        targets = [connect] if isinstance(connect, str) else connect
        if not targets or (len(targets) > 1 and not probe.multi_connect):
            raise rt.error("connect", f"probe {name!r} connects to exactly one endpoint, got {connect!r}")
        for endpoint in targets:
            if endpoint not in endpoints:
                raise rt.error("connect", f"{endpoint!r} is not in [endpoints] {sorted(endpoints)}")
        command += ["--connect", *(f"{{connect.{e}}}" for e in targets)]
    # An option the role does not set follows [options] of the same name (so a scenario's
    # override reaches the probe, and the probe's heartbeat matches the broker's), else
    # the probe's default.
    values: dict[str, Any] = {}
    for key, opt in probe.options.items():
        if key in given:
            value = str(given[key])
        elif key in options:
            value = f"{{opt.{key}}}"
        else:
            value = str(opt.default)
        command += [opt.flag, value]
        values[key] = given.get(key, options.get(key, opt.default))
    service = str(values[probe.service_option]) if probe.service_option else None
    return command, name, service, probe.ready


def _records(rt: Table, command: list[str], probe: str | None) -> tuple[str, ...] | None:
    """What a role's program records in the history: a probe's kinds (its family's card);
    for a command, what ``records`` says, else nothing for a program of the user's and
    anything (None) for zchaos's own (``-m implementations.X``)."""
    from contract.history import EVENTS
    from implementations import families

    if probe is not None:
        return next(f.probe_records for f in families().values() if f.probe and f.probe.name == probe)
    ours = any(a == "-m" and b.startswith("implementations.") for a, b in itertools.pairwise(command))
    given = rt.list_of("records", str, None)
    if given is None:
        return None if ours else ()
    for kind in given:
        if kind not in EVENTS:
            close = difflib.get_close_matches(kind, list(EVENTS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (contract/history.py declares them)"
            raise rt.error("records", f"{kind!r} is not an event kind{hint}")
    return tuple(given)


def client_endpoints(manifest: Manifest) -> list[str]:
    """Every endpoint some client kind connects to, in the order the kinds name them."""
    found: list[str] = []
    for kind in manifest.clients:
        found += [e for e in kind.endpoints if e not in found]
    return found


def check_client_options(adapter: str, options: dict[str, Any], table: Table, key: str = "options") -> None:
    """Raise (naming ``table``'s file and ``key``.option) unless ``adapter`` takes ``options``."""
    cls = adapter_of(adapter, table)
    where = Table(options, table.file, *table.path, key)
    for option, message in cls.check_options(options):
        raise where.error(option, f"{message} ({known_options(adapter)})")


def known_options(adapter: str, declared: dict[str, Any] | None = None) -> str:
    """``adapter 'X' knows: a = 1, b = 2`` for an error message (with the options a manifest declared)."""
    from loadtests.adapters import adapter_class

    cls = adapter_class(adapter)
    known = ", ".join(f"{k} = {v!r}" for k, v in cls.DEFAULTS.items()) or "none"
    text = f"adapter {adapter!r} knows: {known}"
    extra = sorted(set(declared or {}) - set(cls.DEFAULTS))
    if extra:
        text += f"; the manifest declares {', '.join(extra)}"
    elif cls.OPEN_OPTIONS:
        text += "; any other option is passed to the program"
    return text


def adapter_of(adapter: str, table: Table) -> Any:
    """The class of a client adapter, or an error at ``table``.adapter naming the known ones."""
    from loadtests.adapters import adapter_class, adapter_names

    try:
        return adapter_class(adapter)
    except KeyError:
        raise table.error(
            "adapter", f"unknown client adapter {adapter!r} (known: {', '.join(adapter_names())})"
        ) from None


def _check_runnable(table: Table, command: list[str], directory: Path) -> None:
    """The program ``command`` starts exists and may be run: a missing or non-executable
    file would only show when the run starts it. A path is taken as the process would take
    it (``{manifest_dir}/`` from the manifest's folder, else from the current one); a
    command of other placeholders is left to the run."""
    program = command[0]
    if program == "{python}":  # then its script, when it is one of the manifest's files
        script = command[1] if len(command) > 1 else ""
        file = directory / script.removeprefix("{manifest_dir}/")
        if script.startswith("{manifest_dir}/") and "{" not in str(file) and not file.is_file():
            raise table.error("command", f"{script!r}: no such file {file}")
        return
    # Another placeholder ({opt.X}: a program a scenario may choose) is known only at the run.
    if "{" in program.removeprefix("{manifest_dir}/"):
        return
    nearby = directory / Path(program).name
    beside = f' (there is {nearby}: write "{{manifest_dir}}/{nearby.name}")' if nearby.is_file() else ""
    if "/" not in program:
        if shutil.which(program) is None:
            raise table.error("command", f"program {program!r} is not on PATH{beside}")
        return
    path = directory / program.removeprefix("{manifest_dir}/") if program.startswith("{") else Path(program)
    if not path.is_file():
        raise table.error("command", f"{program!r}: no such file {path}{'' if path == nearby else beside}")
    if not os.access(path, os.X_OK):
        run_it = (
            f'run it with the interpreter, ["{{python}}", "{program}", ...], or '
            if path.suffix == ".py"
            else ""
        )
        raise table.error("command", f"{path} is not executable: {run_it}chmod +x {path}")


def _check_program(ct: Table, command: list[str], directory: Path) -> None:
    """The program of an external client and the files it is given must exist."""
    for arg in command:
        for m in PLACEHOLDER.finditer(arg):
            if m.group(2) is not None or m.group(1) not in CLIENT_PLACEHOLDERS:
                known = ", ".join(f"{{{p}}}" for p in CLIENT_PLACEHOLDERS)
                raise ct.error("command", f"unknown placeholder {m.group(0)} (known here: {known})")
    _check_runnable(ct, command, directory)
    for arg in command:
        if arg.startswith("{manifest_dir}/"):
            file = directory / arg.removeprefix("{manifest_dir}/")
            if not file.exists():
                raise ct.error("command", f"{arg!r}: no such file {file}")


def _open_option_warnings(ct: Table, cls: Any, options: dict[str, Any]) -> list[str]:
    """A client program takes any option, so a misspelt one would pass silently: each option
    zchaos passes on whose name is close to an option some adapter knows (``retires``)."""
    from loadtests.adapters import adapter_class, adapter_names

    known = sorted({k for name in adapter_names() for k in adapter_class(name).DEFAULTS})
    found = []
    for key in options:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.8) if key not in cls.DEFAULTS else []
        if close and close[0] != key:
            found.append(
                f"{Table(options, ct.file, *ct.path, 'options').where(key)}: passed to the program as it is; "
                f"did you mean {close[0]!r}? ({known_options(ct.get('adapter', str))})"
            )
    return found


def _parse_client(
    ct: Table,
    endpoints: dict[str, str],
    in_order: bool,
    default_name: bool,
    directory: Path,
    warnings: list[str],
) -> ClientKind:
    adapter = ct.get("adapter", str)
    cls = adapter_of(adapter, ct)
    name = ct.get("name", str, adapter) if default_name else adapter
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name):
        raise ct.error("name", f"client kind names are letters, digits, '.', '_' and '-'; got {name!r}")
    if ct.has("endpoint") == ct.has("endpoints"):
        raise ct.error(None, 'give endpoint = "NAME" or endpoints = ["NAME", ...] (one of them)')
    names = [ct.get("endpoint", str)] if ct.has("endpoint") else ct.list_of("endpoints", str)
    key = "endpoint" if ct.has("endpoint") else "endpoints"
    if not names:
        raise ct.error(key, "is empty")
    for endpoint in names:
        if endpoint not in endpoints:
            raise ct.error(key, f"{endpoint!r} is not in [endpoints] {sorted(endpoints)}")
    if len(set(names)) != len(names):
        raise ct.error(key, f"names an endpoint twice: {names}")
    if cls.MAX_ENDPOINTS is not None and len(names) > cls.MAX_ENDPOINTS:
        raise ct.error(key, f"adapter {adapter!r} uses {cls.MAX_ENDPOINTS} endpoint(s), got {len(names)}")
    options = ct.get("options", dict, {})
    check_client_options(adapter, options, ct)
    if cls.OPEN_OPTIONS:
        warnings += _open_option_warnings(ct, cls, options)
    command: list[str] = []
    if adapter == EXTERNAL:
        command = ct.list_of("command", str)
        if not command:
            raise ct.error("command", "is empty")
        _check_program(ct, command, directory)
    elif ct.has("command"):
        raise ct.error(
            "command", f"only an {EXTERNAL!r} client runs a command; adapter {adapter!r} is built in"
        )
    return ClientKind(
        name=name,
        adapter=adapter,
        endpoints=tuple(names),
        options=options,
        weight=ct.get("weight", int, 1, minimum=1),
        users=ct.get("users", int, 0, minimum=0, maximum=MAX_USERS),
        in_order=ct.get("in_order", bool, in_order),
        command=tuple(command),
    )


def _parse_clients(
    top: Table, endpoints: dict[str, str], in_order: bool, directory: Path, warnings: list[str]
) -> tuple[ClientKind, ...]:
    if top.has("client") and top.has("clients"):
        raise top.error("clients", "give either [client] or [[clients]] entries, not both")
    if top.has("client"):
        ct = top.table("client", required=True)
        kinds = [_parse_client(ct, endpoints, in_order, False, directory, warnings)]
        ct.done()
        return tuple(kinds)
    kinds = []
    for ct in top.tables("clients"):
        kind = _parse_client(ct, endpoints, in_order, True, directory, warnings)
        if any(k.name == kind.name for k in kinds):
            raise ct.error("name", f"client kind {kind.name!r} is named twice (give each a name)")
        ct.done()
        kinds.append(kind)
    if not kinds:
        raise top.error("client", "missing: the load's client, as [client] or [[clients]] entries")
    return tuple(kinds)


def _known_checks() -> tuple[str, ...]:
    """Checker names registered by the report pipeline (imported lazily: it loads Spark)."""
    from reports.checkers import registry

    return tuple(sorted(registry()))


def parse_manifest(data: dict[str, Any], path: Path, *, check_names: bool = True) -> Manifest:
    top = Table(data, path)
    name = top.get("name", str)
    description = top.get("description", str, "")
    version = top.get("version", str, "")
    family = top.get("family", str, None)
    network = top.get("network", str, "proxy", choices=NETWORKS)
    if family is not None:
        from implementations import families

        if family not in families():
            raise top.error("family", f"unknown family {family!r} (known: {', '.join(families())})")

    options = top.get("options", dict, {})
    endpoints_table = top.table("endpoints", required=True)
    endpoints = {k: endpoints_table.get(k, str) for k in list(endpoints_table.data)}
    endpoints_table.done()

    roles_table = top.table("roles", required=True)
    roles: dict[str, Role] = {}
    for role_name in list(roles_table.data):
        rt = roles_table.table(role_name, required=True)
        if not re.fullmatch(r"[a-z][a-z0-9_]*", role_name):
            raise rt.error(None, "role names are lower-case letters, digits and _")
        binds = tuple(e for e, r in endpoints.items() if r == role_name)
        if rt.has("probe"):
            if rt.has("command"):
                raise rt.error("probe", "give either command or probe, not both")
            command, probe_name, service, default_ready = _probe_command(
                rt, binds, endpoints, options, family
            )
        else:
            command = rt.list_of("command", str)
            if not command:
                raise rt.error("command", "is empty")
            _check_placeholders(rt, command, endpoints, options)
            _check_runnable(rt, command, path.parent)
            # A role that binds is ready, unless it says otherwise, once it listens on them all.
            default_ready = f"port:{binds[0]}" if binds else "none"
            probe_name, service = None, rt.get("service", str, None)
        records = _records(rt, command, probe_name)
        events = _parse_log_events(rt)
        if events and records is not None:
            # what its lines make is recorded too (zchaos check foresees from it)
            records = (*records, *(e.kind for e in events if e.kind not in records))
        count = rt.get("count", int, 1, minimum=1, maximum=MAX_INSTANCES)  # 0: nothing to judge
        scalable = rt.get("scalable", bool, False)
        ready = Readiness.parse(rt.get("ready", str, default_ready), rt, endpoints, role_name)
        env = {str(k): str(v) for k, v in rt.get("env", dict, {}).items()}
        for var, value in env.items():  # filled in as the command is (harness/topology.py)
            _check_placeholders(rt, [value], endpoints, options, f"env.{var}")
        stop_signal = rt.get("stop_signal", str, "SIGTERM", choices=SIGNALS)
        data_dir = rt.get("data_dir", str, None)
        if data_dir is not None:
            for m in PLACEHOLDER.finditer(data_dir):
                if m.group(2) is not None or m.group(1) not in SIMPLE_PLACEHOLDERS:
                    raise rt.error(
                        "data_dir",
                        f"takes {', '.join('{' + p + '}' for p in SIMPLE_PLACEHOLDERS)}, not {m.group(0)}",
                    )
        data_size_mb = rt.get("data_size_mb", int, DEFAULT_DATA_SIZE_MB, minimum=1, maximum=4096)
        rt.done()
        joined = " ".join(command)
        roles[role_name] = Role(
            name=role_name,
            command=tuple(command),
            count=count,
            scalable=scalable,
            ready=ready,
            env=env,
            stop_signal=stop_signal,
            binds=binds,
            connects=tuple(e for e in endpoints if f"{{connect.{e}}}" in joined),
            probe=probe_name,
            service=service,
            records=records,
            events=events,
            data_dir=data_dir,
            data_size_mb=data_size_mb,
        )
    roles_table.done()
    for endpoint, role_name in endpoints.items():
        if role_name not in roles:
            raise endpoints_table.error(endpoint, f"role {role_name!r} is not in [roles] {sorted(roles)}")

    promises = parse_promises(
        top.table("promises", required=True), options, check_names=check_names, roles=tuple(roles)
    )
    warnings: list[str] = []
    clients = _parse_clients(top, endpoints, promises.in_order, path.parent, warnings)
    _check_reply_deadlines(top, clients, promises)
    top.done()
    return Manifest(
        name=name,
        description=description,
        path=path,
        clients=clients,
        options=options,
        endpoints=endpoints,
        roles=roles,
        promises=promises,
        version=version,
        family=family,
        warnings=tuple(warnings),
        network=network,
    )


def parse_promises(
    pt: Table, options: dict[str, Any], *, check_names: bool = True, roles: tuple[str, ...] | None = None
) -> Promises:
    """A ``[promises]`` table read whole and checked: the manifest's, or a scenario's
    overrides merged into it (``harness/scenario.py``), evaluated with ``options``; with
    ``roles``, the role names a promise gives are checked against them."""
    checks = pt.list_of("checks", str)
    if check_names:
        known = _known_checks()
        for check in checks:
            if check not in known:
                raise pt.error("checks", f"unknown check {check!r} (known: {', '.join(known)})")
    recovery = pt.get("recovery_bound_s", float, DEFAULT_RECOVERY_BOUND_S, minimum=0)
    expiry = pt.get("expiry_ms", (int, float, str), None)
    try:
        expiry_s(expiry, options)
    except ValueError as exc:
        raise pt.error("expiry_ms", str(exc)) from None
    if expiry is not None and not isinstance(expiry, str) and expiry < 0:
        raise pt.error("expiry_ms", f"must be at least 0, got {expiry!r}")
    floor = pt.get("availability_floor", float, DEFAULT_AVAILABILITY_FLOOR, minimum=0)
    if floor > 1:
        raise pt.error(
            "availability_floor", f"is a fraction of the rate before a fault: at most 1, got {floor!r}"
        )
    survives = pt.list_of("survives", str, list(DEFAULT_SURVIVES))
    for entry in survives:
        try:
            survive_rule(entry, FAULT_KINDS)
        except ValueError as exc:
            raise pt.error("survives", str(exc)) from None
    unrecovered = {key: pt.list_of(key, str, []) for key in UNRECOVERED_KEYS}
    for key, named in unrecovered.items():
        for role in named:
            if roles is not None and role not in roles:
                names = ", ".join(roles)
                raise pt.error(key, f"{role!r} is not a role of the manifest ({names})")
    promises = Promises(
        checks=tuple(checks),
        execution=pt.get("execution", str, "at_least_once", choices=EXECUTIONS),
        in_order=pt.get("in_order", bool, True),
        recovery_bound_s=recovery,
        steady_grace_s=pt.get("steady_grace_s", float, recovery, minimum=0),
        latency_p99_ms=pt.get("latency_p99_ms", float, DEFAULT_LATENCY_P99_MS, minimum=0),
        expiry_ms=float(expiry) if isinstance(expiry, int) else expiry,
        availability_floor=floor,
        availability_window_s=pt.get(
            "availability_window_s", float, DEFAULT_AVAILABILITY_WINDOW_S, minimum=0.5, maximum=3600
        ),
        survives=tuple(survives),
        requeue=pt.get("requeue", bool, False),
        unrecovered_restarts=tuple(unrecovered["unrecovered_restarts"]),
        unrecovered_link_loss=tuple(unrecovered["unrecovered_link_loss"]),
        unrecovered_malformed=tuple(unrecovered["unrecovered_malformed"]),
        extra=pt.remaining(),
    )
    pt.done()
    return promises


def reply_deadline_problem(options: dict[str, Any], promises: Promises) -> str | None:
    """What is wrong with a no-resend client's ``reply_deadline_s`` (None: nothing).

    A deadline shorter than the recovery bound would call lost a request that a correct
    system answers while it is still recovering as promised.
    """
    deadline = options.get("reply_deadline_s")
    if deadline is None or deadline == 0 or deadline == AUTO_DEADLINE:
        return None
    if isinstance(deadline, bool) or not isinstance(deadline, int | float) or deadline < 0:
        return (
            f"reply_deadline_s must be a number of seconds (0: resend as usual) or {AUTO_DEADLINE!r}, "
            f"got {deadline!r}"
        )
    if deadline < promises.recovery_bound_s:
        return (
            f"reply_deadline_s = {deadline:g} is shorter than [promises] recovery_bound_s = "
            f"{promises.recovery_bound_s:g}: a request answered within the recovery bound would count as lost"
        )
    return None


def _check_reply_deadlines(top: Table, clients: tuple[ClientKind, ...], promises: Promises) -> None:
    """Each client kind's reply deadline against the recovery bound (an error names its options)."""
    for i, kind in enumerate(clients):
        problem = reply_deadline_problem(kind.options, promises)
        if problem:
            where = Table({}, top.file, "client") if top.has("client") else Table({}, top.file, "clients", i)
            raise where.error("options", problem)


def instance_link_name(instance: str, endpoint: str, role: Role) -> str:
    """``link:worker-1`` (or ``link:worker-1:backend`` for a role that connects to several)."""
    return link_name(instance, endpoint if len(role.connects) > 1 else None)


def client_link_name(manifest: Manifest, endpoint: str) -> str:
    """``link:clients`` when the clients connect to one endpoint; ``link:clients:E`` for each
    endpoint when they connect to several (so a fault can cut one server off from them)."""
    return link_name(CLIENTS, endpoint if len(client_endpoints(manifest)) > 1 else None)


def link_names(manifest: Manifest, topology: dict[str, int]) -> list[str]:
    """Every network link of a topology: the load clients', then each connecting instance's."""
    names = [client_link_name(manifest, e) for e in client_endpoints(manifest)]
    for role in manifest.roles.values():
        for instance in role.instance_names(topology[role.name]):
            names += [instance_link_name(instance, endpoint, role) for endpoint in role.connects]
    return names


def builtin_manifests() -> dict[str, Path]:
    """Name -> path of every manifest shipped under implementations/ (``manifest*.toml``:
    a family may ship several flavours, e.g. another client)."""
    found: dict[str, Path] = {}
    for path in sorted(IMPLEMENTATIONS_DIR.glob("*/manifest*.toml")):
        data = load_toml(path, "manifest")
        name = data.get("name")
        if isinstance(name, str):
            found[name] = path
    return found


def is_manifest(ref: str | Path) -> bool:
    """Whether ``ref`` names a manifest (a built-in's name, or a TOML file with [roles] and
    no ``implementation``) rather than a scenario."""
    text = str(ref)
    if not text.endswith(".toml") and "/" not in text:
        return text in builtin_manifests()
    path = Path(text)
    if not path.is_file():
        return False
    data = load_toml(path, "file")
    return "roles" in data and "implementation" not in data


def manifest_path(ref: str | Path, *, relative_to: Path | None = None) -> Path:
    """The file of a manifest named by built-in name (``paranoid-pirate``) or by path
    (``./my-broker.toml``), resolved. A relative path is taken from ``relative_to`` (the
    scenario's folder) when it exists there, else from the current directory."""
    text = str(ref)
    if not text.endswith(".toml") and "/" not in text:
        builtins = builtin_manifests()
        if text not in builtins:
            raise SetupError(
                f"unknown implementation {text!r}; built-in ones: {', '.join(sorted(builtins))} "
                "(or give the path of a manifest .toml)"
            )
        return builtins[text].resolve()
    path = Path(text)
    if not path.is_absolute() and relative_to is not None and (relative_to / path).exists():
        path = relative_to / path
    return path.resolve()


def load_manifest(ref: str | Path, *, relative_to: Path | None = None) -> Manifest:
    """A manifest by built-in name or by path (``manifest_path``)."""
    path = manifest_path(ref, relative_to=relative_to)
    return parse_manifest(load_toml(path, "manifest"), path)
