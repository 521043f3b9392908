"""Headless Chromium for the tests of zchaos's pages: the DOM after the page's scripts ran,
layout figures measured in the page, and screenshots, each at a given window width.

Chromium runs in its own process group with no network and a throw-away profile; nothing
of it outlives the call. A test skips when Chromium is not installed (./dev tests installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

#: Measures the page as laid out (appended to a copy of it, so it runs after the page's own
#: script): how far the page scrolls sideways, and each table wider than its card that does
#: not scroll inside it. ``PROBE_EXTRA`` (a function body) may add more to ``out``.
PROBE = """
<script>
(function () {
  var out = {viewport: window.innerWidth}, d = document.documentElement;
  out.page_overflow = d.scrollWidth - d.clientWidth;
  out.overflowing_tables = [];
  document.querySelectorAll("section.card table").forEach(function (t) {
    var card = t.closest("section.card"), box = card.getBoundingClientRect(), r = t.getBoundingClientRect();
    var scroller = t.closest(".scroll");
    if (r.right > box.right + 1 && !(scroller && scroller.getBoundingClientRect().right <= box.right + 1)) {
      out.overflowing_tables.push(t.id || t.className || "table");
    }
  });
  (function (out) { PROBE_EXTRA })(out);
  var pre = document.createElement("pre");
  pre.id = "zchaos-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (./dev tests installs it)")
    return browser


def _flags(profile: Path, width: int, height: int) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ]


def browse(argv: list[str], timeout: float = 90) -> bytes:
    """Run headless Chromium in its own process group; nothing of it outlives the call."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"chromium exited with {proc.returncode}"
        return out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def dom(page: Path, profile: Path, width: int = 1100, height: int = 1600) -> str:
    """The page's DOM once it is loaded and its scripts ran."""
    return browse([chromium(), *_flags(profile, width, height), "--dump-dom", page.as_uri()]).decode()


def measure(page: Path, profile: Path, width: int, extra: str = "") -> tuple[dict[str, Any], str]:
    """The page's layout figures (PROBE, plus ``extra``'s) at ``width`` px, and its DOM after."""
    probe = page.with_name(f".probe-{width}-{page.name}")
    probe.write_text(page.read_text().replace("</body>", PROBE.replace("PROBE_EXTRA", extra) + "</body>"))
    try:
        text = dom(probe, profile, width, 1000)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="zchaos-probe">(.*?)</pre>', text, re.S)
    assert found, "the probe did not run"
    return json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")), text


def screenshot(page: Path, profile: Path, width: int, path: Path, height: int = 1400) -> bytes:
    """A PNG of the page's first ``height`` px at ``width`` px, saved at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    browse([chromium(), *_flags(profile, width, height), f"--screenshot={path}", page.as_uri()])
    png = path.read_bytes()
    assert png.startswith(b"\x89PNG")
    return png


def shots_dir(default: Path) -> Path:
    """Where a test saves its screenshots: ``ZCHAOS_SHOTS_DIR`` (to look at them), else ``default``."""
    return Path(os.environ.get("ZCHAOS_SHOTS_DIR") or default)
