"""A real install (issue 34 part 6): a stock scenario named without a path, the version from
the package's metadata, ``zchaos suite --junit-xml``, and a wheel that runs every command from
a folder outside the checkout, with the stock scenarios and docs inside it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from contract.errors import SetupError
from harness.cli import main
from harness.stock import find_scenario, find_suite, stock_root, stock_scenarios
from tests.procs import ROOT

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder is a user's own, outside the checkout."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_in_a_checkout_the_stock_files_are_the_repositorys_own() -> None:
    assert stock_root() == ROOT  # an editable install copies nothing: the folders are read in place
    stock = stock_scenarios()
    assert stock["paranoid-pirate-kill-worker"] == ROOT / "scenarios" / "paranoid-pirate-kill-worker.toml"
    assert stock["ci/pingpong-kills"] == ROOT / "scenarios" / "ci" / "pingpong-kills.toml"
    assert len(stock) == len(list((ROOT / "scenarios").rglob("*.toml")))


def test_a_stock_scenario_is_found_by_name_from_any_folder(
    elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, note = find_scenario("pingpong-baseline")
    assert path == ROOT / "scenarios" / "pingpong-baseline.toml"
    assert note == f"taking the stock scenario pingpong-baseline ({path})"
    # the CI suite's by ci/NAME, and the README's paths under scenarios/ from anywhere
    assert find_scenario("ci/pingpong-kills")[0] == ROOT / "scenarios" / "ci" / "pingpong-kills.toml"
    assert find_scenario("scenarios/ci/pingpong-kills.toml")[0] == ROOT / "scenarios/ci/pingpong-kills.toml"
    # a name both folders have: the top level's, and the note names the other
    path, note = find_scenario("paranoid-pirate-partition-worker")
    assert path.parent == ROOT / "scenarios" and "the CI suite's is ci/paranoid-pirate-partition-worker" in (
        note or ""
    )

    assert main(["check", "pingpong-baseline"]) == 0
    out, err = capsys.readouterr()
    assert "zchaos: note: taking the stock scenario pingpong-baseline" in err
    assert out.startswith(f"{ROOT / 'scenarios' / 'pingpong-baseline.toml'}: valid")


def test_a_local_file_of_the_name_wins_and_the_note_says_so(
    elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = elsewhere / "pingpong-baseline.toml"
    text = (ROOT / "scenarios" / "pingpong-baseline.toml").read_text()
    mine.write_text(text.replace("duration_s = 20", "duration_s = 7"))
    path, note = find_scenario("pingpong-baseline")
    assert path.resolve() == mine
    assert note and "(a file here), not the stock scenario pingpong-baseline" in note

    assert main(["check", "pingpong-baseline"]) == 0
    out, err = capsys.readouterr()
    assert "(a file here), not the stock scenario" in err and "7 s of load" in out
    assert find_scenario("pingpong-baseline.toml")[1] == note  # the file's name: the same choice
    # a path is taken as it is, with no note
    assert find_scenario("./pingpong-baseline.toml") == (Path("pingpong-baseline.toml"), None)


def test_an_unknown_name_is_refused_with_the_names_close_to_it(
    elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SetupError, match=r"nor a stock scenario of that name; close: pingpong-baseline"):
        find_scenario("pingpong-basline")
    with pytest.raises(SetupError, match=r"close: .*paranoid-pirate-kill-worker"):
        find_scenario("kill-worker")
    assert main(["run", "majordomo-kil-busy-worker"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zchaos: error: majordomo-kil-busy-worker: no such scenario file")
    assert "majordomo-kill-busy-worker" in err and "Traceback" not in err
    # a path elsewhere is not looked up by name: the reader names the missing file
    assert main(["check", "mine/absent.toml"]) == 2
    assert "mine/absent.toml: no such scenario file" in capsys.readouterr().err


def test_a_suite_takes_a_stock_folders_name(elsewhere: Path) -> None:
    assert find_suite("ci") == (
        ROOT / "scenarios" / "ci",
        f"taking the stock scenarios ci ({ROOT}/scenarios/ci)",
    )
    assert find_suite("scenarios/ci/")[0] == ROOT / "scenarios" / "ci"
    assert find_suite("scenarios")[0] == ROOT / "scenarios"
    (elsewhere / "ci").mkdir()  # a folder here wins
    assert find_suite("ci") == (Path("ci"), None)
    with pytest.raises(SetupError, match=r"nor a stock folder of scenarios of that name \(scenarios, ci\)"):
        find_suite("cii")


def test_the_version_is_the_packages_with_the_checkouts_commit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"zchaos {re.escape(VERSION)}(\+g[0-9a-f]{{12}})?", shown), shown
    if (ROOT / ".git").exists():
        assert "+g" in shown


# A scenario whose one process exits at once: the suite runs it (a real run, no Spark: it
# ends at set-up, exit 2) and writes an error case for it in its JUnit file.
DIES = """\
name = "dies"
description = "a server that exits before it is ready"
[client]
adapter = "lazy_pirate"
endpoint = "frontend"
[endpoints]
frontend = "server"
[roles.server]
command = ["{python}", "-c", "raise SystemExit(3)"]
ready = "port:frontend"
[promises]
checks = ["no_lost"]
"""


def test_suite_junit_xml_writes_the_suites_junit_where_asked(tmp_path: Path) -> None:
    (tmp_path / "dies.toml").write_text(DIES)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "dies-at-once.toml").write_text('implementation = "../dies.toml"\nduration_s = 1\n')
    runs, target = tmp_path / "runs", tmp_path / "ci-out" / "nested" / "zchaos.xml"

    code = main(["suite", str(suite), "--runs-dir", str(runs), "--junit-xml", str(target)])
    assert code == 2  # the scenario could not be run
    (suite_dir,) = runs.glob("suite-*")
    assert target.read_bytes() == (suite_dir / "junit.xml").read_bytes()
    case = ET.parse(target).getroot().find("testsuite/testcase/error")
    assert case is not None and "server" in (case.get("message") or "")
    assert not list(target.parent.glob(".*.tmp"))


def test_suite_junit_xml_refuses_a_folder_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dies.toml").write_text(DIES)
    (tmp_path / "s.toml").write_text('implementation = "dies.toml"\nduration_s = 1\n')
    runs = tmp_path / "runs"
    for given in (str(tmp_path), str(tmp_path / "out") + os.sep):
        assert main(["suite", str(tmp_path), "--runs-dir", str(runs), "--junit-xml", given]) == 2
        assert "--junit-xml takes a file path" in capsys.readouterr().err
    assert not runs.exists()  # nothing ran


# -- a real install --------------------------------------------------------------------

# What the build needs of the checkout; the rest (tests, runs, venvs, caches) stays out.
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".nox", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
    ".pytest_cache", ".ruff_cache", ".mypy_cache", "spark-warehouse", "metastore_db", "tests", "bench",
)  # fmt: skip


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_wheel_installed_in_a_fresh_venv_runs_every_command_from_elsewhere(tmp_path: Path) -> None:
    """The wheel is built as pip builds it for a user (an isolated build from a copy of the
    checkout, so the checkout gets no build/ or egg-info), installed into a new venv, and run
    from a folder outside the checkout. The venv sees this test venv's site-packages through a
    .pth file for the dependencies (pyspark alone is ~490 MB: no download, and the versions
    are the ones this suite tested); a .pth line adds a path without running that folder's
    own .pth files, so the checkout's editable install is not active there, and the test
    asserts the packages come from the wheel."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        tmp_path, env, 300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("zchaos-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, env, 30).stdout.strip())  # fmt: skip
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zchaos-test-dependencies.pth").write_text("".join(f"{p}\n" for p in deps))
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
         str(wheel)],
        tmp_path, env, 120,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr

    user = tmp_path / "user-project"
    user.mkdir()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    where = _run([str(python), "-c", "import harness, importlib.metadata as m; print(harness.__file__); "
                  "print(m.distribution('zchaos').locate_file(''))"], user, env, 30)  # fmt: skip
    assert where.stdout.split() == [str(site / "harness" / "__init__.py"), str(site)], where

    zchaos = str(venv / "bin" / "zchaos")
    version = _run([zchaos, "--version"], user, env, 60)
    assert version.stdout.strip() == f"zchaos {VERSION}", version  # no checkout: no +g<commit>

    listed = _run([zchaos, "list"], user, env, 120)
    assert listed.returncode == 0, listed.stderr
    stock = site / "harness" / "stock_files"
    for shipped in ("scenarios/pingpong-baseline.toml", "scenarios/ci/pingpong-kills.toml",
                    "README.md", "docs/manifest.md"):  # fmt: skip
        assert f"  {stock / shipped}\n" in listed.stdout or f" {stock / shipped}\n" in listed.stdout, shipped
    assert len(list((stock / "scenarios").rglob("*.toml"))) == len(list((ROOT / "scenarios").rglob("*.toml")))

    checked = _run([zchaos, "check", "pingpong-baseline"], user, env, 120)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"{stock / 'scenarios' / 'pingpong-baseline.toml'}: valid")
    assert f"implementation pingpong ({site / 'implementations'}" in checked.stdout

    # 4 s of load: the first 2 s are warm-up, which steady_state does not judge; the run with
    # its report took 35 s here (the report 21 s).
    sets = ["--set", "duration_s=4", "--set", "drain_s=2"]
    ran = _run([zchaos, "run", "pingpong-baseline", *sets], user, env, 400)
    assert "Traceback" not in ran.stderr, ran.stderr
    assert "taking the stock scenario pingpong-baseline" in ran.stderr
    (run,) = (user / "runs").glob("*-pingpong-baseline")
    verdict = json.loads((run / "verdict.json").read_text())
    assert (verdict["outcome"], ran.returncode) == ("passed", 0), (ran.stdout[-3000:], ran.stderr[-2000:])
    assert (run / "report.html").is_file() and (run / "junit.xml").is_file()
    meta = json.loads((run / "run.json").read_text())
    assert meta["replay"]["zchaos_version"] == VERSION
    assert meta["replay"]["commands"][1] == f"zchaos run pingpong-baseline --seed 1 {' '.join(sets)}"


def test_an_editable_install_runs_from_another_folder_on_the_checkouts_files(tmp_path: Path) -> None:
    """The checkout's own install (``pip install -e .``, as ./dev makes it): its ``zchaos``
    from a folder outside the checkout finds the stock scenarios in the checkout."""
    zchaos = Path(sys.executable).parent / "zchaos"
    if not zchaos.exists():
        pytest.skip("zchaos is not installed in this environment (tests on the pythonpath alone)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    checked = _run([str(zchaos), "check", "ci/pingpong-kills"], tmp_path, env, 120)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"{ROOT / 'scenarios' / 'ci' / 'pingpong-kills.toml'}: valid")
