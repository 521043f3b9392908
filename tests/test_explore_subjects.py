"""``zchaos explore`` on the planted-bug subjects of other families than the stall queue's
(tests/test_explore_runs.py): each bug needs one fault kind on one target in one way, and
the exploration finds it from the manifest alone, with every kind that applies, then its
written scenario breaks the same check again on another seed.

- ``junk-queue`` (tests/explore_subject/junk_queue.py, Simple Pirate): junk sent to the
  queue's backend endpoint costs it its idle workers, for good (``malformed``, at the
  backend, not the frontend);
- ``paced-server`` (tests/explore_subject/paced_server.py, Lazy Pirate): a server that
  paces its replies by the wall clock sleeps a clock step out (a clock fault on it);
- ``mdp-idle-disconnect`` (tests/blackbox/mdp_broker.py, Majordomo): a worker restarted
  while idle stays on the broker's idle list and the next request goes to nobody (a
  ``restart`` of a worker, not a kill; clients that never resend).

Each is a soak (minutes of runs): CI's time goes to tests/test_explore_runs.py's one subject.
bench/explore_power.py measures how many runs each takes on several seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.procs import ROOT, processes_of

SUBJECTS = ROOT / "tests" / "explore_subject"
BLACKBOX = ROOT / "tests" / "blackbox"


def with_bug(manifest: Path, bug: str, where: Path) -> Path:
    """A copy of ``manifest`` with its ``bug`` option set, beside links to its programs."""
    for program in manifest.parent.glob("*.py"):
        (where / program.name).symlink_to(program)
    copy = where / manifest.name
    copy.write_text(manifest.read_text().replace('bug = "none"', f'bug = "{bug}"', 1))
    return copy


# (subject, its bug, exploration seed, the check it breaks, the fault kind that shows it):
# each seed one whose random exploration found the planted bug early in
# bench/explore_power.py's trials (random: its draws do not hang on the runs' outcomes).
# mdp-idle-disconnect's seed draws its trigger with no lossy fault beside it twice (the
# bench's ``draws``: seed 157, runs 4 and 5, the only such seed of 1-200 in 15 runs). Seed 3's
# first trigger run held a partition of the clients' link and cuts of a worker's link too:
# whether its scenario broke no_lost again hung on whether the lost request's life met a link
# fault (then "in flight as a link fault dropped data", excused): 3 of 5 tries on 2026-12-04
# said "reproduced 1 of 2". Seed 30 (clean in run 4 only): 1 of 3 found nothing in 15, the
# bug being racy. Seed 157: 5 of 5 found it in run 5 (a worker restarted alone), 2 of 2.
CASES = [
    pytest.param(SUBJECTS / "junk-queue.toml", "", 1, "recovery", "malformed", id="junk-queue"),
    pytest.param(SUBJECTS / "paced-server.toml", "", 3, "recovery", "clock", id="paced-server"),
    pytest.param(
        BLACKBOX / "mdp-broker-noresend.toml", "idle-disconnect-stays-listed", 157, "no_lost", "restart",
        id="mdp-idle-disconnect",
    ),
]  # fmt: skip


@pytest.mark.soak
@pytest.mark.parametrize(("manifest", "bug", "seed", "check", "kind"), CASES)
def test_explore_finds_the_planted_bug_and_its_scenario_breaks_the_check_again(
    manifest: Path, bug: str, seed: int, check: str, kind: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    subject = with_bug(manifest, bug, tmp_path) if bug else manifest
    runs = tmp_path / "explore"
    args = ["--seed", str(seed), "--strategy", "random", "--run-s", "12", "--no-calibrate", "--confirm", "1"]
    code = main(["explore", str(subject), *args, "--runs", "15", "--until-finding", "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    (folder,) = runs.glob("explore-*")
    record = json.loads((folder / "explore.json").read_text())
    assert code == 1, (out, record["summary"])
    # the planted bug may break more than one check in its run (junk-queue: recovery, and
    # no_lost where its clients never resend); the expected one is among them
    matching = [f for f in record["findings"] if f["check"] == check]
    assert len(matching) == 1, record["findings"]
    (finding,) = matching
    assert any(k.startswith(kind) for k in finding["fault_kinds"]), finding
    # the written scenario, read back as `zchaos run` reads it, broke the check on another seed
    assert finding["reproduced"] == {"violated": 2, "runs": 2}, finding
    assert f"replay: zchaos run {finding['scenario']}" in out
    assert processes_of(runs) == []
