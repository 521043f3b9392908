"""The ``zchaos`` command line.

Exit codes are the run outcome's (contract/outcomes.py, listed in the README): 0 passed,
1 violated, 2 bad input (the message says which file and key), 3 unknown (a promised check
could not be decided), 4 incomplete (the run did not carry out its plan), 130 interrupted.
A command whose output pipe the reader closed (``zchaos check ... | head``) ends quietly
with 141, as a program killed by SIGPIPE would.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from contract.errors import SetupError
from contract.outcomes import EXIT_INTERRUPTED
from harness.synthetic import WARM_UP_REPORTS

if TYPE_CHECKING:
    from harness.manifest import Manifest
    from harness.scenario import Scenario

EPILOG = """\
examples:
  zchaos run paranoid-pirate-kill-worker   # a stock scenario by name (zchaos list shows them)
  zchaos run scenarios/paranoid-pirate-kill-worker.toml --seeds 10
  zchaos run --replay runs/20261121T120000Z-paranoid-pirate-kill-worker
  zchaos shrink runs/20261121T120000Z-paranoid-pirate-kill-worker --budget 20
  zchaos explore my-manifest.toml --time 30m   # generated faults, steered by what runs show
  zchaos check scenarios/paranoid-pirate-kill-worker.toml
  zchaos check my-manifest.toml --smoke   # start your system, send it a few requests, stop
  zchaos run scenarios/majordomo-kill-busy-worker.toml --set implementation=../my-mdp.toml \
      --set options.heartbeat_ms=500   # the scenario against your own system
  zchaos suite ci --junit-xml reports/zchaos.xml   # the stock CI suite
  zchaos calibrate paranoid-pirate        # measure a system's own numbers (stored in runs/calibration/)
  zchaos report runs/20261121T120000Z-paranoid-pirate-kill-worker [RUN...]
  zchaos matrix runs                      # systems x scenarios of every stored run
  zchaos baseline runs/RUN --label v1.4   # make RUN the baseline v1.4 of its scenario
  zchaos compare runs/RUN --baseline v1.4 # what got worse since the baseline
  zchaos index runs                       # rebuild the results store from the run folders
  zchaos load paranoid-pirate --users 20 --duration 30
  zchaos list

exit codes: 0 passed, 1 violated, 2 bad input, 3 unknown (a promised check could not be
decided), 4 incomplete (the run did not carry out its plan), 130 interrupted
"""


def _cmd_run(args: argparse.Namespace) -> int:
    from harness.runner import run_scenario
    from harness.scenario import load_scenario, with_seed

    if (args.scenario is None) == (args.replay is None):
        raise SetupError("give a scenario file or --replay RUN (one of them)", where="zchaos run")
    if args.seeds is not None and args.seeds < 1:
        raise SetupError(f"--seeds must be at least 1, got {args.seeds}", where="zchaos run")
    if args.until_violated and args.seeds is None:
        raise SetupError("--until-violated goes with --seeds N", where="zchaos run")
    if args.set and args.replay is not None:
        raise SetupError(
            "--set goes with a scenario file; --replay runs what was recorded", where="zchaos run"
        )
    if args.replay is not None:
        from harness.replay import scenario_of_run

        scenario, notes = scenario_of_run(args.replay)
        for note in notes:
            print(f"zchaos: note: {note}", file=sys.stderr)
    else:
        scenario = load_scenario(_scenario_file(args.scenario), sets=args.set)
    if args.seed is not None:
        scenario = with_seed(scenario, args.seed)
    if args.check:
        return _describe(_with_stored_calibration(scenario, args.runs_dir))
    from harness.calibrate import calibrated

    scenario = calibrated(scenario, args.runs_dir)
    if args.seeds is not None:
        from harness.seeds import print_summary, run_seeds

        seeds = run_seeds(
            scenario, args.seeds, runs_dir=Path(args.runs_dir), until_violated=args.until_violated,
            report=not args.no_report, subject_version=args.subject_version,
        )  # fmt: skip
        print_summary(seeds)
        return seeds.exit_code
    result = run_scenario(
        scenario, runs_dir=args.runs_dir, report=not args.no_report, subject_version=args.subject_version
    )
    return result.exit_code


SHOWN_TIMES = 8  # fault times `zchaos check` prints per fault line


def _cmd_check(args: argparse.Namespace) -> int:
    from harness.manifest import is_manifest, load_manifest
    from harness.scenario import load_scenario

    if is_manifest(args.scenario):
        if args.set:
            raise SetupError("--set goes with a scenario file, not a manifest", where="zchaos check")
        manifest = load_manifest(args.scenario)
        _describe_manifest(manifest)
        if not args.smoke:
            return 0
        from harness.smoke import smoke

        print(f"smoke: starting {manifest.name} ...", flush=True)
        return smoke(manifest)
    if args.smoke:
        raise SetupError("--smoke goes with a manifest (zchaos run runs a scenario)", where="zchaos check")
    scenario = load_scenario(_scenario_file(args.scenario), sets=args.set)
    return _describe(_with_stored_calibration(scenario, args.runs_dir))


def _scenario_file(ref: str) -> Path:
    """The file a scenario argument names (a path, or a stock scenario's name), saying which
    file a name found."""
    from harness.stock import find_scenario

    path, note = find_scenario(ref)
    if note:
        print(f"zchaos: note: {note}", file=sys.stderr)
    return path


def _with_stored_calibration(scenario: Scenario, runs_dir: str) -> Scenario:
    """``scenario`` resolved against the calibration stored for it, if there is one: ``zchaos
    check`` measures nothing (without one its relative values show their stand-ins)."""
    if not scenario.uncalibrated:
        return scenario
    from dataclasses import replace

    from harness.calibrate import scenario_setup, stored
    from harness.scenario import reparse

    found = stored(scenario_setup(scenario), runs_dir)
    if found is None:
        return scenario
    return replace(reparse(scenario, scenario.source, calibration=found), sets=scenario.sets)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from contract.calibration import calibration_file
    from harness.calibrate import STEP_S, calibrate, print_calibration, setup_of, stored

    if args.step_s is not None and not 1.0 <= args.step_s <= 60.0:
        raise SetupError(
            f"--step-s must be between 1 and 60 s, got {args.step_s:g}", where="zchaos calibrate"
        )
    setup = setup_of(args.target)
    path = calibration_file(args.runs_dir, setup.manifest.name, setup.key())
    if not args.again and (found := stored(setup, args.runs_dir)) is not None:
        print(f"already calibrated on this machine ({found.date}); --again measures it anew")
        print_calibration(found, path)
        return 0
    calibration = calibrate(setup, args.runs_dir, step_s=args.step_s or STEP_S)
    print_calibration(calibration, path)
    return 0


def _describe_manifest(manifest: Manifest) -> None:
    """What a valid manifest starts, how it is judged ready, and how a run would judge it."""
    from harness.scenario import parse_scenario

    family = f", family {manifest.family}" if manifest.family else ""
    print(f"{manifest.path}: valid manifest of {manifest.name}{family}")
    for warning in manifest.warnings:
        print(f"  warning: {warning}")
    for role in manifest.roles.values():
        count = f"x{role.count}" + (" (scalable)" if role.scalable else "")
        ready = f"{role.ready.kind}:{role.ready.arg}" if role.ready.arg else role.ready.kind
        binds = f", binds {', '.join(role.binds)}" if role.binds else ""
        print(f"  role {role.name} {count}: ready {ready}{binds}")
        print(f"    {'probe ' + role.probe if role.probe else 'command'}: {' '.join(role.command)}")
    for kind in manifest.clients:
        options = ", ".join(f"{k}={v!r}" for k, v in kind.options.items()) or "defaults"
        print(f"  client kind {kind.name}: {kind.adapter}, endpoints {', '.join(kind.endpoints)}; {options}")
    if manifest.network != "proxy":
        print(f'  network = "{manifest.network}": its runs\' default (a scenario may say otherwise)')
    print("  a run of it with no fault:")
    plain = parse_scenario({"implementation": str(manifest.path), "duration_s": 30}, None, manifest=manifest)
    _describe_checks(plain)
    from harness.runner import machine_problems

    problems = machine_problems(plain)
    if problems:  # valid, but this machine cannot run it (hosts mode without root)
        raise SetupError("; ".join(problems), where=manifest.path)


def _describe(scenario: Scenario) -> int:
    """What a valid scenario would run (its manifest and client kinds were validated loading it)."""
    manifest = scenario.manifest
    print(f"{scenario.path}: valid")
    for warning in manifest.warnings:
        print(f"  warning: {warning}")
    for warning in scenario.warnings:
        print(f"  warning: {warning}")
    for note in scenario.notes:
        print(f"  note: {note}")
    print(f"  implementation {manifest.name} ({manifest.path})")
    print(f"  {scenario.duration_s:g} s of load, {scenario.load.users} users, seed {scenario.seed}")
    if scenario.calibration is not None:
        print(f"  calibration: {scenario.calibration.summary()}")
    elif scenario.uncalibrated:
        print(
            "  not calibrated yet on this machine: the relative values below are stand-ins until "
            "`zchaos run` (or `zchaos calibrate`) measures the system"
        )
    for r in scenario.resolved:
        print(f"  {r['key']} = {r['given']!r} -> {r['value']:g}")
    topology = ", ".join(f"{role} x{n}" for role, n in scenario.topology.items())
    print(f"  processes: {topology}")
    for kind in scenario.load.clients:
        share = f"{kind.users} users" if kind.users else f"weight {kind.weight}"
        options = ", ".join(f"{k}={v!r}" for k, v in kind.options.items()) or "defaults"
        print(f"  client kind {kind.name}: {kind.adapter}, {share}, endpoints {', '.join(kind.endpoints)}")
        print(f"    options: {options}")
        if kind.command:
            print(f"    command: {' '.join(kind.command)}")
    for fault in scenario.faults:
        # A summary: a fault line may fire thousands of times.
        times = fault.schedule.times(scenario.seed, fault.index)
        shown = ", ".join(f"{t:g}" for t in times[:SHOWN_TIMES])
        more = f" ... ({len(times)} times, the last at {times[-1]:g})" if len(times) > SHOWN_TIMES else ""
        print(f"  fault {fault.kind} on {fault.target} at {shown}{more} s")
    _describe_checks(scenario)
    from harness.runner import machine_problems

    problems = machine_problems(scenario)
    if problems:  # the scenario is valid, this machine cannot run it
        raise SetupError("; ".join(problems), where=scenario.path or scenario.name)
    return 0


def _describe_checks(scenario: Scenario) -> None:
    """The checks a run would judge, with the promises as the scenario makes them, and those
    that any run of it can only leave unknown, with why and what to change."""
    import json

    from harness.runner import forecast

    promises = scenario.manifest.promises.as_dict()
    shown = ", ".join(
        f"{k} = {json.dumps(v)}" for k, v in promises.items() if k != "checks" and v is not None
    )
    print(f"  promises (the manifest's, with the scenario's overrides): {shown}")
    foreseen = forecast(scenario)
    width = max(map(len, foreseen), default=0)
    print("  checks:")
    for name, reason in foreseen.items():
        print(f"    {name:<{width}}  " + (f"UNKNOWN (foreseen): {reason}" if reason else "judged"))
    unknown = [name for name, reason in foreseen.items() if reason]
    if unknown:
        print(
            f"  {len(unknown)} of {len(foreseen)} checks can only be unknown ({', '.join(unknown)}): "
            "a run of this scenario ends unknown (exit 3) or violated, never passed"
        )


def _cmd_suite(args: argparse.Namespace) -> int:
    from harness.stock import find_suite
    from harness.suite import run_suite

    if args.seeds < 1:
        raise SetupError(f"--seeds must be at least 1, got {args.seeds}", where="zchaos suite")
    junit = _junit_target(args.junit_xml) if args.junit_xml is not None else None
    directory, note = find_suite(args.directory)
    if note:
        print(f"zchaos: note: {note}", file=sys.stderr)
    return run_suite(
        directory,
        junit_xml=junit,
        runs_dir=Path(args.runs_dir),
        seeds=args.seeds,
        until_violated=args.until_violated,
        subject_version=args.subject_version,
        sets=args.set,
    )


def _junit_target(given: str) -> Path:
    """Where ``--junit-xml`` puts the suite's JUnit file, checked before any scenario runs:
    its folder is made as pytest makes it; a folder given, or one that cannot be made, is
    refused now rather than after the runs."""
    path = Path(given)
    if given.endswith(os.sep) or path.is_dir():
        raise SetupError("is a folder; --junit-xml takes a file path, e.g. reports/zchaos.xml", where=given)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(f"cannot make its folder: {exc.strerror}", where=given) from None
    if not os.access(path.parent, os.W_OK):
        raise SetupError(f"cannot write into {path.parent}", where=given)
    return path


def _cmd_shrink(args: argparse.Namespace) -> int:
    from harness.shrink import shrink_run

    return shrink_run(
        Path(args.run),
        budget_runs=args.budget,
        budget_s=args.time_budget,
        seeds_per_candidate=args.seeds_per_candidate,
        check=args.check,
        out_dir=Path(args.out) if args.out else None,
    ).exit_code


def _cmd_explore(args: argparse.Namespace) -> int:
    from harness.explore.loop import explore, parse_duration, print_result

    kinds = tuple(k.strip() for k in (args.kinds or "").split(",") if k.strip())
    state = explore(
        args.target,
        resume=Path(args.resume) if args.resume else None,
        runs=args.runs,
        time_s=parse_duration(args.time) if args.time else None,
        seed=args.seed,
        strategy=args.strategy,
        kinds=kinds,
        run_s=args.run_s,
        network=args.network,
        runs_dir=Path(args.runs_dir),
        calibrate=not args.no_calibrate,
        confirm=args.confirm,
        shrink=args.shrink,
        until_finding=args.until_finding,
    )
    print_result(state)
    return state.exit_code


def _run_folder(path: str) -> Path:
    folder = Path(path)
    if not (folder / "run.json").exists():
        raise SetupError("not a run folder (it has no run.json)", where=path)
    return folder


def _cmd_index(args: argparse.Namespace) -> int:
    from reports.store import rebuild

    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        raise SetupError("no such folder", where=runs_dir)
    store, count, skipped, moved = rebuild(runs_dir)
    if moved is not None:
        print(f"the damaged store was moved aside to {moved}")
    for why in skipped:
        print(f"  skipped {why}")
    print(f"{store}: {count} run(s) indexed" + (f", {len(skipped)} folder(s) skipped" if skipped else ""))
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    from harness.suite import write_store_matrix
    from reports.store import StoreDamaged, rebuild, store_path

    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        raise SetupError("no such folder", where=runs_dir)
    if not store_path(runs_dir).exists():
        print(f"no results store in {runs_dir} yet: indexing its run folders")
        rebuild(runs_dir)
    try:
        page = write_store_matrix(runs_dir)
    except StoreDamaged as exc:
        print(f"zchaos: {exc}; rebuilding it now", file=sys.stderr)
        rebuild(runs_dir)
        page = write_store_matrix(runs_dir)
    print(f"reliability matrix: {page}")
    return 0


def _cmd_baseline(args: argparse.Namespace) -> int:
    from reports.store import mark_baseline

    run = _run_folder(args.run)
    store = mark_baseline(run, args.label)
    print(f"{run} is now the baseline {args.label!r} of its scenario (in {store})")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from reports.baseline import compare_runs, describe

    page, rows, base = compare_runs(_run_folder(args.run), args.baseline)
    print(f"{args.run} against {base}:")
    for row in rows:
        print(f"  {'WORSE' if row['worse'] else '     '} {describe(row)}")
    failing = [r for r in rows if r.get("regressed") or (r["kind"] == "check" and r["worse"])]
    worse = sum(r["worse"] for r in rows)
    print(f"{worse} of {len(rows)} got worse, {len(failing)} beyond a bound or a check; page: {page}")
    return 1 if failing else 0


def _cmd_report(args: argparse.Namespace) -> int:
    from contract.outcomes import BAD_INPUT, combine_outcomes, exit_code
    from contract.rundir import RunDir
    from harness.progress import Progress
    from harness.reporting import build_report_for
    from reports.ingest.read import expected_events

    runs = [RunDir(_run_folder(path)) for path in args.runs]  # all checked before Spark starts
    if len(runs) == 1:
        return int(build_report_for(runs[0], Progress())["exit_code"])
    # One Spark session for all of them, sized for the largest history.
    largest = max((n for run in runs if (n := expected_events(run)) is not None), default=None)
    outcomes = []
    for n, run in enumerate(runs, start=1):
        progress = Progress()
        progress.phase(f"run {n}/{len(runs)}: {run.root}")
        try:
            outcomes.append(build_report_for(run, progress, events=largest)["outcome"])
        except SetupError as exc:
            print(f"zchaos: error: {exc}", file=sys.stderr)
            outcomes.append(BAD_INPUT)
    if BAD_INPUT in outcomes:
        return exit_code(BAD_INPUT)
    return exit_code(combine_outcomes(outcomes))


def _cmd_spark(args: argparse.Namespace) -> int:
    from reports import connect

    if args.action == "start":

        def say(line: str) -> None:
            print(line, flush=True)

        already = connect.running()
        connect.start(say)
        if already is None and args.warm_up > 0:  # a server that ran already is warm
            from harness.synthetic import warm_up

            warm_up(say, args.warm_up)
    elif args.action == "stop":
        connect.stop(print)
    elif args.action == "archive":
        from harness.synthetic import make_class_archive

        return make_class_archive(lambda line: print(line, flush=True))
    else:
        print("\n".join(connect.status()))
    return 0


def _cmd_load(args: argparse.Namespace) -> int:
    import re

    from harness.manifest import load_manifest
    from harness.runner import run_scenario
    from harness.scenario import parse_scenario

    try:  # the run is named after the manifest's name, not its file's (often "manifest")
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", load_manifest(args.implementation).name)
    except SetupError as exc:
        raise SetupError(str(exc), where="zchaos load: implementation") from None
    data: dict = {
        "name": f"load-{name}",
        "implementation": args.implementation,
        "duration_s": args.duration,
        "seed": args.seed,
        "load": {"users": args.users, "spawn_rate": args.spawn_rate, "wait_ms": args.wait_ms,
                 "processes": args.processes},
    }  # fmt: skip
    if args.workers is not None:
        data["topology"] = {"worker": args.workers}
    scenario = parse_scenario(data, None, where="zchaos load")
    ui_port = args.ui_port if args.ui else None
    return run_scenario(
        scenario, runs_dir=args.runs_dir, report=not args.no_report, ui_port=ui_port
    ).exit_code


def _cmd_list(args: argparse.Namespace) -> int:
    from chaos.faults import SELECTORS
    from chaos.kinds import FAULT_KINDS
    from harness.manifest import builtin_manifests, load_manifest
    from implementations import probes

    print("implementations (zchaos run/load take a name or a manifest path):")
    for name, path in builtin_manifests().items():
        manifest = load_manifest(path)
        print(f"  {name:<22} {manifest.description}")
    print("\nfaults ([[faults]] kind = ...):")
    for kind in FAULT_KINDS.values():
        print(f"  {kind.name:<10} {kind.doc} (targets a {kind.target}; {kind.harm})")
        for pname, spec in kind.params.items():
            print(f"      {spec.describe(pname)}")
    print(f"  targets: an instance (worker-2), a role (queue), or role:{'|'.join(SELECTORS)}")
    print("\nprobe workers ([roles.NAME] probe = ..., for your own broker; they record exec/done):")
    for probe in probes().values():
        options = ", ".join(f"{name}={opt.default!r}" for name, opt in probe.options.items())
        print(f"  {probe.name:<16} {probe.use}: {probe.speaks}")
        print(f"  {'':<16} options: {options}")
    print("\nclient adapters ([client] or [[clients]] adapter = ...; options with their defaults):")
    from loadtests.adapters import adapter_class, adapter_names

    for name in adapter_names():
        cls = adapter_class(name)
        endpoints = (
            "any number of endpoints" if cls.MAX_ENDPOINTS is None else f"{cls.MAX_ENDPOINTS} endpoint(s)"
        )
        print(f"  {name:<12} {cls.SUMMARY} ({endpoints})")
        options = ", ".join(f"{k} = {v!r}" for k, v in cls.DEFAULTS.items())
        more = " (other options are passed to the program)" if cls.OPEN_OPTIONS else ""
        print(f"  {'':<12} options: {options or 'none'}{more}")
    from loadtests.adapters.external import PROTOCOL

    print("\n" + PROTOCOL)
    print(
        "\ninvariants ([promises] checks = [...]); 'needs:' marks a check that reads events the "
        "subject itself\nwrites, UNKNOWN on a black box without them:"
    )
    from reports.checkers import registry

    for checker in registry().values():
        print(f"  {checker.name:<20} {checker.doc}")
        if checker.needs:
            print(f"  {'':<20} needs: {checker.needs_text()}")
    _list_scenarios()
    return 0


def _list_scenarios() -> None:
    """The stock scenarios by name with their files, the docs that ship, and the scenarios of
    a ./scenarios folder when it is not the stock one."""
    from harness.stock import docs, stock_root, stock_scenarios

    root = stock_root()
    stock = stock_scenarios()
    if root is None or not stock:
        print("\nstock scenarios: none (this zchaos was built without them)")
    else:
        width = max(map(len, stock))
        print(
            f"\nstock scenarios ({len(stock)}; zchaos run NAME runs one, zchaos suite ci the CI suite; "
            "a file of the name in the current folder wins):"
        )
        for name, path in stock.items():
            print(f"  {name:<{width}}  {path}")
    here = Path("scenarios")
    if here.is_dir() and (root is None or here.resolve() != (root / "scenarios").resolve()):
        print("\nscenarios in ./scenarios:")
        for path in sorted(here.rglob("*.toml")):
            print(f"  {path}")
    shipped = docs()
    if shipped:
        print("\ndocumentation:")
        for path in shipped:
            print(f"  {path}")


def _cmd_toxiproxy(args: argparse.Namespace, rest: list[str]) -> int:
    from chaos.toxiproxy_server import main as server_main

    return server_main(rest)


def _add_set(p: argparse.ArgumentParser, what: str = "the scenario") -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a key of {what}, as if its file said it: a dotted key, a TOML value "
        "(implementation=../my-broker.toml, options.heartbeat_ms=500, faults.0.at_s=[5]); "
        "repeat it for several; a run records them for --replay",
    )


def _add_spark_where(p: argparse.ArgumentParser) -> None:
    """--spark-remote and --spark-history-dir: where the report's Spark runs, and reads from."""
    p.add_argument(
        "--spark-remote",
        metavar="sc://HOST:PORT",
        help="send the report to this Spark Connect endpoint (a cluster's; also "
        "ZCHAOS_SPARK_REMOTE): its executors read the history by path, see --spark-history-dir",
    )
    p.add_argument(
        "--spark-history-dir",
        metavar="DIR",
        help="copy the history into DIR for Spark to read: a folder this machine and the cluster "
        "see at the same path (also ZCHAOS_SPARK_HISTORY_DIR; default: the run folder itself)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zchaos",
        description="Chaos and load testing for ZeroMQ broker/worker systems.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="print zchaos's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run one chaos scenario (on one seed or many) and report on it",
        description="Run one chaos scenario and report on it. With --seeds N it runs N times, "
        "on the scenario's seed and N-1 seeds derived from it, and says per check in how many "
        "seeds it was violated, and which. The end of each run prints the command that "
        "reproduces it (zchaos run --replay RUN).",
    )
    p.add_argument(
        "scenario",
        nargs="?",
        help="a scenario file (TOML), or a stock scenario's name (zchaos list): paranoid-pirate-kill-worker",
    )
    p.add_argument(
        "--replay", metavar="RUN", help="run again what a stored run ran (its recorded scenario and seed)"
    )
    p.add_argument("--runs-dir", default="runs", help="where run folders go (default: runs)")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument(
        "--seeds", type=int, metavar="N", help="run on N seeds (the scenario's, then N-1 derived from it)"
    )
    p.add_argument(
        "--until-violated", action="store_true", help="with --seeds: stop at the first violated seed"
    )
    p.add_argument("--no-report", action="store_true", help="record the run but skip the Spark report")
    p.add_argument("--check", action="store_true", help="validate the scenario and its manifest, run nothing")
    _add_set(p)
    p.add_argument(
        "--subject-version",
        help="the version of the system under test, for the results store (default: its manifest's)",
    )
    _add_spark_where(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "check", help="validate a scenario and its manifest, or a manifest alone, without running it"
    )
    p.add_argument(
        "scenario",
        help="a scenario (a file, or a stock scenario's name), or a manifest (a file, or a built-in's name)",
    )
    p.add_argument(
        "--runs-dir", default="runs", help="where stored calibrations are looked up (default: runs)"
    )
    _add_set(p)
    p.add_argument(
        "--smoke",
        action="store_true",
        help="(a manifest) start it, wait until ready, send a few requests through its clients, stop",
    )
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser(
        "calibrate",
        help="measure a system without faults (capacity, latency, the client timeout that fits) and store it",
        description="Run an implementation without faults under a short ramp of users (1, 2, 4 ... 32, "
        "a few seconds each) and measure its capacity (ok replies per second before errors break "
        "away), its latency percentiles at a moderate load and the client timeout that fits. The "
        "result is stored in RUNS_DIR/calibration/, keyed by the manifest's content, the topology "
        "and options and this machine; a scenario may then size its load and bounds relative to it "
        '(users = "0.5x capacity", latency_p99_ms = "3x p99, at least 250"). zchaos run '
        "calibrates by itself when such a scenario has none.",
    )
    p.add_argument(
        "target", help="a manifest (a file, or a built-in's name) or a scenario (its topology and options)"
    )
    p.add_argument("--runs-dir", default="runs", help="where the calibration is stored (default: runs)")
    p.add_argument("--again", action="store_true", help="measure again even when one is stored")
    p.add_argument("--step-s", type=float, help="seconds of each step of the ramp (default 5)")
    p.set_defaults(func=_cmd_calibrate)

    p = sub.add_parser("suite", help="run every scenario of a folder (the CI suite)")
    p.add_argument(
        "directory", help="a folder of scenario files, or a stock one's name: ci (the CI suite), scenarios"
    )
    p.add_argument("--runs-dir", default="runs", help="where run folders go (default: runs)")
    p.add_argument(
        "--junit-xml",
        metavar="PATH",
        help="write the suite's JUnit file to PATH too (its folder is made; one is always in the suite's)",
    )
    p.add_argument(
        "--subject-version",
        help="the version of the systems under test, for the results store and the matrix",
    )
    p.add_argument(
        "--seeds", type=int, default=1, metavar="N", help="run each scenario on N seeds (default 1)"
    )
    p.add_argument(
        "--until-violated",
        action="store_true",
        help="with --seeds: stop a scenario at its first violated seed",
    )
    _add_set(p, "each scenario")
    _add_spark_where(p)
    p.set_defaults(func=_cmd_suite)

    p = sub.add_parser(
        "matrix", help="write RUNS_DIR/matrix.html: every stored system against every scenario"
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="a runs folder, e.g. runs")
    p.set_defaults(func=_cmd_matrix)

    p = sub.add_parser(
        "index", help="rebuild RUNS_DIR/results.sqlite (the results store) from the run folders"
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="a runs folder, e.g. runs")
    p.set_defaults(func=_cmd_index)

    p = sub.add_parser(
        "baseline", help="make a run the baseline LABEL of its scenario ([baseline] in a scenario)"
    )
    p.add_argument("run", help="a run folder with a report")
    p.add_argument("--label", required=True, help="the baseline's name, e.g. v1.4")
    p.set_defaults(func=_cmd_baseline)

    p = sub.add_parser(
        "compare",
        help="what got worse in a run against a baseline (exit 1: a check did, or a figure broke [baseline])",
    )
    p.add_argument("run", help="a run folder with a report")
    p.add_argument("--baseline", required=True, help="a run folder, or a label given with zchaos baseline")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser(
        "shrink",
        help="search for the smallest scenario that still breaks a violated run's check",
        description="Take a violated run and search for a smaller scenario that still violates "
        "the same check: fewer faults (delta debugging over the run's fault plan), a shorter "
        "load and shorter faults, fewer users and workers. Each candidate runs on a few seeds "
        "(racy bugs); the search stops at the budget. Writes the smallest scenario found as a "
        "standalone TOML beside a short report (shrink.md) in a shrink-* folder.",
    )
    p.add_argument("run", help="a violated run folder, e.g. runs/20261121T120000Z-NAME")
    p.add_argument("--budget", type=int, default=30, metavar="RUNS", help="most runs to spend (default 30)")
    p.add_argument("--time-budget", type=float, metavar="SECONDS", help="start no candidate after this long")
    p.add_argument(
        "--seeds-per-candidate", type=int, default=3, metavar="K",
        help="seeds a candidate is tried on before it counts as not reproducing (default 3)",
    )  # fmt: skip
    p.add_argument("--check", help="the violated check to keep (default: the run's first violated check)")
    p.add_argument("--out", help="where the shrink folder goes (default: beside the run)")
    p.set_defaults(func=_cmd_shrink)

    p = sub.add_parser(
        "explore",
        help="let zchaos look for bugs: generated fault schedules, steered by what each run shows",
        description="Generate scenarios for an implementation by itself (1 to 4 faults on its roles and "
        "links, parameters from each fault card's explore ranges, lengths also around the manifest's "
        "expiry_ms where those miss it, loads with idle stretches and bursts), "
        "run them one after the other until the budget is spent, keep the runs that showed a behaviour "
        "never seen before and mutate them (--strategy guided), and write each new violated check as a "
        "scenario that replays it. Writes RUNS_DIR/explore-<time>-<name>/ (explore.json, explore.html, "
        "findings/). "
        "Exit 1 with a finding, 0 without (never 'passed'), 2 bad input, 130 interrupted.",
    )
    p.add_argument(
        "target", nargs="?", help="a manifest: a built-in implementation's name or a manifest path"
    )
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="go on with the exploration of DIR instead: its target, seed, strategy, kinds and run "
        "length as its explore.json says; the budget is for the runs to come, and --seed and "
        "--kinds given change the draws of the runs to come",
    )
    p.add_argument("--runs", type=int, metavar="N", help="most runs to make")
    p.add_argument("--time", metavar="T", help="start no run after this long: 30m, 2h, 600 (seconds)")
    p.add_argument(
        "--seed", type=int, help="seed of the exploration (default 1; with --resume: of the runs to come)"
    )
    p.add_argument(
        "--strategy", choices=("guided", "random"), default="guided",
        help="guided: mutate runs that showed something new (default); random: fresh draws only",
    )  # fmt: skip
    p.add_argument(
        "--kinds",
        metavar="K1,K2",
        help="the fault kinds allowed (default: every kind that applies; with --resume: in the runs to come)",
    )
    p.add_argument(
        "--run-s",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="seconds of load of each run (default 20; a run whose faults would leave steady_state "
        "too little to judge goes on calmly after them, up to 2.5 times this)",
    )
    p.add_argument(
        "--network",
        choices=("proxy", "hosts"),
        help="every run through the fault proxy on 127.0.0.1, or on hosts (network namespaces, as root), "
        "where the packet faults host_partition and netem are drawn too (default: the manifest's network)",
    )
    p.add_argument("--runs-dir", default="runs", help="where the exploration's folder goes (default: runs)")
    p.add_argument(
        "--no-calibrate",
        action="store_true",
        help="size the load in absolute users, not from the system's measured capacity (no calibration run)",
    )
    p.add_argument(
        "--confirm", type=int, default=0, metavar="K",
        help="run each new finding's scenario on K more seeds: reproduced in k of K+1 (default 0)",
    )  # fmt: skip
    p.add_argument(
        "--shrink", type=int, default=0, metavar="RUNS",
        help="shrink each new finding with zchaos shrink's search, at most RUNS runs (default 0: not)",
    )  # fmt: skip
    p.add_argument("--until-finding", action="store_true", help="stop after the first finding")
    _add_spark_where(p)
    p.set_defaults(func=_cmd_explore)

    p = sub.add_parser(
        "report",
        help="(re)build the verdict and report of stored runs, all in one Spark session",
        description="(Re)build the verdict, JUnit file and report of each run folder. Several runs are "
        "checked one after the other in one Spark session (one JVM start); the exit code is their "
        "outcomes combined (2 if any is not a run or holds no event).",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="a run folder, e.g. runs/20261121T120000Z-NAME")
    _add_spark_where(p)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "spark",
        help="a local Spark Connect server that later reports use (start | stop | status), and "
        "Spark's class archive (archive)",
        description="start: a Spark Connect server on 127.0.0.1 that outlives the command; while it is "
        "up, `zchaos report/run/suite/explore` send their reports to it (warm: no Spark start per "
        "command), and use an in-process session when it is not (ZCHAOS_SPARK_CONNECT=0: always). "
        "Its token, pid and log are in ~/.cache/zchaos/spark-connect/. stop: it and everything it "
        "started end. status: its address, uptime, memory and the reports it served. archive: "
        "save the class archive that every later report's JVM starts from "
        "(~/.cache/zchaos/spark-cds/, about 190 MB) now, about 40 s, rather than at the end of "
        "the first report on this install: for a CI image, or before a parallel test run.",
    )
    p.add_argument("action", choices=["start", "stop", "status", "archive"])
    p.add_argument(
        "--warm-up",
        type=int,
        default=WARM_UP_REPORTS,
        metavar="N",
        help=f"start: before returning, report a synthetic run N times on the new server (default "
        f"{WARM_UP_REPORTS}, about 20 s on 2 idle cores), so that your first report is as quick as "
        "later ones; 0 returns as soon as it listens",
    )
    p.set_defaults(func=_cmd_spark)

    p = sub.add_parser("load", help="load-test an implementation (no faults)")
    p.add_argument("implementation", help="a built-in implementation name or a manifest path")
    p.add_argument("--users", type=int, default=10, help="Locust users (default 10)")
    p.add_argument("--spawn-rate", type=float, default=10, help="users started per second (default 10)")
    p.add_argument(
        "--wait-ms", type=float, default=0, help="pause between two requests of a user (default 0)"
    )
    p.add_argument("--duration", type=float, default=30, help="seconds of load (default 30)")
    p.add_argument("--workers", type=int, help="worker instances (default: the manifest's)")
    p.add_argument("--processes", type=int, default=1, help="Locust processes (default 1)")
    p.add_argument("--seed", type=int, default=1, help="seed of the request streams (default 1)")
    p.add_argument("--runs-dir", default="runs", help="where run folders go (default: runs)")
    p.add_argument("--no-report", action="store_true", help="skip the Spark report")
    p.add_argument("--ui", action="store_true", help="serve Locust's web UI while the load runs")
    p.add_argument("--ui-port", type=int, default=8089, help="port of the web UI on 127.0.0.1 (default 8089)")
    p.set_defaults(func=_cmd_load)

    p = sub.add_parser(
        "list", help="implementations, probe workers, faults, invariants and scenarios zchaos knows"
    )
    p.set_defaults(func=_cmd_list)

    sub.add_parser(
        "toxiproxy", help="a Toxiproxy-compatible fault proxy server (-host, -port, -config)", add_help=False
    ).set_defaults(func=None)
    return parser


class _Version(argparse.Action):
    """``--version``: the installed package's version (harness/replay.py), looked up only when
    asked, not on every command's start."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from harness.replay import zchaos_version

        print(f"zchaos {zchaos_version()}")
        parser.exit()


#: The exit of a command whose standard output was closed under it (128 + SIGPIPE).
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if argv and argv[0] == "toxiproxy":  # the real server's single-dash flags, passed through
        try:
            return _cmd_toxiproxy(parser.parse_args(["toxiproxy"]), argv[1:])
        except KeyboardInterrupt:
            return 0
    args = parser.parse_args(argv)
    spark = sys.modules.get("reports.spark")
    caller_session = spark is not None and spark.running()  # main() called in a process using Spark
    with _sigterm_interrupts():
        try:
            _spark_where(args)
            code = args.func(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        except BrokenPipeError:
            # The reader went away: nothing more can be said to it, and no traceback either
            # (the interpreter's own flush at exit goes to /dev/null).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = EXIT_CLOSED_PIPE
        except SetupError as exc:
            print(f"zchaos: error: {exc}", file=sys.stderr)
            code = exc.exit_code
        except KeyboardInterrupt:
            print("zchaos: interrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
        except Exception as exc:
            if not _raised_by_an_interrupt(exc):
                raise
            print("zchaos: interrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
        return code if caller_session else _end_spark(code)


def _raised_by_an_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a Ctrl-C or SIGTERM: py4j, interrupted in the
    middle of a call to the JVM, tries to cancel it on the broken connection and raises its
    own error, with the KeyboardInterrupt only as its context."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _spark_where(args: argparse.Namespace) -> None:
    """--spark-remote / --spark-history-dir to the environment variables the report reads
    (reports/connect.py); the run's own processes are not handed the endpoint (it may carry
    a token: harness/topology.py leaves out connect.CLIENT_ENV)."""
    from reports import connect

    for option, key in (("spark_remote", connect.REMOTE_ENV), ("spark_history_dir", connect.HISTORY_DIR_ENV)):
        value = getattr(args, option, None)
        if value:
            os.environ[key] = value
    url = connect.remote()
    if url is not None and (
        args.func in (_cmd_report, _cmd_suite, _cmd_explore)
        or (args.func is _cmd_run and not args.no_report and not args.check)
    ):
        connect.reach(url)  # an endpoint that is not there is an error before any run starts


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM is Ctrl-C for every command: the same cleanup, what finished written, exit 130
    (during a run's processes the runner's own handler takes over, harness/runner.py)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _end_spark(code: int) -> int:
    """The end of a command that started Spark: the session stopped and its JVM waited for,
    so that none outlives this process (reports/spark.py stop_spark); if the JVM is the one
    making the class archive (the first report of an install, reports/cds.py), it writes the
    archive first. An interrupted command ends its JVM at once and writes no archive."""
    spark = sys.modules.get("reports.spark")
    if spark is None:
        return code
    try:
        if code == EXIT_INTERRUPTED:
            spark.kill_spark()
        else:
            from harness.progress import Progress

            spark.stop_spark(Progress().note)
    except KeyboardInterrupt:  # while the archive was written: dropped, the JVM killed
        spark.kill_spark()
        print("zchaos: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
