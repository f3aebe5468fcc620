"""Headless Chromium, driven by Playwright, for the tests that open dml_ep's HTML reports as a reader would.

The browser is Debian's package (``/usr/bin/chromium``; ``.ci/run`` installs it as it installs
qemu-user), started with the flags that keep it off the network, so a page that fetched anything
would show it in :attr:`OpenedPage.requests`. Without Chromium or Playwright the tests that need
them skip, except where ``DML_EP_REQUIRE_BROWSER`` is set (as ``.ci/run`` sets it): there they fail.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import zlib
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("DML_EP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}


def launch(playwright):
    """Chromium, or a skip (a failure where a browser is required) saying what is missing."""
    if not Path(CHROMIUM).exists():
        missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)


def missing(what: str):
    if os.environ.get("DML_EP_REQUIRE_BROWSER"):
        pytest.fail(f"the browser tests need it: {what}")
    pytest.skip(what)


@dataclasses.dataclass
class OpenedPage:
    """A report opened from disk and drawn: what its console said, what it asked the network for."""

    page: object
    errors: list[str]
    requests: list[str]
    seconds: float  # from navigation to the graph drawn

    def evaluate(self, script: str):
        return self.page.evaluate(script)  # type: ignore[attr-defined]


def open_report(browser, path: Path, timeout_s: float = 30) -> OpenedPage:
    """Opens ``path`` (file://) and waits until the page says the graph is drawn."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    started = time.monotonic()
    page.goto(path.resolve().as_uri())
    page.wait_for_function("document.documentElement.dataset.renderMs !== undefined || document.getElementById('status')"
                           ".textContent.startsWith('the graph could not')", timeout=timeout_s * 1000)
    return OpenedPage(page, errors, [url for url in requests if not url.startswith("file:")], time.monotonic() - started)


def distinct_pixel_bytes(png: bytes) -> int:
    """How many distinct byte values the PNG's image data holds (filter bytes included): a blank
    screenshot, one colour throughout, has a handful; a drawn page has hundreds."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "a PNG"
    data, at = b"", 8
    while at < len(png):
        length = int.from_bytes(png[at:at + 4], "big")
        kind = png[at + 4:at + 8]
        if kind == b"IDAT":
            data += png[at + 8:at + 8 + length]
        at += 12 + length
    return len(set(zlib.decompress(data)))


def keep_screenshot(picture: bytes, path: Path, readme: Path) -> None:
    """A README picture made by the test that calls this: written to ``path`` with
    DML_EP_UPDATE_SCREENSHOT=1; else the committed one must exist, not be blank, and be in README."""
    assert distinct_pixel_bytes(picture) > 50
    if os.environ.get("DML_EP_UPDATE_SCREENSHOT"):
        path.write_bytes(picture)
    assert distinct_pixel_bytes(path.read_bytes()) > 50
    assert f"docs/{path.name}" in readme.read_text(encoding="utf-8")
