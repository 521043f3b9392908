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
