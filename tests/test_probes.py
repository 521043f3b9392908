"""Probe workers: a manifest names one in a line, the command is built from harness/probes.py,
every flag it passes is one the worker accepts, and mistakes name the file and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import load_toml
from harness.errors import SetupError
from harness.manifest import parse_manifest
from harness.probes import PROBES
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
command = ["my-broker", "--clients", "{bind.frontend}", "--workers", "{bind.backend}"]
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
        (PROBE, 'probe = "majordomoo"', "unknown probe worker 'majordomoo' (known: paranoid-pirate"),
        (PROBE, PROBE + '\ncommand = ["x"]', "either command or probe, not both"),
        ("work_ms = 20", "work = 20", "probe 'majordomo' has no option 'work' (known: service, heartbeat_ms"),
        ("work_ms = 20", 'work_ms = "slow"', "work_ms should be a number (like 0), got 'slow'"),
        ("work_ms = 20", "service = 7", "service should be a string (like 'echo'), got 7"),
        (PROBE, PROBE + '\nconnect = "nowhere"', "'nowhere' is not in [endpoints]"),
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


@pytest.mark.parametrize("name", list(PROBES))
def test_every_flag_a_probe_passes_is_one_its_worker_accepts(name: str) -> None:
    probe = PROBES[name]
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
    for name in PROBES:
        assert f"\n  {name} " in out.stdout
    block = out.stdout.split("  execution_count", 1)[1].split("\n  ", 2)
    assert block[1].strip().startswith("needs: exec (workers: probe workers write it)")
