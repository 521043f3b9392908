"""The type check of ``./dev lint`` (mypy, as pyproject.toml's [tool.mypy] sets it) holds code
to the typed records and Protocols: a subject module that misspells a run.json key or gives
a fault a process control without ``running`` fails it, the same module written right passes."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # mypy reads the dependencies' types: 5-10 s

HEADER = """\
from contract.rundir import RunDir
from chaos.faults import ProcessControl


class Control:
    def signal(self, instance: str, sig: int, *, expected_exit: bool = False) -> int | None:
        return None

    def stop(self, instance: str) -> None:
        pass

    def start(self, instance: str) -> int:
        return 1
"""

CORRECT = (
    HEADER
    + """
    def running(self, instance: str) -> int | None:
        return None


def load_start(run: RunDir) -> int:
    return run.read_meta()["load_started_ns"]


control: ProcessControl = Control()
"""
)

FAULTY = (
    HEADER
    + """

def load_start(run: RunDir) -> int:
    return run.read_meta()["load_start_ns"]


control: ProcessControl = Control()
"""
)


def _mypy(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    from mypy import api

    subject = tmp_path / "subject.py"
    subject.write_text(source)
    monkeypatch.chdir(ROOT)  # mypy finds the packages from the project's folder
    out, err, status = api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(subject)]
    )
    return out + err, status


def test_the_typed_records_and_protocols_written_right_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, status = _mypy(tmp_path, CORRECT, monkeypatch)
    assert status == 0, out


def test_a_misspelt_run_json_key_and_a_partial_process_control_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, status = _mypy(tmp_path, FAULTY, monkeypatch)
    assert status == 1, out
    assert '"RunMeta" has no key "load_start_ns"' in out, out
    assert '"Control" is missing following "ProcessControl" protocol member' in out, out
    assert out.count(" error: ") == 2, out
