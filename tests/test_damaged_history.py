"""A damaged history never gives a violation the undamaged run did not have (real Spark, real
files): the client file truncated or with a garbage line, a worker's file cut half-way.

The runs damaged are a synthetic one in the Locust layout (every client in one file,
``history/locust-0.jsonl``) and, when ``ZCHAOS_STORED_RUNS`` names a folder of run folders
(a suite's, say), a copy of each of those too (never the originals)."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from contract.history import HistoryWriter, history_file
from contract.rundir import RunDir
from reports.pipeline import build_report
from tests.history import GENERIC, T0, t

LOAD_S = 30


def locust_run(root: Path) -> RunDir:
    """A passing run: 3 clients writing one file (as Locust's users do) for 30 s, 3 workers,
    worker-2 killed from 10 to 12 s and the system back at once."""
    run = RunDir(root)
    for sub in (run.history, run.logs, run.locust):
        sub.mkdir(parents=True)
    rng = random.Random(5)
    writers: dict[str, HistoryWriter] = {}

    def w(src: str, file: str | None = None) -> HistoryWriter:
        if (file or src) not in writers:
            writers[file or src] = HistoryWriter(history_file(run.history, file or src), src)
        return writers[file or src]

    runner = w("runner")
    runner.emit("phase", ts=t(-1), name="load")
    runner.emit("phase_done", ts=t(LOAD_S), name="load")
    runner.emit("phase_done", ts=t(LOAD_S + 2), name="drain")
    for pid, inst in enumerate(("queue", "worker-1", "worker-2", "worker-3")):
        runner.emit("proc_start", ts=t(-1), role=inst.split("-")[0], instance=inst, pid=1000 + pid)
    nemesis = w("nemesis")
    nemesis.emit("fault_start", ts=t(10), fault="kill", target="worker-2", fault_id=1)
    nemesis.emit("fault_stop", ts=t(12), fault="kill", target="worker-2", fault_id=1)
    runner.emit("proc_exit", ts=t(10), role="worker", instance="worker-2", pid=1002, signal=9, expected=True)
    events: list[tuple[int, str, dict]] = []
    for c in range(1, 4):
        cid = f"client-{c}"
        at, seq = 0.05 * c, 0
        while at < LOAD_S - 0.2:
            seq += 1
            rid = f"{cid}:{seq}"
            worker = f"worker-{1 + (seq + c) % 3}"
            if worker == "worker-2" and 10 <= at < 12:
                worker = "worker-1"
            lat = rng.uniform(0.5, 3.0)
            events.append((t(at), "send", {"cid": cid, "seq": seq, "rid": rid, "attempt": 1}))
            w(worker).emit("exec", ts=t(at) + 10_000, rid=rid, worker=worker)
            reply = {"cid": cid, "seq": seq, "rid": rid, "ok": True, "latency_us": int(lat * 1000)}
            events.append((t(at + lat / 1000), "reply", reply | {"worker": worker}))
            at += 0.1 + lat / 1000
    for ts, ev, fields in sorted(events, key=lambda e: e[0]):
        w(fields["cid"], "locust-0").emit(ev, ts=ts, src=fields["cid"], **fields)
    for writer in writers.values():
        writer.close()
    promises = {"checks": list(GENERIC), "recovery_bound_s": 5.0, "latency_p99_ms": 50.0}
    run.write_meta(
        {
            "scenario": {"name": "synthetic-locust", "seed": 7, "duration_s": LOAD_S, "implementation": "pp"},
            "manifest": {"name": "paranoid-pirate", "promises": promises},
            "expect_violated": [],
            "started_ns": t(-2),
            "load_started_ns": T0,
            "load_stopped_ns": t(LOAD_S),
            "ended_ns": t(LOAD_S + 3),
            "client_budget_s": 5.0,
        }
    )
    return run


def _client_file(hist: Path) -> Path:
    return sorted(hist.glob("locust-*.jsonl"))[0]


def _truncate_client(hist: Path) -> None:
    f = _client_file(hist)
    os.truncate(f, f.stat().st_size - 37)


def _garbage_in_client(hist: Path) -> None:
    f = _client_file(hist)
    lines = f.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    f.write_text("".join([*lines[:half], "\x00\x00garbage, not an event\n", *lines[half:]]))


def _cut_worker(hist: Path) -> None:
    workers = sorted(hist.glob("worker-*.jsonl")) or sorted(
        f for f in hist.glob("*.jsonl") if not f.name.startswith(("locust-", "runner", "nemesis"))
    )
    f = max(workers, key=lambda p: p.stat().st_size)
    data = f.read_bytes()
    f.write_bytes(data[: data.index(b"\n", len(data) // 2) + 10])  # 10 bytes into a line half-way


DAMAGE: dict[str, Callable[[Path], None]] = {
    "client file truncated": _truncate_client,
    "garbage in the client file": _garbage_in_client,
    "worker file cut": _cut_worker,
}


def _stored_runs() -> list[Path]:
    folder = os.environ.get("ZCHAOS_STORED_RUNS")
    if not folder:
        return []
    return sorted(p.parent.parent for p in Path(folder).glob("*/history/locust-*.jsonl"))


def _violated(verdict: dict) -> set[str]:
    return {name for name, c in verdict["checks"].items() if c["status"] == "violated"}


def _fresh_copy(src: Path, dst: Path) -> RunDir:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("events.parquet", "verdict.json", "report.html"))
    return RunDir(dst)


#: run -> its verdict before any damage
_WHOLE: dict[Path, dict] = {}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return locust_run(tmp_path_factory.mktemp("locust") / "run").root


def _nothing_violated_and_no_worker_blamed(verdict: dict) -> None:
    """The synthetic run passes whole: no violation after a damage is no new one."""
    assert not _violated(verdict), {name: verdict["checks"][name]["summary"] for name in _violated(verdict)}
    for check in verdict["checks"].values():  # workers whose file is whole are not blamed
        assert "record nothing" not in (check.get("reason") or ""), check


# On the synthetic run this is a soak (30-40 s of the default run): each of its damages is
# one of the tests below, which assert this too (_nothing_violated_and_no_worker_blamed) and
# more on the same damaged copy. Stored runs (ZCHAOS_STORED_RUNS) stay in the default tier.
@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize(
    "stored",
    [pytest.param(None, marks=pytest.mark.soak), *_stored_runs()],
    ids=lambda p: p.name if p else "synthetic",
)
def test_damage_gives_no_new_violation(spark, synthetic, tmp_path, damage, stored):
    source = stored or synthetic
    if source not in _WHOLE:  # the undamaged verdict, once per run for its three damages
        _WHOLE[source] = build_report(_fresh_copy(source, tmp_path / "whole").root)
    before = _WHOLE[source]
    run = _fresh_copy(source, tmp_path / "damaged")
    DAMAGE[damage](run.history)
    after = build_report(run.root)
    new = _violated(after) - _violated(before)
    assert not new, {name: after["checks"][name]["summary"] for name in new}
    for check in after["checks"].values():  # workers whose file is whole are not blamed
        assert "record nothing" not in (check.get("reason") or ""), check


@pytest.mark.slow
def test_a_cut_line_of_the_shared_client_file_leaves_out_one_request(spark, synthetic, tmp_path):
    """Before: every client wrote into the one damaged file, so every client was left out,
    recovery saw no ok reply after the fault (violated, exit 1) and execution_count said the
    workers record nothing."""
    run = _fresh_copy(synthetic, tmp_path / "run")
    _truncate_client(run.history)
    verdict = build_report(run.root)
    _nothing_violated_and_no_worker_blamed(verdict)
    inp = verdict["input"]
    assert inp["damaged_clients"] == {}
    assert len(inp["damaged_requests"]) == 1  # the request whose reply was cut
    checks = verdict["checks"]
    assert checks["recovery"]["status"] == "held", checks["recovery"]["summary"]
    assert checks["no_unexpected_exit"]["status"] == "held"
    assert checks["no_lost"]["status"] == "unknown" and "damaged" in checks["no_lost"]["reason"]
    assert checks["no_lost"]["figures"]["requests"] > 700  # the others were judged
    assert verdict["outcome"] == "unknown"


@pytest.mark.slow
def test_a_garbage_line_naming_nobody_leaves_its_file_out_without_a_violation(spark, synthetic, tmp_path):
    run = _fresh_copy(synthetic, tmp_path / "run")
    _garbage_in_client(run.history)
    verdict = build_report(run.root)
    _nothing_violated_and_no_worker_blamed(verdict)
    assert set(verdict["input"]["damaged_clients"]) == {"client-1", "client-2", "client-3"}
    checks = verdict["checks"]
    assert checks["recovery"]["status"] == "unknown"
    assert "nothing was left to judge" in checks["execution_count"]["reason"]
    assert verdict["outcome"] == "unknown"


@pytest.mark.slow
def test_a_worker_file_cut_half_way_makes_the_execution_checks_unknown(spark, synthetic, tmp_path):
    run = _fresh_copy(synthetic, tmp_path / "run")
    _cut_worker(run.history)
    verdict = build_report(run.root)
    _nothing_violated_and_no_worker_blamed(verdict)
    sources = verdict["input"]["damaged_sources"]
    assert len(sources) == 1 and "worker-1.jsonl: ends mid-line" in next(iter(sources.values()))
    checks = verdict["checks"]
    assert checks["execution_count"]["status"] == "unknown"
    assert next(iter(sources)) in checks["execution_count"]["reason"]
    assert checks["no_lost"]["status"] == "held"  # reads no worker event
    assert json.dumps(verdict, default=str)  # all of it serialisable
