"""The results store (reports/store.py): rows per run, concurrent writers, a damaged store
rebuilt from the run folders; and the baseline comparison (reports/baseline.py) on stored runs.

The runs here are run folders written by hand (run.json and verdict.json as the runner and
the pipeline write them); tests/test_regression_e2e.py makes real ones."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contract.errors import SetupError
from contract.rundir import RunDir
from harness.cli import main
from harness.config import Table
from harness.scenario import _baseline
from reports.baseline import baseline_check, compare
from reports.checkers import HELD, VIOLATED, CheckResult
from reports.html import write_html
from reports.store import StoreDamaged, read_runs, record_run, store_path
from reports.verdict import build_verdict

ROOT = Path(__file__).resolve().parent.parent
NS = 1_000_000_000
T0 = 1_795_700_000 * NS


def synthetic_run(
    runs_dir: Path,
    scenario: str,
    implementation: str,
    seed: int,
    *,
    violated: tuple[str, ...] = (),
    recovery_s: tuple[float, ...] = (0.5,),
    p99_ms: float = 12.0,
    availability: float | None = 0.95,
    version: str = "",
    kinds: tuple[str, ...] = ("kill",),
    minute: int = 0,
    baseline: dict[str, Any] | None = None,
    page: bool = False,
    regressed: bool = False,
) -> RunDir:
    """A run folder as a finished run leaves it: run.json, verdict.json (and report.html);
    ``regressed``: its ``baseline`` check was violated."""
    started = T0 + (minute * 60 + seed) * NS
    run = RunDir(runs_dir / f"{minute:04d}-{seed}-{scenario}-{implementation}-{version or 'v'}")
    for sub in (run.history, run.logs, run.locust):
        sub.mkdir(parents=True)
    checks = ["no_lost", "recovery", "steady_state"] + (["availability"] if availability is not None else [])
    faults = [
        {"fault_id": i, "fault": kinds[0], "target": "worker-1", "start_ns": started + 5 * NS,
         "stop_ns": started + 6 * NS, "recovery_s": r, "within_bound": True}
        for i, r in enumerate(recovery_s, start=1)
    ]  # fmt: skip
    results = []
    for name in checks:
        status = VIOLATED if name in violated else HELD
        figures: dict[str, Any] = {}
        if name == "availability":
            figures = {
                "faults": [{"fault_id": 1, "fault": kinds[0], "target": "worker-1", "ratio": availability}]
            }
        results.append(
            CheckResult(name, status, int(status == VIOLATED), summary=f"{name} {status}", figures=figures)
        )
    if regressed:
        results.append(CheckResult("baseline", VIOLATED, 1, summary="recovery regressed against 'v1'"))
    meta = {
        "scenario": {
            "name": scenario,
            "seed": seed,
            "faults": [{"kind": k, "target": "worker-1"} for k in kinds],
            "baseline": baseline,
        },
        "manifest": {"name": implementation, "version": version, "promises": {"checks": checks}},
        "plan": [{"kind": k, "target": "worker-1", "fault_id": i} for i, k in enumerate(kinds, start=1)],
        "started_ns": started,
        "ended_ns": started + 30 * NS,
        "replay": {"zchaos_version": "0.1.0+gtest"},
    }
    run.write_meta(meta)
    metrics = {
        "latency_ms": {"count": 1000, "p50": 1.5, "p99": p99_ms},
        "client_kinds": {
            "sync": {
                "clients": 4,
                "requests": 1000,
                "replies": 997,
                "retries": 3,
                "abandons": 0,
                "latency_ms": {"p50": 1.5, "p99": p99_ms, "max": 40.0},
            }
        },
    }
    verdict = build_verdict(
        meta,
        results,
        metrics,
        extra={"faults": faults, "run_dir": str(run.root), "times": {"started_ns": started}},
    )
    run.verdict_json.write_text(json.dumps(verdict))
    if page:
        write_html(verdict, meta, run, run.report_html)
    return run


def test_a_run_adds_one_row_per_check_and_per_key_figure(tmp_path):
    run = synthetic_run(tmp_path, "kill-worker", "pirate", 7, violated=("no_lost",), recovery_s=(0.4, 1.25))
    store = record_run(run.root)
    assert store == store_path(tmp_path)
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = db.execute(
            "SELECT kind, name, outcome, value, unit, fault_id, scenario, implementation, seed, "
            "zchaos_version FROM results ORDER BY kind, name, fault_id"
        ).fetchall()
    checks = {r[1]: r[2] for r in rows if r[0] == "check"}
    assert checks == {
        "no_lost": "violated",
        "recovery": "passed",
        "steady_state": "passed",
        "availability": "passed",
    }
    figures = {(r[1], r[5]): (r[3], r[4]) for r in rows if r[0] == "figure"}
    assert figures[("recovery_s", 1)] == (0.4, "s") and figures[("recovery_s", 2)] == (1.25, "s")
    assert figures[("max_recovery_s", None)] == (1.25, "s")
    assert figures[("min_availability", None)] == (0.95, "ratio")
    assert figures[("p99_ms", None)] == (12.0, "ms") and figures[("requests", None)] == (1000, "count")
    assert figures[("duration_s", None)] == (30.0, "s")
    assert {r[6:] for r in rows} == {("kill-worker", "pirate", 7, "0.1.0+gtest")}
    # A report rebuilt replaces the run's rows; it never adds a second set.
    record_run(run.root)
    (stored,) = read_runs(store)
    assert stored["outcome"] == "violated" and len(stored["checks"]) == 4
    assert len(stored["figures"]["recovery_s"]) == 2


#: A writer process: waits for the go file (so that all start at once), then appends its runs.
WRITER = """
import sys, time
from pathlib import Path
from reports.store import record_run
go, store, *runs = sys.argv[1:]
deadline = time.monotonic() + 60
while not Path(go).exists():
    assert time.monotonic() < deadline, "never told to go"
    time.sleep(0.005)
for root in runs:
    record_run(Path(root), Path(store))
"""


def test_concurrent_writers_all_land(tmp_path):
    """Four processes append 15 runs each at the same moment: every run is there, whole."""
    folders = [
        [str(synthetic_run(tmp_path, f"s{n}", f"impl{w}", n, minute=w).root) for n in range(15)]
        for w in range(4)
    ]
    go = tmp_path / "go"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(go), str(store_path(tmp_path)), *f], cwd=ROOT)
        for f in folders
    ]
    try:
        go.touch()
        assert [w.wait(120) for w in writers] == [0, 0, 0, 0]
    finally:
        for w in writers:
            w.kill()
            w.wait()
    runs = read_runs(store_path(tmp_path))
    assert len(runs) == 60
    assert all(len(r["checks"]) == 4 and "p99_ms" in r["figures"] for r in runs)
    with sqlite3.connect(store_path(tmp_path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_damaged_store_is_named_and_rebuilt_from_the_run_folders(tmp_path, capsys):
    base = synthetic_run(tmp_path, "kill-worker", "pirate", 1, recovery_s=(0.3,))
    other = synthetic_run(tmp_path / "suite-x" / "seeds-y", "kill-worker", "pirate", 2)  # suite --seeds
    record_run(base.root)
    assert main(["baseline", str(base.root), "--label", "v1"]) == 0
    record_run(other.root, store_path(tmp_path))
    store = store_path(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    store.write_bytes(b"this is not a database, it was overwritten" * 100)
    with pytest.raises(StoreDamaged) as err:
        record_run(other.root, store)
    assert err.value.where == str(store) and f"zchaos index {tmp_path}" in str(err.value)
    (tmp_path / "no-verdict").mkdir()
    RunDir(tmp_path / "no-verdict").write_meta({"manifest": {"promises": {"checks": []}}})
    capsys.readouterr()
    assert main(["index", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "damaged store was moved aside" in out and "2 run(s) indexed, 1 folder(s) skipped" in out
    assert "no-verdict/verdict.json" in out
    runs = read_runs(store)
    assert sorted(r["run"] for r in runs) == sorted([base.root.name, f"suite-x/seeds-y/{other.root.name}"])
    # The baseline label came back from the run folder.
    meta = {"scenario": {"name": "kill-worker", "baseline": {"label": "v1", "recovery_ratio": 1.5}}}
    now = json.loads(other.verdict_json.read_text())
    assert baseline_check(meta, now, store).figures["baseline_run"] == str(base.root.resolve())


def test_the_regression_check_against_a_stored_baseline(tmp_path):
    promise = {
        "label": "fast",
        "recovery_ratio": 1.5,
        "p99_ratio": 2.0,
        "recovery_slack_s": 0.5,
        "p99_slack_ms": 1.0,
    }
    fast = synthetic_run(tmp_path, "kill-all", "twin", 1, recovery_s=(0.6,), p99_ms=10.0)
    slow = synthetic_run(tmp_path, "kill-all", "twin-slow", 1, recovery_s=(4.0,), p99_ms=15.0, minute=1)
    store = store_path(tmp_path)
    meta = {"scenario": {"name": "kill-all", "baseline": promise}}
    slow_verdict = json.loads(slow.verdict_json.read_text())
    unknown = baseline_check(meta, slow_verdict, store)
    assert unknown.status == "unknown" and "zchaos baseline RUN --label fast" in unknown.reason
    assert main(["baseline", str(fast.root), "--label", "fast"]) == 0
    result = baseline_check(meta, slow_verdict, store)
    assert (result.status, result.violations) == (VIOLATED, 2)  # the fault's recovery and the slowest
    assert "recovery_s (fault 1: kill worker-1): 0.6 s → 4 s" in result.examples[0]["problem"]
    assert result.figures["baseline_run"] == str(fast.root.resolve())
    # The fast twin itself, and a run slower only within the slack, hold.
    fast_verdict = json.loads(fast.verdict_json.read_text())
    assert baseline_check(meta, fast_verdict, store).status == HELD
    near = synthetic_run(tmp_path, "kill-all", "twin", 2, recovery_s=(1.3,), p99_ms=20.9, minute=2)
    assert baseline_check(meta, json.loads(near.verdict_json.read_text()), store).status == HELD
    # A scenario that promises nothing has no such check.
    assert baseline_check({"scenario": {"name": "kill-all"}}, slow_verdict, store) is None


def test_compare_says_what_got_worse_check_by_check_and_figure_by_figure(tmp_path, capsys):
    base = synthetic_run(tmp_path, "s", "impl", 1, recovery_s=(0.5,), p99_ms=10.0, availability=0.9)
    now = synthetic_run(
        tmp_path,
        "s",
        "impl",
        1,
        recovery_s=(0.52,),
        p99_ms=30.0,
        availability=0.5,
        violated=("no_lost",),
        minute=1,
    )
    rows = compare(
        (json.loads(now.verdict_json.read_text()), now.read_meta()),
        (json.loads(base.verdict_json.read_text()), base.read_meta()),
    )
    worse = {r["what"] for r in rows if r["worse"]}
    assert worse == {
        "the run",
        "no_lost",
        "p99_ms",
        "min_availability",
        "availability (fault 1: kill worker-1)",
    }
    assert main(["compare", str(now.root), "--baseline", str(base.root)]) == 1
    out = capsys.readouterr().out
    assert "WORSE check no_lost: passed → violated" in out and "WORSE p99_ms: 10 ms → 30 ms (3.00×)" in out
    page = (now.root / "compare.html").read_text()
    assert 'id="compare-figures"' in page and "regressed" not in page.split("<main>")[1].split("<p class")[0]
    assert main(["compare", str(now.root), "--baseline", "nope"]) == 2
    assert "neither a run folder nor a baseline label" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"recovery_ratio": 1.5}, "baseline.label: missing"),
        ({"label": "v1"}, "give at least one of recovery_ratio, p99_ratio, availability_ratio"),
        ({"label": "v1", "recovery_ratio": 0.5}, "baseline.recovery_ratio: must be at least 1"),
        ({"label": "v1", "p99_ratio": 2, "p99_slak_ms": 3}, "did you mean 'p99_slack_ms'?"),
    ],
)
def test_a_bad_baseline_table_names_the_key(table, message):
    with pytest.raises(SetupError) as err:
        _baseline(Table(table, "s.toml", "baseline"))
    assert message in str(err.value)
