"""The layers of zchaos: every import points down (docs/architecture.md).

``contract`` is the bottom: it imports nothing of zchaos. The families
(``implementations``) build on it alone. The fault injectors, the load clients and the
report pipeline (``chaos``, ``loadtests``, ``reports``) build on those two and never on
each other. The orchestrator (``harness``: runner, CLI, suite) is the top. Imports made
inside functions count, and so do modules loaded by name (``importlib.import_module``
with a name we can read), since either makes the same dependency at run time.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Each package's layer: a package may import its own modules and those of lower layers.
LAYERS: dict[str, int] = {
    "contract": 0,
    "implementations": 1,
    "chaos": 2,
    "loadtests": 2,
    "reports": 2,
    "harness": 3,
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name ``tree`` imports, wherever the import stands, and every module it
    loads by a name we can read (a string, or an f-string whose head is a string or
    ``__name__``)."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                head = ".".join([*base, node.module] if node.module else base)
            else:
                head = node.module or ""
            names.add(head)
            names.update(f"{head}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("import_module", "__import__"):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            elif isinstance(arg, ast.JoinedStr) and arg.values:
                first = arg.values[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value.rstrip("."))
                elif isinstance(first, ast.FormattedValue) and getattr(first.value, "id", "") == "__name__":
                    names.add(module)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the zchaos packages' modules it imports, for every module of the layers."""
    graph: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            tree = ast.parse(path.read_text(), str(path))
            names = imported_names(tree, module, path.name == "__init__.py")
            graph[module] = {n for n in names if n.split(".")[0] in LAYERS}
    return graph


def layer_problems(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported package) for each import that does not point down or inward."""
    problems = set()
    for module, names in graph.items():
        own = module.split(".")[0]
        for name in names:
            other = name.split(".")[0]
            if other != own and LAYERS[other] >= LAYERS[own]:
                problems.add((module, other))
    return problems


def package_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles between packages (each package as one node), as lists of package names."""
    edges = {p: set() for p in LAYERS}
    for module, names in graph.items():
        for name in names:
            a, b = module.split(".")[0], name.split(".")[0]
            if a != b:
                edges[a].add(b)
    cycles, path = [], []

    def visit(node: str) -> None:
        if node in path:
            cycles.append([*path[path.index(node) :], node])
            return
        path.append(node)
        for nxt in sorted(edges[node]):
            visit(nxt)
        path.pop()

    for start in LAYERS:
        visit(start)
    return cycles


def test_every_import_points_down() -> None:
    problems = sorted(layer_problems(import_graph(ROOT)))
    assert not problems, "imports that point up a layer or sideways: " + ", ".join(
        f"{m} -> {p}" for m, p in problems
    )


def test_no_cycle_between_packages() -> None:
    assert package_cycles(import_graph(ROOT)) == []


#: Third-party modules the contract may use, by module: who listens on a port is psutil's
#: to say (the systems under test never import contract.ports, so they need no psutil).
CONTRACT_EXTRAS = {"contract.ports": {"psutil"}}


def test_the_contract_uses_the_standard_library_only() -> None:
    for path in (ROOT / "contract").rglob("*.py"):
        module = module_name(path, ROOT)
        tree = ast.parse(path.read_text())
        for name in imported_names(tree, module, path.name == "__init__.py"):
            top = name.split(".")[0]
            allowed = {"contract", *sys.stdlib_module_names, *CONTRACT_EXTRAS.get(module, ())}
            assert top in allowed, f"{path}: imports {name}"


@pytest.mark.parametrize(
    ("where", "source", "bad"),
    [
        ("contract/history.py", "import harness.runner\n", ("contract.history", "harness")),
        ("reports/html.py", "def f():\n    from loadtests import user\n", ("reports.html", "loadtests")),
        (
            "chaos/nemesis.py",
            "import importlib\nimportlib.import_module('reports.pipeline')\n",
            ("chaos.nemesis", "reports"),
        ),
        (
            "implementations/pingpong/broker.py",
            "from chaos.faults import X\n",
            ("implementations.pingpong.broker", "chaos"),
        ),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, where: str, source: str, bad: tuple[str, str]) -> None:
    for package in LAYERS:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    target = tmp_path / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    graph = import_graph(tmp_path)
    assert layer_problems(graph) == {bad}


def test_imports_that_point_down_pass(tmp_path: Path) -> None:
    for package in LAYERS:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "harness" / "cli.py").write_text("import reports.pipeline\nfrom contract import history\n")
    (tmp_path / "reports" / "pipeline.py").write_text(
        "from contract.errors import SetupError\nfrom . import html\n"
    )
    (tmp_path / "loadtests" / "user.py").write_text("from implementations.dwork import client\n")
    assert layer_problems(import_graph(tmp_path)) == set()
