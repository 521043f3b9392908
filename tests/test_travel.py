"""Stock scenarios that travel (issue 33 parts 2 and 3): run against another implementation
than the one a scenario was written for (``--set implementation=PATH``), its ``[expect]``
is set aside and the settings the other lacks are skipped, each with a note; and a reply
deadline of clients that never resend comes from the system's own timers, with a warning
where a number given falls short of them. Whole runs: tests/test_travel_runs.py.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from contract.errors import SetupError
from contract.promises import timer_deadline_s
from contract.rundir import RunDir
from harness.progress import Progress
from harness.scenario import load_scenario
from tests.procs import ROOT

SCENARIOS = ROOT / "scenarios"
RESTART_QUEUE = SCENARIOS / "simple-pirate-restart-queue.toml"  # expects recovery, steady_state violated
NORESEND = SCENARIOS / "majordomo-noresend-kill-busy-worker.toml"  # kills every worker at 5 and 11 s
PIRATE_QUEUE = ROOT / "tests" / "blackbox" / "pirate-queue.toml"
BLACKBOX_MDP = ROOT / "tests" / "blackbox" / "mdp-broker.toml"  # sync MDP clients only, no work_ms
STANDARD_EXPIRY = ROOT / "tests" / "standard_expiry" / "majordomo.toml"  # 2.5 s x 3 heartbeats
TWELVE = "clients.noresend.options.reply_deadline_s=12.0"  # what fit our broker's 3 s expiry only


# --- [expect] is about the implementation it names ---------------------------------------


@pytest.mark.parametrize(
    "implementation",
    ["simple-pirate", str(ROOT / "implementations" / "simple_pirate" / "manifest.toml")],
    ids=["by-name", "by-path"],
)
def test_an_expectation_applies_to_the_implementation_the_scenario_was_written_for(implementation) -> None:
    scenario = load_scenario(RESTART_QUEUE, sets=[f"implementation={implementation}"])
    assert scenario.expect_violated == ("recovery", "steady_state")
    assert scenario.expect_set_aside == () and scenario.notes == ()


def test_an_expectation_is_set_aside_on_another_implementation_and_says_why() -> None:
    scenario = load_scenario(RESTART_QUEUE, sets=[f"implementation={PIRATE_QUEUE}"])
    assert scenario.expect_violated == ()  # every check judged: their broken queue cannot pass
    assert scenario.expect_set_aside == ("recovery", "steady_state")
    assert scenario.written_for == "simple-pirate"
    (note,) = scenario.notes
    assert "is about simple-pirate, not pirate-queue" in note and "set aside" in note
    # run.json and replays carry it: the source names the implementation it was written for
    assert scenario.source["written_for"] == "simple-pirate"
    assert scenario.as_dict()["expect_set_aside"] == ["recovery", "steady_state"]


def test_an_expectation_may_name_its_implementation(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    expect = '[expect]\nviolated = ["recovery"]\n'
    path.write_text(f'implementation = "{PIRATE_QUEUE}"\n{expect}implementation = "simple-pirate"\n')
    assert load_scenario(path).expect_set_aside == ("recovery",)
    path.write_text(f'implementation = "{PIRATE_QUEUE}"\n{expect}')
    assert load_scenario(path).expect_violated == ("recovery",)


# --- settings the other implementation lacks ---------------------------------------------


def test_options_of_the_scenarios_own_implementation_are_skipped_on_another_with_a_note(tmp_path) -> None:
    scenario = load_scenario(NORESEND, sets=[f"implementation={BLACKBOX_MDP}"])
    assert "work_ms" not in scenario.options
    assert "[options] work_ms: an option of majordomo-noresend" in "\n".join(scenario.notes)
    path = tmp_path / "s.toml"  # settle_ms: an option of Lazy Pirate clients, not of MDP ones
    path.write_text('implementation = "simple-pirate"\n[load]\nclient = { settle_ms = 5 }\n')
    scenario = load_scenario(path, sets=[f"implementation={BLACKBOX_MDP}"])
    assert not any("settle_ms" in kind.options for kind in scenario.load.clients)
    assert "[load] client settle_ms: a client option of simple-pirate" in "\n".join(scenario.notes)


def test_an_unknown_option_is_still_refused_on_the_scenarios_own_implementation(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="not an option of majordomo-noresend"):
        load_scenario(NORESEND, sets=["options.wrok_ms=5"])
    with pytest.raises(SetupError, match="'windoe' is not a client option"):
        load_scenario(NORESEND, sets=["load.client.windoe=5"])


def test_a_scenario_brings_the_asynchronous_client_to_a_majordomo_broker_of_yours() -> None:
    """Before: "'window' is not a client option" with a broker whose manifest has sync clients only."""
    stock = SCENARIOS / "majordomo-async-kill-busy-worker.toml"
    theirs = load_scenario(stock, sets=[f"implementation={BLACKBOX_MDP}"])
    kinds = {k.name: k for k in theirs.load.clients}
    assert kinds["mdp_sync"].adapter == "mdp_sync"  # their own clients stay
    brought = kinds["mdp_async"]
    assert (brought.adapter, brought.endpoints, brought.in_order) == ("mdp_async", ("frontend",), False)
    assert brought.options == {"window": 2, "timeout_ms": 5000, "retries": 2, "mmi_every": 25}
    # on the implementation it was written for, the same table overrides its kind of that name
    ours = load_scenario(stock)
    (kind,) = ours.load.clients
    assert kind.name == "mdp_async" and kind.options["window"] == 2 and not kind.in_order


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            '[clients.x]\nadapter = "lazy_pirate"\n',
            "adapter 'lazy_pirate' speaks lazy-pirate; the clients of blackbox-mdp",
        ),
        (
            '[clients.mdp_sync]\nadapter = "mdp_async"\n',
            "kind 'mdp_sync' of blackbox-mdp uses adapter 'mdp_sync'",
        ),
        ('[clients.x]\nadapter = "mdp_async"\nendpoint = "nowhere"\n', "'nowhere' is not in [endpoints]"),
        ('[clients.x]\nadapter = "mdp_asink"\n', "unknown client adapter 'mdp_asink'"),
    ],
)
def test_a_kind_the_scenario_cannot_bring_is_refused_naming_the_key(tmp_path: Path, table, message) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'implementation = "{BLACKBOX_MDP}"\n{table}')
    with pytest.raises(SetupError) as caught:
        load_scenario(path)
    assert message in str(caught.value) and "clients" in str(caught.value.where)


# --- reply deadlines from the system's own timers ----------------------------------------


def test_the_timer_deadline_covers_one_expiry_per_outage_a_request_can_live_through() -> None:
    # two kills 6 s apart: one request can live through both
    assert timer_deadline_s([5, 11], 7.5, 10.0) == (25.0, 2)
    assert timer_deadline_s([5, 11], 3.0, 10.0) == (16.0, 2)
    # far apart, each request lives through one at most
    assert timer_deadline_s([5, 60], 7.5, 10.0) == (17.5, 1)
    assert timer_deadline_s([], 7.5, 10.0) == (10.0, 0)


def test_a_deadline_that_the_systems_expiry_outlasts_is_warned_of() -> None:
    """The false alarm of issue 33: a correct broker expiring workers after 7.5 s answers a
    request that lived through both kills at 19.4 s, past a deadline of 12 s."""
    # the stock scenario says "auto" for its no-resend kind; a number given is kept, with a warning
    scenario = load_scenario(NORESEND, sets=[f"implementation={STANDARD_EXPIRY}", TWELVE])
    (warning,) = scenario.warnings
    assert "client kind noresend: reply_deadline_s = 12 s cannot cover" in warning
    assert "2 outage(s)" in warning and "expiry 7.5 s" in warning and "= 25 s" in warning


def test_an_auto_deadline_is_computed_from_the_declared_expiry_and_the_plan() -> None:
    scenario = load_scenario(NORESEND, sets=[f"implementation={STANDARD_EXPIRY}"])
    assert scenario.warnings == ()
    noresend = next(k for k in scenario.load.clients if k.name == "noresend")
    assert noresend.options["reply_deadline_s"] == 25.0
    assert scenario.manifest.clients == scenario.load.clients  # what run.json records
    assert any("reply_deadline_s = auto = 25 s" in note for note in scenario.notes)
    # the same scenario with one kill: 10 s recovery + one 7.5 s expiry
    one = load_scenario(NORESEND, sets=[f"implementation={STANDARD_EXPIRY}", "faults.0.at_s=[5]"])
    assert next(k for k in one.load.clients if k.name == "noresend").options["reply_deadline_s"] == 17.5


def test_another_seed_gets_the_auto_deadline_of_its_own_plan(tmp_path: Path, monkeypatch) -> None:
    """The kills at random times: how many one request can live through, and so the "auto"
    deadline, is the seed's. ``--seeds`` once ran every seed with the first seed's deadline.
    The seed is still a field replaced: nothing is parsed again."""
    from harness import scenario as scenario_module
    from harness.config import dump_toml, load_toml
    from harness.scenario import fault_plan, with_seed

    data = load_toml(NORESEND, "scenario")
    del data["faults"][0]["at_s"]
    data["faults"][0]["random"] = {"count": 2, "between": [3, 55]}
    data["duration_s"] = 60
    data["implementation"] = str(STANDARD_EXPIRY)
    path = tmp_path / "random-kills.toml"
    path.write_text(dump_toml(data))

    def deadline(scenario) -> float:
        return next(k for k in scenario.load.clients if k.name == "noresend").options["reply_deadline_s"]

    first = load_scenario(path, sets=["seed=1"])
    monkeypatch.setattr(scenario_module, "parse_scenario", lambda *a, **k: pytest.fail("parsed again"))
    reseeded = {seed: with_seed(first, seed) for seed in range(2, 12)}
    monkeypatch.undo()
    seen = set()
    for seed, again in reseeded.items():
        own = load_scenario(path, sets=[f"seed={seed}"])
        assert fault_plan(again) == fault_plan(own)
        assert deadline(again) == deadline(own), seed
        assert again.manifest.clients == again.load.clients == own.load.clients  # what run.json records
        assert again.notes == own.notes and again.warnings == own.warnings
        seen.add(deadline(again))
    assert len(seen) > 1, "the seeds' plans should call for different deadlines"


def test_check_prints_the_warning(capsys) -> None:
    from harness.cli import main

    assert main(["check", str(NORESEND), "--set", f"implementation={STANDARD_EXPIRY}", "--set", TWELVE]) == 0
    out = capsys.readouterr().out
    assert "warning: client kind noresend: reply_deadline_s = 12 s cannot cover" in out
    assert main(["check", str(NORESEND), "--set", f"implementation={STANDARD_EXPIRY}"]) == 0
    assert "cannot cover" not in capsys.readouterr().out


# --- the terminal ----------------------------------------------------------------------


def test_an_expected_violation_that_did_not_show_says_so_on_its_line(tmp_path: Path) -> None:
    out = io.StringIO()
    verdict = {
        "outcome": "violated",
        "exit_code": 1,
        "checks": {
            "recovery": {
                "status": "held",
                "outcome": "violated",
                "expected": True,
                "summary": "recovered in 2 s",
            },
            "no_lost": {"status": "held", "outcome": "passed", "expected": False, "summary": "0 lost"},
        },
        "notes": ["[expect] violated = ['x'] is about a, not b: set aside"],
    }
    Progress(out=out, stream=io.StringIO()).verdict(verdict, RunDir(tmp_path))
    lines = out.getvalue().splitlines()
    recovery = next(line for line in lines if "recovery" in line)
    assert recovery.split()[0] == "FAIL" and "expected to be violated: the run did not show it" in recovery
    assert next(line for line in lines if "no_lost" in line).split()[0] == "ok"
    assert "  note: [expect] violated = ['x'] is about a, not b: set aside" in lines
