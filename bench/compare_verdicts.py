"""Are two sets of verdicts the same? For a change that must keep every verdict identical.

Compare two folders of stored runs (each run folder holding its ``verdict.json``), paired
by the run folder's name:

    python bench/compare_verdicts.py OLD NEW

prints, for each pair, every difference in the outcome (and exit code, what made the run
incomplete, the reasons) and, per check, in its status, outcome, violations, summary and
the reason it gives; then the totals. Exit 0 when all pairs agree, 1 when any differs or a
run is in one folder only.

To judge the same runs with another checkout (a report is deterministic for one history),
re-report copies of them first:

    python bench/compare_verdicts.py --rereport CHECKOUT RUNS... --into NEW

copies each run folder given (or each one found under a folder given) into NEW, without
what a report makes, and runs ``zchaos report`` on each copy with the code of CHECKOUT
(its own ``.nox/quick`` Python when it has one, else this one). ``--upgrade`` first rewrites
each copy's run.json as that checkout writes it (``RunDir.write_meta(read_meta())``), so
the verdicts also show that nothing a report reads is lost in the rewriting. Heavy (one
Spark report per run): run it through /work/tools/slot on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: What a report writes into a run folder; a copy to re-report leaves them out.
REPORT_OUTPUTS = ("verdict.json", "junit.xml", "report.html", "results.sqlite")
#: Rewrites the run.json of the run folder given as that checkout writes it.
UPGRADE = (
    "import sys, pathlib; from contract.rundir import RunDir; r = RunDir(pathlib.Path(sys.argv[1])); "
    "r.write_meta(r.read_meta())"
)
#: Per check: what must not change.
CHECK_FIELDS = ("status", "outcome", "violations", "summary", "reason", "expected")
#: Per run.
RUN_FIELDS = ("outcome", "exit_code", "passed", "incomplete", "reasons", "errors", "expect_violated")


def verdicts(folder: Path) -> dict[str, Path]:
    """run folder name -> its verdict.json, for every run under ``folder`` (links followed:
    one folder may gather several runs folders)."""
    found = {}
    for root, _, files in sorted(os.walk(folder, followlinks=True)):
        if "verdict.json" in files:
            found[Path(root).name] = Path(root) / "verdict.json"
    return found


def placed(verdict_json: Path) -> dict[str, Any]:
    """A verdict with its run folder and the two folders above it (a suite's, a runs folder's
    results store) written as <run>, <up1>, <up2>: a copy re-reported elsewhere is the same."""
    text = verdict_json.read_text()
    run = verdict_json.resolve().parent
    for place, name in ((run, "<run>"), (run.parent, "<up1>"), (run.parent.parent, "<up2>")):
        text = text.replace(json.dumps(str(place))[1:-1], name)
    return dict(json.loads(text))


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two verdicts of one run, one line each."""
    lines = [
        f"{field}: {old.get(field)!r} -> {new.get(field)!r}"
        for field in RUN_FIELDS
        if old.get(field) != new.get(field)
    ]
    old_checks, new_checks = old.get("checks") or {}, new.get("checks") or {}
    for name in sorted(old_checks.keys() | new_checks.keys()):
        if name not in new_checks or name not in old_checks:
            lines.append(f"{name}: {'only before' if name in old_checks else 'only after'}")
            continue
        for field in CHECK_FIELDS:
            before, after = old_checks[name].get(field), new_checks[name].get(field)
            if before != after:
                lines.append(f"{name}.{field}: {before!r} -> {after!r}")
    return lines


def compare(old_dir: Path, new_dir: Path, out: Any = sys.stdout) -> int:
    """Print the differences of every pair; the number of runs that differ or lack a twin."""
    old, new = verdicts(old_dir), verdicts(new_dir)
    bad = 0
    checks = 0
    for name in sorted(old.keys() | new.keys()):
        if name not in old or name not in new:
            print(f"{name}: only in {old_dir if name in old else new_dir}", file=out)
            bad += 1
            continue
        before, after = placed(old[name]), placed(new[name])
        checks += len(before.get("checks") or {})
        lines = differences(before, after)
        status = "DIFFERS" if lines else "same"
        print(
            f"{name}: {status} ({before.get('outcome')}, {len(before.get('checks') or {})} checks)", file=out
        )
        for line in lines:
            print(f"    {line}", file=out)
        bad += bool(lines)
    print(f"{len(old.keys() & new.keys())} runs paired, {checks} checks; {bad} differ or unpaired", file=out)
    return bad


def run_folders(paths: list[Path]) -> list[Path]:
    """The run folders given, or found (by their run.json) under the folders given."""
    found: list[Path] = []
    for path in paths:
        if (path / "run.json").exists():
            found.append(path)
        else:
            found += sorted(p.parent for p in path.rglob("run.json"))
    return found


def rereport(checkout: Path, runs: list[Path], into: Path, *, upgrade: bool = False) -> int:
    """Copy each run into ``into`` and report it with ``checkout``'s code; the failures."""
    python = checkout / ".nox" / "quick" / "bin" / "python"
    exe = str(python) if python.exists() else sys.executable
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    failed = 0
    for run in run_folders(runs):
        copy = into / run.name
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns(*REPORT_OUTPUTS, "events.parquet", "parts"))
        if upgrade:
            code = UPGRADE
            subprocess.run([exe, "-c", code, str(copy)], cwd=checkout, env=env, check=True)
        started = time.monotonic()
        done = subprocess.run(
            [exe, "-m", "harness.cli", "report", str(copy)],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
        )
        # 0..4 are outcomes (passed, violated, bad input, unknown, incomplete); 2 is a failure here.
        ok = done.returncode in (0, 1, 3, 4)
        failed += not ok
        print(f"{run.name}: exit {done.returncode} in {time.monotonic() - started:.1f} s", flush=True)
        if not ok:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="+", type=Path, help="OLD NEW, or with --rereport the runs to copy")
    parser.add_argument("--rereport", type=Path, metavar="CHECKOUT", help="report copies with this checkout")
    parser.add_argument("--into", type=Path, help="with --rereport: where the copies go")
    parser.add_argument("--upgrade", action="store_true", help="with --rereport: rewrite run.json first")
    args = parser.parse_args(argv)
    if args.rereport is not None:
        if args.into is None:
            parser.error("--rereport needs --into")
        args.into.mkdir(parents=True, exist_ok=True)
        return 1 if rereport(args.rereport.resolve(), args.folders, args.into, upgrade=args.upgrade) else 0
    if len(args.folders) != 2:
        parser.error("give two folders: OLD NEW")
    return 1 if compare(args.folders[0], args.folders[1]) else 0


if __name__ == "__main__":
    sys.exit(main())
