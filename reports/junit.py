"""junit.xml for CI: one testcase per check of the verdict, classname = scenario name.

A violation that was not expected is a ``failure``, and so is an expected violation that
did not happen; an unknown outcome is ``skipped``; an expected violation that happened
passes, with a note in ``system-out``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from reports.checkers import UNKNOWN

# Characters XML 1.0 cannot carry, even escaped; a history may hold any text.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_tree(verdict: dict[str, Any]) -> ET.ElementTree:
    scenario = verdict.get("scenario") or "scenario"
    checks: dict[str, dict[str, Any]] = verdict["checks"]
    failures = sum(1 for c in checks.values() if not c["passed"])
    skipped = sum(1 for c in checks.values() if c["passed"] and c["status"] == UNKNOWN and not c["expected"])
    errors = verdict.get("errors") or []
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=scenario,
        tests=str(len(checks) + len(errors)),
        failures=str(failures),
        errors=str(len(errors)),
        skipped=str(skipped),
    )
    props = ET.SubElement(suite, "properties")
    for key in ("implementation", "seed", "status"):
        ET.SubElement(props, "property", name=key, value=str(verdict.get(key)))
    for name, c in checks.items():
        case = ET.SubElement(suite, "testcase", classname=scenario, name=name)
        detail = json.dumps(c["examples"], indent=1, default=str) if c["examples"] else c["summary"]
        if not c["passed"]:
            message = c.get("note") or c["summary"]
            failure = ET.SubElement(case, "failure", message=_clean(message), type=c["status"])
            failure.text = _clean(f"{c['summary']}\n{detail}")
        elif c["status"] == UNKNOWN and not c["expected"]:
            ET.SubElement(case, "skipped", message=_clean(c["summary"]))
        out = ET.SubElement(case, "system-out")
        out.text = _clean(c.get("note", c["summary"]))
    for message in errors:
        case = ET.SubElement(suite, "testcase", classname=scenario, name="report")
        ET.SubElement(case, "error", message=_clean(message))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(verdict: dict[str, Any], path: Path) -> None:
    junit_tree(verdict).write(path, encoding="utf-8", xml_declaration=True)
