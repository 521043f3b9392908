"""Client kinds in manifests and scenarios: several kinds, their options validated before
anything runs (naming the file, the key and the adapter's known options), scenario
overrides of client options and promises, and `zchaos check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contract.errors import SetupError
from harness.manifest import load_manifest
from harness.scenario import load_scenario
from tests.procs import ROOT

MANIFEST = """
name = "two-kinds"

[[clients]]
name = "sync"
adapter = "mdp_sync"
endpoint = "frontend"
options = {{ timeout_ms = 2500 }}
{extra}

[[clients]]
name = "async"
adapter = "mdp_async"
endpoint = "frontend"
options = {{ window = 4 }}
in_order = false
users = 1

[endpoints]
frontend = "broker"

[roles.broker]
command = ["{{python}}", "-c", "pass", "{{bind.frontend}}"]
ready = "none"

[promises]
checks = ["no_lost", "in_order"]
latency_p99_ms = 250.0
"""

SCENARIO = """
implementation = "m.toml"
duration_s = 10
[load]
users = 4
{load}
{rest}
"""


def write(tmp_path: Path, extra: str = "", load: str = "", rest: str = "", manifest: str = MANIFEST) -> Path:
    (tmp_path / "m.toml").write_text(manifest.format(extra=extra))
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(load=load, rest=rest))
    return path


def test_several_kinds_with_their_shares_and_order_promises(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path))
    sync, async_ = scenario.load.clients
    assert (sync.name, sync.adapter, sync.endpoints, sync.weight, sync.users, sync.in_order) == (
        "sync", "mdp_sync", ("frontend",), 1, 0, True
    )  # fmt: skip
    assert (async_.users, async_.in_order, async_.options) == (1, False, {"window": 4})


def test_the_single_client_table_still_works() -> None:
    manifest = load_manifest("paranoid-pirate")
    (kind,) = manifest.clients
    assert (kind.name, kind.adapter, kind.endpoints) == ("lazy_pirate", "lazy_pirate", ("frontend",))


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ("", None, None),
        ('weight = "2"', "clients[0].weight", "expected an integer"),
        ('endpoints = ["frontend"]', "clients[0]", "give endpoint"),
    ],
)
def test_kind_tables_are_validated(
    tmp_path: Path, extra: str, where: str | None, message: str | None
) -> None:
    path = write(tmp_path, extra=extra)
    if message is None:
        load_scenario(path)
        return
    with pytest.raises(SetupError) as info:
        load_scenario(path)
    assert where in str(info.value) and message in str(info.value)
    assert "m.toml" in str(info.value)


def test_a_misspelt_client_option_in_the_manifest_names_file_key_and_known_options(tmp_path: Path) -> None:
    manifest = MANIFEST.replace("{{ timeout_ms = 2500 }}", "{{ timeout_msx = 2500 }}")
    with pytest.raises(SetupError) as info:
        load_scenario(write(tmp_path, manifest=manifest))
    text = str(info.value)
    assert "m.toml: clients[0].options.timeout_msx" in text
    assert "unknown client option" in text and "timeout_ms = 2500" in text and "mdp_sync" in text


def test_an_option_of_the_wrong_type_and_an_unknown_adapter(tmp_path: Path) -> None:
    manifest = MANIFEST.replace("{{ window = 4 }}", '{{ window = "four" }}')
    with pytest.raises(SetupError, match=r"clients\[1\]\.options\.window: expected an integer"):
        load_scenario(write(tmp_path, manifest=manifest))
    manifest = MANIFEST.replace('adapter = "mdp_async"', 'adapter = "mdp_asink"')
    with pytest.raises(
        SetupError, match=r"clients\[1\]\.adapter: unknown client adapter 'mdp_asink' \(known: .*mdp_async"
    ):
        load_scenario(write(tmp_path, manifest=manifest))
    manifest = MANIFEST.replace("{{ window = 4 }}", "{{ window = 0 }}")
    with pytest.raises(SetupError, match="window: must be at least 1"):
        load_scenario(write(tmp_path, manifest=manifest))


def test_a_client_of_one_endpoint_is_not_given_two(tmp_path: Path) -> None:
    manifest = MANIFEST.replace('frontend = "broker"', 'frontend = "broker"\nother = "broker"').replace(
        'name = "sync"\nadapter = "mdp_sync"\nendpoint = "frontend"',
        'name = "sync"\nadapter = "mdp_sync"\nendpoints = ["frontend", "other"]',
    )
    with pytest.raises(SetupError, match=r"clients\[0\]\.endpoints: adapter 'mdp_sync' uses 1 endpoint"):
        load_scenario(write(tmp_path, manifest=manifest))


def test_scenarios_override_client_options_and_promises(tmp_path: Path) -> None:
    rest = """
[clients.sync]
options = { timeout_ms = 9000 }
weight = 3
[promises]
latency_p99_ms = 400
"""
    scenario = load_scenario(write(tmp_path, load="client = { retries = 5 }", rest=rest))
    sync, async_ = scenario.load.clients
    assert sync.options == {"timeout_ms": 9000, "retries": 5} and sync.weight == 3
    assert async_.options == {"window": 4, "retries": 5}  # both adapters know retries
    assert scenario.manifest.promises.latency_p99_ms == 400.0
    assert scenario.manifest.clients == scenario.load.clients  # what the run records


def test_a_scenario_switches_a_client_kind_off_with_users_0(tmp_path: Path) -> None:
    """Before: users = 0 was read as "a share by weight" and the kind still ran."""
    scenario = load_scenario(write(tmp_path, rest="[clients.async]\nusers = 0"))
    assert [k.name for k in scenario.load.clients] == ["sync"]
    assert [k.name for k in scenario.manifest.clients] == ["sync"]  # what the run records
    both_off = "[clients.async]\nusers = 0\n[clients.sync]\nusers = 0"
    with pytest.raises(SetupError, match=r"s\.toml: clients: every client kind has users = 0"):
        load_scenario(write(tmp_path, rest=both_off))
    with pytest.raises(SetupError, match=r"clients\.sync\.weight: .*users = 0 switches the kind off"):
        load_scenario(write(tmp_path, rest="[clients.sync]\nweight = 0"))


@pytest.mark.parametrize(
    ("load", "rest", "where", "message"),
    [
        ("client = { timeout = 1 }", "", "s.toml: load.client", "'timeout' is not a client option"),
        (
            "",
            "[clients.sync]\noptions = { timeout_msx = 1 }",
            "s.toml: clients.sync.options.timeout_msx",
            "knows: service",
        ),
        (
            "",
            "[clients.sync]\noptions = { timeout_ms = 'x' }",
            "clients.sync.options.timeout_ms",
            "an integer",
        ),
        ("", "[clients.nope]\nweight = 2", "s.toml: clients.nope", "no client kind 'nope'"),
        ("", "[promises]\nlatency_p99 = 3", "s.toml: promises.latency_p99", "not a promise"),
        ("", "[promises]\nchecks = []", "s.toml: promises.checks", "not a promise"),
        # Checked as the manifest's own are, not only by type.
        ("", "[promises]\nexpiry_ms = 'heartbeat * 2'", "s.toml: promises.expiry_ms", "'heartbeat' is not"),
        ("", "[promises]\navailability_floor = 1.5", "s.toml: promises.availability_floor", "at most 1"),
        ("", "[promises]\nsurvives = ['sometimes']", "s.toml: promises.survives", "sometimes"),
        ("", "[promises]\nexpiry_ms = -4", "s.toml: promises.expiry_ms", "at least 0"),
        ("", "[clients.sync]\nusers = 4", "s.toml: load.users", "cannot hold"),
    ],
)
def test_scenario_overrides_are_validated(
    tmp_path: Path, load: str, rest: str, where: str, message: str
) -> None:
    with pytest.raises(SetupError) as info:
        load_scenario(write(tmp_path, load=load, rest=rest))
    assert where in str(info.value) and message in str(info.value)


def zchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_zchaos_check_validates_without_running(tmp_path: Path) -> None:
    good = zchaos("check", str(write(tmp_path)))
    assert good.returncode == 0, good.stderr
    assert "valid" in good.stdout and "client kind async: mdp_async, 1 users" in good.stdout
    assert not list(tmp_path.glob("runs")) and not Path(ROOT / "runs").joinpath("s").exists()
    bad = zchaos("check", str(write(tmp_path, rest="[clients.sync]\noptions = { timeout_msx = 1 }")))
    assert bad.returncode == 2
    assert "clients.sync.options.timeout_msx" in bad.stderr and "Traceback" not in bad.stderr
    assert "timeout_ms = 2500" in bad.stderr  # the adapter's known options, with defaults
    assert zchaos("run", "--check", str(write(tmp_path))).returncode == 0


def test_figures_per_kind_from_the_history(spark) -> None:
    from reports.history_frame import events_frame
    from reports.metrics import client_errors, client_kinds

    def ev(ev: str, cid: str, seq: int, kind: str | None, **more) -> dict:
        return {
            "ts": seq,
            "src": cid,
            "ev": ev,
            "cid": cid,
            "seq": seq,
            "rid": f"{cid}:{seq}",
            "kind": kind,
            **more,
        }

    events = events_frame(
        spark,
        [
            ev("send", "client-1", 1, "a", attempt=1),
            ev("reply", "client-1", 1, "a", ok=True, latency_us=1000, endpoint="primary"),
            ev("send", "client-1", 2, "a", attempt=1),
            ev("retry", "client-1", 2, "a", attempt=2),
            ev("send", "client-1", 2, "a", attempt=2),
            ev("reply", "client-1", 2, "a", ok=False, latency_us=3000, endpoint="backup"),
            ev("send", "client-2", 1, "b", attempt=1),
            ev("lost", "client-2", 1, "b", reason="deadline"),
            ev("send", "client-3", 1, "b", attempt=1),
            ev("abandon", "client-3", 1, "b", reason="gave up"),
            ev("send", "client-9", 1, None, attempt=1),  # a history from before kinds
            {"ts": 9, "src": "client-3", "ev": "client_error", "cid": "client-3", "kind": "b",
             "reason": "exit", "code": 3, "detail": "client program exited early (code 3)"},
        ],
    )  # fmt: skip
    kinds = client_kinds(events)
    assert set(kinds) == {"a", "b", "(unnamed)"}
    a, b = kinds["a"], kinds["b"]
    assert (a["clients"], a["requests"], a["sends"], a["replies"], a["replies_not_ok"], a["retries"]) == (
        1, 2, 3, 2, 1, 1
    )  # fmt: skip
    assert a["latency_ms"]["max"] == 3.0 and a["replies_by_endpoint"] == {"backup": 1, "primary": 1}
    assert (b["clients"], b["requests"], b["replies"], b["lost"], b["abandons"]) == (2, 2, 0, 1, 1)
    assert b["latency_ms"]["p99"] is None
    errors = client_errors(events)
    assert errors["count"] == 1 and errors["by_reason"] == {"exit": 1}
    assert errors["first"][0]["code"] == 3 and errors["first"][0]["cid"] == "client-3"


def test_requests_per_kind_are_the_distinct_seqs_sent_whatever_their_values(spark) -> None:
    """client_kinds counts a kind's requests from bits of the seqs (64 per word), not by
    grouping each request: seqs on both sides of a word's edge, negative, huge, resent, or
    missing each count as in a grouping by (client, seq)."""
    from reports.history_frame import events_frame
    from reports.metrics import client_kinds

    seqs = [-65, -64, -1, 0, 63, 64, 64, 2**62, -(2**63), None, None]
    events = [
        {"ts": i, "src": "c-1", "ev": "send", "cid": "c-1", "seq": seq, "rid": f"c-1:{seq}", "attempt": 1}
        for i, seq in enumerate(seqs)
    ]
    events += [
        {"ts": 90, "src": "c-2", "ev": "send", "cid": "c-2", "seq": 64, "rid": "c-2:64", "attempt": 1},
        # A client that sent nothing still counts as a client of its kind, with no request.
        {"ts": 91, "src": "c-3", "ev": "unexpected", "cid": "c-3", "detail": "stray"},
    ]
    kinds = client_kinds(events_frame(spark, events))
    expected = len({(e["cid"], e["seq"]) for e in events if e["ev"] == "send"})
    figures = kinds["(unnamed)"]
    assert (figures["requests"], figures["sends"], figures["clients"]) == (expected, 12, 3)
    assert expected == 10


# --- a whole run ----------------------------------------------------------------------------

MIXED = ROOT / "scenarios" / "majordomo-mixed-kill-busy-worker.toml"


@pytest.mark.slow
def test_sync_and_async_clients_on_one_broker_with_figures_per_kind(tmp_path: Path, spark) -> None:
    from contract.history import read_events
    from harness.runner import run_scenario
    from tests.doubles import as_our_system

    result = run_scenario(as_our_system(load_scenario(MIXED)), runs_dir=tmp_path / "runs")
    verdict = result.verdict
    assert result.exit_code == 0, {n: c["summary"] for n, c in verdict["checks"].items()}
    kinds = verdict["metrics"]["client_kinds"]
    assert set(kinds) == {"sync", "async"}
    for figures in kinds.values():
        assert figures["clients"] == 2 and figures["replies"] > 50
        assert figures["requests"] >= figures["replies"] and figures["latency_ms"]["p99"] is not None
        assert {"retries", "abandons", "unexpected", "replies_not_ok"} <= figures.keys()
    # The async clients keep a window of 10 in flight: far more requests than the sync ones.
    assert kinds["async"]["requests"] > 2 * kinds["sync"]["requests"]
    events = [e for e in read_events(result.run.history) if e["ev"] in ("send", "reply", "abandon", "retry")]
    by_client = {}
    for e in events:
        by_client.setdefault(e["cid"], set()).add(e.get("kind"))
    assert sorted(map(sorted, by_client.values())) == [["async"], ["async"], ["sync"], ["sync"]]
    in_order = verdict["checks"]["in_order"]
    assert in_order["figures"]["kinds_checked"] == ["sync"]
    assert in_order["figures"]["replies"] == kinds["sync"]["replies"]  # only the kind that promises it
    report = result.run.report_html.read_text()
    assert 'id="client-kinds"' in report and "<code>async</code>" in report and "<code>sync</code>" in report
