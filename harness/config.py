"""Reading TOML files strictly: every key is known, every value has its type.

The manifest and the scenario are read through ``Table``, so both report mistakes the
same way: the file, the dotted key, what was expected, and a near spelling when a key is
unknown ("did you mean 'users'?"). Nothing is started before a file has been read whole.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contract.errors import SetupError, key_path

REQUIRED: Any = object()
_REQUIRED = REQUIRED

#: The documented bounds (README: "Bounds on numbers"). Every number in a scenario or a
#: manifest is finite and at most MAX_NUMBER in size, unless its key gives its own bound;
#: the keys that size work get smaller ones, so that an absurd value is refused before it
#: costs minutes (a random fault count of 1e8 once took `zchaos check` 209 s and 11.7 GB).
MAX_NUMBER = 1_000_000_000
MAX_INSTANCES = 256  # processes of one role
MAX_USERS = 10_000  # load users (of a kind, a phase, or in all)
MAX_FAULT_TIMES = 10_000  # times one [[faults]] line fires
MAX_DURATION_S = 7 * 86_400  # a run's load, a phase
MAX_SEED = 2**63 - 1
MAX_PROCESSES = 64  # Locust processes
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


def load_toml(path: str | Path, what: str) -> dict[str, Any]:
    """Parse ``path`` or raise a SetupError that names it (``what`` says what it should be)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SetupError(f"no such {what} file", where=path) from None
    except IsADirectoryError:
        raise SetupError(f"is a directory, expected a {what} file (.toml)", where=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"not valid TOML: {exc}", where=path) from None


def _type_ok(value: Any, expected: type | tuple[type, ...]) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    for t in types:
        if t is float and isinstance(value, int | float) and not isinstance(value, bool):
            return True
        if t is int and isinstance(value, bool):
            continue
        if isinstance(value, t):
            return True
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _describe(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


class Table:
    """One TOML table being read: ``get`` each key, then ``done`` rejects the rest."""

    def __init__(self, data: dict[str, Any], file: str | Path, *path: str | int) -> None:
        self.data = data
        self.file = file
        self.path = path
        self._seen: set[str] = set()

    def where(self, key: str | int | None = None) -> str:
        keys = self.path if key is None else (*self.path, key)
        return key_path(self.file, *keys)

    def error(self, key: str | int | None, message: str) -> SetupError:
        return SetupError(message, where=self.where(key))

    def has(self, key: str) -> bool:
        return key in self.data

    def get(
        self,
        key: str,
        expected: type | tuple[type, ...],
        default: Any = _REQUIRED,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        choices: tuple[Any, ...] | None = None,
        numbers_inside: bool = True,
    ) -> Any:
        """The value of ``key``, checked. The numbers inside a table or list are held to the
        general bound unless ``numbers_inside`` is false: a table read key by key (``table``,
        ``tables``) checks each of its numbers when it is read, against that key's own bound."""
        self._seen.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                unread = [k for k in self.data if isinstance(k, str) and k not in self._seen]
                close = difflib.get_close_matches(key, unread, n=1)
                hint = f" (is {close[0]!r} a misspelling of it?)" if close else ""
                raise self.error(key, f"missing; expected {_describe(expected)}{hint}")
            return default
        value = self.data[key]
        if not _type_ok(value, expected):
            raise self.error(key, f"expected {_describe(expected)}, got {value!r}")
        if isinstance(expected, type) and expected is float:
            value = float(value)
        if _is_number(value):
            self._check_number(key, value, maximum)
        elif isinstance(value, dict | list) and numbers_inside:
            self._check_numbers_in(value, (key,))
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum:g}, got {value!r}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum:g}, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(key, f"must be one of {', '.join(map(str, choices))}; got {value!r}")
        return value

    def _check_number(self, key: str | int, value: float, maximum: float | None = None) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value!r}")
        if maximum is None and abs(value) > MAX_NUMBER:
            raise self.error(key, f"must be at most {MAX_NUMBER:g} in size, got {value!r} (README: bounds)")

    def _check_numbers_in(self, data: dict | list, path: tuple[str | int, ...]) -> None:
        """Every number inside a table or list (free-form options too) within the bounds."""
        items = data.items() if isinstance(data, dict) else enumerate(data)
        for k, v in items:
            if _is_number(v):
                try:
                    self._check_number(k, v)
                except SetupError as exc:
                    raise SetupError(exc.message, where=key_path(self.file, *self.path, *path, k)) from None
            elif isinstance(v, dict | list):
                self._check_numbers_in(v, (*path, k))

    def table(self, key: str, *, required: bool = False) -> Table:
        value = self.get(key, dict, _REQUIRED if required else {}, numbers_inside=False)
        return Table(value, self.file, *self.path, key)

    def tables(self, key: str) -> Iterator[Table]:
        """An array of tables (``[[faults]]``)."""
        items = self.get(key, list, [], numbers_inside=False)
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.error(key, f"item {i + 1} should be a table, got {item!r}")
            yield Table(item, self.file, *self.path, key, i)

    def list_of(self, key: str, item_type: type, default: Any = _REQUIRED) -> list[Any]:
        items = self.get(key, list, default)
        if items is default and default is not _REQUIRED:
            return items
        for i, item in enumerate(items):
            if not _type_ok(item, item_type):
                raise self.error(key, f"item {i + 1} should be {_describe(item_type)}, got {item!r}")
        return [float(i) if item_type is float else i for i in items]

    def remaining(self) -> dict[str, Any]:
        """The keys not read yet (for tables of free-form options); marks them read."""
        rest = {k: v for k, v in self.data.items() if k not in self._seen}
        self._seen.update(rest)
        self._check_numbers_in(rest, ())
        return rest

    def done(self) -> None:
        """Reject every key that was not read, suggesting the nearest known one."""
        unknown = [k for k in self.data if k not in self._seen]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, sorted(self._seen), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(sorted(self._seen))
            raise self.error(key, f"unknown key{hint} (known here: {known})")


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    """One value in TOML's inline syntax (JSON's string escapes are TOML's too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)
        return "nan" if math.isnan(value) else ("-inf" if value < 0 else "inf")

    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _toml_section(lines: list[str], data: dict[str, Any], prefix: str, depth: int) -> None:
    # Plain values first: after a [header] every key belongs to that table.
    for key, value in data.items():
        if not (depth < 2 and isinstance(value, dict)) and not _is_table_array(value):
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in data.items():
        name = f"{prefix}{_toml_key(key)}"
        if depth < 2 and isinstance(value, dict):
            lines += ["", f"[{name}]"]
            _toml_section(lines, value, f"{name}.", depth + 1)
        elif _is_table_array(value):
            for item in value:
                lines += ["", f"[[{name}]]"]
                _toml_section(lines, item, f"{name}.", 2)  # tables inside are written inline


def dump_toml(data: dict[str, Any]) -> str:
    """TOML text that ``tomllib`` reads back as ``data`` (the subset scenarios use: scalars,
    lists, tables, arrays of tables); tables below the second level are written inline."""
    lines: list[str] = []
    _toml_section(lines, data, "", 0)
    return "\n".join(lines).lstrip("\n") + "\n"
