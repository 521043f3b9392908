"""``zchaos explore``'s pure parts: the scenario generator and its mutations
(harness/explore/generate.py), a run's behaviour signature and the findings' dedup
(harness/explore/signature.py), the corpus and the findings written (harness/explore/loop.py).
Nothing here starts a process; tests/test_explore_runs.py explores real subjects."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chaos.faults import ParamProblem
from chaos.kinds import FAULT_KINDS
from contract.errors import SetupError
from harness.cli import main
from harness.explore.generate import (
    FIRST_FAULT_S,
    MAX_FAULTS,
    NEAR_EXPIRY,
    Space,
    _fits,
    _room_to_ask_s,
    bracket,
    companions,
    context_of,
    draw_fault,
    fault_pair,
    generate,
    length_of,
    make_space,
    mutate,
    pair_of,
    pairs,
    pauses,
    sides_to_bracket,
    stretches,
    to_scenario,
    where_of,
    with_room_to_judge,
)
from harness.explore.loop import (
    Exploration,
    _learn,
    _pick,
    energy,
    focus_of,
    next_scenario,
    parse_duration,
    resumed,
)
from harness.explore.signature import bucket, findings, problem_kind, share_bucket, signature
from harness.manifest import builtin_manifests, load_manifest
from harness.runner import forecast
from harness.scenario import load_scenario
from tests.procs import ROOT

SUBJECT = ROOT / "tests" / "explore_subject" / "manifest.toml"


def space_of(ref: str | Path = "paranoid-pirate", **kw: Any) -> Space:
    return make_space(load_manifest(ref), **kw)


def problems_of(space: Space, data: dict[str, Any]) -> list[str]:
    """What a generated scenario does wrong against the space's bounds (empty: nothing)."""
    wrong = []
    faults = data["faults"]
    if not 1 <= len(faults) <= MAX_FAULTS:
        wrong.append(f"{len(faults)} faults")
    for f in faults:
        kind = FAULT_KINDS[f["kind"]]
        if kind.name not in space.kinds:
            wrong.append(f"kind {kind.name} not allowed")
        targets = space.links if kind.target == "link" else [i for v in space.processes.values() for i in v]
        if f["target"] not in targets:
            wrong.append(f"{kind.name} on {f['target']}")
        at, end = f["at_s"][0], f["at_s"][0] + length_of(kind, f)
        if at < FIRST_FAULT_S or end > max(space.last_end_s, FIRST_FAULT_S + 0.5) + 0.01:
            wrong.append(f"{kind.name} from {at} to {end} s, outside [{FIRST_FAULT_S}, {space.last_end_s}]")
        if kind.name == "kill" and f.get("restart_after_s") is None:
            wrong.append("a kill never restarted")
        for name, spec in kind.params.items():
            if not spec.explore or name not in f:
                continue
            value = f[name]
            if spec.choices or spec.type is str:
                ok = value in spec.explore
            else:
                lo, hi = spec.explore
                if spec.length and space.expiry_s:  # guided's lengths around the system's expiry
                    hi = max(hi, space.expiry_s * NEAR_EXPIRY[1])
                ok = (spec.min or 0) <= value <= hi if spec.length else lo <= value <= hi
            if not ok:
                wrong.append(f"{kind.name}.{name} = {value} outside {spec.explore}")
    phases = data["load"].get("phases")
    total = sum(p["duration_s"] for p in phases) if phases else data["duration_s"]
    if abs(total - space.duration_s) > 0.05:
        wrong.append(f"{total} s of load, not {space.duration_s}")
    return wrong


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another() -> None:
    space = space_of()
    assert generate(space, random.Random(7)) == generate(space, random.Random(7))
    drawn = {repr(generate(space, random.Random(seed))) for seed in range(10)}
    assert len(drawn) == 10
    # Named by what it does: one name in the results store is one scenario.
    names = {generate(space, random.Random(seed))["name"] for seed in range(10)}
    assert len(names) == 10 and all(n.startswith("explore-") for n in names)
    again = {**generate(space, random.Random(7)), "seed": 1}
    assert again["name"] == generate(space, random.Random(7))["name"]


def test_the_same_seed_gives_the_same_scenarios_in_another_process() -> None:
    # Which loads have clients that never resend was drawn from a hash of the generator's
    # whole state, None's included, and None's hash is its address in Python 3.11: it
    # changed from one process to the next.
    code = (
        "import json, random; from harness.explore.generate import generate, make_space; "
        "from harness.manifest import load_manifest; space = make_space(load_manifest('lazy-pirate')); "
        "from collections import Counter; from harness.explore.generate import pairs; "
        "busy = Counter({f'{p} while busy': 1 for p in pairs(space)}); "
        "print(json.dumps([generate(space, random.Random(n)) for n in range(20)])); "
        "print(json.dumps([generate(space, random.Random(n), drawn=Counter(busy)) for n in range(20)]))"
    )
    drawn = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
        ).stdout
        for _ in range(2)
    ]
    assert drawn[0] == drawn[1] and '"reply_deadline_s"' in drawn[0]
    assert '"name": "idle"' in drawn[0].splitlines()[1]  # guided's, faults moved to quiet stretches


@pytest.mark.parametrize("name", sorted(builtin_manifests()))
def test_every_generated_scenario_of_every_built_in_parses_and_keeps_to_its_bounds(name: str) -> None:
    space = space_of(name)
    for seed in range(15):
        rng = random.Random(seed)
        data = generate(space, rng)
        assert problems_of(space, data) == [], data
        scenario = to_scenario(space, data)  # a SetupError here is the generator's bug
        assert len(scenario.faults) == len(data["faults"])
        assert {k.name for k in scenario.load.clients} == {k.name for k in space.manifest.clients}
        changed, _ = mutate(space, data, rng)
        assert problems_of(space, changed) == [], changed
        to_scenario(space, changed)


def test_a_short_run_gets_faults_of_every_length_it_holds_within_its_room() -> None:
    space = space_of(SUBJECT, kinds=("freeze",), duration_s=10)
    lengths = [f["duration_s"] for s in range(40) for f in generate(space, random.Random(s))["faults"]]
    room = space.last_end_s - FIRST_FAULT_S
    assert max(lengths) <= room + 0.01 and min(lengths) >= 0.5
    assert len({round(x) for x in lengths}) >= 4, "lengths spread over the room, not cut to one"


def test_a_run_whose_faults_leave_steady_state_nothing_to_judge_goes_on_calmly_after_them() -> None:
    # simple-pirate has no expiry_ms: each fault excuses steady_grace_s (10 s) after its stop,
    # and in 20 s its steady_state was foreseen unknown in most runs.
    space = space_of("simple-pirate")
    lengthened = 0
    for seed in range(12):
        data = generate(space, random.Random(seed))
        room = with_room_to_judge(space, data)
        before, after = forecast(to_scenario(space, data)), forecast(to_scenario(space, room))
        assert after["steady_state"] == "", (seed, after["steady_state"])
        assert room["faults"] == data["faults"]
        assert [p for p in problems_of(space, room) if "s of load, not" not in p] == []
        if room is data:  # its plan left enough to judge (with a margin: a run judges less)
            assert before["steady_state"] == ""
        else:
            lengthened += bool(before["steady_state"])
            assert room["name"] != data["name"] and "s longer, for " in room["description"]
            assert to_scenario(space, room).duration_s <= 2.5 * space.duration_s
    assert lengthened >= 6, "most simple-pirate runs, foreseen unknown, were given a longer load"
    # majordomo's expiry is short: nothing to add for clients that resend.
    space = space_of("majordomo")
    for seed in range(8):
        data = generate(space, random.Random(seed))
        if not data["load"].get("client"):
            assert with_room_to_judge(space, data) is data


def test_a_load_whose_clients_never_resend_goes_on_until_they_can_ask_again_after_the_faults() -> None:
    """explore, stall-hold-star seed 2: the primary frozen 1.8 s at 6.5 s held every client's
    request (its planted bug); clients that never resend waited out their 14 s deadlines, the
    load stopped first, and recovery had no request after the fault to judge."""
    space = space_of(ROOT / "tests" / "explore_subject" / "stall-hold-star.toml")
    freeze = {"kind": "freeze", "target": "primary", "at_s": [6.45], "duration_s": 1.84}
    data = {**generate(space, random.Random(1)), "faults": [freeze]}
    data["load"] = {k: v for k, v in data["load"].items() if k != "client"}
    resending = with_room_to_judge(space, data)
    data["load"]["client"] = {"reply_deadline_s": "auto"}
    once = with_room_to_judge(space, data)
    from harness.runner import planned_meta
    from harness.scenario import fault_plan

    planned = to_scenario(space, data)
    budget = planned_meta(planned, fault_plan(planned))["client_budget_s"]
    assert budget == 14.0  # reply_deadline_s = "auto": recovery_bound_s 12 + one expiry of 2 s
    end = 6.45 + 1.84 + budget + space.tail_s
    assert end <= to_scenario(space, once).duration_s <= end + 1, once["description"]
    assert once["description"].endswith("s longer, for clients that never resend to ask again")
    assert once["faults"] == data["faults"] and once["name"] != data["name"]
    assert to_scenario(space, resending).duration_s < end  # a client that resends asks again at once
    # never past LONGEST_RUN times the run length
    late = {**data, "faults": [{**freeze, "at_s": [14.0]}]}
    assert to_scenario(space, with_room_to_judge(space, late)).duration_s <= 2.5 * space.duration_s


def test_a_manifest_whose_own_clients_never_resend_gets_the_same_room(tmp_path: Path) -> None:
    """The same pair, its clients given a deadline of their own in the manifest (never
    resending, as explore's override makes them): the load goes on as long."""
    for name in ("stall-hold-star.toml", "stall_hold_star.py"):
        shutil.copy(ROOT / "tests" / "explore_subject" / name, tmp_path / name)
    manifest = tmp_path / "stall-hold-star.toml"
    text = manifest.read_text()
    resending = "options = { timeout_ms = 1000, retries = 4, settle_ms = 2000 }"
    assert resending in text
    manifest.write_text(text.replace(resending, "options = { reply_deadline_s = 14 }"))
    space = space_of(manifest)
    freeze = {"kind": "freeze", "target": "primary", "at_s": [6.45], "duration_s": 1.84}
    data = {**generate(space, random.Random(1)), "faults": [freeze]}
    data["load"] = {k: v for k, v in data["load"].items() if k != "client"}  # no override drawn
    longer = with_room_to_judge(space, data)
    end = 6.45 + 1.84 + 14 + space.tail_s
    assert end <= to_scenario(space, longer).duration_s <= end + 1, longer["description"]
    assert longer["description"].endswith("s longer, for clients that never resend to ask again")
    # titanic's clients have a deadline too, but poll until it: nothing to wait for
    titanic = space_of("titanic")
    polled = generate(titanic, random.Random(1))
    assert polled["faults"] and "client" not in polled["load"]
    assert _room_to_ask_s(titanic, polled, 30.0, 100.0) == 0.0


def test_the_checker_of_bounds_catches_a_scenario_out_of_them() -> None:
    space = space_of()
    data = generate(space, random.Random(1))
    data["faults"].append({"kind": "kill", "target": "nobody", "at_s": [0.1]})
    data["faults"][0]["at_s"] = [space.duration_s]
    wrong = problems_of(space, data)
    assert any("kill on nobody" in w for w in wrong) and any("a kill never restarted" in w for w in wrong)
    assert any("outside [" in w for w in wrong)


def test_kinds_are_checked_against_the_cards_and_the_manifest() -> None:
    assert "malformed" not in space_of("lazy-pirate").kinds  # no junk for its family
    assert "malformed" in space_of("majordomo").kinds
    with pytest.raises(SetupError, match="unknown fault kind 'frezee'"):
        space_of(kinds=("frezee",))
    with pytest.raises(SetupError, match="'malformed' does not apply to lazy-pirate"):
        space_of("lazy-pirate", kinds=("malformed",))
    space = space_of(kinds=("freeze", "partition"))
    for seed in range(20):
        assert {f["kind"] for f in generate(space, random.Random(seed))["faults"]} <= {"freeze", "partition"}


def test_a_calibrated_space_sizes_its_load_from_the_capacity() -> None:
    space = space_of(calibrated=True)
    data = generate(space, random.Random(3))
    assert "x capacity, at most" in data["load"]["users"]
    assert to_scenario(space, data).uncalibrated  # the runner refuses it until it is calibrated


def test_a_mutation_changes_one_thing_and_says_what() -> None:
    space = space_of()
    parent = next(d for s in range(50) if len((d := generate(space, random.Random(s)))["faults"]) == 2)
    seen = set()
    for seed in range(60):
        child, change = mutate(space, parent, random.Random(seed))
        seen.add(change.split()[0])
        assert (child["faults"] != parent["faults"] or child["load"] != parent["load"]) and change
        kept = [f for f in child["faults"] if f in parent["faults"]]
        assert len(kept) >= min(len(parent["faults"]), len(child["faults"])) - 1 or change.startswith(
            "new load"
        )
    assert {"moved", "added", "dropped", "new"} <= seen, seen
    assert mutate(space, parent, random.Random(5)) == mutate(space, parent, random.Random(5))


# --- signatures and findings -----------------------------------------------------------


def verdict(
    outcome: str = "passed", recovery: float | None = 0.2, violated: dict[str, str] | None = None
) -> dict[str, Any]:
    """A verdict.json as the report writes one, cut to what signatures read."""
    checks: dict[str, Any] = {
        "no_lost": {"status": "held", "figures": {"lost": 0, "abandoned": 3, "indeterminate": 1}},
        "recovery": {"status": "held", "figures": {"bound_s": 3.0}},
        "execution_count": {"status": "held", "figures": {"histogram": {"0": 0, "1": 90, "2": 1, "3+": 0}}},
    }
    for name, problem in (violated or {}).items():
        checks[name] = {"status": "violated", "summary": "broke", "examples": [{"problem": problem}]}
    t0 = 1_000_000_000_000
    return {
        "outcome": outcome,
        "checks": checks,
        "faults": [
            {"fault": "freeze", "start_ns": t0 + 2 * 10**9, "stop_ns": t0 + 4 * 10**9, "recovery_s": recovery}
        ],
        "processes": [
            {"role": "worker", "code": 1, "signal": None, "expected": False},
            {"role": "queue", "code": None, "signal": 15, "expected": True},
        ],
        "metrics": {
            "t0_ns": t0,
            "timeline": [{"t": t, "retries": 2, "abandons": 0} for t in range(10)],
            "latency_ms": {"p99": 30.0},
            "events": {"send": 90, "reply": 90, "worker_expired": 2},
            "client_errors": {"by_reason": {"protocol": 1}},
        },
    }


def test_a_signature_names_what_the_run_showed() -> None:
    features = signature(verdict())
    assert {
        "outcome:passed",
        "check:no_lost=held",
        "recovery:freeze:<10%",
        "retries:freeze:4",  # 2 a second from its start (t=2) to 3 s after its stop (t=7): 12
        "abandons:freeze:0",
        "abandoned:1",
        "executed:2",
        "exit:worker:code 1",
        "client_error:protocol",
        "event:worker_expired",
    } <= features
    assert not any(f.startswith(("event:send", "exit:queue")) for f in features)
    assert "recovery:freeze:over" in signature(verdict(recovery=5.0))
    assert "recovery:freeze:none" in signature(verdict(recovery=None))


def test_buckets_keep_near_runs_together_and_far_ones_apart() -> None:
    assert [bucket(n) for n in (0, 1, 3, 4, 15, 16, 100)] == ["0", "1", "1", "4", "4", "16", "64+"]
    assert [share_bucket(v, 10) for v in (0.5, 4, 9, 11, None)] == ["<10%", "<50%", "<100%", "over", "none"]
    assert problem_kind("recovered in 12.3 s > 10 s") == problem_kind("recovered in 4 s > 3 s")


def test_findings_are_violated_checks_of_violated_runs_only() -> None:
    broken = verdict("violated", violated={"recovery": "recovered in 12.3 s > 3 s"})
    assert findings(broken, ["kill", "freeze"]) == [
        ("recovery", "recovered in N s > N s", ("freeze", "kill"))
    ]
    assert findings(verdict("unknown"), ["kill"]) == []
    assert findings(verdict("incomplete", violated={"recovery": "x"}), ["kill"]) == []
    expected = {**broken, "expect_violated": ["recovery"]}
    assert findings(expected, ["kill"]) == []


def test_a_run_whose_host_clocks_disagreed_is_no_finding_though_violated(tmp_path: Path) -> None:
    """A run the report made incomplete for a clock drift, and violated (a check read its
    broken time line): the outcome combines to violated, and explore counted it as a
    finding. Its times are not one line, so it judged nothing: no finding, said in its record."""
    drift = "the host's wall clock moved +2.3 s against its monotonic clock during the run"
    stepped = verdict("violated", violated={"recovery": "recovered in 12.3 s > 3 s"})
    stepped |= {"incomplete": [drift], "completion": {"clock_drift": drift}}
    assert findings(stepped, ["kill"]) == []
    state = Exploration(tmp_path, space_of(SUBJECT), 1, "guided", 5, None)
    data = generate(state.space, random.Random(1), name="explore-001")
    _learn(state, 1, data, "fresh", "run-1", stepped)
    assert state.found == {} and state.runs[0]["findings"] == [] and state.runs[0]["unjudged"] == drift
    assert state.exit_code == 0 and not (tmp_path / "findings").exists()
    # incomplete otherwise (a fault that failed to fire) and violated: still a finding
    short = verdict("violated", violated={"recovery": "recovered in 12.3 s > 3 s"})
    short |= {"incomplete": ["fault 2 (kill worker-1) failed when it fired: gone"], "completion": {}}
    assert findings(short, ["kill"]) == [("recovery", "recovered in N s > N s", ("kill",))]


def test_a_new_behaviour_enters_the_corpus_and_a_finding_is_written_once(tmp_path: Path) -> None:
    space = space_of(SUBJECT)
    state = Exploration(tmp_path, space, 1, "guided", 5, None)
    first = generate(space, random.Random(1), name="explore-001")
    _learn(state, 1, first, "fresh", "run-1", verdict())
    assert len(state.corpus) == 1 and state.runs[0]["new"]
    _learn(state, 2, first, "fresh", "run-2", verdict())  # nothing new
    assert len(state.corpus) == 1 and state.runs[1]["new"] == []
    broken = verdict("violated", recovery=None, violated={"recovery": "no ok reply after the fault"})
    _learn(state, 3, first, "fresh", "run-3", broken)
    again = verdict("violated", recovery=None, violated={"recovery": "no ok reply after the fault"})
    _learn(state, 4, first, "fresh", "run-4", again)  # the same finding: not written again
    assert len(state.found) == 1 and state.runs[3]["findings"] == [1]
    (written,) = (tmp_path / "findings").glob("*.toml")
    assert written.name == "1-recovery.toml"
    text = written.read_text()
    assert f"# run it again: zchaos run {written}" in text
    scenario = load_scenario(written)  # standalone: it parses from any folder
    assert [f.kind for f in scenario.faults] == [f["kind"] for f in first["faults"]]
    assert tomllib.loads(text)["seed"] == first["seed"]
    assert state.exit_code == 1 and "1 finding" in state.summary()
    assert state.write().exists()
    page = (tmp_path / "explore.html").read_text()
    # the findings first, with their scenario, then the plot, then every run
    assert page.index("id=findings") < page.index("<svg id=plot") < page.index("id=runs")
    assert '<a href="findings/1-recovery.toml">' in page and "<b>recovery</b> violated" in page
    assert page.count("<tr><td>") == 4


def test_the_page_of_an_exploration_without_findings_says_so(tmp_path: Path) -> None:
    state = Exploration(tmp_path, space_of(SUBJECT), 1, "random", 1, None)
    state.write()
    page = (tmp_path / "explore.html").read_text()
    assert "none: no violation" in page and "no run yet" in page and "PASSED" not in page


def test_random_never_mutates_and_guided_mutates_more_the_more_pairs_it_tried(tmp_path: Path) -> None:
    space = space_of()
    every = pairs(space)
    assert len(every) == len(set(every)) and "kill queue" in every
    rng = random.Random(4)
    # (strategy, the share of pairs tried, the least and most runs of 100 mutated)
    for strategy, tried, low, high in (
        ("random", 1.0, 0, 0),
        ("guided", 1.0, 33, 67),  # GUIDED_MUTATE, 0.5
        ("guided", 0.5, 12, 40),
        ("guided", 0.0, 0, 0),  # nothing tried: fresh draws, which take untried pairs
    ):
        state = Exploration(tmp_path, space, 1, strategy, 5, None)
        state.coverage = Counter(every[: round(tried * len(every))])
        state.corpus.append({"run": 1, "scenario": generate(space, rng), "new": ["x"]})
        mutated = sum(next_scenario(state, rng, "x")[1] != "fresh" for _ in range(100))
        assert low <= mutated <= high, (strategy, tried, mutated)


def test_budgets_and_bad_input_are_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_duration("30m") == 1800 and parse_duration("2h") == 7200 and parse_duration("90") == 90
    runs = str(tmp_path / "runs")
    assert main(["explore", "paranoid-pirate", "--runs", "1", "--time", "soon", "--runs-dir", runs]) == 2
    assert "--time" in capsys.readouterr().err
    assert main(["explore", "paranoid-pirate", "--kinds", "frezee", "--runs", "1", "--runs-dir", runs]) == 2
    assert main(["explore", "paranoid-pirate", "--runs-dir", runs]) == 2  # no budget
    assert "give a budget" in capsys.readouterr().err
    assert main(["explore", "no-such-system", "--runs", "1", "--runs-dir", runs]) == 2
    assert main(["explore", "paranoid-pirate", "--runs", "1", "--confirm", "-1", "--runs-dir", runs]) == 2
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("explore-*"))


def test_a_fault_of_a_kind_named_is_drawn_on_a_target_it_can_hit() -> None:
    space = space_of("majordomo")
    for seed in range(30):
        fault = draw_fault(space, random.Random(seed), "malformed")
        assert (
            fault["endpoint"]
            in space.binds[fault["target"].rsplit("-", 1)[0] if "-" in fault["target"] else fault["target"]]
        )


def test_clock_faults_are_explored_only_where_libfaketime_is(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.explore.generate as generate_module

    clock = {n for n, k in FAULT_KINDS.items() if k.clock}
    monkeypatch.setattr(generate_module, "find_library", lambda: None)
    assert clock and not clock & set(space_of().kinds)
    monkeypatch.setattr(generate_module, "find_library", lambda: Path("/lib/libfaketime.so.1"))
    assert clock <= set(space_of().kinds)


def test_a_full_disk_is_explored_on_the_roles_that_keep_data_where_the_machine_can_mount(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness.explore.generate as generate_module

    assert "disk_full" not in space_of("majordomo").kinds  # no role keeps a data_dir
    assert "lose_unsynced" not in space_of("majordomo").kinds
    monkeypatch.setattr(generate_module, "_lacks", lambda kind: False)
    space = space_of("titanic")
    assert {"disk_full", "lose_unsynced"} <= set(space.kinds)
    keeps = {n for n, r in space.manifest.roles.items() if r.data_dir}
    for kind in ("disk_full", "lose_unsynced"):
        hit = {draw_fault(space, random.Random(s), kind)["target"] for s in range(30)}
        assert hit and all(generate_module._role_of(space, t) in keeps for t in hit), hit
    # another kind made disk_full lands only on a target that keeps data
    for seed in range(40):
        data = generate(space, random.Random(seed))
        changed, _ = mutate(space, data, random.Random(seed))
        for f in changed["faults"]:
            on_data = f["kind"] in ("disk_full", "lose_unsynced")
            assert not on_data or generate_module._role_of(space, f["target"]) in keeps, f
        to_scenario(space, changed)
    monkeypatch.setattr(generate_module, "_lacks", lambda kind: kind.name == "disk_full")
    assert "disk_full" not in space_of("titanic").kinds
    assert "lose_unsynced" in space_of("titanic").kinds


def test_some_loads_have_clients_that_never_resend_where_an_adapter_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness.explore.generate as generate_module

    space = space_of("lazy-pirate")
    loads = [generate(space, random.Random(s))["load"] for s in range(60)]
    once = [d for d in loads if d.get("client") == {"reply_deadline_s": "auto"}]
    assert 8 <= len(once) <= 30, len(once)  # NORESEND_SHARE of 60, with room for chance
    seed = next(s for s in range(60) if "client" in loads[s])
    (kind,) = to_scenario(space, generate(space, random.Random(seed))).load.clients
    # "auto" was made a number
    assert kind.options["reply_deadline_s"] >= space.manifest.promises.recovery_bound_s
    # the choice takes nothing from the exploration's generator: its seeds draw what they drew before
    monkeypatch.setattr(generate_module, "NORESEND_SHARE", 0.0)
    plain = [generate(space, random.Random(s)) for s in range(60)]
    assert [{k: v for k, v in d.items() if k != "client"} for d in loads] == [d["load"] for d in plain]
    # synchronous MDP clients cannot: no such load for majordomo
    monkeypatch.setattr(generate_module, "NORESEND_SHARE", 1.0)
    assert all("client" not in generate(space_of("majordomo"), random.Random(s))["load"] for s in range(10))


def test_an_exploration_resumes_as_its_explore_json_left_it(tmp_path: Path) -> None:
    space = space_of(SUBJECT, kinds=("freeze",), duration_s=10)
    state = Exploration(tmp_path, space, 9, "random", 5, None)
    data = generate(space, random.Random(1))
    _learn(state, 1, data, "fresh", "run-1", verdict())
    broken = verdict("violated", recovery=None, violated={"recovery": "no ok reply after the fault"})
    _learn(state, 2, data, "fresh", "run-2", broken)
    state.runs.append({"run": 3, "run_dir": "run-3", "outcome": "interrupted"})
    state.interrupted = True
    state.write()
    again = resumed(tmp_path, 2, None)
    assert (again.seed, again.strategy, again.space.kinds, again.space.duration_s) == (
        9,
        "random",
        ("freeze",),
        10,
    )
    assert again.corpus == state.corpus and again.seen == state.seen and again.runs == state.runs
    assert list(again.found) == list(state.found) and not again.interrupted
    assert again.found[next(iter(again.found))].scenario.endswith("1-recovery.toml")
    with pytest.raises(SetupError, match=r"no explore\.json"):
        resumed(tmp_path / "nothing", 1, None)
    (tmp_path / "explore.json").write_text('{"format": 1, "kinds": []}')
    with pytest.raises(SetupError, match="damaged"):
        resumed(tmp_path, 1, None)


def test_a_target_or_resume_one_of_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(tmp_path)
    assert main(["explore", "--runs", "1", "--runs-dir", runs]) == 2
    assert main(["explore", "paranoid-pirate", "--resume", runs, "--runs", "1", "--runs-dir", runs]) == 2
    assert "one of them" in capsys.readouterr().err
    assert main(["explore", "--resume", runs, "--runs", "1"]) == 2
    assert "no explore.json" in capsys.readouterr().err


def test_guided_mutates_the_entries_whose_mutations_show_something_new(tmp_path: Path) -> None:
    space = space_of(SUBJECT, kinds=("freeze",), duration_s=10)
    rng = random.Random(2)
    state = Exploration(tmp_path, space, 1, "guided", 50, None)
    state.coverage = Counter(pairs(space))  # every pair tried: guided mutates most of its runs
    state.corpus = [{"run": n, "scenario": generate(space, rng), "new": ["x"]} for n in (1, 2)]
    state.corpus[0].update(tried=4, fruitful=0)  # four mutations, nothing new
    state.corpus[1].update(tried=4, fruitful=3)
    assert energy(state.corpus[0]) == 0.2 and energy(state.corpus[1]) == 0.8
    picks = [_pick(state.corpus, rng)["run"] for _ in range(400)]
    assert picks.count(2) > 2.5 * picks.count(1) > 0  # 4 to 1 by energy
    origin = next(o for _ in range(20) if (o := next_scenario(state, rng, "x")[1]) != "fresh")
    assert sum(e["tried"] for e in state.corpus) == 9, origin  # the mutated one counted its try
    # A mutation of run 2 that showed something new counts for run 2.
    before = state.corpus[1]["fruitful"]
    _learn(state, 3, generate(space, rng), "run 2: moved freeze on queue", "run-3", verdict())
    assert state.corpus[1]["fruitful"] == before + 1 and state.corpus[-1]["run"] == 3


def test_a_run_that_cannot_be_set_up_ends_the_exploration_with_exit_2_and_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.explore.loop as loop

    class Refused:  # what the runner does on a machine without room for a run
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise SetupError("no room for a run", where=str(tmp_path))

    monkeypatch.setattr(loop, "Runner", Refused)
    args = ["explore", str(SUBJECT), "--runs", "2", "--kinds", "freeze", "--no-calibrate"]
    assert main([*args, "--runs-dir", str(tmp_path)]) == 2
    assert "no room for a run" in capsys.readouterr().err
    (record,) = tmp_path.glob("explore-*/explore.json")
    assert '"runs": []' in record.read_text()


def test_a_fault_made_another_kind_keeps_its_target() -> None:
    space = space_of(SUBJECT, kinds=("freeze", "starve", "kill", "partition"), duration_s=12)
    parent = generate(space, random.Random(1))
    parent["faults"] = [{"kind": "starve", "target": "queue", "at_s": [3.0], "duration_s": 2.0, "share": 0.1}]
    made = set()
    for seed in range(40):
        child, change = mutate(space, parent, random.Random(seed))
        if " made " in change and "longer or shorter" not in change:
            (fault,) = child["faults"]
            # at its time, or earlier when it is longer than the load has room for after it
            assert fault["target"] == "queue" and fault["at_s"][0] <= 3.0 and problems_of(space, child) == []
            made.add(fault["kind"])
    assert made == {"freeze", "kill"}  # process kinds only: partition is a link's


def test_a_focused_mutation_changes_the_fault_that_showed_something_new() -> None:
    # A parent with a freeze and a partition whose run showed new behaviour from its freeze
    # (signature features "recovery:freeze:..."): its mutations change the freeze most often,
    # in place (never a new load, an added or a dropped fault), and stay within the bounds.
    space = space_of(SUBJECT, kinds=("freeze", "starve", "partition"), duration_s=12)
    parent = generate(space, random.Random(1))
    freeze = {"kind": "freeze", "target": "queue", "at_s": [3.0], "duration_s": 1.0}
    cut = {"kind": "partition", "target": "link:worker-1", "at_s": [4.0], "duration_s": 1.0}
    parent["faults"] = [freeze, cut]
    assert focus_of(["recovery:freeze:<10%", "retries:freeze:4", "event:expired", "p99:over"]) == {"freeze"}
    focused = plain = 0
    for seed in range(100):
        child, change = mutate(space, parent, random.Random(seed), focus={"freeze"})
        assert problems_of(space, child) == [], change
        focused += cut in child["faults"] and freeze not in child["faults"] and len(child["faults"]) == 2
        child, _ = mutate(space, parent, random.Random(seed))
        plain += cut in child["faults"] and freeze not in child["faults"] and len(child["faults"]) == 2
    assert focused >= 70 and plain <= 45, (focused, plain)


def _hosts_possible(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one that can make hosts and every packet fault (the unit tests run
    anywhere; tests/test_explore_runs.py explores on real hosts)."""
    import dataclasses

    import harness.explore.generate as generate_module

    monkeypatch.setattr(generate_module, "hosts_missing", lambda: None)
    for name, kind in FAULT_KINDS.items():
        if kind.hosts:
            monkeypatch.setitem(FAULT_KINDS, name, dataclasses.replace(kind, missing=lambda: None))


@pytest.mark.parametrize("name", ["paranoid-pirate", "titanic", "freelance"])
def test_on_hosts_packet_faults_are_drawn_and_every_scenario_says_hosts(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hosts_possible(monkeypatch)
    packet = {n for n, k in FAULT_KINDS.items() if k.hosts}
    proxy_only = {n for n, k in FAULT_KINDS.items() if k.target == "link" and k.on_hosts is None}
    through_proxy = space_of(name)
    assert packet and not packet & set(through_proxy.kinds) and proxy_only & set(through_proxy.kinds)
    assert all("network" not in generate(through_proxy, random.Random(s)) for s in range(5))

    space = space_of(name, network="hosts")
    assert packet <= set(space.kinds) and not proxy_only & set(space.kinds)
    drawn = set()
    for seed in range(30):
        data = generate(space, random.Random(seed))
        assert data["network"] == "hosts" and problems_of(space, data) == [], data
        assert to_scenario(space, data).network == "hosts"  # a SetupError here is the generator's bug
        changed, _ = mutate(space, data, random.Random(seed))
        assert changed["network"] == "hosts" and to_scenario(space, changed).network == "hosts"
        drawn |= {f["kind"] for f in data["faults"] + changed["faults"]}
        # a link fault on hosts acts on every connection of its link
        assert all(f.get("toxicity", 1.0) == 1.0 for f in data["faults"] + changed["faults"])
    assert packet <= drawn, drawn
    # the same draws, but for the network, name another scenario in the results store
    assert generate(space, random.Random(1))["name"] != generate(through_proxy, random.Random(1))["name"]


def test_hosts_are_refused_before_any_run_where_they_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.explore.generate as generate_module

    monkeypatch.setattr(generate_module, "hosts_missing", lambda: 'network = "hosts" needs root')
    with pytest.raises(SetupError, match="needs root"):
        space_of("paranoid-pirate", network="hosts")
    assert main(["explore", "paranoid-pirate", "--network", "hosts", "--runs", "1",
                 "--runs-dir", str(tmp_path)]) == 2  # fmt: skip
    assert 'network = "hosts" needs root' in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing ran, no folder made

    _hosts_possible(monkeypatch)
    own = (ROOT / "implementations" / "lazy_pirate" / "manifest.toml").read_text()
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(own.replace('ready = "port:frontend"', 'ready = "port:frontend"\ncount = 2', 1))
    with pytest.raises(SetupError) as refused:
        space_of(manifest, network="hosts")
    assert "topology.server" in str(refused.value) and "reach the first alone" in str(refused.value)
    assert space_of(manifest).network == "proxy"  # through the proxy it is explored as before


def test_an_exploration_on_hosts_resumes_on_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hosts_possible(monkeypatch)
    state = Exploration(tmp_path, space_of(SUBJECT, network="hosts", duration_s=10), 3, "guided", 2, None)
    state.write()
    assert resumed(tmp_path, 1, None).space.network == "hosts"
    record = tmp_path / "explore.json"
    old = {k: v for k, v in json.loads(record.read_text()).items() if k != "network"}
    old["kinds"] = [k for k in old["kinds"] if not FAULT_KINDS[k].hosts]
    record.write_text(json.dumps(old))  # an explore.json from before hosts
    assert resumed(tmp_path, 1, None).space.network == "proxy"


# --- coverage: the (kind, role or link) pairs an exploration drew ------------------------


def all_pairs(space: Space) -> set[str]:
    """Every pair of a fault kind and a role or link the space can draw (generate.py ``pair_of``)."""
    found = set()
    for name in space.kinds:
        kind = FAULT_KINDS[name]
        for target in space.links if kind.target == "link" else sorted(space.processes):
            if kind.target == "link" or _fits(space, kind, target):
                instance = target if kind.target == "link" else space.processes[target][0]
                # junk's pairs are one per endpoint of the role
                for endpoint in space.binds[target] if name == "malformed" else [None]:
                    found.add(pair_of(space, name, instance, endpoint))
    return found


def test_coverage_draws_every_pair_once_before_any_twice_and_the_same_per_seed() -> None:
    # The tag-ring subject: 15 kinds (fewer without libfaketime), a broker and three workers,
    # four links; malformed only on the broker, which binds.
    space = space_of(ROOT / "tests" / "explore_subject" / "tag-ring.toml", duration_s=12)
    pairs = all_pairs(space)
    assert "freeze worker" in pairs and "partition link:worker-2" in pairs and "malformed worker" not in pairs
    # junk at the broker's frontend (clients' code) and at its backend (workers') are two pairs
    assert {"malformed broker@frontend", "malformed broker@backend"} <= pairs

    def draws(seed: int, rounds: int) -> list[str]:
        drawn: Counter[str] = Counter()
        rng = random.Random(seed)
        return [
            fault_pair(space, f)
            for f in (draw_fault(space, rng, drawn=drawn) for _ in range(rounds * len(pairs)))
        ]

    first = draws(3, 2)
    n = len(pairs)
    assert set(first[:n]) == pairs and len(set(first[:n])) == n  # each once ...
    assert Counter(first) == {p: 2 for p in pairs}  # ... then each twice
    assert first == draws(3, 2) and first != draws(4, 2)  # the same per seed, another order by another
    # Memoryless, the same draws repeat pairs long before every pair came up.
    rng = random.Random(3)
    plain = [fault_pair(space, f) for f in (draw_fault(space, rng) for _ in range(n))]
    assert len(set(plain)) < n


def test_guided_tries_a_pair_that_ran_while_busy_next_while_the_load_is_quiet(tmp_path: Path) -> None:
    """A bug that needs a worker restarted while idle (mdp-idle-disconnect) was drawn by guided
    in 48 of 100 seeds' first 30 runs, random 57: guided's restarts of a worker came while
    busy. Each pair's context now counts too, and its next draw takes the one it ran in less."""
    space = space_of(SUBJECT)
    every = pairs(space)
    for ran, other in (("busy", "quiet"), ("quiet", "busy")):
        drawn = Counter({p: 1 for p in every} | {f"{p} while {ran}": 1 for p in every})
        moved = total = 0
        for seed in range(20):
            data = generate(space, random.Random(seed), drawn=Counter(drawn))
            assert problems_of(space, data) == [], data
            assert any(c == other for c, _, _ in stretches(data["load"], space.duration_s))
            moved += sum(context_of(data, f) == other for f in data["faults"])
            total += len(data["faults"])
        assert moved >= 0.8 * total, (ran, moved, total)  # all but a fault too long for the stretch
    # the kinds, targets and parameters are drawn as before: only times (and a load) move
    plain = Counter({p: 1 for p in every})
    drawn = Counter(plain) | Counter({f"{p} while busy": 1 for p in every})
    for seed in range(10):
        a = generate(space, random.Random(seed), drawn=Counter(plain))
        b = generate(space, random.Random(seed), drawn=Counter(drawn))
        strip = [{k: v for k, v in f.items() if k != "at_s"} for f in a["faults"]]
        assert sorted(map(str, strip)) == sorted(
            str({k: v for k, v in f.items() if k != "at_s"}) for f in b["faults"]
        )
    # what ran counts its pair and the pair with its context
    state = Exploration(tmp_path, space, 1, "guided", 5, None)
    data = generate(space, random.Random(3), drawn=Counter())
    _learn(state, 1, data, "fresh", "run-1", verdict())
    fault = data["faults"][0]
    assert state.coverage[f"{fault_pair(space, fault)} while {context_of(data, fault)}"] >= 1


def test_guided_draws_the_pair_never_run_and_random_draws_as_before(tmp_path: Path) -> None:
    space = space_of(SUBJECT, kinds=("freeze", "kill"), duration_s=10)
    guided = Exploration(tmp_path, space, 1, "guided", 5, None)
    guided.coverage = Counter({"freeze queue": 2, "freeze worker": 1, "kill queue": 1})
    data, origin = next_scenario(guided, random.Random(1), "x")
    assert origin == "fresh" and ("kill", "worker") in [(f["kind"], f["target"][:6]) for f in data["faults"]]
    assert guided.coverage == {
        "freeze queue": 2,
        "freeze worker": 1,
        "kill queue": 1,
    }  # a draw counts nothing
    # ... what ran counts, and a pair tried for the first time is a new behaviour naming its kind
    _learn(guided, 1, data, origin, "run-1", verdict())
    assert guided.coverage["kill worker"] >= 1 and "pair:kill:worker" in guided.runs[0]["new"]
    assert "kill" in focus_of(guided.runs[0]["new"])
    _learn(guided, 2, data, origin, "run-2", verdict())
    assert not any(f.startswith("pair:") for f in guided.runs[1]["new"])
    # random keeps no memory in its draws: the scenario a fresh draw without coverage gives
    chance = Exploration(tmp_path, space, 1, "random", 5, None)
    chance.coverage = Counter(guided.coverage)
    assert next_scenario(chance, random.Random(1), "x")[0] == generate(space, random.Random(1), name="x")


def test_a_mutation_with_coverage_retargets_and_changes_kind_to_a_pair_least_drawn() -> None:
    space = space_of(SUBJECT, kinds=("freeze", "starve", "kill"), duration_s=12)
    parent = generate(space, random.Random(1))
    parent["faults"] = [
        {"kind": "starve", "target": "worker-1", "at_s": [3.0], "duration_s": 2.0, "share": 0.1}
    ]
    drawn = Counter({"starve worker": 1, "freeze worker": 3, "kill worker": 1, "starve queue": 3})
    made = moved = 0
    for seed in range(60):
        child, change = mutate(space, parent, random.Random(seed), drawn=Counter(drawn))
        (fault, *_) = child["faults"]
        if " made " in change and "longer or shorter" not in change:
            assert fault["kind"] == "kill", change  # not the freeze drawn 3 times
            made += 1
        if change.startswith("starve moved to"):
            assert fault["target"] == "worker-2", change  # not the queue, starved 3 times
            moved += 1
    assert made and moved, (made, moved)


def test_guided_puts_more_faults_a_scenario_each_on_a_role_or_link_of_its_own() -> None:
    # guided's draw (with its coverage); random's draws 1 to 4 alike, anywhere, as it always did
    space = space_of()
    scenarios = [generate(space, random.Random(s), drawn=Counter()) for s in range(400)]
    counts = Counter(len(g["faults"]) for g in scenarios)
    assert set(counts) == {1, 2, 3, 4}
    assert counts[3] > counts[1] and counts[4] > counts[2] and counts[3] + counts[4] > 2 * counts[1], counts
    places = [[where_of(space, f["kind"], f["target"]) for f in g["faults"]] for g in scenarios]
    wheres = len(space.processes) + len(space.links)
    assert all(len(set(p)) == len(p) for p in places if len(p) <= wheres), places
    alike = [generate(space, random.Random(s)) for s in range(400)]
    assert min(Counter(len(g["faults"]) for g in alike).values()) > 70
    shared = [[where_of(space, f["kind"], f["target"]) for f in g["faults"]] for g in alike]
    assert any(len(set(p)) < len(p) for p in shared)  # random's faults may share a target


def test_an_exploration_resumes_with_its_coverage(tmp_path: Path) -> None:
    space = space_of(SUBJECT, kinds=("freeze", "partition"), duration_s=10)
    state = Exploration(tmp_path, space, 9, "guided", 5, None)
    rng = random.Random(2)
    for index in (1, 2, 3):
        data, origin = next_scenario(state, rng, "x")
        _learn(state, index, data, origin, f"run-{index}", verdict())
    state.write()
    faults = sum(len(r["faults"]) for r in state.runs)
    in_context = {k: v for k, v in state.coverage.items() if " while " in k}
    assert sum(state.coverage.values()) - sum(in_context.values()) == sum(in_context.values()) == faults
    again = resumed(tmp_path, 2, None)
    assert again.coverage == state.coverage
    # the next draw after --resume is the one the exploration would have made
    assert next_scenario(again, random.Random(5), "x") == next_scenario(state, random.Random(5), "x")
    # an explore.json of before coverage: counted again from its runs' faults
    record = json.loads((tmp_path / "explore.json").read_text())
    del record["coverage"]
    (tmp_path / "explore.json").write_text(json.dumps(record))
    assert resumed(tmp_path, 2, None).coverage == state.coverage - Counter(in_context)  # no loads there


def test_guided_runs_each_fault_in_focus_of_an_entry_alone_once_then_mutates_it(tmp_path: Path) -> None:
    """mdp-idle-disconnect's bug (a worker restarted while idle) showed in no run that had a
    link fault losing data beside the restart: no_lost excused the request lost. Guided now
    runs each fault in focus of a corpus entry alone once before it mutates the entry."""
    space = space_of(SUBJECT, duration_s=12)
    parent = generate(space, random.Random(1))
    freeze = {"kind": "freeze", "target": "queue", "at_s": [3.0], "duration_s": 2.0}
    cut = {
        "kind": "partition",
        "target": "link:worker-1",
        "at_s": [4.0],
        "duration_s": 1.0,
        "direction": "both",
    }
    restart = {"kind": "restart", "target": "worker-2", "at_s": [5.0], "delay_s": 0.5}
    parent["faults"] = [freeze, cut, restart]
    parent["load"] = {"users": 2, "spawn_rate": 10, "wait_ms": 0}  # busy throughout
    state = Exploration(tmp_path, space, 1, "guided", 50, None)
    # every pair tried (guided mutates in one run of two), each of the three while busy only
    state.coverage = Counter(pairs(space)) + Counter(
        f"{fault_pair(space, f)} while busy" for f in parent["faults"]
    )
    entry = {"run": 1, "scenario": parent, "new": ["pair:freeze:queue", "recovery:restart:<10%"]}
    state.corpus = [entry]
    rng = random.Random(3)
    origins, children = [], []
    while len(origins) < 4:
        data, origin = next_scenario(state, rng, "x")
        if origin != "fresh":
            origins.append(origin)
            children.append(data)
    assert origins[:2] == ["run 1: isolated freeze on queue", "run 1: isolated restart on worker-2"], origins
    assert not any("isolated" in o for o in origins[2:]), origins  # then mutated as before
    assert entry["isolated"] == ["freeze queue", "restart worker"]
    for child, alone in zip(children, (freeze, restart), strict=False):
        assert problems_of(space, child) == [], child
        to_scenario(space, child)  # it parses as any scenario
        (fault,) = child["faults"]
        assert {k: v for k, v in fault.items() if k != "at_s"} == {
            k: v for k, v in alone.items() if k != "at_s"
        }
        # its pair ran while busy only: alone, it starts while the load is quiet
        assert context_of(child, fault) == "quiet", child
    # an entry of one fault is mutated at once; a fault not in focus is never isolated
    lone = {"run": 2, "scenario": {**parent, "faults": [cut]}, "new": ["pair:partition:link:worker-1"]}
    state.corpus = [lone]
    origin = next(o for _ in range(20) if (o := next_scenario(state, rng, "x")[1]) != "fresh")
    assert "isolated" not in origin and "isolated" not in lone


def test_guided_runs_a_scenario_again_without_the_link_faults_that_excused_its_losses(tmp_path: Path) -> None:
    """mdp-idle-disconnect's bug (the request sent to a worker restarted while idle is lost)
    hid in 6 of 9 runs that had it: no_lost excused the loss as "in flight as a link fault
    dropped data". Guided's next run after such a run drops the faults that lose data."""
    space = space_of(SUBJECT, duration_s=12)
    data = generate(space, random.Random(1))
    cut = {"kind": "reset", "target": "link:worker-1", "at_s": [4.0], "duration_s": 1.0}
    restart = {"kind": "restart", "target": "worker-2", "at_s": [5.0], "delay_s": 0.5}
    latency = {"kind": "latency", "target": "link:clients", "at_s": [3.0], "duration_s": 2.0}
    latency["latency_ms"] = 200
    data["faults"] = [latency, cut, restart]
    excused = verdict()
    excused["checks"]["no_lost"]["figures"]["lost_in_transit"] = 1
    state = Exploration(tmp_path, space, 1, "guided", 50, None)
    _learn(state, 1, data, "fresh", "run-1", excused)
    rng = random.Random(3)
    child, origin = next_scenario(state, rng, "x")
    assert origin == "run 1: without reset on link:worker-1, whose losses no_lost excused"
    assert child["faults"] == [latency, restart] and child["load"] == data["load"]
    assert child["seed"] == data["seed"] and child["name"].startswith("x")
    assert problems_of(space, child) == [] and to_scenario(space, child)  # a scenario as any
    assert next_scenario(state, rng, "x")[1] != origin  # once
    # not after a run whose losses nothing excused, nor one of lossy faults only, nor by random
    _learn(state, 2, data, "fresh", "run-2", verdict())
    only_cuts = {**data, "faults": [cut]}
    _learn(state, 3, only_cuts, "fresh", "run-3", excused)
    chance = Exploration(tmp_path, space, 1, "random", 50, None)
    _learn(chance, 1, data, "fresh", "run-1", excused)
    assert state.followups == [] and chance.followups == []
    # kept in explore.json: a resumed exploration runs it next
    _learn(state, 4, data, "fresh", "run-4", excused)
    state.write()
    again = resumed(tmp_path, 50, None)
    assert next_scenario(again, random.Random(3), "x")[1].startswith("run 4: without reset")


def test_guided_keeps_faults_that_lose_data_apart_from_the_others() -> None:
    space = space_of(SUBJECT)
    assert "partition" not in companions(space, "restart") and "latency" in companions(space, "restart")
    assert set(companions(space, "reset")) == {k for k in space.kinds if FAULT_KINDS[k].lossy}

    def mixed(scenarios: list[dict[str, Any]]) -> int:
        return sum(len({FAULT_KINDS[f["kind"]].lossy for f in s["faults"]}) > 1 for s in scenarios)

    # every pair tried once: each first fault is a pair's second try, and its scenario keeps apart
    tried = Counter(pairs(space))
    guided = [generate(space, random.Random(s), drawn=Counter(tried)) for s in range(200)]
    several = [g for g in guided if len(g["faults"]) > 1]
    assert mixed(guided) == 0 and len(several) > 100
    lossy = sum(all(FAULT_KINDS[f["kind"]].lossy for f in g["faults"]) for g in several)
    assert 0.2 * len(several) < lossy < 0.8 * len(several), lossy  # both sorts are drawn
    # a first try of a lossy pair mixes them (breadth: keeping them apart there too drew
    # stall-queue's freeze later); a first try of another never does
    assert mixed([generate(space, random.Random(s), drawn=Counter()) for s in range(200)]) > 20

    # a first try of a fault on the queue, lossy pairs drawn less than the other others: a
    # draw without the rule would take lossy ones beside it; it takes none
    def count(pair: str) -> int:
        return 1 if FAULT_KINDS[pair.split()[0]].lossy else 0 if pair.endswith(" queue") else 5

    queue_first = Counter({p: count(p) for p in pairs(space)})
    drawn = [generate(space, random.Random(s), drawn=Counter(queue_first)) for s in range(100)]
    assert all("queue" in [f["target"] for f in g["faults"]] for g in drawn)
    assert sum(len(g["faults"]) > 1 for g in drawn) > 50 and mixed(drawn) == 0
    # random's draw mixes them, as it always did
    assert mixed([generate(space, random.Random(s)) for s in range(200)]) > 50


def test_a_kind_whose_card_refuses_many_draws_still_gets_its_parameters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # slicer refuses a quarter of its draws: 8 tries in a row failed once in 65,000 slicers
    # and stopped an exploration with exit 2
    import dataclasses

    from harness.explore.generate import draw_params

    space = space_of(SUBJECT)
    refused = 0

    def picky(params: dict[str, Any], target: str, manifest: Any) -> None:
        nonlocal refused
        if refused < 20:
            refused += 1
            raise ParamProblem(None, "not yet")

    kind = dataclasses.replace(FAULT_KINDS["slicer"], validate=picky)
    params = draw_params(space, kind, "link:worker-1", random.Random(1))
    assert refused == 20 and "average_size" in params


def test_guided_draws_half_its_lengths_around_an_expiry_the_cards_ranges_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stranger's queue ten times slower than ours: its workers expire after 50 s, beyond
    # every card's explore range (8 s at most), so no drawn stall ever straddled its expiry.
    import dataclasses

    from harness.explore import generate as generation

    manifest = load_manifest(SUBJECT)
    slow = dataclasses.replace(manifest, options={**manifest.options, "heartbeat_ms": 10_000})
    space = make_space(slow, duration_s=120)
    assert space.expiry_s == 50.0

    def lengths(guided: bool, of: Space = space) -> list[float]:
        drawn = [generate(of, random.Random(s), drawn=Counter() if guided else None) for s in range(150)]
        every = [length_of(FAULT_KINDS[f["kind"]], f) for g in drawn for f in g["faults"]]
        return [n for n in every if n > 0]

    guided, unguided = lengths(True), lengths(False)
    near = sum(25 <= n <= 75 for n in guided)
    assert 0.35 * len(guided) < near < 0.65 * len(guided), (near, len(guided))
    assert all(n <= 8 for n in unguided)  # random draws from the cards' ranges, as it always did
    assert sum(n <= 8 for n in guided) > 0.35 * len(guided)  # the rest: the cards' ranges
    # a system ten times faster (expiry 0.5 s): lengths of a quarter to three quarters of a second
    quick = dataclasses.replace(manifest, options={**manifest.options, "heartbeat_ms": 100})
    fast = lengths(True, make_space(quick))
    assert sum(0.25 <= n <= 0.75 for n in fast) > 0.35 * len(fast)
    # without an expiry in the manifest, guided's lengths are the cards' too
    plain = make_space(
        dataclasses.replace(manifest, promises=dataclasses.replace(manifest.promises, expiry_ms=None))
    )
    assert plain.expiry_s is None and all(n <= 8 for n in lengths(True, plain))
    # ours as it is (expiry 5 s): a freeze's range (0.5-8 s) holds 2.5-7.5 s, so its lengths
    # are the card's, drawn as they always were
    ours = make_space(manifest, kinds=["freeze"])
    as_declared = [generate(ours, random.Random(s), drawn=Counter()) for s in range(50)]
    monkeypatch.setattr(generation, "NEAR_EXPIRY_SHARE", 0.0)
    assert [generate(ours, random.Random(s), drawn=Counter()) for s in range(50)] == as_declared
    monkeypatch.setattr(generation, "NEAR_EXPIRY", (0.05, 1.5))  # a band the range misses
    monkeypatch.setattr(generation, "NEAR_EXPIRY_SHARE", 0.5)
    assert [generate(ours, random.Random(s), drawn=Counter()) for s in range(50)] != as_declared


def test_a_freeze_is_bracketed_alone_below_and_above_the_expiry() -> None:
    """stall-queue's bug needs its queue frozen 1.5-5 s (its workers' patience, the expiry,
    is 5 s); a first freeze drawn from 0.5-8 s lands past the expiry two times in five."""
    space = space_of(SUBJECT)
    assert space.expiry_s == 5.0
    assert [k for k in space.kinds if pauses(FAULT_KINDS[k])] == ["freeze"]  # kills, junk, clocks: no
    latency = {
        "kind": "latency",
        "target": "link:clients",
        "at_s": [3.0],
        "duration_s": 2.0,
        "latency_ms": 200,
    }
    freeze = {"kind": "freeze", "target": "queue", "at_s": [4.0], "duration_s": 6.56}
    data = {**generate(space, random.Random(1)), "faults": [latency, freeze]}
    for side, lo, hi in (("below", 2.5, 5.0), ("above", 5.0, 7.5)):
        lengths = []
        for seed in range(40):
            child, change = bracket(space, data, 1, side, random.Random(seed), name="x")
            (alone,) = child["faults"]
            assert {k: v for k, v in alone.items() if k != "duration_s"} == {
                k: v for k, v in freeze.items() if k != "duration_s"
            }  # the same freeze, alone, at its time
            assert child["load"] == data["load"] and problems_of(space, child) == [], child
            to_scenario(space, child)
            assert (
                change
                == f"freeze on queue alone for {alone['duration_s']:g} s, {side} the system's expiry (5 s)"
            )
            lengths.append(alone["duration_s"])
        assert all(lo <= n <= hi for n in lengths) and max(lengths) - min(lengths) > (hi - lo) / 2, lengths
    assert data["faults"] == [latency, freeze]  # left as it was
    # both sides after a run with other faults; alone, the side it was not on
    assert sides_to_bracket(data, 1, 5.0) == ["below", "above"]
    assert sides_to_bracket({"faults": [freeze]}, 0, 5.0) == ["below"]
    assert sides_to_bracket({"faults": [{**freeze, "duration_s": 0.87}]}, 0, 5.0) == ["above"]
    # not another kind, nor without an expiry, nor where the load has no room for the side
    assert bracket(space, data, 0, "below", random.Random(1), name="x") is None
    import dataclasses

    manifest = load_manifest(SUBJECT)
    plain = make_space(
        dataclasses.replace(manifest, promises=dataclasses.replace(manifest.promises, expiry_ms=None))
    )
    assert bracket(plain, data, 1, "below", random.Random(1), name="x") is None
    slow = make_space(dataclasses.replace(manifest, options={**manifest.options, "heartbeat_ms": 10_000}))
    assert slow.expiry_s == 50.0 and bracket(slow, data, 1, "below", random.Random(1), name="x") is None
    longer = make_space(slow.manifest, duration_s=120)  # a load with room for 75 s
    assert (
        50
        <= bracket(longer, data, 1, "above", random.Random(1), name="x")[0]["faults"][0]["duration_s"]
        <= 75
    )


def test_guided_brackets_a_freeze_whose_pair_ran_first_and_only_then(tmp_path: Path) -> None:
    space = space_of(SUBJECT)
    freeze = {"kind": "freeze", "target": "queue", "at_s": [4.0], "duration_s": 4.0}
    cut = {"kind": "partition", "target": "link:worker-2", "at_s": [3.0], "duration_s": 2.0}
    data = {**generate(space, random.Random(1)), "faults": [cut, freeze]}
    state = Exploration(tmp_path, space, 1, "guided", 50, None)
    _learn(state, 1, data, "fresh", "run-1", verdict())
    # the entry counts its freeze as run alone: it is not isolated again
    assert state.corpus[0]["isolated"] == ["freeze queue"]
    state.write()
    rng = random.Random(3)
    origins = []
    for side, lo, hi in (("below", 2.5, 5.0), ("above", 5.0, 7.5)):
        child, origin = next_scenario(state, rng, "x")
        (alone,) = child["faults"]
        assert origin.startswith("run 1: freeze on queue alone for ") and origin.endswith(
            f"{side} the system's expiry (5 s)"
        )
        assert alone["target"] == "queue" and lo <= alone["duration_s"] <= hi
        origins.append(origin)
    assert not next_scenario(state, rng, "x")[1].startswith("run 1: freeze")  # once each
    # kept in explore.json: a resumed exploration runs them next
    again = resumed(tmp_path, 50, None)
    rng = random.Random(3)
    assert [next_scenario(again, rng, "x")[1] for _ in range(2)] == origins
    # a freeze of the queue again: its pair ran before, no bracket; random never brackets
    _learn(state, 2, {**data, "faults": [freeze]}, "fresh", "run-2", verdict())
    chance = Exploration(tmp_path, space, 1, "random", 50, None)
    _learn(chance, 1, data, "fresh", "run-1", verdict())
    assert state.followups == [] and chance.followups == []
    assert "isolated" not in chance.corpus[0]
