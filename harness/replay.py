"""Replaying a run: what ``run.json`` keeps of a run's plan, and the scenario it gives back.

A run records (``run.json``, key ``replay``) the scenario's TOML data as it ran (overrides
such as ``--set`` included, and the ``--set`` given) and its file's text, the manifest's
text and the zchaos version; the seed and the two files' paths are the scenario's and the
manifest's own record (contract/rundir.py). ``zchaos run --replay RUN`` parses that data
again with that seed, with the manifest text of the record (not today's file, which may
have changed) at its old path, so relative commands (``{manifest_dir}/broker.py``) find the
same programs: the same seed gives the same fault plan and the same client request streams.
"""

from __future__ import annotations

import functools
import importlib.metadata
import shlex
import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from contract.calibration import Calibration
from contract.errors import SetupError
from contract.rundir import ReplayMeta, RunDir
from harness.manifest import parse_manifest
from harness.scenario import Scenario, parse_scenario, with_sets
from harness.stock import checkout_root, shown_name


@functools.cache
def zchaos_version() -> str:
    """The installed package's version (its metadata), with the git commit when zchaos runs
    from a checkout of its own; a bare checkout that was never installed (the tests'
    pythonpath) has no metadata, and its pyproject.toml says the version instead."""
    root = checkout_root()
    try:
        version = importlib.metadata.version("zchaos")
    except importlib.metadata.PackageNotFoundError:
        version = _checkout_version(root)
    if root is None or not (root / ".git").exists():
        # Only our own checkout's commit: the folder of an installed package may be inside
        # the user's repository (a project's .venv), whose commit says nothing of zchaos.
        return version
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{commit}" if commit else version


def _checkout_version(root: Path | None) -> str:
    if root is None:
        return "unknown (zchaos is neither installed nor run from its checkout)"
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def _text(path: Path | None) -> str | None:
    try:
        return path.read_text() if path is not None else None
    except OSError:
        return None


def replay_commands(scenario: Scenario, run: RunDir) -> list[str]:
    """The commands that reproduce a run: ``--replay`` always; ``SCENARIO --seed S [--set
    KEY=VALUE...]`` too when the scenario file with those overrides says what ran, but for
    its seed (``Scenario.from_file``: known from how it was read, no file read again)."""
    commands = [f"zchaos run --replay {shlex.quote(str(run.root))}"]
    if scenario.from_file and scenario.path is not None and scenario.path.exists():
        sets = "".join(f" --set {shlex.quote(given)}" for given in scenario.sets)
        commands.append(f"zchaos run {shlex.quote(_shown(scenario.path))} --seed {scenario.seed}{sets}")
    return commands


def _shown(path: Path) -> str:
    """A path as a user would type it here: a stock scenario's name, else relative to the
    current folder when inside it."""
    if (name := shown_name(path)) is not None:
        return name
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def replay_record(scenario: Scenario, run: RunDir) -> ReplayMeta:
    """What ``run.json`` keeps so that ``zchaos run --replay`` can run the same plan again:
    the TOML data without its seed, which the scenario's record holds."""
    manifest = scenario.base_manifest or scenario.manifest
    return {
        "scenario_data": {k: v for k, v in scenario.source.items() if k != "seed"},
        "sets": list(scenario.sets),
        "scenario_text": _text(scenario.path),
        "manifest_text": _text(manifest.path),
        "zchaos_version": zchaos_version(),
        "commands": replay_commands(scenario, run),
    }


def _says(text: str | None, sets: list[str], path: Path, data: dict[str, Any]) -> bool:
    """Whether a scenario file's ``text`` with ``sets`` is the TOML ``data`` (but for a seed)."""
    if text is None:
        return False
    try:
        on_file = with_sets(tomllib.loads(text), sets, path)
    except (tomllib.TOMLDecodeError, SetupError):
        return False
    return {**on_file, "seed": 0} == {**data, "seed": 0}


def scenario_of_run(run_dir: str | Path) -> tuple[Scenario, list[str]]:
    """The scenario a stored run ran, from its replay record, and notes for the user
    (a file that changed since)."""
    run = RunDir(Path(run_dir))
    where = run.run_json
    if not where.exists():
        raise SetupError("not a run folder (it has no run.json)", where=run_dir)
    meta = run.read_meta()
    record = meta.get("replay")
    if not isinstance(record, dict) or not isinstance(record.get("scenario_data"), dict):
        raise SetupError(
            "run.json has no replay record (the run was made by a zchaos older than --replay); "
            "run its scenario with --seed instead",
            where=where,
        )
    ran = meta.get("scenario") or {}
    notes = []
    manifest = None
    manifest_path = Path((meta.get("manifest") or {}).get("path") or "")
    manifest_text = record.get("manifest_text")
    if manifest_text is not None:
        try:
            data = tomllib.loads(manifest_text)
        except tomllib.TOMLDecodeError as exc:
            raise SetupError(f"the recorded manifest text does not parse: {exc}", where=where) from None
        manifest = parse_manifest(data, manifest_path)
        if _text(manifest_path) != manifest_text:
            notes.append(f"{manifest_path} changed since the run; replaying the manifest text it recorded")
    scenario_path = Path(path) if (path := ran.get("path")) else None
    scenario_text = record.get("scenario_text")
    today = _text(scenario_path)
    if scenario_path is not None and scenario_text not in (None, today):
        notes.append(f"{scenario_path} changed since the run; replaying the scenario it recorded")
    scenario_data = dict(record["scenario_data"])
    if "seed" in ran:
        scenario_data["seed"] = ran["seed"]
    recorded = run.read_meta().get("calibration")
    calibration = None
    if isinstance(recorded, dict):  # the system's own numbers as the run had them, not today's
        try:
            calibration = Calibration.from_dict(recorded)
        except ValueError as exc:
            raise SetupError(f"the recorded calibration does not read: {exc}", where=where) from None
    scenario = parse_scenario(
        scenario_data, scenario_path, where=f"{where} (replay)", manifest=manifest, calibration=calibration
    )
    sets = list(record.get("sets") or ())
    # The file still says what ran, as it did then: its --seed command reproduces this replay too.
    from_file = scenario_path is not None and scenario_text == today
    from_file = from_file and _says(scenario_text, sets, scenario_path or Path(), scenario.source)
    return replace(scenario, sets=tuple(sets), from_file=from_file), notes
