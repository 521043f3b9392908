"""Output folders are claimed, never shared (issue 34 part 4): every folder zchaos makes for a
command's output (a run, a suite, a many-seeds group, a shrink) comes from
contract/rundir.py ``new_folder``, an exclusive mkdir with a suffix on collision.

Before, ``zchaos suite`` named its folder ``suite-<UTC second>`` and made it with
``exist_ok=True`` (so did shrink): two suites started in the same second into one runs folder
wrote into one folder, and the second's junit.xml and index.html replaced the first's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.rundir import STAMP, new_folder
from harness.config import dump_toml
from tests.procs import ROOT

#: Started by the test, each waits for a line on stdin (all are started by then), so they
#: make their folders at the same moment.
CLAIM = """
import sys
from contract.rundir import new_folder
print("ready", flush=True)
sys.stdin.readline()
for _ in range(int(sys.argv[2])):
    folder = new_folder(sys.argv[1], prefix="suite")
    with open(folder / "owner", "x") as fh:  # "x": fails if another process made it first
        fh.write(sys.argv[3])
    print(folder, flush=True)
"""

#: ``zchaos suite`` as the command line runs it, once the test says go.
SUITE = """
import sys
from harness.cli import main
print("ready", flush=True)
sys.stdin.readline()
sys.exit(main(sys.argv[1:]))
"""


@contextlib.contextmanager
def started_together(commands: list[list[str]]) -> Iterator[list[subprocess.Popen[str]]]:
    """Start the processes, wait until each says it is ready, then release them all at once;
    whatever still runs after the block is killed with its group."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for argv in commands:
            proc = subprocess.Popen(
                argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_two_processes_at_the_same_moment_get_folders_of_their_own(tmp_path: Path) -> None:
    per_process = 30
    base = tmp_path / "runs"
    commands = [[sys.executable, "-c", CLAIM, str(base), str(per_process), name] for name in ("A", "B")]
    with started_together(commands) as procs:
        outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    claimed = {name: out.split() for name, out in zip(("A", "B"), outputs, strict=True)}
    folders = [Path(f) for made in claimed.values() for f in made]
    assert len(folders) == 2 * per_process == len(set(folders))
    for name, made in claimed.items():
        assert all((Path(f) / "owner").read_text() == name for f in made)
    assert sorted(base.iterdir()) == sorted(folders)  # nothing else made, nothing left half-made
    # Same second, same stem: the names differ by their suffix only.
    assert all(f.name.startswith("suite-") for f in folders)


def test_a_folder_that_exists_is_never_reused(tmp_path: Path) -> None:
    """Whoever made it (a suite of the same second, a folder restored by hand): the next
    name is taken, and what was there is left alone."""
    # a minute of names either side: a loaded machine once took more than the 2 s this had
    now = time.time()
    theirs = {tmp_path / f"seeds-{time.strftime(STAMP, time.gmtime(now + s))}-x" for s in range(-5, 60)}
    for folder in theirs:
        folder.mkdir()
        (folder / "junit.xml").write_text("theirs")
    ours = new_folder(tmp_path, prefix="seeds", name="x")
    assert ours not in theirs and ours.name.endswith("-x-1") and list(ours.iterdir()) == []
    assert all((f / "junit.xml").read_text() == "theirs" for f in theirs)
    assert new_folder(tmp_path / "new" / "deeper", name="y").parent == tmp_path / "new" / "deeper"


@pytest.mark.slow
def test_two_suites_started_together_keep_their_own_junit_and_index(tmp_path: Path) -> None:
    """Two ``zchaos suite`` into one runs folder at the same moment, each of one scenario
    whose server exits at once (a bad-input run: no Spark): each suite's junit.xml and
    index.html name its own scenario, in a folder of its own."""
    manifest = tmp_path / "gone.toml"
    gone = {
        "name": "gone",
        "description": "a server that exits at once",
        "client": {"adapter": "lazy_pirate", "endpoint": "frontend"},
        "endpoints": {"frontend": "server"},
        "roles": {"server": {"command": ["{python}", "-c", "raise SystemExit(3)"], "ready": "log:ready"}},
        "promises": {"checks": ["no_lost"]},
    }
    manifest.write_text(dump_toml(gone))
    runs = tmp_path / "runs"
    commands = []
    for name in ("alpha", "beta"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.toml").write_text(dump_toml({"implementation": str(manifest), "duration_s": 2}))
        commands.append([sys.executable, "-c", SUITE, "suite", str(folder), "--runs-dir", str(runs)])
    with started_together(commands) as procs:
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [2, 2], outputs  # bad input: the server exited
    suites = sorted(runs.glob("suite-*"))
    assert len(suites) == 2, outputs
    named = {}
    for suite in suites:
        junit, index = (suite / "junit.xml").read_text(), (suite / "index.html").read_text()
        (name,) = [n for n in ("alpha", "beta") if n in junit]
        assert name in index and ({"alpha", "beta"} - {name}).pop() not in junit
        named[name] = suite
    assert set(named) == {"alpha", "beta"}
    for suite in named.values():  # each said where its own index is
        assert any(f"index: {suite / 'index.html'}" in out for out in outputs)
