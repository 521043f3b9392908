"""A system's own numbers: what ``zchaos calibrate`` measured, and values relative to them.

A calibration measures an implementation without faults (harness/calibrate.py): a ramp of
users finds its capacity (the rate of ok replies before latency or errors break away), a
moderate load gives its latency percentiles, and from them the client timeout that fits.
It is stored as a small JSON file in the runs folder::

    runs/calibration/<manifest name>-<key>.json

keyed by the manifest file's content, the set-up it ran (topology and options) and the
machine (``calibration_key``), with its date. This module is that file's contract (the
runner, ``zchaos check`` and ``zchaos explore`` read it through ``Calibration``), and the
grammar of the values a scenario may give relative to it::

    users = "0.5x capacity"                 # users that offer half the capacity rate
    users = "0.5x capacity, at most 10"     # ... and never more than 10
    latency_p99_ms = "3x p99, at least 250" # 3 times the measured p99, never under 250 ms
    recovery_bound_s = "8x p99, at least 10"
    client = { timeout_ms = "3x p99, at least 2500" }

``<factor>x <quantity>`` followed by optional ``, at least N`` and ``, at most N`` (in the
key's own unit). The quantities: ``capacity`` (for user counts only), ``p50`` and ``p99``
(the latency at a moderate load, converted to the key's unit: ms or s) and ``timeout``
(the client timeout that fits, ditto). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: The folder of a runs folder that holds the calibrations (and the runs that measured them).
CALIBRATION_DIR = "calibration"
#: The version of the stored file's format; a file of another version is measured again.
FORMAT = 1
#: The quantities a relative value may name, and what each is.
QUANTITIES = {
    "capacity": "users that offer the measured capacity rate (user counts only)",
    "p50": "median reply latency at a moderate load",
    "p99": "99th percentile reply latency at a moderate load",
    "timeout": "the client timeout that fits the measured latency (3x p99)",
}
#: How much the client timeout that fits leaves over the p99 at a moderate load.
TIMEOUT_OVER_P99 = 3.0

_RELATIVE = re.compile(
    r"\s*(?P<factor>\d+(?:\.\d+)?|\.\d+)\s*x\s*(?P<quantity>[a-z0-9_]+)\s*"
    r"(?P<bounds>(?:,\s*at\s+(?:least|most)\s+[-+0-9.eE]+\s*)*)$"
)
_BOUND = re.compile(r",\s*at\s+(least|most)\s+([-+0-9.eE]+)\s*")


@dataclass(frozen=True)
class Step:
    """One step of the calibration's ramp: so many users, and what the system did."""

    users: int
    ok_per_s: float  # ok replies per second in the step's measured window
    sent: int  # attempts sent in it
    errors: int  # retries, abandons and lost requests in it
    p50_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class Calibration:
    """What one calibration measured (the stored file holds ``as_dict``)."""

    manifest: str  # the manifest's name
    manifest_path: str
    key: str  # calibration_key(...): what the stored file is found by
    machine: str
    date: str  # ISO 8601, UTC
    setup: dict[str, Any]  # topology and options it ran with
    capacity_rps: float  # ok replies per second at capacity
    capacity_users: int  # the fewest users of the ramp that reached it (wait 0)
    capped: bool  # the rate still grew at the ramp's top: capacity is at least this
    p50_ms: float  # at a moderate load (half the capacity users)
    p90_ms: float
    p99_ms: float
    moderate_users: int
    timeout_ms: float  # the client timeout that fits: TIMEOUT_OVER_P99 x p99, rounded up
    steps: tuple[Step, ...] = ()
    run: str = ""  # the run folder that measured it
    format: int = FORMAT
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["steps"] = [asdict(s) for s in self.steps]
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """Raises ValueError (a KeyError or TypeError turned into one) on a file not of this format."""
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            fields = dict(data)
            fields["steps"] = tuple(Step(**s) for s in data.get("steps", ()))
            fields["notes"] = tuple(data.get("notes", ()))
            return cls(**fields)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a calibration: {exc}") from None

    def quantity(self, name: str, unit: str) -> float:
        """A measured latency quantity in ``unit`` ('ms' or 's')."""
        ms = {"p50": self.p50_ms, "p99": self.p99_ms, "timeout": self.timeout_ms}[name]
        return ms if unit == "ms" else ms / 1000.0

    def summary(self) -> str:
        more = "at least " if self.capped else ""
        return (
            f"capacity {more}{self.capacity_rps:g} ok replies/s ({users_text(self.capacity_users)}), "
            f"latency at {users_text(self.moderate_users)} p50 {self.p50_ms:g} ms, p90 {self.p90_ms:g} ms, "
            f"p99 {self.p99_ms:g} ms; client timeout that fits {self.timeout_ms:g} ms "
            f"(measured {self.date} on {self.machine})"
        )


def users_text(n: int) -> str:
    """``n`` users, said right for one."""
    return f"{n} user" + ("" if n == 1 else "s")


def machine_name() -> str:
    """The machine a calibration belongs to: its host name and CPU count."""
    return f"{platform.node() or 'localhost'}/{os.cpu_count() or 1}cpu"


def calibration_key(manifest_text: str, setup: dict[str, Any], machine: str) -> str:
    """What a stored calibration is found by: the manifest file's content, the topology and
    options it ran with, and the machine (another of any of them: measured again)."""
    blob = json.dumps({"manifest": manifest_text, "setup": setup, "machine": machine}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def calibration_file(runs_dir: str | Path, manifest_name: str, key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", manifest_name)
    return Path(runs_dir) / CALIBRATION_DIR / f"{safe}-{key}.json"


def read_calibration(path: Path) -> Calibration | None:
    """The calibration stored at ``path``; None when there is none or it is not readable
    (a damaged or older file is measured again rather than trusted)."""
    try:
        return Calibration.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def write_calibration(path: Path, calibration: Calibration) -> None:
    """Written aside and moved into place, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(calibration.as_dict(), indent=2) + "\n")
    tmp.replace(path)


@dataclass(frozen=True)
class Relative:
    """A value given relative to the calibration: ``factor`` x ``quantity``, clamped."""

    text: str
    factor: float
    quantity: str
    at_least: float | None = None
    at_most: float | None = None

    def resolve(self, calibration: Calibration, unit: str, *, wait_ms: float = 0.0) -> float:
        """The absolute value in ``unit`` ('users', 'ms' or 's'). Users: the users that offer
        ``factor`` x the capacity rate when each pauses ``wait_ms`` between requests and
        waits the median latency for each reply (at least 1)."""
        if self.quantity == "capacity":
            per_user_s = (calibration.p50_ms + wait_ms) / 1000.0
            value: float = max(1, math.ceil(self.factor * calibration.capacity_rps * per_user_s - 1e-9))
        else:
            value = self.factor * calibration.quantity(self.quantity, unit)
        if self.at_least is not None:
            value = max(value, self.at_least)
        if self.at_most is not None:
            value = min(value, self.at_most)
        return value

    def fallback(self, default: float) -> float:
        """A stand-in before any calibration: ``default`` held to the bounds given."""
        value = default
        if self.at_least is not None:
            value = max(value, self.at_least)
        if self.at_most is not None:
            value = min(value, self.at_most)
        return value


def parse_relative(text: str, unit: str) -> Relative:
    """``text`` as a relative value for a key in ``unit`` ('users', 'ms' or 's'); raises
    ValueError with what is wrong and the form expected."""
    form = '"<factor>x <quantity>[, at least N][, at most N]", e.g. ' + (
        '"0.5x capacity, at most 10"' if unit == "users" else '"3x p99, at least 250"'
    )
    match = _RELATIVE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is neither a number nor a relative value {form}")
    quantity = match["quantity"]
    allowed = ["capacity"] if unit == "users" else [q for q in QUANTITIES if q != "capacity"]
    if quantity not in allowed:
        raise ValueError(
            f"{text!r}: {quantity!r} is not a quantity for this key (known: {', '.join(allowed)})"
        )
    factor = float(match["factor"])
    if factor <= 0:
        raise ValueError(f"{text!r}: the factor must be above 0")
    bounds: dict[str, float] = {}
    for which, number in _BOUND.findall(match["bounds"]):
        if which in bounds:
            raise ValueError(f"{text!r}: 'at {which}' is given twice")
        try:
            bound = float(number)
        except ValueError:
            raise ValueError(f"{text!r}: {number!r} after 'at {which}' is not a number") from None
        if not math.isfinite(bound) or bound < 0:
            raise ValueError(f"{text!r}: 'at {which} {number}' must be a number of at least 0")
        bounds[which] = bound
    low, high = bounds.get("least"), bounds.get("most")
    if low is not None and high is not None and low > high:
        raise ValueError(f"{text!r}: 'at least {low:g}' is above 'at most {high:g}'")
    if unit == "users" and low is not None and low < 1:
        raise ValueError(f"{text!r}: 'at least' users must be 1 or more")
    return Relative(text.strip(), factor, quantity, low, high)


def is_relative(value: Any) -> bool:
    """``value`` is written as a relative value (a string with an ``x``), valid or not."""
    return isinstance(value, str) and re.search(r"\d\s*x\s*[a-z]", value) is not None
