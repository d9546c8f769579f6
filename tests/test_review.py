"""The report as the place to check and correct a session by eye, driven in a real headless Chromium
(Playwright's Python package with the system ``chromium``): hostile text stays text, blinks are accepted,
rejected, retimed and added, spans and trials excluded, the corrections saved and read back by
``eyeblink report``, ``process`` and the API."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from review_session import write_session

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get "
                                   "install chromium); the report is not opened in a browser")


def run_cli(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eyeblink", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class Page:
    """A Playwright page with every dialog, console message and page error recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(str(e)))


@contextlib.contextmanager
def browser_page(html: Path) -> Iterator[Page]:
    pw_api = pytest.importorskip("playwright.sync_api")
    with pw_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            ctx = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
            page = Page(ctx.new_page())
            page.page.goto(html.resolve().as_uri())
            page.page.wait_for_selector('#status[data-ok="1"]', state="attached", timeout=30_000)
            yield page
        finally:
            browser.close()


# ------------------------------------------------------------------------------------------ text stays text

HOSTILE = {
    "trial_type": "<img src=x onerror=alert(1)>",
    "cs_type": '"><script>alert(2)</script>',
    "us_type": "{{JS}}<svg onload=alert(3)>",
}
HOSTILE_STEM = "<img src=x onerror=alert(4)> & {{DATA}}"


@needs_browser
def test_hostile_labels_file_names_and_summary_text_are_shown_as_text(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", HOSTILE_STEM, labels=HOSTILE, summary_extra={
        "warnings": ["<b onmouseover=alert(5)>warned</b>"],
        "input": "</script><script>alert(6)</script>.avi",
        "settings": {"note": "<!-- <script>alert(7)</script>"},
        "blink_rate_per_min": "<img src=x onerror=alert(8)>",
    })
    proc = run_cli("report", session)
    assert proc.returncode == 0, proc.stderr
    html = session.parent / f"{HOSTILE_STEM}.report.html"
    with browser_page(html) as p:
        page = p.page
        page.mouse.move(300, 300)  # hover events, if any markup had got through
        page.wait_for_timeout(300)
        assert p.dialogs == [] and p.errors == []
        assert [m for m in p.console if m.startswith("error")] == []
        # no element the files asked for: the only images are none (no crops), no injected script or svg
        assert page.locator("img").count() == 0 and page.locator("svg").count() == 0
        assert page.locator("script").count() == 2  # the data block and the viewer
        rows = page.locator("#trial-table tbody tr")
        assert rows.count() == 3
        assert rows.nth(0).locator("td").nth(1).text_content() == HOSTILE["trial_type"]
        # the stem is the page's title and heading, as written
        assert page.title() == f"eyeblink report: {HOSTILE_STEM}"
        assert page.locator("h1 .stem").text_content() == HOSTILE_STEM
        assert "<b onmouseover=alert(5)>warned</b>" in page.locator("#warnings").text_content()
        assert "<img src=x onerror=alert(8)>" in page.locator(".cards").text_content()
        assert page.locator("#summary b").count() == 0
        # the data block reads back every label whole
        data = json.loads(page.locator("#report-data").text_content())
        assert data["stem"] == HOSTILE_STEM
