"""``zchaos calibrate``: measure an implementation without faults, and store what it measured.

One run of the implementation, through the same runner as a scenario (its processes, its
clients, readiness, teardown), with no fault and a ramp of users (1, 2, 4, ... each for
``step_s``, no pause between requests, a client timeout far above any latency so that no
retry is the client's doing). From the clients' history, per step: ok replies per second,
attempts, errors (retries, abandons, lost, wrong replies) and latency percentiles. Then:

- capacity: the highest rate of ok replies before errors break away, and the fewest users
  that reached 90 % of it, or fewer: the most before latency broke away (``capped`` when the
  rate still grew at the ramp's top: the load generator, not the system, was the limit);
- latency at a moderate load: the percentiles of the steps of at most half the capacity
  users;
- the client timeout that fits: TIMEOUT_OVER_P99 x that p99.

The result is stored in the runs folder (contract/calibration.py), keyed by the manifest's
content, the topology and options, and the machine; ``calibrated`` gives a scenario with
relative values (``users = "0.5x capacity"``) the stored calibration, measuring it first
when there is none. The run folders it measured with stay in ``runs/calibration/`` for
their logs; the results store and the matrix leave them out.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contract.calibration import (
    CALIBRATION_DIR,
    TIMEOUT_OVER_P99,
    Calibration,
    Step,
    calibration_file,
    calibration_key,
    machine_name,
    read_calibration,
    write_calibration,
)
from contract.errors import SetupError
from contract.history import LOADGEN_BUSY_SHARE
from contract.outcomes import EXIT_INTERRUPTED
from harness.manifest import Manifest, is_manifest, load_manifest
from harness.progress import Progress

#: The ramp's user counts (the last ones only while the system keeps up: see ``ramp``).
RAMP_USERS = (1, 2, 4, 8, 16, 32)
#: Seconds of each step of the ramp.
STEP_S = 5.0
#: The part of a step left out of its figures: the users it added are still settling.
SETTLE_FRACTION = 0.4
#: The client timeout during a calibration: no request of a working system waits this long,
#: so a retry or an abandon in it is the system's doing.
CALIBRATION_TIMEOUT_MS = 30_000
#: A step whose errors exceed this share of its attempts has broken away.
ERROR_SHARE = 0.01
#: The share of the top rate that counts as having reached capacity.
NEAR_TOP = 0.9
#: A step whose median latency is over LATENCY_BREAK x the first step's + LATENCY_SLACK_MS
#: is past capacity: its users wait in a queue (closed-loop users keep the rate flat).
LATENCY_BREAK = 1.5
LATENCY_SLACK_MS = 5.0
#: A rate still growing by this factor at the ramp's top: capacity not found (capped).
STILL_GROWING = 1.1


@dataclass(frozen=True)
class Setup:
    """What a calibration runs: a manifest with a topology and options."""

    manifest: Manifest
    topology: dict[str, int]
    options: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "topology": dict(sorted(self.topology.items())),
            "options": dict(sorted(self.options.items())),
        }

    def key(self) -> str:
        return calibration_key(_manifest_text(self.manifest), self.as_dict(), machine_name())


def _manifest_text(manifest: Manifest) -> str:
    try:
        return manifest.path.read_text()
    except OSError:
        return manifest.name  # a manifest no longer on disk (a replay): its name stands for it


def setup_of(target: str | Path) -> Setup:
    """The set-up of ``zchaos calibrate TARGET``: a manifest with its own topology and
    options, or a scenario's (its topology and options, its implementation's manifest)."""
    if is_manifest(str(target)):
        manifest = load_manifest(str(target))
        return Setup(manifest, {n: r.count for n, r in manifest.roles.items()}, dict(manifest.options))
    from harness.scenario import load_scenario
    from harness.stock import find_scenario

    path, _ = find_scenario(str(target))  # a file, or a stock scenario's name
    return scenario_setup(load_scenario(path))


def scenario_setup(scenario: Any) -> Setup:
    """The set-up a scenario runs (harness/scenario.py ``Scenario``)."""
    manifest = scenario.base_manifest or scenario.manifest
    return Setup(manifest, dict(scenario.topology), dict(scenario.options))


def stored(setup: Setup, runs_dir: str | Path) -> Calibration | None:
    """The calibration stored for ``setup`` on this machine, if any."""
    return read_calibration(calibration_file(runs_dir, setup.manifest.name, setup.key()))


def ramp(users: tuple[int, ...], step_s: float) -> list[dict[str, Any]]:
    """The load phases of the ramp, as a scenario's ``[[load.phases]]`` say them."""
    return [{"name": f"users-{n}", "duration_s": step_s, "users": n} for n in users]


def _calibration_scenario(setup: Setup, users: tuple[int, ...], step_s: float) -> Any:
    from harness.scenario import _knows, parse_scenario

    manifest = setup.manifest
    data: dict[str, Any] = {
        "name": f"calibrate-{_safe(manifest.name)}",
        "implementation": str(manifest.path),
        "topology": {r: n for r, n in setup.topology.items() if manifest.roles[r].scalable},
        "options": setup.options,
        "drain_s": 5.0,
        "load": {"wait_ms": 0, "spawn_rate": 100, "phases": ramp(users, step_s)},
    }
    if any("timeout_ms" in k.options or _knows(k, "timeout_ms") for k in manifest.clients):
        data["load"]["client"] = {"timeout_ms": CALIBRATION_TIMEOUT_MS}
    return parse_scenario(data, None, where=f"calibration of {manifest.name}", manifest=manifest)


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def calibrate(
    setup: Setup,
    runs_dir: str | Path = "runs",
    *,
    progress: Progress | None = None,
    users: tuple[int, ...] | None = None,
    step_s: float | None = None,
) -> Calibration:
    """Measure ``setup`` and store the result in ``runs_dir`` (see the module's doc); the
    ramp is RAMP_USERS, STEP_S each, unless ``users`` and ``step_s`` say otherwise."""
    from harness.runner import Runner

    users = users or RAMP_USERS
    step_s = step_s or STEP_S
    progress = progress or Progress()
    scenario = _calibration_scenario(setup, users, step_s)
    runner = Runner(scenario, runs_dir=Path(runs_dir) / CALIBRATION_DIR, progress=progress)
    progress.phase(f"calibrate {setup.manifest.name}")
    progress.note(
        f"no faults; a ramp of {', '.join(map(str, users))} users, {step_s:g} s each "
        f"(~{len(users) * step_s:.0f} s of load), client timeout {CALIBRATION_TIMEOUT_MS} ms"
    )
    result = runner.execute(report=False)
    if result.exit_code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    meta = runner.meta
    origin = meta.get("load_started_ns")
    if origin is None:
        raise SetupError(f"the calibration's load never started; see {runner.run.root}")
    steps = measure_steps(runner.run.history, origin, users, step_s)
    calibration = summarise(steps, setup, run=str(runner.run.root))
    windows = measured_windows(origin, len(users), step_s)
    if busy := busy_note(generator_lag_s(runner.run.history, windows), windows):
        calibration = replace(calibration, notes=(*calibration.notes, busy))
    write_calibration(calibration_file(runs_dir, setup.manifest.name, calibration.key), calibration)
    return calibration


def _percentile(sorted_values: list[float], q: float) -> float:
    """The ``q`` percentile (nearest rank) of a sorted list."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def read_client_events(history: Path) -> list[dict[str, Any]]:
    """The clients' send, reply, retry, abandon and lost events (their files: locust-*.jsonl)."""
    kinds = {"send", "reply", "retry", "abandon", "lost"}
    events = []
    for path in sorted(history.glob("locust-*.jsonl")):
        with path.open("rb") as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line cut by a killed writer: one event less to count
                if isinstance(event, dict) and event.get("ev") in kinds:
                    events.append(event)
    return events


def measured_windows(origin_ns: int, steps: int, step_s: float) -> list[tuple[int, int]]:
    """Each ramp step's measured window: its end, past SETTLE_FRACTION."""
    step_ns = int(step_s * 1e9)
    return [
        (origin_ns + i * step_ns + int(SETTLE_FRACTION * step_ns), origin_ns + (i + 1) * step_ns)
        for i in range(steps)
    ]


def measure_steps(
    history: Path, origin_ns: int, users: tuple[int, ...], step_s: float
) -> list[tuple[Step, list[float]]]:
    """Each ramp step's figures over its measured window (``measured_windows``), with the
    latencies (ms, sorted) of the requests sent in it."""
    events = read_client_events(history)
    windows = measured_windows(origin_ns, len(users), step_s)
    steps = []
    for n, (lo, hi) in zip(users, windows, strict=True):
        ok = sent = errors = 0
        latencies: list[float] = []
        for e in events:
            ts, ev = int(e.get("ts", 0)), e["ev"]
            if ev == "reply":
                latency_us = float(e.get("latency_us") or 0)
                if e.get("ok") and lo <= ts < hi:
                    ok += 1
                if not e.get("ok") and lo <= ts < hi:
                    errors += 1
                if e.get("ok") and lo <= ts - latency_us * 1000 < hi:
                    latencies.append(latency_us / 1000.0)
            elif lo <= ts < hi:
                if ev == "send":
                    sent += 1
                else:
                    errors += 1
        latencies.sort()
        steps.append(
            (
                Step(
                    users=n,
                    ok_per_s=round(ok / ((hi - lo) / 1e9), 2),
                    sent=sent,
                    errors=errors,
                    p50_ms=round(_percentile(latencies, 0.5), 3) if latencies else None,
                    p99_ms=round(_percentile(latencies, 0.99), 3) if latencies else None,
                ),
                latencies,
            )
        )
    return steps


def generator_lag_s(history: Path, windows: list[tuple[int, int]]) -> float:
    """Seconds of ``windows`` in which the load generator's own event loop ran late
    (``loadgen_lag``, loadtests/user.py): the clients' latencies and rates then were the
    machine's as much as the system's."""
    late = 0
    for path in sorted(history.glob("locust-*.jsonl")):
        with path.open("rb") as fh:
            for line in fh:
                if b'"loadgen_lag"' not in line:
                    continue
                try:
                    event = json.loads(line)
                    to, lag_us = int(event["ts"]), int(event["lag_us"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a killed writer
                late += sum(max(0, min(to, hi) - max(to - lag_us * 1000, lo)) for lo, hi in windows)
    return late / 1e9


def busy_note(lag_s: float, windows: list[tuple[int, int]]) -> str:
    """The note of a calibration measured while the load generator ran late for
    LOADGEN_BUSY_SHARE of its measured time or more, or ''."""
    measured_s = sum(hi - lo for lo, hi in windows) / 1e9
    if lag_s < LOADGEN_BUSY_SHARE * measured_s:
        return ""
    return (
        f"the machine was busy: the load generator's own event loop ran {lag_s:.1f} s late over the "
        f"{measured_s:.1f} s measured, so these figures are partly the machine's (a capacity too low, "
        "latencies and the timeout too high); calibrate again with the machine quiet "
        "(`zchaos calibrate NAME --again`)"
    )


def summarise(
    measured: list[tuple[Step, list[float]]], setup: Setup, *, run: str = "", date: str | None = None
) -> Calibration:
    """Capacity, latency at a moderate load and the timeout that fits, from the ramp's steps."""
    steps = [step for step, _ in measured]
    healthy: list[Step] = []
    notes: list[str] = []
    for step in steps:
        if step.ok_per_s <= 0 or step.errors > ERROR_SHARE * max(step.sent, 1):
            notes.append(
                f"errors broke away at {step.users} users: {step.errors} retries, abandons, lost or wrong "
                f"replies in {step.sent} attempts, {step.ok_per_s:g} ok replies/s"
            )
            break
        healthy.append(step)
    if not healthy:
        raise SetupError(
            f"{setup.manifest.name} answered no request ok even at {steps[0].users if steps else 1} user "
            "without faults, so there is nothing to calibrate; see the logs of "
            f"{run or 'the calibration run'}"
        )
    top = max(s.ok_per_s for s in healthy)
    # Capacity in users: the first step that reached near the top rate, but never past the
    # last one before latency broke away (a slow system's few replies a step make its rates
    # coarse: 2.67 or 3 a second for the same three 1 s workers).
    base = healthy[0].p50_ms or 0.0
    unloaded = [s for s in healthy if (s.p50_ms or 0.0) <= LATENCY_BREAK * base + LATENCY_SLACK_MS]
    at_capacity = next(s for s in healthy if s.ok_per_s >= NEAR_TOP * top)
    if unloaded and unloaded[-1].users < at_capacity.users:
        at_capacity = unloaded[-1]
        notes.append(
            f"latency broke away after {at_capacity.users} users (p50 over {LATENCY_BREAK:g}x "
            f"the {base:g} ms at {healthy[0].users} user + {LATENCY_SLACK_MS:g} ms)"
        )
    # Capped: the top rate came at the ramp's last step and was still growing there.
    capped = (
        len(healthy) == len(steps)
        and healthy[-1].ok_per_s == top
        and (len(healthy) == 1 or healthy[-1].ok_per_s >= STILL_GROWING * healthy[-2].ok_per_s)
    )
    if capped:
        notes.append(
            f"the rate still grew at the ramp's top ({healthy[-1].users} users): the capacity is at least "
            "this; the load generator, not the system, may have been the limit"
        )
    moderate = [s for s in healthy if s.users <= max(1, at_capacity.users // 2)] or healthy[:1]
    pooled = sorted(x for step, latencies in measured if step in moderate for x in latencies)
    if not pooled:
        raise SetupError(f"no request of the calibration's first steps was answered ok; see {run}")
    p50, p90, p99 = (round(_percentile(pooled, q), 3) for q in (0.5, 0.9, 0.99))
    timeout = max(100.0, math.ceil(TIMEOUT_OVER_P99 * p99 / 100.0) * 100.0)
    return Calibration(
        manifest=setup.manifest.name,
        manifest_path=str(setup.manifest.path),
        key=setup.key(),
        machine=machine_name(),
        date=date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        setup=setup.as_dict(),
        capacity_rps=top,
        capacity_users=at_capacity.users,
        capped=capped,
        p50_ms=p50,
        p90_ms=p90,
        p99_ms=p99,
        moderate_users=max(s.users for s in moderate),
        timeout_ms=timeout,
        steps=tuple(steps),
        run=run,
        notes=tuple(notes),
    )


def calibrated(scenario: Any, runs_dir: str | Path = "runs", progress: Progress | None = None) -> Any:
    """``scenario`` with the calibration its relative values need: the one stored for its
    set-up on this machine, else one measured now (said on the terminal) and stored. A
    scenario without relative values, or already calibrated, is returned as it is."""
    if not scenario.uncalibrated:
        return scenario
    from harness.scenario import reparse

    progress = progress or Progress()
    setup = scenario_setup(scenario)
    found = stored(setup, runs_dir)
    if found is None:
        progress.note(
            f"{scenario.name} sizes its load or bounds from {setup.manifest.name}'s own numbers "
            f"({', '.join(scenario.relative_keys)}), and none are stored for this set-up on this machine: "
            f"calibrating it first (`zchaos calibrate` does it alone), ~{len(RAMP_USERS) * STEP_S:.0f} s"
        )
        found = calibrate(setup, runs_dir, progress=progress)
        progress.note(f"calibration stored: {found.summary()}")
    else:
        progress.note(f"calibration of {setup.manifest.name} ({found.date}): {found.summary()}")
    # Each use says them: a calibration measured on a busy machine sizes every later run.
    for note in found.notes:
        progress.note(f"calibration note: {note}")
    again = reparse(scenario, scenario.source, calibration=found)
    return replace(again, sets=scenario.sets)


def print_calibration(calibration: Calibration, path: Path) -> None:
    """The short summary ``zchaos calibrate`` ends with."""
    print(f"calibration of {calibration.manifest} stored in {path}")
    print(f"  set-up: {', '.join(f'{r} x{n}' for r, n in calibration.setup['topology'].items())}")
    print("  ramp:  users  ok/s   attempts  errors  p50 ms  p99 ms")
    for s in calibration.steps:
        p50 = "-" if s.p50_ms is None else f"{s.p50_ms:g}"
        p99 = "-" if s.p99_ms is None else f"{s.p99_ms:g}"
        print(f"         {s.users:>5}  {s.ok_per_s:>6g}  {s.sent:>8}  {s.errors:>6}  {p50:>6}  {p99:>6}")
    more = "at least " if calibration.capped else ""
    print(
        f"  capacity: {more}{calibration.capacity_rps:g} ok replies/s, "
        f"reached at {calibration.capacity_users} users"
    )
    print(
        f"  latency at {calibration.moderate_users} users: p50 {calibration.p50_ms:g} ms, "
        f"p90 {calibration.p90_ms:g} ms, p99 {calibration.p99_ms:g} ms"
    )
    print(f"  client timeout that fits: {calibration.timeout_ms:g} ms ({TIMEOUT_OVER_P99:g}x p99)")
    for note in calibration.notes:
        print(f"  note: {note}")
