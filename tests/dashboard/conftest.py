"""A headless Chromium for the dashboard tests, driven by Playwright for Python.

The browser is Debian's ``chromium`` (``make test`` installs it with apt-get), launched with
``executable_path``: Playwright's own browser downloads are never used. Without it the tests
are skipped with the command that installs it.

``dashboard(url)`` opens ``<url>/ui/`` in a fresh page (1400x900, the size of the README's
screenshot) and waits until the three watch streams report "watching".
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator

import pytest

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium")

Open = Callable[[str], "playwright_sync.Page"]


@pytest.fixture(scope="module")
def browser() -> Iterator[playwright_sync.Browser]:
    if CHROMIUM is None:
        pytest.skip("no chromium on the PATH: apt-get install chromium (make test does)")
    with playwright_sync.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def dashboard(browser: playwright_sync.Browser) -> Iterator[Open]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    errors: list[str] = []

    def open_page(url: str) -> playwright_sync.Page:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/ui/")
        for stream in ("nodes", "pods", "events"):
            playwright_sync.expect(page.locator(f"#stream-{stream}")).to_have_class(
                "ok", timeout=30_000
            )
        return page

    try:
        yield open_page
    finally:
        context.close()
    assert not errors, f"the page's scripts raised: {errors}"
