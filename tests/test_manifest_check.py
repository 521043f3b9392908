"""What a user's manifest needs (issue 33 part 4): ``zchaos check MANIFEST`` alone and with
``--smoke``, placeholders in a role's ``env``, readiness for every endpoint a role binds,
``{opt.X}`` in a command's script path, and no traceback on a closed pipe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ROOT

pytestmark = pytest.mark.timeout(120)


def zchaos(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_closed_pipe_ends_a_command_without_a_traceback() -> None:
    # `zchaos check ... | head` where head has gone: the pipe's reader is closed before
    # zchaos writes a line.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = zchaos("check", str(ROOT / "scenarios" / "paranoid-pirate-kill-worker.toml"), stdout=write_end)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr


#: A user's manifest (one queue of a program of theirs, zchaos's Simple Pirate probe workers).
MANIFEST = """
name = "mine"
[client]
adapter = "lazy_pirate"
endpoint = "frontend"
[options]
queue_program = "queue.py"
level = "debug"
[endpoints]
frontend = "queue"
backend = "queue"
[roles.queue]
command = {command}
env = {{ QUEUE_BACKEND = "{{bind.backend}}", QUEUE_NAME = "{{instance}}", QUEUE_LOG = "{{opt.level}}" }}
[roles.worker]
probe = "simple-pirate"
[promises]
checks = ["no_duplicate"]
"""


def write_manifest(tmp_path: Path, command: str = '["{python}", "{manifest_dir}/queue.py"]') -> Path:
    (tmp_path / "queue.py").write_text("")
    path = tmp_path / "manifest.toml"
    path.write_text(MANIFEST.format(command=command))
    return path


@pytest.mark.parametrize(
    "command",
    ['["{python}", "{manifest_dir}/{opt.queue_program}"]', '["{manifest_dir}/{opt.queue_program}"]'],
    ids=["script", "program"],
)
def test_a_program_chosen_by_an_option_is_not_refused_as_missing(tmp_path: Path, command: str) -> None:
    from harness.manifest import load_manifest

    # Before: "'{manifest_dir}/{opt.queue_program}': no such file ..." for a manifest that ran.
    manifest = load_manifest(write_manifest(tmp_path, command))
    assert manifest.roles["queue"].command[-1] == "{manifest_dir}/{opt.queue_program}"


def test_a_roles_env_takes_placeholders_filled_in_per_instance(tmp_path: Path) -> None:
    from contract.ports import PortAllocator
    from contract.rundir import RunDir
    from harness.scenario import parse_scenario
    from harness.topology import Topology

    path = write_manifest(tmp_path)
    scenario = parse_scenario(
        {"implementation": str(path), "duration_s": 5, "options": {"level": "info"}}, path
    )
    topology = Topology(scenario, RunDir.create(tmp_path, "t"), PortAllocator())
    env = topology.proc_spec("queue", "queue").env
    assert env["QUEUE_BACKEND"] == topology.bind_address("backend")
    assert (env["QUEUE_NAME"], env["QUEUE_LOG"]) == ("queue", "info")  # the scenario's option


def test_an_unknown_placeholder_in_env_names_its_key(tmp_path: Path) -> None:
    from contract.errors import SetupError
    from harness.manifest import load_manifest

    path = write_manifest(tmp_path)
    path.write_text(path.read_text().replace("{bind.backend}", "{bind.nowhere}"))
    with pytest.raises(
        SetupError, match=r"roles\.queue\.env\.QUEUE_BACKEND: unknown placeholder \{bind\.nowhere\}"
    ):
        load_manifest(path)


#: Binds each port of argv (a port taken by someone else is skipped, as a queue that does
#: not check its second bind would), says ready, and waits.
BINDER = (
    "import socket, sys, time\n"
    "held = []\n"
    "for port in sys.argv[1:]:\n"
    "    s = socket.socket()\n"
    "    try:\n"
    "        s.bind(('127.0.0.1', int(port))); s.listen(); held.append(s)\n"
    "    except OSError as exc:\n"
    "        print('bind failed:', exc)\n"
    "print('ready', flush=True)\n"
    "time.sleep(3600)\n"
)


@pytest.mark.parametrize("rule", ["port", "log"])
def test_a_role_is_ready_only_when_it_listens_on_every_endpoint_it_binds(tmp_path: Path, rule: str) -> None:
    import socket

    from contract.errors import SetupError
    from contract.history import HistoryWriter
    from contract.ports import PortAllocator
    from harness.supervisor import ProcSpec, Supervisor

    history = HistoryWriter(tmp_path / "runner.jsonl", "runner")
    supervisor = Supervisor(history, dict(os.environ))
    try:
        with PortAllocator() as ports, socket.create_server(("127.0.0.1", 0)) as other:
            front, taken = ports.allocate(), other.getsockname()[1]

            def spec(backend: int) -> ProcSpec:
                return ProcSpec(
                    instance="queue",
                    role="queue",
                    argv=[sys.executable, "-c", BINDER, str(front), str(backend)],
                    log=tmp_path / "queue.log",
                    ready_port=front if rule == "port" else None,
                    ready_line="^ready" if rule == "log" else None,
                    binds={"frontend": front, "backend": backend},
                    captured=True,
                )

            # Its second bind failed (another program has the port): not ready, and said so.
            with pytest.raises(
                SetupError, match=rf"backend \(port {taken}\) had none \(a bind that failed\?\)"
            ):
                supervisor.start(spec(taken), ready_timeout=2.0)
            supervisor.stop("queue")
            free = ports.allocate()
            managed = supervisor.start(spec(free), ready_timeout=20.0)
            assert managed.popen.poll() is None
    finally:
        supervisor.stop_all()
        history.close()


MALFORMED = """
implementation = "manifest.toml"
duration_s = 5
[[faults]]
kind = "malformed"
target = "queue"
endpoint = "backend"
at_s = [1]
duration_s = 1
"""


def test_a_manifests_family_gives_the_malformed_faults_junk_and_its_probe(tmp_path: Path) -> None:
    from contract.errors import SetupError
    from harness.manifest import load_manifest
    from harness.scenario import load_scenario

    path = write_manifest(tmp_path)
    scenario = tmp_path / "junk.toml"
    scenario.write_text(MALFORMED)
    # Before: the family was wanted on every fault line, the manifest could not say it.
    with pytest.raises(SetupError, match=r"faults\[0\].*family.*declares none"):
        load_scenario(scenario)
    text = path.read_text()
    path.write_text('family = "simple-pirate"\n' + text.replace('probe = "simple-pirate"', "probe = true"))
    (fault,) = load_scenario(scenario).faults
    assert fault.params["family"] == "simple-pirate"
    assert load_manifest(path).roles["worker"].probe == "simple-pirate"
    path.write_text('family = "simple-pirates"\n' + text)
    with pytest.raises(SetupError, match=r"family: unknown family 'simple-pirates' \(known: .*simple-pirate"):
        load_manifest(path)
    path.write_text(text.replace('probe = "simple-pirate"', "probe = true"))
    with pytest.raises(
        SetupError, match=r"roles\.worker\.probe: true takes the family's probe, but the manifest"
    ):
        load_manifest(path)


LRU = ROOT / "tests" / "blackbox_lru" / "manifest.toml"


def test_check_validates_a_manifest_alone() -> None:
    # Before: "implementation: missing" (exit 2): check took only a scenario.
    done = zchaos("check", str(LRU))
    assert done.returncode == 0, done.stderr
    assert f"{LRU}: valid manifest of blackbox-lru-queue" in done.stdout
    assert "role queue x1: ready port:frontend, binds frontend, backend" in done.stdout
    assert "correct_reply       judged" in done.stdout
    bad = zchaos("check", str(LRU), "--set", "seed=3")
    assert bad.returncode == 2 and "--set goes with a scenario file" in bad.stderr


def test_what_names_a_manifest() -> None:
    from harness.manifest import is_manifest

    assert is_manifest("paranoid-pirate") and is_manifest(LRU)  # a built-in's name, a file
    assert not is_manifest(ROOT / "tests" / "blackbox_lru" / "malformed.toml")  # a scenario
    assert not is_manifest("no-such-thing")


def smoke(tmp_path: Path, manifest: Path) -> subprocess.CompletedProcess[str]:
    """``zchaos check MANIFEST --smoke`` with its temporary run folder under ``tmp_path``."""
    from tests.procs import processes_of

    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(manifest), "--smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert not processes_of(tmp_path), "the smoke test left processes behind"
    assert not list(tmp_path.glob("zchaos-smoke-*")), "the smoke test left its folder behind"
    return done


def test_a_smoke_test_starts_the_system_sends_requests_and_stops(tmp_path: Path) -> None:
    done = smoke(tmp_path, LRU)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "queue: pid" in done.stdout and "ready (port:frontend)" in done.stdout
    assert "worker-2: pid" in done.stdout and "ready (log:ready)" in done.stdout
    assert "request 3: answered in" in done.stdout
    assert "smoke: 3 of 3 requests answered with their own body; every process stopped" in done.stdout


@pytest.mark.slow
def test_a_hosts_manifest_is_smoked_in_hosts_mode_where_the_machine_can(tmp_path: Path) -> None:
    """Each instance in a namespace of its own, the requests over the bridge, all of it gone
    after; without root, on loopback, saying why in one line."""
    manifest = tmp_path / "hosts" / "manifest.toml"
    manifest.parent.mkdir()
    text = LRU.read_text().replace("{manifest_dir}/lru_queue.py", str(LRU.parent / "lru_queue.py"))
    manifest.write_text('network = "hosts"\n' + text)
    done = smoke(tmp_path, manifest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "smoke: 3 of 3 requests answered with their own body; every process stopped" in done.stdout
    if os.geteuid() != 0:
        assert 'network = "hosts" smoked on loopback instead: network = "hosts" needs root' in done.stdout
        return
    bridge = re.search(r"hosts: 4 network namespaces on bridge (zc(\d+)b)", done.stdout)
    assert bridge is not None, done.stdout
    assert not Path("/sys/class/net", bridge[1]).exists(), "the bridge was left"
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"zchaos-{bridge[2]}." not in left, "a namespace was left"


def test_a_smoke_test_of_a_system_that_does_not_answer_in_time_says_so(tmp_path: Path) -> None:
    # Workers that take 300 ms, clients that wait 50 ms once: nothing comes back in time.
    text = LRU.read_text().replace(
        "options = { timeout_ms = 1000, retries = 3 }", "options = { timeout_ms = 50, retries = 0 }"
    )
    text = text.replace('probe = "simple-pirate"', 'probe = "simple-pirate"\noptions = { work_ms = 300 }')
    manifest = tmp_path / "slow" / "manifest.toml"
    manifest.parent.mkdir()
    manifest.write_text(text.replace("{manifest_dir}/lru_queue.py", str(LRU.parent / "lru_queue.py")))
    done = smoke(tmp_path, manifest)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "request 1: abandoned: no reply after 1 attempts" in done.stdout
    assert "smoke: 0 of 3 requests answered" in done.stdout
    assert "last lines of queue's log:" in done.stdout
