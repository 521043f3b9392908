"""The checker toolkit: the one fault excuse, instance kinds from the manifest, and the
rule that family modules share helpers only through it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from reports.checkers import CheckContext, FaultWindow, Profile, toolkit
from reports.checkers.core import aggregates
from reports.history_frame import events_frame
from tests.history import NS

CHECKERS_DIR = Path(toolkit.__file__).parent.parent
META = {
    "manifest": {"endpoints": {"frontend": "broker", "backend": "broker"}, "promises": {"checks": []}},
    "processes": {"broker": "broker", "worker-1": "worker", "worker-10": "worker"},
}


def ctx_with(faults: list[FaultWindow], spark: Any = None, events: Any = None) -> CheckContext:
    return CheckContext(spark, events, META, faults)


def test_instance_kinds_come_from_the_manifest_endpoints() -> None:
    ctx = ctx_with([])
    assert toolkit.broker_instances(ctx) == {"broker"}
    assert toolkit.worker_instances(ctx) == {"worker-1", "worker-10"}
    # A role named "server" that binds the client endpoint serves it: not a worker.
    lazy = {
        "manifest": {"endpoints": {"frontend": "server"}, "promises": {"checks": []}},
        "processes": {"server": "server"},
    }
    assert toolkit.worker_instances(CheckContext(None, None, lazy, [])) == set()


def test_one_fault_excuse_for_every_family() -> None:
    faults = [
        FaultWindow(1, "freeze", "worker-1", 10, 20),
        FaultWindow(2, "kill", "broker", 30, 40),
        FaultWindow(3, "partition", "link:worker-10", 50, 60),
        FaultWindow(4, "latency", "worker-1", 70, 80),
        FaultWindow(5, "kill", "worker-10", 90, None),
    ]
    ctx = ctx_with(faults)
    assert toolkit.fault_spans(ctx, "worker-1") == [(10, 20), (30, 40), (70, 80)]
    # worker-1 is not worker-10: a prefix does not make a fault its own.
    assert toolkit.fault_spans(ctx, "worker-10") == [(30, 40), (50, 60), (90, toolkit.END_OF_TIME)]
    assert toolkit.fault_spans(ctx, "worker-1", broker=False, link=False) == [(10, 20)]
    assert toolkit.fault_spans(ctx, "worker-1", own=False, link=False) == [(30, 40)]
    assert toolkit.fault_spans(ctx, "worker-10", lossy_only=True) == [(50, 60)]
    assert toolkit.fault_spans(ctx, "worker-1", grace_ns=15, lead_ns=5) == [(5, 55), (65, 95)]
    # No instance: every fault, whatever its target.
    assert len(toolkit.fault_spans(ctx)) == 5
    assert toolkit.overlaps(toolkit.fault_spans(ctx, "worker-1"), 21, 29) is False
    assert toolkit.overlaps(toolkit.fault_spans(ctx, "worker-1"), 21, 30) is True


def test_on_hosts_a_fault_that_lost_packets_excuses_as_long_again_after_its_stop() -> None:
    """TCP backs its retransmissions off through an IP-level silence: after an 8 s partition a
    WMP manager was heard 5 s after the heal, past the 2 s expiry (steady_state was violated on
    a correct system, 3 of 3 seeds, in hosts mode). Through the proxy the expiry stays the rule,
    and a fault that loses nothing (a slow link) keeps it on hosts too."""
    cut = FaultWindow(1, "partition", "link:device:backend_a", 10 * NS, 18 * NS)
    slow = FaultWindow(2, "latency", "link:device:backend_a", 30 * NS, 38 * NS)
    load = (0, 60 * NS)
    proxy = toolkit.Timers(2.0, 3.0, "expiry_ms = ready_max_ms")
    hosts = toolkit.Timers(2.0, 3.0, "expiry_ms = ready_max_ms", on_hosts=True)
    assert aggregates.excused_spans(load, [cut, slow], proxy)[1:] == [(10 * NS, 20 * NS), (30 * NS, 40 * NS)]
    assert aggregates.excused_spans(load, [cut, slow], hosts)[1:] == [(10 * NS, 26 * NS), (30 * NS, 40 * NS)]
    meta = {"manifest": {"promises": {"expiry_ms": 2000}}, "scenario": {"network": "hosts"}}
    assert toolkit.timers_of(meta).on_hosts and not toolkit.timers_of({**meta, "scenario": {}}).on_hosts


def test_the_excuse_as_a_broadcast_range_join(spark: Any) -> None:
    faults = [
        FaultWindow(1, "freeze", "worker-1", 10 * NS, 20 * NS),
        FaultWindow(2, "kill", "broker", 50 * NS, None),
    ]
    events = events_frame(
        spark,
        [
            {"ts": 15 * NS, "src": "worker-1", "ev": "ping", "worker": "worker-1"},  # its own freeze
            {"ts": 15 * NS, "src": "worker-10", "ev": "ping", "worker": "worker-10"},  # not its fault
            {"ts": 25 * NS, "src": "worker-1", "ev": "ping", "worker": "worker-1"},  # after the grace
            {"ts": 21 * NS, "src": "worker-1", "ev": "ping", "worker": "worker-1"},  # in the grace
            {"ts": 60 * NS, "src": "worker-10", "ev": "ping", "worker": "worker-10"},  # broker never back
        ],
    )
    ctx = ctx_with(faults, spark, events)
    marked = toolkit.with_excused(events, ctx, instance="src", grace_ns=2 * NS)
    got = {(r["ts"] // NS, r["src"]): r["excused"] for r in marked.collect()}
    assert got == {
        (15, "worker-1"): True,
        (15, "worker-10"): False,
        (25, "worker-1"): False,
        (21, "worker-1"): True,
        (60, "worker-10"): True,
    }
    kept = toolkit.outside(events, ctx, [(14 * NS, 22 * NS)])
    assert sorted(r["ts"] // NS for r in kept.collect()) == [25, 60]


def _requests(spark: Any) -> Any:
    """Two clients' requests: sent, one retried, replied but one; an exec of each."""
    events = []
    for cid, last in (("client-1", 3), ("client-2", 2)):
        for seq in range(1, last + 1):
            rid, at = f"{cid}:{seq}", seq * NS
            request = {"cid": cid, "seq": seq, "rid": rid}
            events.append({"ts": at, "src": cid, "ev": "send", "attempt": 1, **request})
            events.append({"ts": at + 5, "src": "worker-1", "ev": "exec", "rid": rid, "worker": "worker-1-a"})
            if (cid, seq) != ("client-2", 1):  # lost
                events.append({"ts": at + 9, "src": cid, "ev": "reply", "ok": True, **request})
    events.append(
        {"ts": 9 * NS, "src": "client-1", "ev": "retry", "cid": "client-1", "seq": 2, "rid": "client-1:2"}
    )
    return events_frame(spark, events)


def _plan(frame: Any) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


@pytest.mark.slow  # 7 s of Spark plans
def test_prepared_shared_aggregates_skip_the_partial_aggregation_and_are_compiled(spark: Any) -> None:
    events = _requests(spark)
    # Built on first use, as Spark plans any aggregation: a partial one before the shuffle.
    lazy = ctx_with([], spark, events)
    assert all("partial_" in _plan(lazy.shared(name, toolkit.SHARED[name])) for name in toolkit.SHARED)
    shared = (toolkit.per_request, toolkit.per_rid)
    built = {f.__name__: sorted(map(tuple, f(lazy).collect())) for f in shared}
    lazy.release()
    prepared = ctx_with([], spark, events)
    # A short history's session (reports/spark.py fit_to): interpreted, no adaptive execution.
    short = {
        toolkit.shared.WHOLE_STAGE: "false",
        toolkit.shared.FACTORY_MODE: "NO_CODEGEN",
        "spark.sql.adaptive.enabled": "false",
    }
    before = {key: spark.conf.get(key, None) for key in [*toolkit.shared.PREPARED, *short]}
    try:
        for key, value in short.items():
            spark.conf.set(key, value)
        toolkit.prepare(prepared, ["per_request", "per_rid"])
        assert spark.conf.get(toolkit.shared.WHOLE_STAGE) == "false"  # the session's settings put back
        assert spark.conf.get(toolkit.shared.FACTORY_MODE) == "NO_CODEGEN"
        assert spark.conf.get(toolkit.shared.BYPASS_PARTIAL, None) == before[toolkit.shared.BYPASS_PARTIAL]
    finally:
        for key in short:
            if before[key] is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before[key])  # type: ignore[arg-type]
    plans = [_plan(prepared.shared(name, toolkit.SHARED[name])) for name in toolkit.SHARED]
    assert not any("partial_" in plan for plan in plans)
    # Compiled though the session interprets: each aggregation is a stage of generated code.
    assert all("*(" in plan for plan in plans), plans
    # The same rows either way; each client's last request from its sends.
    for f in shared:
        assert sorted(map(tuple, f(prepared).collect())) == built[f.__name__]
    rows = {(r["cid"], r["seq"]): r for r in toolkit.per_request(prepared).collect()}
    assert {k: (r["last_seq"], r["replied"], r["retries"]) for k, r in rows.items()} == {
        ("client-1", 1): (3, 1, 0),
        ("client-1", 2): (3, 1, 1),
        ("client-1", 3): (3, 1, 0),
        ("client-2", 1): (2, 0, 0),
        ("client-2", 2): (2, 1, 0),
    }
    # A short history's (counted, small): each client's last request by a window, no broadcast,
    # the same rows and columns.
    counted = Profile({"client-1": {"send": 3}, "client-2": {"send": 2}}, 0, 9 * NS)
    assert counted.events < toolkit.shared.LAST_SEQ_WINDOW_MAX_EVENTS
    short = CheckContext(spark, events, META, [], profile=counted)
    windowed = toolkit.per_request(short)
    assert "Window" in _plan(windowed) and "Broadcast" not in _plan(windowed)
    assert "Broadcast" in _plan(toolkit.per_request(prepared))
    assert windowed.columns == toolkit.per_request(prepared).columns
    assert sorted(map(tuple, windowed.collect())) == sorted(
        map(tuple, toolkit.per_request(prepared).collect())
    )
    short.release()
    prepared.release()


@pytest.mark.slow
def test_each_dispatch_finds_the_registration_state_it_was_sent_in(spark: Any) -> None:
    def broker(at_s: float, kind: str, worker: str = "w-a", **more: Any) -> dict[str, Any]:
        return {"ts": int(at_s * NS), "src": "broker", "ev": kind, "worker": worker, **more}

    # A history of 4000 s: spans cut into buckets of 8 s, a registration's span crosses many.
    events = [
        broker(10, "worker_ready", reason="ready"),
        broker(2000, "worker_expired", reason="silent"),
        broker(2500, "worker_ready", reason="ping"),
        broker(4000, "worker_ready", worker="w-c"),
    ]
    sent = {5: None, 10: "worker_ready", 1500: "worker_ready", 2100: "worker_expired", 3000: "worker_ready"}
    events += [broker(at, "dispatch", rid=f"r{at}") for at in sent]
    events.append(broker(100, "dispatch", worker="w-b", rid="never"))  # a worker never registered
    frame = events_frame(spark, events)
    ctx = ctx_with([], spark, frame)
    got = toolkit.with_state(ctx, frame.filter("ev = 'dispatch'")).collect()
    assert {r["rid"]: r["state"] for r in got} == {f"r{at}": state for at, state in sent.items()} | {
        "never": None
    }
    assert {r["rid"]: r["state_reason"] for r in got}["r2100"] == "silent"
    result = toolkit.registered_dispatch(ctx)
    assert (result.status, result.violations) == ("violated", 3)
    assert [e["rid"] for e in result.examples] == ["r5", "never", "r2100"]


def test_each_mark_finds_the_latest_event_before_it(spark: Any) -> None:
    import random

    rnd = random.Random(12)
    # A history of 4000 s (buckets of 8 s): events of two workers at random times (some
    # before every mark, some at a mark's very time), marks at random times (two at once,
    # one key with no event at all, intervals crossing many buckets).
    events = [{"ts": rnd.randrange(0, 4000 * NS), "src": rnd.choice(["w-1", "w-2"]), "ev": "exec"}
              for _ in range(300)]  # fmt: skip
    events += [{"ts": 1000 * NS, "src": "w-1", "ev": "exec"}, {"ts": 4000 * NS, "src": "w-2", "ev": "exec"}]
    marks = [{"ts": t, "src": src, "ev": "ping"} for src in ("w-1", "w-2", "w-3")
             for t in sorted(rnd.randrange(0, 4000 * NS) for _ in range(12))]  # fmt: skip
    marks += [{"ts": 1000 * NS, "src": "w-1", "ev": "ping"}, {"ts": 1000 * NS, "src": "w-1", "ev": "ping"}]
    frame = events_frame(spark, events + marks)
    ctx = ctx_with([], spark, frame)
    got = toolkit.last_before(ctx, frame.filter("ev = 'ping'"), frame.filter("ev = 'exec'"), "src", "before")
    found = sorted((r["src"], r["ts"], r["before"]) for r in got.collect())

    def latest(src: str, ts: int) -> int | None:
        return max((e["ts"] for e in events if e["src"] == src and e["ts"] < ts), default=None)

    assert found == sorted((m["src"], m["ts"], latest(m["src"], m["ts"])) for m in marks)
    assert {b for src, _, b in found if src == "w-3"} == {None}


@pytest.mark.parametrize("one_aggregation", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_totals_and_the_first_offenders(spark: Any, monkeypatch: Any, one_aggregation: bool) -> None:
    import random

    from pyspark.sql import functions as F

    from reports.checkers import Profile

    # A history counted at 200 events: one aggregation from ONE_PASS_MIN_EVENTS on.
    monkeypatch.setattr(aggregates, "ONE_PASS_MIN_EVENTS", 200 if one_aggregation else 201)
    times = random.Random(3).sample(range(10_000), 200)
    frame = spark.createDataFrame([(ts, ts % 3 == 0) for ts in times], "ts long, bad boolean")
    ctx = CheckContext(spark, frame, META, [], profile=Profile({"client": {"send": 200}}, 0, 10_000))
    plans: list[str] = []
    monkeypatch.setattr(type(frame), "agg", _recording(type(frame).agg, plans))
    row, firsts = aggregates.totals_and_firsts(
        ctx, frame, [F.count("*").alias("n"), F.sum(F.col("bad").cast("int")).alias("bad")], F.col("bad")
    )
    assert any("min_by" in p for p in plans) == one_aggregation
    offenders = sorted(ts for ts in times if ts % 3 == 0)
    assert (row["n"], row["bad"]) == (200, len(offenders))
    assert [r["ts"] for r in firsts] == offenders[: toolkit.MAX_EXAMPLES]
    assert set(firsts[0]) == {"ts", "bad"}
    none, shown = aggregates.totals_and_firsts(
        ctx, frame.filter(~F.col("bad")), [F.count("*").alias("n")], F.col("bad")
    )
    assert (none["n"], shown) == (200 - len(offenders), [])


def test_offenders_of_one_frame_counted_with_its_totals(spark: Any, monkeypatch: Any) -> None:
    import random

    from pyspark.sql import functions as F

    from reports.checkers.toolkit import results

    times = random.Random(5).sample(range(10_000), 300)
    frame = spark.createDataFrame([(ts, ts % 3, f"r{ts}") for ts in times], "ts long, k int, rid string")
    labelled = [("by three", F.col("k") == 0), ("one", F.col("k") == 1), ("never", F.col("k") == 7)]
    cols = ["ts", F.col("rid").alias("id")]
    found = toolkit.problems_in(
        frame, *((label, cond, cols) for label, cond in labelled), totals=[F.count("*").alias("n")]
    )
    # The same counts and examples as problems() over each label's rows, the totals beside them.
    alike = toolkit.problems(*((label, frame.filter(cond).select(*cols)) for label, cond in labelled))
    assert dict(found) == dict(alike) and set(found) == {"by three", "one"}
    assert found.n("by three") == sum(ts % 3 == 0 for ts in times)
    assert found.totals == {"n": 300}
    assert set(found.shown("one")[0]) == {"ts", "id", "problem"}
    # Counted first, examples read for the shown labels alone: the same counts and examples.
    frames = [(label, frame.filter(cond).select(*cols)) for label, cond in labelled]
    some = toolkit.problems(*frames, shown=["one", "never"])
    assert {label: n for label, (n, _) in some.items()} == {label: n for label, (n, _) in alike.items()}
    assert (some["one"], some["by three"][1]) == (alike["one"], [])
    # Nothing offends: the one aggregation, no query for examples.
    monkeypatch.setattr(results, "problems", lambda *_a: pytest.fail("examples read with no offender"))
    none = toolkit.problems_in(frame, ("never", F.col("k") == 7, cols), totals=[F.max("ts").alias("last")])
    assert (dict(none), none.totals) == ({}, {"last": max(times)})


def test_every_kind_of_problem_is_shown_however_many_of_one_kind_came_first(spark: Any) -> None:
    from reports.checkers import MAX_EXAMPLES, VIOLATED

    many = MAX_EXAMPLES + 5
    offenders = [(ts, "not ok", f"z{ts}") for ts in range(1, many + 1)] + [(500, "foreign", "a")]
    frame = spark.createDataFrame(offenders, "ts long, problem string, job string")
    found = toolkit.examples(frame)  # the first ten, and the first of each kind
    assert [ex["ts"] for ex in found] == [*range(1, MAX_EXAMPLES + 2), 500]
    shown = toolkit.result("bad", violations=many + 1, examples=found).examples
    assert shown[-1]["problem"] == "foreign" and len(shown) == MAX_EXAMPLES  # not cut by 10 earlier ones
    assert [ex["ts"] for ex in shown] == [*range(1, MAX_EXAMPLES), 500]
    assert toolkit.result("bad", violations=1, examples=found).status == VIOLATED
    assert [r["ts"] for r in toolkit.rows(frame, "ts", "problem", limit=2)] == [1, 2, 3, 500]
    # However many kinds (a label that names a time): the first n, and the first of n kinds.
    late = [(ts, f"late by {ts} ms") for ts in range(1, 1000)]
    distinct = spark.createDataFrame(late, "ts long, problem string")
    assert [ex["ts"] for ex in toolkit.examples(distinct, 3)] == [1, 2, 3]
    assert [r["ts"] for r in toolkit.rows(frame, "ts", limit=2)] == [1, 2]
    # problems(): the earliest rows of each label, whatever the frame's first column.
    by_job = frame.filter("problem = 'not ok'").select("job", "ts")  # "z10" sorts before "z2"
    labels = toolkit.problems(("not ok", by_job))
    assert [ex["ts"] for ex in labels.shown("not ok")] == list(range(1, MAX_EXAMPLES + 1))
    assert labels.n("not ok") == many


def _recording(agg: Any, plans: list[str]) -> Any:
    """DataFrame.agg that also keeps the text of the aggregations asked for."""

    def recorded(self: Any, *exprs: Any) -> Any:
        plans.extend(str(e) for e in exprs)
        return agg(self, *exprs)

    return recorded


def test_check_modules_import_through_the_toolkit_alone() -> None:
    """One door: a check module imports from reports.checkers only the toolkit (the generic
    checks also their own package), never another family's module."""
    for path in sorted(CHECKERS_DIR.rglob("*.py")):
        if path.parent.name == "toolkit" or path == CHECKERS_DIR / "__init__.py":
            continue
        own = "reports.checkers.core" if path.parent.name == "core" else None
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reports.checkers"):
                allowed = node.module == "reports.checkers.toolkit" or (own and node.module.startswith(own))
                assert allowed, f"{path.relative_to(CHECKERS_DIR)} imports {node.module}"
                renamed = [a.name for a in node.names if a.asname]
                assert not renamed, f"{path.relative_to(CHECKERS_DIR)} renames {renamed} on import"


@pytest.mark.parametrize(
    ("on_damage", "status", "stands"),
    [
        (toolkit.WHOLE_RUN, "violated", False),
        (toolkit.WHOLE_RUN, "held", False),
        (toolkit.EACH_REQUEST, "violated", True),
        (toolkit.EACH_REQUEST, "held", False),
        (toolkit.SOME_REPLY, "held", True),
        (toolkit.SOME_REPLY, "violated", False),
    ],
)
def test_what_stands_of_a_check_with_damaged_requests_left_out_is_its_on_damage(
    on_damage: toolkit.OnDamage, status: str, stands: bool
) -> None:
    """A check that says nothing of damage (the default, WHOLE_RUN) is unknown whatever it
    found for the rest: a new check cannot vouch for requests it never saw by mistake."""
    from reports.checkers import Checker, CheckResult
    from reports.ingest.damage import Damage
    from reports.pipeline import damaged_result

    assert Checker("new_check", "doc", fn=lambda ctx: None).on_damage == toolkit.WHOLE_RUN  # type: ignore[arg-type,return-value]
    checker = Checker("new_check", "doc", fn=lambda ctx: None, on_damage=on_damage)  # type: ignore[arg-type,return-value]
    found = CheckResult("new_check", status, violations=int(status == "violated"), summary="found")
    damage = Damage(clients={"client-2": "its file ends mid-line"})
    after = damaged_result(found, damage, checker, None)  # type: ignore[arg-type]  # read only for an unknown
    assert (after.status == status) is stands
    assert after.status in (status, "unknown")
    assert ("client-2" in after.summary) is True


def test_a_frozen_frame_holds_the_rows_not_the_plan_that_found_them(spark: Any) -> None:
    """``frozen``: the few rows a check shows, as literals, so that the query over them does not
    run again the shuffles that chose them (steady_state's examples: 36 shuffles, issue 38)."""
    rows = [(ts % 7, ts, f"c{ts % 3}", None if ts % 4 else 1.5) for ts in range(40)]
    frame = spark.createDataFrame(rows, "k int, ts long, cid string, x double")
    grouped = frame.groupBy("cid").agg({"ts": "max", "k": "min"}).withColumnRenamed("max(ts)", "ts")
    chosen = toolkit.firsts(grouped)
    assert "Exchange" in chosen._jdf.queryExecution().executedPlan().toString()
    kept = toolkit.frozen(ctx_with([], spark), chosen)
    assert [(f.name, f.dataType) for f in kept.schema] == [(f.name, f.dataType) for f in chosen.schema]
    assert sorted(map(tuple, kept.collect())) == sorted(map(tuple, chosen.collect()))
    assert "Exchange" not in kept._jdf.queryExecution().executedPlan().toString()
    with_null = toolkit.frozen(ctx_with([], spark), frame.filter("ts < 4"))
    assert [r["x"] for r in with_null.orderBy("ts").collect()] == [1.5, None, None, None]
    nothing = frame.filter("ts < 0")
    assert toolkit.frozen(ctx_with([], spark), nothing).collect() == []
