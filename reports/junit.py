"""junit.xml for CI: one testcase per check of the verdict, classname = scenario name.

A check whose outcome is violated (a violation that was not expected, or an expected one
that did not happen) is a ``failure``; an unknown one is ``skipped`` with its reason (what
was missing and how to get it); an expected violation that happened passes, with a note
in ``system-out``. A run that did not carry out its plan gets a ``run`` testcase with an
``error`` per way it fell short, and a report error a ``report`` testcase with an ``error``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from contract.outcomes import UNKNOWN, VIOLATED

# Characters XML 1.0 cannot carry, even escaped; a history may hold any text.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_tree(verdict: dict[str, Any]) -> ET.ElementTree:
    scenario = verdict.get("scenario") or "scenario"
    checks: dict[str, dict[str, Any]] = verdict["checks"]
    failures = sum(1 for c in checks.values() if c["outcome"] == VIOLATED)
    skipped = sum(1 for c in checks.values() if c["outcome"] == UNKNOWN)
    errors = verdict.get("errors") or []
    incomplete = verdict.get("incomplete") or []
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=scenario,
        tests=str(len(checks) + len(errors) + len(incomplete)),
        failures=str(failures),
        errors=str(len(errors) + len(incomplete)),
        skipped=str(skipped),
    )
    props = ET.SubElement(suite, "properties")
    for key in ("implementation", "seed", "outcome", "status"):
        ET.SubElement(props, "property", name=key, value=str(verdict.get(key)))
    for name, c in checks.items():
        case = ET.SubElement(suite, "testcase", classname=scenario, name=name)
        detail = json.dumps(c["examples"], indent=1, default=str) if c["examples"] else c["summary"]
        if c["outcome"] == VIOLATED:
            message = c.get("note") or c["summary"]
            failure = ET.SubElement(case, "failure", message=_clean(message), type=c["status"])
            failure.text = _clean(f"{c['summary']}\n{detail}")
        elif c["outcome"] == UNKNOWN:
            ET.SubElement(case, "skipped", message=_clean(c.get("reason") or c["summary"]))
        out = ET.SubElement(case, "system-out")
        out.text = _clean(c.get("note", c["summary"]))
    for message in incomplete:
        case = ET.SubElement(suite, "testcase", classname=scenario, name="run")
        ET.SubElement(case, "error", message=_clean(message), type="incomplete")
    for message in errors:
        case = ET.SubElement(suite, "testcase", classname=scenario, name="report")
        ET.SubElement(case, "error", message=_clean(message))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(verdict: dict[str, Any], path: Path) -> None:
    junit_tree(verdict).write(path, encoding="utf-8", xml_declaration=True)
