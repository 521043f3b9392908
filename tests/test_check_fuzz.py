"""`zchaos check` on random mutations of every stock scenario and manifest: numbers made NaN,
infinite, huge or negative, keys misspelt, types swapped. Each is valid (exit 0) or bad
input (exit 2) with a message naming the mutated file and the key; never a traceback, and
never the minutes a huge count once cost (a bound of tens of seconds only catches a hang)."""

from __future__ import annotations

import contextlib
import io
import math
import random
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.config import dump_toml

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").rglob("*.toml"))
MANIFESTS = sorted((ROOT / "implementations").glob("*/manifest.toml"))
MUTATIONS_PER_FILE = 6
HANG_S = 30.0

NUMBERS = [math.nan, math.inf, -math.inf, 1e300, 2**63 - 1, 10**9, -5, 0, 1e-300]


def _leaves(data: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every scalar (and list) in a TOML document."""
    out: list[tuple] = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((*path, k))
            out += _leaves(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            if isinstance(v, dict | list):
                out += _leaves(v, (*path, i))
    return out


def _at(data: Any, path: tuple) -> Any:
    for k in path:
        data = data[k]
    return data


def mutate(data: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """One mutation of ``data`` (a deep copy) and what it was."""
    import copy

    data = copy.deepcopy(data)
    paths = _leaves(data)
    numeric = [
        p for p in paths if isinstance(_at(data, p), int | float) and not isinstance(_at(data, p), bool)
    ]
    kind = rng.choice(["number", "number", "key", "type"])
    if kind == "number" and numeric:
        path = rng.choice(numeric)
        value = rng.choice(NUMBERS)
        if isinstance(_at(data, path), int) and not isinstance(value, float) and rng.random() < 0.5:
            value = int(value)
        _at(data, path[:-1])[path[-1]] = value
        return data, f"{'.'.join(map(str, path))} = {value!r}"
    path = rng.choice(paths)
    parent, key = _at(data, path[:-1]), path[-1]
    if kind == "key" and isinstance(key, str):
        typo = key[:-1] if len(key) > 2 else key + "x"
        parent[typo] = parent.pop(key)
        return data, f"{'.'.join(map(str, path))} renamed {typo}"
    value = parent[key]
    swapped: Any = (
        "text" if isinstance(value, int | float | bool | list | dict) else rng.choice([7, 2.5, True, ["a"]])
    )
    parent[key] = swapped
    return data, f"{'.'.join(map(str, path))} = {swapped!r}"


def _cases() -> list[tuple[Path, int]]:
    return [(p, i) for p in [*SCENARIOS, *MANIFESTS] for i in range(MUTATIONS_PER_FILE)]


def _scenario_for(manifest: Path, tmp: Path) -> Path:
    """A scenario that runs ``manifest`` (by path) with its defaults."""
    path = tmp / "uses-manifest.toml"
    path.write_text(f'name = "fuzz"\nimplementation = "{manifest}"\nduration_s = 10\n')
    return path


@pytest.mark.parametrize(("file", "n"), _cases(), ids=lambda v: v.stem if isinstance(v, Path) else str(v))
def test_check_on_a_mutated_file_is_valid_or_names_the_file_and_key(
    file: Path, n: int, tmp_path: Path
) -> None:
    rng = random.Random(f"{file.relative_to(ROOT)}:{n}")
    data = tomllib.loads(file.read_text())
    mutated, what = mutate(data, rng)
    target = tmp_path / file.name
    text = dump_toml(mutated)
    if file in MANIFESTS:
        # Relative paths in the manifest ({manifest_dir}) stay those of its own folder.
        target = file.parent / f".fuzz-{n}-{file.name}"
        try:
            target.write_text(text)
            scenario = _scenario_for(target, tmp_path)
            code, out, err, took = _check(scenario)
        finally:
            target.unlink(missing_ok=True)
    else:
        if isinstance(mutated.get("implementation"), str) and mutated["implementation"].endswith(".toml"):
            mutated["implementation"] = str((file.parent / mutated["implementation"]).resolve())
            text = dump_toml(mutated)
        target.write_text(text)
        code, out, err, took = _check(target)
    assert "Traceback" not in err + out, (what, err)
    assert code in (0, 2), (what, code, err)
    if code == 2:
        assert target.name in err, (what, err)
    assert took < HANG_S, (what, took)
    assert len(out) < 100_000, (what, len(out))  # a summary, not every fault time


def _check(scenario: Path) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["check", str(scenario)])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - t0


BASE = """name = "absurd"
implementation = "pingpong"
duration_s = 20

[topology]
worker = 3

[load]
users = 2

[[faults]]
kind = "freeze"
target = "worker-1"
at_s = [5]
duration_s = 2
"""

#: The issue's absurd values (issue 22, item 4): each passed `zchaos check` before.
ABSURD = {
    "fault duration nan": ("duration_s = 2\n", "duration_s = nan\n", "faults[0].duration_s"),
    "load duration nan": ("duration_s = 20\n", "duration_s = nan\n", "duration_s"),
    "load duration inf": ("duration_s = 20\n", "duration_s = inf\n", "duration_s"),
    "random count 1e8": ("at_s = [5]\n", "random = {count = 100000000, between = [1, 10]}\n", "random.count"),
    "every 0.1 s for a week": (
        "duration_s = 20\n",
        "duration_s = 604800\n",
        "faults[0]",
    ),
    "10000 workers": ("worker = 3\n", "worker = 10000\n", "topology.worker"),
    "a billion users": ("users = 2\n", "users = 1000000000\n", "load.users"),
    "an option nan": ("[load]\n", "[options]\nheartbeat_ms = nan\n\n[load]\n", "options.heartbeat_ms"),
}


@pytest.mark.parametrize("case", list(ABSURD))
def test_absurd_numbers_are_bad_input_naming_the_key(case: str, tmp_path: Path) -> None:
    old, new, key = ABSURD[case]
    text = BASE.replace(old, new, 1)
    if case == "every 0.1 s for a week":
        text = text.replace("at_s = [5]\n", "every_s = 0.1\n")
    path = tmp_path / "absurd.toml"
    path.write_text(text)
    code, out, err, _ = _check(path)
    assert code == 2, (case, out[:300])
    assert "absurd.toml" in err and key in err, err


def test_check_prints_a_summary_of_many_fault_times(tmp_path: Path) -> None:
    path = tmp_path / "many.toml"
    path.write_text(BASE.replace("at_s = [5]\n", "random = {count = 5000, between = [1, 10]}\n"))
    code, out, err, _ = _check(path)
    assert code == 0, err
    line = next(line for line in out.splitlines() if "fault freeze" in line)
    assert "(5000 times, the last at" in line and len(line) < 200


def test_a_misspelt_required_key_is_named_with_the_spelling_given(tmp_path: Path) -> None:
    """Before: `comand =` said only "command: missing" (while `redy =` got a did-you-mean)."""
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        'name = "x"\n[client]\nadapter = "lazy_pirate"\nendpoint = "frontend"\n[endpoints]\n'
        'frontend = "server"\n[roles.server]\ncomand = ["true"]\n[promises]\nchecks = ["no_lost"]\n'
    )
    code, _, err, _ = _check(_scenario_for(manifest, tmp_path))
    assert code == 2 and "roles.server.command: missing" in err and "'comand' a misspelling" in err, err


def test_list_outside_the_checkout_shows_the_stock_scenarios_with_their_files(
    tmp_path: Path, monkeypatch
) -> None:
    """Before: outside the checkout it listed none (issue 34 part 6; tests/test_install.py)."""
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list"]) == 0
    text = out.getvalue()
    assert f"  {ROOT / 'scenarios' / 'ci' / 'pingpong-kills.toml'}\n" in text
    assert text.rstrip().endswith(str(ROOT / "docs" / "manifest.md"))


def test_load_names_the_run_after_the_manifest_not_its_file(monkeypatch) -> None:
    """Before: `zchaos load .../manifest.toml` named the run load-manifest."""
    import types

    import harness.runner

    seen: list[str] = []

    def run_scenario(scenario, **_kw):  # the run itself is not what is tested here
        seen.append(scenario.name)
        return types.SimpleNamespace(exit_code=0)

    monkeypatch.setattr(harness.runner, "run_scenario", run_scenario)
    manifest = ROOT / "tests" / "external_clients" / "manifest.toml"
    assert main(["load", str(manifest), "--no-report"]) == 0
    name = tomllib.loads(manifest.read_text())["name"]
    assert seen == [f"load-{name}"] and name != "manifest"


def test_a_misspelt_external_client_option_is_warned_of(tmp_path: Path) -> None:
    """Before: `retires = 3` went to the program silently (any option is passed on)."""
    source = (ROOT / "tests" / "external_clients" / "manifest.toml").read_text()
    manifest = ROOT / "tests" / "external_clients" / ".typo-manifest.toml"
    try:
        manifest.write_text(source.replace("retries = 5", "retires = 5"))
        code, out, err, _ = _check(_scenario_for(manifest, tmp_path))
    finally:
        manifest.unlink(missing_ok=True)
    assert code == 0, err
    warning = ".typo-manifest.toml: clients[0].options.retires: passed to the program as it is"
    assert warning in out and "did you mean 'retries'" in out, out
    code, out, _, _ = _check(_scenario_for(ROOT / "tests" / "external_clients" / "manifest.toml", tmp_path))
    assert code == 0 and "did you mean" not in out, out
