"""The test tiers: the ``spark`` mark tests/conftest.py gives every test that uses the run's
SparkSession, which ``./dev quick`` leaves out (noxfile.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOST, E2E = "tests/test_lost_requests.py", "tests/test_end_to_end.py"


def collected(mark: str) -> set[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    out = subprocess.run(
        [*command, "-m", mark, LOST, E2E], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: nothing collected
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_a_test_using_spark_directly_or_through_a_fixture_is_marked_spark_and_no_other() -> None:
    spark, other = collected("spark"), collected("not spark")
    assert spark and other and not spark & other
    direct = f"{LOST}::test_no_lost_counts_a_request_past_its_deadline_as_lost_where_requeue_is_promised"
    through = f"{E2E}::test_paranoid_pirate_survives_worker_kills_and_freezes"  # its fixture pp_kills
    pure = f"{LOST}::test_a_deadline_below_the_recovery_bound_is_refused_naming_the_key"
    assert direct in spark and through in spark
    assert pure in other
