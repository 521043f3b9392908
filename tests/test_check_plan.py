"""`zchaos check` says before a run what the run would only find out: a role's program that
cannot start, the checks the plan can only leave unknown (and why, and how to fix it), the
promises as the scenario makes them (issue 22, items 5 and 8)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from harness.cli import main

ROOT = Path(__file__).resolve().parent.parent


def check(*args: str) -> tuple[int, str, str]:
    """``zchaos check ARGS``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", *args])
    return code, out.getvalue(), err.getvalue()


def manifest_with_broker(tmp_path: Path, command: str) -> Path:
    """A scenario of a manifest whose broker runs ``command`` (TOML list text) under probe workers."""
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        'name = "mine"\n[client]\nadapter = "mdp_sync"\nendpoint = "frontend"\n'
        '[endpoints]\nfrontend = "broker"\nbackend = "broker"\n'
        f'[roles.broker]\ncommand = {command}\nready = "port:frontend"\n'
        '[roles.worker]\nprobe = "majordomo"\ncount = 2\nscalable = true\n'
        '[promises]\nchecks = ["no_lost", "correct_reply"]\n'
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'implementation = "{manifest}"\nduration_s = 20\n')
    return scenario


def test_a_role_program_that_does_not_exist_is_bad_input_naming_the_key(tmp_path: Path) -> None:
    """Before: accepted by check; the run failed when it started the broker."""
    code, _, err = check(str(manifest_with_broker(tmp_path, '["{manifest_dir}/no-such-broker"]')))
    assert code == 2, err
    assert "m.toml: roles.broker.command" in err and "no such file" in err and "Traceback" not in err


def test_a_role_program_on_no_path_is_bad_input(tmp_path: Path) -> None:
    code, _, err = check(str(manifest_with_broker(tmp_path, '["no-such-broker-zchaos", "--x"]')))
    assert code == 2 and "roles.broker.command" in err and "not on PATH" in err, err


def test_a_script_that_is_not_executable_gets_the_python_hint(tmp_path: Path) -> None:
    (tmp_path / "broker.py").write_text("print('hi')\n")
    os.chmod(tmp_path / "broker.py", 0o644)
    code, _, err = check(str(manifest_with_broker(tmp_path, '["{manifest_dir}/broker.py"]')))
    assert code == 2 and "roles.broker.command" in err and "not executable" in err, err
    assert '"{python}", "{manifest_dir}/broker.py"' in err and "chmod +x" in err, err


def test_a_program_that_is_not_executable_gets_the_chmod_hint(tmp_path: Path) -> None:
    (tmp_path / "broker").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "broker", 0o644)
    code, _, err = check(str(manifest_with_broker(tmp_path, '["{manifest_dir}/broker"]')))
    assert code == 2 and f"chmod +x {tmp_path / 'broker'}" in err, err


def test_a_python_script_that_is_missing_is_bad_input(tmp_path: Path) -> None:
    code, _, err = check(str(manifest_with_broker(tmp_path, '["{python}", "{manifest_dir}/gone.py"]')))
    assert code == 2 and "roles.broker.command" in err and "gone.py" in err, err


def test_runnable_programs_pass(tmp_path: Path) -> None:
    (tmp_path / "broker").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "broker", 0o755)
    (tmp_path / "broker.py").write_text("")
    for command in ('["{manifest_dir}/broker"]', '["{python}", "{manifest_dir}/broker.py"]', '["true"]'):
        code, _, err = check(str(manifest_with_broker(tmp_path, command)))
        assert code == 0, (command, err)


# --- the checks a run would judge, and those it can only leave unknown --------------------

BLACK_BOX = """name = "black-box"
[client]
adapter = "mdp_sync"
endpoint = "frontend"
options = {client_options}
[options]
{options}
[endpoints]
frontend = "broker"
backend = "broker"
[roles.broker]
command = ["true"]
ready = "none"
[roles.worker]
{worker}
count = 2
scalable = true
[promises]
checks = {checks}
{promises}
"""


def forecast_of(
    tmp_path: Path,
    checks: str,
    *,
    worker: str = 'probe = "majordomo"',
    client_options: str = "{}",
    options: str = "",
    promises: str = "",
    scenario: str = "",
) -> dict[str, str]:
    """``zchaos check``'s line per check for a user's broker (a program that records nothing)."""
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        BLACK_BOX.format(
            checks=checks, worker=worker, client_options=client_options, options=options, promises=promises
        )
    )
    path = tmp_path / "s.toml"
    path.write_text(f'implementation = "{manifest}"\nduration_s = 30\n{scenario}')
    code, out, err = check(str(path))
    assert code == 0, err
    lines = out.split("  checks:\n", 1)[1].splitlines()
    return {line.split()[0]: line.split(None, 1)[1] for line in lines if line.startswith("    ")}


def test_checks_needing_events_no_role_records_are_foreseen_unknown(tmp_path: Path) -> None:
    """Before: check accepted it, and every run of it (clean ones too) exited 3."""
    seen = forecast_of(tmp_path, '["no_lost", "execution_count", "no_dispatch_to_expired"]')
    assert seen["no_lost"] == "judged" and seen["execution_count"] == "judged"  # the probes record exec
    assert seen["no_dispatch_to_expired"].startswith("UNKNOWN (foreseen): needs dispatch, worker_ready")
    assert "drop the check" in seen["no_dispatch_to_expired"]


def test_command_workers_without_a_probe_are_told_to_use_one(tmp_path: Path) -> None:
    seen = forecast_of(tmp_path, '["execution_count"]', worker='command = ["true"]')
    assert seen["execution_count"].startswith("UNKNOWN (foreseen): needs exec events from the workers")
    assert 'probe = "<family>"' in seen["execution_count"] and "records = [...]" in seen["execution_count"]
    # A program of the user's that writes zchaos's history says so, and is believed.
    seen = forecast_of(
        tmp_path, '["execution_count"]', worker='command = ["true"]\nrecords = ["exec", "done"]'
    )
    assert seen["execution_count"] == "judged"


def test_a_misspelt_recorded_event_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(
        BLACK_BOX.format(
            checks='["no_lost"]',
            worker='command = ["true"]\nrecords = ["exce"]',
            client_options="{}",
            options="",
            promises="",
        )
    )
    (tmp_path / "s.toml").write_text(f'implementation = "{tmp_path / "m.toml"}"\n')
    code, _, err = check(str(tmp_path / "s.toml"))
    assert code == 2 and "roles.worker.records" in err and "did you mean 'exec'" in err, err


def test_mmi_service_foreseen_by_its_own_rules(tmp_path: Path) -> None:
    """Before: no mmi_every, no service or no tolerance showed only at report time."""
    mmi = '["mmi_service"]'
    assert "mmi_every" in forecast_of(tmp_path, mmi)["mmi_service"]
    asking = '{ mmi_every = 5, service = "echo" }'
    seen = forecast_of(tmp_path, mmi, worker='command = ["true"]', client_options=asking)
    assert "no role of the manifest says it serves echo" in seen["mmi_service"]
    seen = forecast_of(tmp_path, mmi, client_options=asking)
    assert "heartbeat_ms and liveness" in seen["mmi_service"]
    seen = forecast_of(tmp_path, mmi, client_options=asking, options="heartbeat_ms = 500\nliveness = 3")
    assert seen["mmi_service"] == "judged"
    seen = forecast_of(tmp_path, mmi, client_options=asking, promises="mmi_tolerance_s = 2.0")
    assert seen["mmi_service"] == "judged"
    seen = forecast_of(
        tmp_path, mmi, worker='command = ["true"]\nservice = "echo"', client_options=asking,
        promises="mmi_tolerance_s = 2.0",
    )  # fmt: skip
    assert seen["mmi_service"] == "judged"


def test_in_order_listed_but_not_promised_is_foreseen(tmp_path: Path) -> None:
    """Before: accepted; every run exited 3 (issue 22, item 8)."""
    seen = forecast_of(tmp_path, '["no_lost", "in_order"]', promises="in_order = false")
    assert seen["in_order"].startswith("UNKNOWN (foreseen): the manifest lists in_order among its checks")
    assert seen["in_order"].endswith("but promises in_order = false: drop one")
    assert forecast_of(tmp_path, '["in_order"]')["in_order"] == "judged"


def test_a_schedule_that_leaves_under_a_fifth_judged_is_foreseen(tmp_path: Path) -> None:
    """Before: accepted; every run's steady_state was unknown (issue 22, item 8)."""
    freezes = '[[faults]]\nkind = "freeze"\ntarget = "worker-1"\nevery_s = 5\nduration_s = 3\n'
    seen = forecast_of(tmp_path, '["steady_state"]', promises="expiry_ms = 2000", scenario=freezes)
    assert seen["steady_state"].startswith("UNKNOWN (foreseen): judged 3.0 s of 30.0 s of load"), seen
    assert "schedule fewer or shorter faults, or a longer load" in seen["steady_state"]
    sparse = freezes.replace("every_s = 5", "at_s = [10]")
    assert forecast_of(tmp_path, '["steady_state"]', scenario=sparse)["steady_state"] == "judged"


def test_check_prints_the_promises_as_the_scenario_makes_them(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('implementation = "paranoid-pirate"\n[promises]\nlatency_p99_ms = 123.0\n')
    code, out, err = check(str(scenario))
    assert code == 0 and "latency_p99_ms = 123.0" in out and "  checks:\n" in out, err
    assert "unknown (exit 3)" not in out
