"""Probe workers: a manifest names one in a line, the command is built from its family's card,
every flag it passes is one the worker accepts, and mistakes name the file and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contract.errors import SetupError
from harness.config import load_toml
from harness.manifest import parse_manifest
from implementations import probes
from tests.procs import ROOT

BROKER = """
name = "my-broker"

[client]
adapter = "mdp_sync"
endpoint = "frontend"

[options]
heartbeat_ms = 1000

[endpoints]
frontend = "broker"
backend = "broker"

[roles.broker]
command = ["{manifest_dir}/my-broker", "--clients", "{bind.frontend}", "--workers", "{bind.backend}"]
ready = "port:frontend"

[roles.worker]
probe = "majordomo"
options = { work_ms = 20 }
count = 2
scalable = true

[promises]
checks = ["no_lost", "execution_count"]
"""


PROBE = 'probe = "majordomo"'


def parse(tmp_path: Path, text: str):
    path = tmp_path / "manifest.toml"
    path.write_text(text)
    # zchaos check refuses a program that is not there or may not be run; this one never runs.
    broker = tmp_path / "my-broker"
    broker.write_text("#!/bin/sh\nexit 1\n")
    broker.chmod(0o755)
    return parse_manifest(load_toml(path, "manifest"), path)


def test_a_probe_role_becomes_the_family_worker_with_mapped_endpoints_and_options(tmp_path: Path) -> None:
    manifest = parse(tmp_path, BROKER)
    worker = manifest.roles["worker"]
    assert worker.probe == "majordomo" and worker.service == "echo"
    assert worker.connects == ("backend",)
    assert worker.ready.kind == "log" and worker.ready.arg == "ready"
    argv = list(worker.command)
    assert argv[:3] == ["{python}", "-m", "implementations.majordomo.worker"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert flags["--connect"] == "{connect.backend}" and flags["--identity"] == "{instance}"
    assert flags["--work-ms"] == "20"  # given on the role
    assert flags["--heartbeat-ms"] == "{opt.heartbeat_ms}"  # follows [options] (and scenario overrides)
    assert flags["--liveness"] == "3" and flags["--service"] == "echo"  # the probe's defaults
    assert manifest.as_dict()["roles"]["worker"]["probe"] == "majordomo"


def test_the_rep_probe_binds_when_the_endpoint_is_its_own(tmp_path: Path) -> None:
    text = BROKER.replace('frontend = "broker"', 'frontend = "worker"').replace('ready = "port:frontend"', "")
    text = text.replace('probe = "majordomo"', 'probe = "rep"').replace("work_ms = 20", "work_ms = 5")
    worker = parse(tmp_path, text).roles["worker"]
    assert "--frontend" in worker.command and "{bind.frontend}" in worker.command
    assert worker.binds == ("frontend",) and worker.connects == ()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (PROBE, 'probe = "majordomoo"', "probe worker 'majordomoo' (known: majordomo, paranoid-pirate"),
        (PROBE, PROBE + '\ncommand = ["x"]', "either command or probe, not both"),
        ("work_ms = 20", "work = 20", "probe 'majordomo' has no option 'work' (known: service, heartbeat_ms"),
        ("work_ms = 20", 'work_ms = "slow"', "work_ms should be a number (like 0), got 'slow'"),
        ("work_ms = 20", "service = 7", "service should be a string (like 'echo'), got 7"),
        (PROBE, PROBE + '\nconnect = "nowhere"', "'nowhere' is not in [endpoints]"),
        (PROBE, PROBE + '\nservice = "echo"', "a probe worker's service is its option"),
        (PROBE, PROBE + '\nconnect = ["frontend", "backend"]', "exactly one endpoint"),
        ('backend = "broker"', 'backend = "worker"', "connects to its broker; it cannot bind"),
    ],
)  # fmt: skip
def test_a_wrong_probe_role_is_named_with_its_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(SetupError) as err:
        parse(tmp_path, BROKER.replace(old, new, 1))
    text = str(err.value)
    assert message in text, text
    assert "manifest.toml" in text and "roles.worker" in text


def test_without_a_backend_endpoint_the_probe_must_say_where_it_connects(tmp_path: Path) -> None:
    text = BROKER.replace('backend = "broker"', 'workers = "broker"').replace(
        "{bind.backend}", "{bind.workers}"
    )
    with pytest.raises(SetupError, match=r"roles\.worker\.connect.*missing"):
        parse(tmp_path, text)
    assert parse(tmp_path, text.replace("count = 2", 'connect = "workers"\ncount = 2')).roles[
        "worker"
    ].connects == ("workers",)


@pytest.mark.parametrize("name", list(probes()))
def test_every_flag_a_probe_passes_is_one_its_worker_accepts(name: str) -> None:
    probe = probes()[name]
    out = subprocess.run(
        [sys.executable, "-m", probe.module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    for flag in ["--identity", "--connect", *(o.flag for o in probe.options.values())]:
        assert flag in out.stdout, f"{probe.module} has no {flag}"
    if probe.bind_flag:
        assert probe.bind_flag in out.stdout


def test_zchaos_list_shows_the_probes_and_marks_checks_that_need_the_subjects_events() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "list"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "probe workers" in out.stdout
    for name in probes():
        assert f"\n  {name} " in out.stdout
    block = out.stdout.split("  execution_count", 1)[1].split("\n  ", 2)
    assert block[1].strip().startswith("needs: exec (workers: probe workers write it)")


# --- each probe serves its family's built-in broker --------------------------------------

#: family manifest -> (role, probe) pairs: the built-in workers replaced by probe workers
FAMILIES = {
    "paranoid_pirate/manifest.toml": [("worker", "paranoid-pirate")],
    "simple_pirate/manifest.toml": [("worker", "simple-pirate")],
    "majordomo/manifest.toml": [("worker", "majordomo")],
    "lazy_pirate/manifest.toml": [("server", "rep")],  # the REP probe binds: it is the server
    "pingpong/manifest.toml": [("worker", "pingpong")],
    "reliable_sketch/manifest.toml": [("server", "sketch")],
    "wmp/manifest.toml": [("worker", "wmp"), ("direct", "wmp")],  # behind the device; to both managers
}


#: where a probe role connects when it is not the manifest's "backend"
CONNECT = {"worker-wmp": '"device"', "direct-wmp": '["backend_a", "backend_b"]'}


def with_probes(text: str, roles: list[tuple[str, str]]) -> str:
    """A built-in manifest whose roles run probe workers instead of their commands."""
    for role, probe in roles:
        head = text.index(f"[roles.{role}]\n") + len(f"[roles.{role}]\n")
        start = text.index("command = [", head)
        end = text.index("]\n", start) + 2
        lines = f'probe = "{probe}"\n'
        if f"{role}-{probe}" in CONNECT:
            lines += f"connect = {CONNECT[f'{role}-{probe}']}\n"
        text = text[:start] + lines + text[end:]
    # A probe serves the service of its `service` option, not of a role key.
    return text.replace('service = "echo"             # the service its workers serve', "#")


@pytest.mark.slow  # a short run per family (no report)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_probe_serves_its_familys_broker_and_records_its_executions(tmp_path: Path, family: str) -> None:
    from contract.history import read_events
    from harness.runner import run_scenario
    from harness.scenario import load_scenario

    source = ROOT / "implementations" / family
    text = with_probes(source.read_text(), FAMILIES[family])
    (tmp_path / "manifest.toml").write_text(text.replace("{manifest_dir}", str(source.parent)))
    (tmp_path / "scenario.toml").write_text(
        'implementation = "manifest.toml"\nseed = 1\nduration_s = 3\ndrain_s = 2\n'
        "[load]\nusers = 2\nspawn_rate = 2\nwait_ms = 20\n"
    )
    result = run_scenario(load_scenario(tmp_path / "scenario.toml"), runs_dir=tmp_path / "runs", report=False)
    events = list(read_events(result.run.history))
    probes = {role for role, _ in FAMILIES[family]}
    replies = [e for e in events if e["ev"] == "reply"]
    execs = [e for e in events if e["ev"] == "exec" and e["src"].rsplit("-", 1)[0] in probes | {"server"}]
    assert replies and all(e["ok"] for e in replies), f"{len(replies)} replies"
    answered = {e["rid"] for e in replies}
    assert answered <= {e["rid"] for e in execs}  # every answered request was run by a probe
    assert {e["ev"] for e in events} >= {"exec", "done"}
