"""Hosts mode and packet faults (issue 37 parts 1-2; chaos/hosts.py, chaos/packets.py,
chaos/kinds/host_partition.py, chaos/kinds/netem.py): the rules and commands built, the
scenario key's contract, real namespaces on a real bridge (a TCP connect across them, cut
by a drop rule and refused by a reset rule, whole again after), a SIGKILLed runner's
namespaces and links swept by the next, and whole runs in hosts mode.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.hosts import MARK, Hosts, HostsError, LinkPath, in_ns, remove_leftovers
from chaos.packets import (
    Applied,
    add_link_cut,
    add_netem,
    add_partition,
    cut_rules,
    groups,
    iptables_missing,
    link_rules,
    netem_args,
    netem_missing,
    partition_rules,
    rules_in,
    shape_cut,
)
from contract.errors import SetupError
from tests.procs import ROOT, nemesis_events, processes_of, run_process, wait_for

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
needs_iptables = pytest.mark.skipif(
    iptables_missing() is not None, reason=str(iptables_missing())
)  # ./dev tests installs it as root


def scenario_text(network: str, kind: str = "kill", extra: str = "") -> str:
    return (
        f'implementation = "paranoid-pirate"\nduration_s = 10\nnetwork = "{network}"\n'
        f'[[faults]]\nkind = "{kind}"\ntarget = "worker-1"\nat_s = [1]\n{extra}'
    )


# --- what is built ---------------------------------------------------------------------


def test_the_shapes_cut_whom_jepsen_cuts() -> None:
    names = ["queue", "worker-1", "worker-2", "worker-3", "load"]
    assert groups("isolate", "worker-1", names) == [("worker-1", ["queue", "worker-2", "worker-3", "load"])]
    # halves: the target's half first (3 of 5), cut from the other two
    assert groups("halves", "worker-2", names) == [
        ("worker-2", ["queue", "worker-1"]),
        ("worker-3", ["queue", "worker-1"]),
        ("load", ["queue", "worker-1"]),
    ]
    ring = dict(groups("ring", "queue", names))
    # each of 5 keeps itself and its two neighbours (3: a majority), never the same majority
    assert ring == {
        "queue": ["worker-2", "worker-3"],
        "worker-1": ["worker-3", "load"],
        "worker-2": ["queue", "load"],
        "worker-3": ["queue", "worker-1"],
        "load": ["worker-1", "worker-2"],
    }
    kept = [frozenset(set(names) - set(lost)) for lost in ring.values()]
    assert all(len(k) == 3 for k in kept) and len(set(kept)) == 5
    assert groups("ring", "a", ["a", "b", "c"]) == [], "three hosts in a ring all keep a majority"
    # over a run's hosts: the load is isolated with the rest, never split off in halves or a ring
    run = ["broker", "worker-1", "worker-2", "worker-3", "load"]
    halves = shape_cut("halves", "broker", run)
    assert halves == [("broker", ["worker-2", "worker-3"]), ("worker-1", ["worker-2", "worker-3"])]
    assert shape_cut("isolate", "worker-1", run) == [("worker-1", ["broker", "worker-2", "worker-3", "load"])]
    assert shape_cut("isolate", "worker-1", run, "broker, load") == [("worker-1", ["broker", "load"])]
    assert shape_cut("isolate", "broker", run, "worker") == [("broker", ["worker-1", "worker-2", "worker-3"])]


def test_partition_rules_lose_packets_where_they_arrive_one_way_or_both() -> None:
    assert partition_rules("drop", ["10.1.2.3"], "zchaos-fault-4") == [
        ["INPUT", "-s", "10.1.2.3", "-m", "comment", "--comment", "zchaos-fault-4", "-j", "DROP"],
    ]
    reset = partition_rules("reset", ["a"], "t")
    assert reset[0][-4:] == ["-j", "REJECT", "--reject-with", "tcp-reset"] and reset[1][-2:] == ["-j", "DROP"]
    # a reset passes the rules (the other side's REJECT sends it): both ways, it was lost
    assert reset[0][-8:-4] == ["!", "--tcp-flags", "RST", "RST"]
    assert reset[1][-5:-2] == ["!", "-p", "tcp"]
    address = {"t": "10.0.0.2", "p": "10.0.0.3", "q": "10.0.0.4"}
    cut = [("t", ["p", "q"])]
    both = cut_rules(cut, "drop", "both", address, "x")
    assert sorted((host, rule[2]) for host, rule in both) == [
        ("p", "10.0.0.2"), ("q", "10.0.0.2"), ("t", "10.0.0.3"), ("t", "10.0.0.4"),
    ]  # fmt: skip
    # in: the target hears nothing (its own INPUT); out: what it sends is lost (the peers')
    assert {host for host, _ in cut_rules(cut, "drop", "in", address, "x")} == {"t"}
    assert {host for host, _ in cut_rules(cut, "drop", "out", address, "x")} == {"p", "q"}
    # a ring's cuts go both ways: each rule once
    ring = [("t", ["p"]), ("p", ["t"])]
    assert len(cut_rules(ring, "drop", "both", address, "x")) == 2


def test_a_link_card_on_hosts_cuts_the_links_own_flows_in_the_proxys_directions() -> None:
    address = {"worker-1": "10.0.0.3", "queue": "10.0.0.2"}
    path = LinkPath("worker-1", "queue", 5555)
    both = link_rules(path, "drop", "both", address, "t")
    # upstream (towards the binder) in the binder's INPUT, downstream in the connector's
    tail = ["-m", "comment", "--comment", "t", "-j", "DROP"]
    assert both == [
        ("queue", ["INPUT", "-s", "10.0.0.3", "-p", "tcp", "--dport", "5555", *tail]),
        ("worker-1", ["INPUT", "-s", "10.0.0.2", "-p", "tcp", "--sport", "5555", *tail]),
    ]
    assert [h for h, _ in link_rules(path, "drop", "upstream", address, "t")] == ["queue"]
    assert [h for h, _ in link_rules(path, "drop", "downstream", address, "t")] == ["worker-1"]
    reset = link_rules(path, "reset", "both", address, "t")
    assert all(
        r[-8:] == ["!", "--tcp-flags", "RST", "RST", "-j", "REJECT", "--reject-with", "tcp-reset"]
        for _, r in reset
    )


def test_netem_arguments_follow_its_manual() -> None:
    assert netem_args({"delay_ms": 100, "jitter_ms": 20, "correlation_pct": 25}) == [
        "delay", "100ms", "20ms", "25%",
    ]  # fmt: skip
    assert netem_args({"loss_pct": 5, "duplicate_pct": 1, "corrupt_pct": 0.5, "rate_kbit": 800}) == [
        "loss", "5%", "duplicate", "1%", "corrupt", "0.5%", "rate", "800kbit",
    ]  # fmt: skip
    assert netem_args({"delay_ms": 50, "reorder_pct": 10}) == ["delay", "50ms", "reorder", "10%"]


# --- the scenario's contract -----------------------------------------------------------


def test_network_is_proxy_unless_the_scenario_says_hosts(tmp_path: Path) -> None:
    from harness.scenario import load_scenario

    path = tmp_path / "s.toml"
    path.write_text(scenario_text("proxy"))
    proxy = load_scenario(path)
    assert proxy.network == "proxy" and "network" not in proxy.as_dict()
    path.write_text(scenario_text("hosts"))
    assert load_scenario(path).as_dict()["network"] == "hosts"
    path.write_text(scenario_text("lan"))
    with pytest.raises(SetupError, match="network"):
        load_scenario(path)


def test_a_manifest_may_say_hosts_once_and_a_scenario_overrides_it(tmp_path: Path) -> None:
    from harness.manifest import load_manifest
    from harness.scenario import load_scenario

    own = (ROOT / "implementations" / "paranoid_pirate" / "manifest.toml").read_text()
    manifest = tmp_path / "manifest.toml"
    manifest.write_text('network = "hosts"\n' + own)
    assert load_manifest(manifest).as_dict()["network"] == "hosts"
    path = tmp_path / "s.toml"
    path.write_text(f'implementation = "{manifest}"\nduration_s = 10\n')
    assert load_scenario(path).network == "hosts"
    path.write_text(f'implementation = "{manifest}"\nduration_s = 10\nnetwork = "proxy"\n')
    scenario = load_scenario(path)
    # recorded: the manifest alone would say hosts
    assert scenario.network == "proxy" and scenario.as_dict()["network"] == "proxy"
    # a packet fault needs hosts, whoever says it
    path.write_text(
        scenario_text("proxy", "host_partition", "duration_s = 2\n").replace(
            '"paranoid-pirate"', f'"{manifest}"'
        )
    )
    with pytest.raises(SetupError, match="needs network"):
        load_scenario(path)
    assert "network" not in load_manifest("paranoid-pirate").as_dict()
    manifest.write_text('network = "lan"\n' + own)
    with pytest.raises(SetupError) as bad:
        load_manifest(manifest)
    assert str(manifest) in str(bad.value) and "network" in str(bad.value) and "hosts" in str(bad.value)


def test_a_binding_role_of_several_instances_is_refused_on_hosts(tmp_path: Path) -> None:
    """Each instance would bind its own host's address and every connector reach the first
    alone (the others idle, unseen); through the proxy they collide on one port at start."""
    from harness.scenario import load_scenario

    own = (ROOT / "implementations" / "lazy_pirate" / "manifest.toml").read_text()
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(own.replace('ready = "port:frontend"', 'ready = "port:frontend"\nscalable = true', 1))
    path = tmp_path / "s.toml"
    path.write_text(
        f'implementation = "{manifest}"\nduration_s = 10\nnetwork = "hosts"\n[topology]\nserver = 2\n'
    )
    with pytest.raises(SetupError) as refused:
        load_scenario(path)
    assert "topology.server" in str(refused.value) and "would reach the first alone" in str(refused.value)
    path.write_text(f'implementation = "{manifest}"\nduration_s = 10\nnetwork = "hosts"\n')
    assert load_scenario(path).topology["server"] == 1


def test_packet_faults_need_hosts_and_proxy_faults_need_the_proxy(tmp_path: Path) -> None:
    from harness.scenario import load_scenario

    path = tmp_path / "s.toml"
    path.write_text(scenario_text("proxy", "host_partition", "duration_s = 2\n"))
    with pytest.raises(
        SetupError, match='host_partition acts on packets between hosts: it needs network = "hosts"'
    ):
        load_scenario(path)
    # the proxy's partition and disconnect are made of rules on hosts; the rest are refused,
    # each saying what to use there instead
    for kind in ("partition", "disconnect"):
        path.write_text(
            scenario_text("hosts", kind, 'duration_s = 2\ntarget = "link:worker-1"\n').replace(
                'target = "worker-1"\n', ""
            )
        )
        assert load_scenario(path).faults[0].kind == kind
    path.write_text(scenario_text("hosts", "partition", "duration_s = 2\ntoxicity = 0.5\n"))
    with pytest.raises(SetupError, match="toxicity < 1 needs network"):
        load_scenario(path)
    # latency and bandwidth pass the link's flows through a packet queue there
    for kind, extra in (("latency", "latency_ms = 50\n"), ("bandwidth", "rate_kb_s = 8\n")):
        path.write_text(scenario_text("hosts", kind, "duration_s = 2\n" + extra))
        assert load_scenario(path).faults[0].kind == kind
    path.write_text(scenario_text("hosts", "latency", "duration_s = 2\nlatency_ms = 50\ntoxicity = 0.5\n"))
    with pytest.raises(SetupError, match="toxicity < 1 needs network"):
        load_scenario(path)
    path.write_text(scenario_text("hosts", "reset", "duration_s = 2\n"))
    with pytest.raises(SetupError) as refused:
        load_scenario(path)
    assert str(refused.value).endswith(
        'faults[0].kind: reset on worker-1 needs the fault proxy, which network = "hosts" has not; '
        'instead: disconnect (TCP resets of the link at the IP level) or host_partition with how = "reset"'
    )
    path.write_text(scenario_text("hosts", "limit_data", "duration_s = 2\nbytes = 100\n"))
    with pytest.raises(SetupError, match="only a proxy can"):
        load_scenario(path)
    path.write_text(scenario_text("hosts", "netem", "duration_s = 2\n"))
    with pytest.raises(SetupError, match="give netem something to do"):
        load_scenario(path)
    path.write_text(scenario_text("hosts", "host_partition", 'duration_s = 2\npeers = "brokers"\n'))
    with pytest.raises(SetupError, match="'brokers' is no role"):
        load_scenario(path)
    path.write_text(scenario_text("hosts", "host_partition", 'duration_s = 2\npeers = "queue"\n'))
    assert load_scenario(path).faults[0].params["peers"] == "queue"


def test_without_root_hosts_mode_says_so_in_one_line(tmp_path: Path) -> None:
    """`zchaos check` as an unprivileged user: one line, exit 2 (the proxy mode needs nothing)."""
    import tempfile

    # pytest's own folders are its user's alone
    folder = Path(tempfile.mkdtemp(prefix="zchaos-hosts-"))
    folder.chmod(0o755)
    path = folder / "s.toml"
    path.write_text(scenario_text("hosts", "host_partition", "duration_s = 2\n"))
    path.chmod(0o644)
    if os.geteuid() == 0:
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = [*nobody, sys.executable, "-c", "import harness.cli"]
        # a checkout or interpreter only root may read (a CI's /root) is no test of the message
        if subprocess.run(probe, cwd=ROOT, capture_output=True, check=False).returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip("an unprivileged user cannot run this checkout here")
    else:
        nobody = []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)}
    try:
        done = subprocess.run(
            [*nobody, sys.executable, "-m", "harness.cli", "check", str(path)],
            cwd=ROOT, capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'network = "hosts" needs root' in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


# --- real namespaces -------------------------------------------------------------------


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    made = Hosts(["server", "client", "other"])
    try:
        made.open()
    except Exception as exc:
        made.close()
        pytest.skip(f"cannot make network namespaces here: {exc}")
    try:
        yield made
    finally:
        assert made.close() == []


def connect_from(hosts: Hosts, host: str, address: str, port: int, timeout: float) -> str:
    """Connect to address:port from inside ``host``: "ok", "refused" or "timeout"."""
    code = (
        "import socket, sys\n"
        f"s = socket.socket(); s.settimeout({timeout})\n"
        f"try:\n    s.connect(({address!r}, {port})); print('ok')\n"
        "except ConnectionRefusedError: print('refused')\n"
        "except (TimeoutError, socket.timeout): print('timeout')\n"
    )
    done = subprocess.run(
        in_ns(hosts.ns(host), [sys.executable, "-c", code]), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def server(hosts: Hosts) -> Iterator[int]:
    """A listening socket in the ``server`` host (opened there by a child that sends it back)."""
    code = (
        "import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('0.0.0.0', 0)); s.listen(64); print(s.getsockname()[1], flush=True)\n"
        "while True:\n    c, _ = s.accept(); c.close()\n"
    )
    listener = subprocess.Popen(
        in_ns(hosts.ns("server"), [sys.executable, "-c", code]),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert listener.stdout is not None
        yield int(listener.stdout.readline())
    finally:
        listener.kill()
        listener.wait()


@needs_root
def test_hosts_reach_each_other_by_address_and_the_runner_reaches_them(hosts: Hosts, server: int) -> None:
    assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "ok"
    with socket.create_connection((hosts.address("server"), server), timeout=2):
        pass  # the runner's readiness checks come from the bridge's address
    ip = subprocess.run(in_ns(hosts.ns("client"), ["ip", "-o", "-4", "addr"]), capture_output=True, text=True)
    assert hosts.address("client") in ip.stdout and "127.0.0.1" in ip.stdout


@needs_root
@needs_iptables
def test_a_silent_partition_leaves_a_connect_hanging_and_a_reset_refuses_it(
    hosts: Hosts, server: int
) -> None:
    params = {"how": "drop", "direction": "both", "shape": "isolate", "peers": "client"}
    applied, what = add_partition(hosts, 7, "server", params)
    assert what == "isolate (drop, both): server cut from client"
    assert "zchaos-fault-7" in rules_in(hosts.ns("server")) and "zchaos-fault-7" in rules_in(
        hosts.ns("client")
    )
    assert connect_from(hosts, "client", hosts.address("server"), server, 1.0) == "timeout"
    assert connect_from(hosts, "other", hosts.address("server"), server, 2) == "ok", "not a peer: untouched"
    with socket.create_connection((hosts.address("server"), server), timeout=2):
        pass  # the bridge's own address is never cut (readiness after a restart)
    assert applied.remove() == []
    assert "zchaos" not in rules_in(hosts.ns("server")) + rules_in(hosts.ns("client"))
    assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "ok"

    applied, _ = add_partition(hosts, 8, "server", {**params, "how": "reset", "direction": "in"})
    assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "refused"
    assert applied.remove() == []
    assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "ok"


@needs_root
@needs_iptables
def test_a_reset_both_ways_refuses_a_connect_rather_than_hang_it(hosts: Hosts, server: int) -> None:
    """Cut both ways, each side's rule rejected the reset the other's sent, so the connect
    hung as at a silent partition (measured before the fix: timeout)."""
    params = {"how": "reset", "direction": "both", "shape": "isolate", "peers": "client"}
    applied, _ = add_partition(hosts, 9, "server", params)
    try:
        assert connect_from(hosts, "client", hosts.address("server"), server, 3) == "refused"
    finally:
        assert applied.remove() == []


@needs_root
@needs_iptables
def test_a_link_cut_on_hosts_cuts_that_link_and_no_other(hosts: Hosts, server: int) -> None:
    """The proxy's partition (drop) and disconnect (reset) of ``link:client``: its own flows
    to the server's port, not another port between the same two hosts, nor another host."""
    hosts.links = {"link:client": LinkPath("client", "server", server)}
    closed = free_port(hosts, "server")
    applied, what = add_link_cut(hosts, 3, "client", "drop", "both")
    try:
        assert what.startswith("link:client cut at the IP level (packets dropped, both)")
        assert connect_from(hosts, "client", hosts.address("server"), server, 1.0) == "timeout"
        assert connect_from(hosts, "client", hosts.address("server"), closed, 2) == "refused", "another port"
        assert connect_from(hosts, "other", hosts.address("server"), server, 2) == "ok", "another host"
    finally:
        assert applied.remove() == []
    assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "ok"
    applied, _ = add_link_cut(hosts, 4, "link:client", "reset", "both")
    try:
        assert connect_from(hosts, "client", hosts.address("server"), server, 2) == "refused"
    finally:
        assert applied.remove() == []
    assert "zchaos" not in rules_in(hosts.ns("server")) + rules_in(hosts.ns("client"))
    with pytest.raises(HostsError, match="no link for target 'worker-1'"):
        add_link_cut(hosts, 5, "worker-1", "drop", "both")


def free_port(hosts: Hosts, host: str) -> int:
    """A port nothing listens on in ``host``."""
    code = "import socket\ns = socket.socket(); s.bind(('0.0.0.0', 0)); print(s.getsockname()[1])\n"
    done = subprocess.run(in_ns(hosts.ns(host), [sys.executable, "-c", code]), capture_output=True, text=True)
    return int(done.stdout)


@needs_root
@needs_iptables
def test_netem_on_a_host_link_with_the_kernels_netem_or_built_without(hosts: Hosts) -> None:
    """Where the kernel has netem, its qdisc; where not (this project's CI), iptables rules
    and a packet queue in the host (tests/test_packet_emulation.py shows their effects)."""
    why = netem_missing()
    applied, what = add_netem(hosts, "server", {"delay_ms": 50, "direction": "both"}, 6)
    assert "delay 50ms" in what
    assert (
        "zchaos-netem-probe"
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    shown = subprocess.run(
        in_ns(hosts.ns("server"), ["tc", "qdisc", "show", "dev", "eth0"]), capture_output=True, text=True
    )
    if why is None:
        assert "netem" in shown.stdout
    else:
        assert "netem" in why and "\n" not in why and "without netem" in what
        assert "NFQUEUE --queue-num 6" in rules_in(hosts.ns("server"))
        assert [q.proc.poll() for q in applied.queues] == [None]
    assert applied.remove() == []
    assert isinstance(applied, Applied) and "zchaos" not in rules_in(hosts.ns("server"))
    assert applied.queues == [] and applied.counts["packets"] == 0


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (a zombie is: a runner test before may have made this
    process the subreaper its orphans go to)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def owned_by(pid: int) -> list[str]:
    """The namespaces and links that carry runner ``pid``'s mark."""
    found = []
    for name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
        m = MARK.match(name)
        if m and int(m[1]) == pid:
            found.append(name)
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout)
    found += [
        lk["ifname"] for lk in links if (m := MARK.fullmatch(lk.get("ifalias", ""))) and int(m[1]) == pid
    ]
    return found


@needs_root
@needs_iptables
def test_what_a_killed_runner_made_is_swept_and_a_live_ones_kept(hosts: Hosts) -> None:
    """A packet fault's queue (a process in a host) dies with its runner; the namespaces and
    links wait for the next run's sweep."""
    code = (
        "import time; from chaos.hosts import Hosts; from chaos.packets import add_emulated\n"
        "h = Hosts(['a', 'b']); h.open()\n"
        "applied, _ = add_emulated(h, 5, 'a', {'delay_ms': 50, 'direction': 'both'})\n"
        "print(applied.queues[0].proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    try:
        assert proc.stdout is not None
        queue = int(proc.stdout.readline())
        assert "packet_queue" in Path(f"/proc/{queue}/cmdline").read_text()
        assert len(owned_by(proc.pid)) == 5  # two namespaces, two veths, the bridge
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wait_for(lambda: ended(queue), 10, "the packet queue to die with its runner")
    removed, failed = remove_leftovers()
    # (not counted: a veth goes with its namespace, by the kernel in its own time, and a sweep
    # in another test's run may come first)
    assert failed == [], (removed, failed)
    assert owned_by(proc.pid) == []
    assert len(owned_by(os.getpid())) == 7, "a live runner's stay"


# --- whole runs ------------------------------------------------------------------------


@needs_root
@needs_iptables
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_runner_killed_mid_run_in_hosts_mode_leaves_nothing_after_the_next_sweep(tmp_path: Path) -> None:
    """SIGKILL the runner while a partition is in place: its processes die with it (their
    death signal), and what it made on the host goes at the next run's sweep."""
    scenario = ROOT / "tests" / "hosts" / "paranoid-pirate-host-partition.toml"
    runs = tmp_path / "runs"
    with run_process(scenario, runs, "--no-report", output=False) as runner:
        wait_for(lambda: nemesis_events(runs, "fault_start"), 120, "the partition to start")
        assert len(owned_by(runner.pid)) == 9  # four hosts and the bridge
        ns = [n for n in owned_by(runner.pid) if n.startswith("zchaos-")]
        assert any("zchaos-fault-1" in rules_in(n) for n in ns)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    wait_for(lambda: not processes_of(runs), 30, "the run's processes to die with their runner")
    removed, failed = remove_leftovers()
    assert failed == [] and owned_by(runner.pid) == [], (removed, failed)
    assert "zchaos" not in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout


def _run(scenario: Path, runs: Path) -> dict:
    from harness.runner import run_scenario
    from harness.scenario import load_scenario

    result = run_scenario(load_scenario(scenario), runs_dir=runs)
    assert result.verdict is not None
    return result.verdict


@needs_root
@needs_iptables
@pytest.mark.soak
@pytest.mark.timeout(900)
def test_paranoid_pirate_passes_a_silent_partition_on_hosts(tmp_path: Path, spark: object) -> None:
    verdict = _run(ROOT / "tests" / "hosts" / "paranoid-pirate-host-partition.toml", tmp_path)
    checks = {n: (c["status"], c["summary"]) for n, c in verdict["checks"].items()}
    assert verdict["outcome"] == "passed", checks
    assert owned_by(os.getpid()) == []


SUBJECT = ROOT / "tests" / "reconnect_subject"


@needs_root
@needs_iptables
@pytest.mark.soak
@pytest.mark.timeout(900)
def test_a_reconnect_without_a_connect_timeout_fails_a_silent_partition_not_a_proxy_disconnect(
    tmp_path: Path, spark: object
) -> None:
    """Issue 37's acceptance: the same outage of the only worker's network, 16 s. Through the
    proxy its connect is refused and ZeroMQ retries every 100 ms (measured: recovery 0.11 s);
    at the IP level its SYN is lost and TCP's next try comes ~7 s after the end (6.96 s)."""
    silent = _run(SUBJECT / "silent-partition.toml", tmp_path / "hosts")
    assert silent["checks"]["recovery"]["status"] == "violated", silent["checks"]["recovery"]["summary"]
    proxy = _run(SUBJECT / "proxy-disconnect.toml", tmp_path / "proxy")
    assert proxy["outcome"] == "passed", {n: c["summary"] for n, c in proxy["checks"].items()}


@needs_root
@needs_iptables
@pytest.mark.soak
@pytest.mark.timeout(900)
def test_its_twin_with_a_connect_timeout_passes_the_silent_partition(tmp_path: Path, spark: object) -> None:
    scenario = tmp_path / "twin.toml"
    scenario.write_text(
        (SUBJECT / "silent-partition.toml")
        .read_text()
        .replace('"manifest.toml"', f'"{SUBJECT / "manifest.toml"}"')
        + "\n[options]\nconnect_timeout_ms = 1000\n"
    )
    verdict = _run(scenario, tmp_path / "runs")
    assert verdict["outcome"] == "passed", {n: c["summary"] for n, c in verdict["checks"].items()}


#: Issue 37's "built-in families pass their stock scenarios in hosts mode": one stock scenario
#: of each built-in implementation, run with network = "hosts" (the hosts-mode stock scenario
#: where one exists; a link partition, made of rules there, where the family has one that
#: passes). Each PASSED here, one at a time through the slot (the README's hosts section).
FAMILIES_ON_HOSTS = [
    ("binary-star", "binary-star-partition-peers"),
    ("dwork", "dwork-kill-worker"),
    ("freelance", "freelance-partition-one-server"),
    ("lazy-pirate", "lazy-pirate-kill-server"),
    ("lazy-pirate-failover", "lazy-pirate-failover-partition"),
    ("majordomo", "majordomo-hosts-partition-halves"),
    ("majordomo-async", "majordomo-async-kill-busy-worker"),
    ("majordomo-mixed", "majordomo-mixed-kill-busy-worker"),
    ("majordomo-noresend", "majordomo-noresend-kill-busy-worker"),
    ("paranoid-pirate", "paranoid-pirate-hosts-partition-worker"),
    ("pingpong", "pingpong-kill-busy-worker"),
    ("pingpong-resend", "pingpong-resend-kill-busy-worker"),
    ("reliable-sketch", "sketch-kill-restart-servers"),
    ("simple-pirate", "simple-pirate-kill-busy-worker"),
    ("titanic", "titanic-hosts-reset-worker"),
    ("wmp", "wmp-kill-worker"),
]


def test_every_built_in_implementation_has_a_hosts_run_here() -> None:
    from harness.manifest import builtin_manifests

    assert sorted(impl for impl, _ in FAMILIES_ON_HOSTS) == sorted(builtin_manifests())


@needs_root
@needs_iptables
@pytest.mark.soak
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("implementation", "name"), FAMILIES_ON_HOSTS, ids=[i for i, _ in FAMILIES_ON_HOSTS])
def test_a_built_in_family_passes_its_stock_scenario_on_hosts(
    tmp_path: Path, spark: object, implementation: str, name: str
) -> None:
    from harness.calibrate import calibrated
    from harness.runner import run_scenario
    from harness.scenario import load_scenario

    scenario = load_scenario(ROOT / "scenarios" / f"{name}.toml", sets=['network="hosts"'])
    assert scenario.manifest.name == implementation and scenario.network == "hosts"
    # Some stock scenarios size their load from the system's measured capacity, as `zchaos run` does.
    result = run_scenario(calibrated(scenario, runs_dir=tmp_path), runs_dir=tmp_path)
    assert result.verdict is not None
    checks = {n: (c["status"], c["summary"]) for n, c in result.verdict["checks"].items()}
    assert result.verdict["outcome"] == "passed", checks
    assert owned_by(os.getpid()) == []


#: The stock scenarios of the packet faults built without netem where the kernel has none
#: (tests/test_packet_emulation.py shows each effect): each PASSED once through the slot.
PACKET_FAULT_SCENARIOS = [
    "paranoid-pirate-hosts-netem-queue",
    "majordomo-hosts-netem-broker",
    "majordomo-hosts-slow-links",
    "titanic-hosts-netem-titanic",
]


@needs_root
@needs_iptables
@pytest.mark.soak
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", PACKET_FAULT_SCENARIOS)
def test_a_stock_packet_fault_scenario_passes_on_hosts(tmp_path: Path, spark: object, name: str) -> None:
    verdict = _run(ROOT / "scenarios" / f"{name}.toml", tmp_path)
    checks = {n: (c["status"], c["summary"]) for n, c in verdict["checks"].items()}
    assert verdict["outcome"] == "passed", checks
    assert owned_by(os.getpid()) == []


def test_a_namespace_another_sweep_took_first_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs sweep at once (CI: test_hosts failed on "Cannot remove namespace file ... No
    such file or directory"): a dead runner's namespace gone between the listing and the
    delete is what the sweep wanted, not a failure; one still there after a failed delete is."""
    from chaos import hosts as hosts_module

    monkeypatch.setattr(hosts_module.os, "geteuid", lambda: 0)
    monkeypatch.setattr(hosts_module.shutil, "which", lambda _: "/sbin/ip")
    monkeypatch.setattr(hosts_module, "NETNS_DIR", tmp_path)
    monkeypatch.setattr(hosts_module, "_dead", lambda mark: mark.startswith("zchaos-1."))
    (tmp_path / "zchaos-1.2-1").touch()  # taken by the other sweep as this one deletes it
    (tmp_path / "zchaos-1.2-2").touch()  # a delete that fails and leaves it

    def run_cmd(argv: list[str], *, check: bool = True) -> str:
        if argv[:3] == ["ip", "netns", "delete"]:
            if argv[3].endswith("-1"):
                (tmp_path / argv[3]).unlink()
            raise HostsError(f"{' '.join(argv)}: Cannot remove namespace file")
        return "[]" if "link" in argv else ""

    monkeypatch.setattr(hosts_module, "run_cmd", run_cmd)
    removed, failed = remove_leftovers()
    assert removed == []
    assert failed == ["ip netns delete zchaos-1.2-2: Cannot remove namespace file"]
