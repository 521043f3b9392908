"""The Jinja templates of zchaos's HTML pages (report.html, the matrix, compare.html), each
compiled once per process.

A suite, a multi-run ``zchaos report`` and a test process render page after page: with a
new Environment for each, report.html.j2 was parsed and compiled again every time, 0.26 s of
a warm report's ~3.3 s (cProfile, a CI run reported again in one session, 2026-11-28).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, Template, select_autoescape

TEMPLATES = Path(__file__).resolve().parent / "templates"


def page_template(name: str, **filters: Callable[..., Any]) -> Template:
    """The template ``name`` of reports/templates, autoescaped, with ``filters``; compiled on
    first use and kept for the process's life (the same name and filters give the same one)."""
    return _compiled(name, tuple(sorted(filters.items())))


@functools.cache
def _compiled(name: str, filters: tuple[tuple[str, Callable[..., Any]], ...]) -> Template:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(dict(filters))
    return env.get_template(name)
