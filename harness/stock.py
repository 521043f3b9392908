"""What zchaos ships beside its code: the stock scenarios and the docs, where they are, and a
scenario named without a path.

The repository keeps them in its top-level folders (``scenarios/``, ``scenarios/ci/`` the CI
suite, ``docs/``, ``README.md``). A wheel carries a copy of them as package data, in
``harness/stock_files/`` (the build step in ``setup.py`` copies them; the folders stay where
they are in the repository). In a checkout (an editable install, or the tests' pythonpath)
there is no copy, and the repository's own folders are read in place.

A scenario argument of ``zchaos run``, ``check`` and ``suite`` is a path, or a stock
scenario's name (``paranoid-pirate-kill-worker``, ``ci/pingpong-kills``): a file of that name
in the current folder wins over the stock one, and the note says which was taken.
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from pathlib import Path

from contract.errors import SetupError

PACKAGE_DIR = Path(__file__).resolve().parent
#: Where a wheel's build step puts its copy (setup.py writes the same name).
SHIPPED = PACKAGE_DIR / "stock_files"
SCENARIOS = "scenarios"
SUFFIX = ".toml"
CLOSE_MATCHES = 6  # names an unknown scenario name's error offers


@functools.cache
def checkout_root() -> Path | None:
    """The repository folder when zchaos runs from a checkout of its own (its pyproject.toml
    beside the packages names the project zchaos), else None (an installed package: the folder
    above ``harness/`` is site-packages, which holds other projects too)."""
    root = PACKAGE_DIR.parent
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if isinstance(project, dict) and project.get("name") == "zchaos" else None


def stock_root() -> Path | None:
    """The folder holding ``scenarios/``, ``docs/`` and ``README.md``: the package's copy, else
    the checkout's; None when neither is there (a package built without them)."""
    if (SHIPPED / SCENARIOS).is_dir():
        return SHIPPED
    root = checkout_root()
    return root if root is not None and (root / SCENARIOS).is_dir() else None


def stock_scenarios() -> dict[str, Path]:
    """Name -> file of every stock scenario, sorted: ``NAME`` for ``scenarios/NAME.toml``,
    ``ci/NAME`` for the CI suite's ``scenarios/ci/NAME.toml``."""
    root = stock_root()
    if root is None:
        return {}
    folder = root / SCENARIOS
    found = {str(p.relative_to(folder).with_suffix("")): p for p in folder.rglob(f"*{SUFFIX}")}
    return dict(sorted(found.items()))


def stock_suites() -> dict[str, Path]:
    """Name -> folder of every stock folder of scenarios a suite can run: ``scenarios`` (all of
    the top level) and each subfolder (``ci``)."""
    root = stock_root()
    if root is None:
        return {}
    folder = root / SCENARIOS
    return {SCENARIOS: folder} | {p.name: p for p in sorted(folder.iterdir()) if p.is_dir()}


def _key(ref: str) -> str:
    """A scenario argument as a stock name: without ``scenarios/`` before it or ``.toml`` after."""
    key = ref.strip().removeprefix("./")
    key = key.removeprefix(f"{SCENARIOS}/")
    return key.removesuffix(SUFFIX).strip("/")


def _is_name(ref: str) -> bool:
    """Whether a missing path could be meant as a stock name: a bare name, ``ci/NAME`` or a
    path under ``scenarios/`` as the README writes them."""
    text = ref.strip().removeprefix("./")
    return "/" not in text.removesuffix("/") or text.startswith(f"{SCENARIOS}/") or text.startswith("ci/")


def close_matches(key: str, names: list[str]) -> list[str]:
    """Names like ``key``: those containing it, then the nearest by spelling."""
    leaf = key.rsplit("/", 1)[-1]
    containing = [n for n in names if leaf and leaf in n]
    near = difflib.get_close_matches(key, names, n=CLOSE_MATCHES, cutoff=0.6)
    return list(dict.fromkeys(near + containing))[:CLOSE_MATCHES]


def _unknown(ref: str, here: str, stock: str, names: list[str]) -> SetupError:
    """The error for an argument that is neither a path here nor a stock name, offering the
    stock names like it."""
    if stock_root() is None:
        return SetupError(
            f"no such {here}, and this zchaos has no stock scenarios to look it up in", where=ref
        )
    close = close_matches(_key(ref), names)
    hint = f"; close: {', '.join(close)}" if close else "; zchaos list shows them all"
    return SetupError(f"no such {here}, nor a stock {stock} of that name{hint}", where=ref)


def find_scenario(ref: str | Path) -> tuple[Path, str | None]:
    """The file a scenario argument names, and a note that says which file was taken when a
    name was looked up (None for a path given as it is)."""
    text = str(ref)
    path = Path(text)
    bare = "/" not in text
    stock = stock_scenarios()
    key = _key(text)
    if bare and not path.exists() and not text.endswith(SUFFIX) and Path(text + SUFFIX).is_file():
        path = Path(text + SUFFIX)  # a local NAME.toml wins over the stock NAME
    if path.exists():
        shadowed = stock.get(key) if bare else None
        if shadowed is not None and shadowed.resolve() != path.resolve():
            return path, f"taking {path} (a file here), not the stock scenario {key} ({shadowed})"
        return path, None
    if not _is_name(text):
        return path, None  # a path that is not there: the reader says so, naming it
    if key in stock:
        twin = f"; the CI suite's is ci/{key}" if f"ci/{key}" in stock else ""
        return stock[key], f"taking the stock scenario {key} ({stock[key]}){twin}"
    raise _unknown(text, "scenario file", "scenario", list(stock))


def find_suite(ref: str | Path) -> tuple[Path, str | None]:
    """The folder a suite argument names (a path, or a stock folder's name: ``ci``,
    ``scenarios``), and a note when a name was looked up."""
    text = str(ref)
    path = Path(text)
    if path.exists() or not _is_name(text):
        return path, None
    suites = stock_suites()
    key = _key(text) or SCENARIOS
    if key in suites:
        return suites[key], f"taking the stock scenarios {key} ({suites[key]})"
    raise SetupError(
        f"no such folder, nor a stock folder of scenarios of that name ({', '.join(suites) or 'none'})",
        where=text,
    )


def shown_name(path: Path) -> str | None:
    """The name that finds ``path`` from the current folder, if it is a stock scenario (so a
    command printed for the user stays short and runs anywhere)."""
    stock = stock_scenarios()
    for name, found in stock.items():
        if found.resolve() == path.resolve():
            try:
                return name if find_scenario(name)[0].resolve() == path.resolve() else None
            except SetupError:
                return None
    return None


def docs() -> list[Path]:
    """The documentation that ships: README.md and docs/*.md."""
    root = stock_root()
    if root is None:
        return []
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]
