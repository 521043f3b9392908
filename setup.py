"""The build step that puts the stock scenarios and the docs into the wheel.

Everything else about the package is in pyproject.toml. The repository keeps its scenarios
(``scenarios/``, ``scenarios/ci/``) and docs (``docs/*.md``, ``README.md``) in top-level
folders, which stay there; a wheel gets a copy of them as package data of ``harness``, in
``harness/stock_files/``, where ``harness/stock.py`` finds them once installed. Why a copy
at build time: setuptools' package data lives inside a package's folder, and mapping a data
package onto the top-level folders (``package-dir``) would need an ``__init__.py`` in them and
behaves differently in an editable install. An editable install copies nothing: it runs from
the checkout, whose own folders ``harness/stock.py`` reads in place. The sdist carries the
folders too (MANIFEST.in), so a wheel built from it has them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: What ships, relative to the repository; harness/stock.py reads the same layout.
STOCK = {"scenarios": "*.toml", "docs": "*.md"}
FILES = ("README.md",)
TARGET = ("harness", "stock_files")


class BuildWithStock(build_py):
    """build_py, then the stock scenarios and docs copied beside the packages."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib, *TARGET)
        shutil.rmtree(target, ignore_errors=True)
        for folder, pattern in STOCK.items():
            source = HERE / folder
            found = sorted(source.rglob(pattern))
            if not found:  # never a wheel that quietly lacks them
                raise SystemExit(f"setup.py: no {pattern} under {source}: the stock files are missing")
            for path in found:
                self._copy(path, target / folder / path.relative_to(source))
        for name in FILES:
            self._copy(HERE / name, target / name)

    def _copy(self, source: Path, destination: Path) -> None:
        destination.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(source), str(destination), preserve_mode=False)


setup(cmdclass={"build_py": BuildWithStock})
