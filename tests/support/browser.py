"""Pages opened in a real browser: Debian's Chromium, headless, driven through the DevTools
Protocol by playwright (``executable_path``: playwright never downloads a browser here).

Every request the page makes goes through a route that lets ``file:`` and ``data:`` through and
aborts (and records) anything else, and the browser itself resolves no host name: a page that
needs the network shows it as recorded requests, never as a fetch. Each page is screenshot at
a 1280 px wide viewport, and every element whose box passes the viewport's edges is listed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

APT_INSTALL = "apt-get update && apt-get install -y chromium"
WIDTH = 1280
HEIGHT = 900
MAX_SHOT = 6000  # a screenshot shows at most the page's first 6000 px
# Headless as root, with nothing of Chromium's own running in the background (updates, sync,
# field trials, safe browsing), and no host name resolved: the page gets the network it needs
# from disk or not at all.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")

# Every visible element whose box passes the viewport's left or right edge, and the document's
# own scroll width when it is wider than the viewport.
_TOO_WIDE = """
() => {
  const w = document.documentElement.clientWidth, out = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : '');
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right > w + 1 || r.left < -1)
      out.push(name(el) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  if (document.documentElement.scrollWidth > w + 1)
    out.push('document ' + document.documentElement.scrollWidth);
  return out;
}
"""


def chromium() -> str:
    """Debian's Chromium, or the test fails (in CI) or skips (elsewhere) with the install."""
    found = shutil.which("chromium")
    if found is not None:
        return found
    message = f"chromium is not installed; install it with: {APT_INSTALL}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Opened:
    """What one page did in the browser."""

    screenshot: Path
    outside: tuple[str, ...]  # requests for anything but file:/data: (each was aborted)
    too_wide: tuple[str, ...]  # elements wider than the viewport, as 'tag#id left..right'
    text: str  # the page's visible text


class Browser:
    """One headless Chromium with a fresh profile; :meth:`open` one page at a time."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def open(self, path: Path, screenshot: Path, *, wait_for: str | None = None) -> Opened:
        outside: list[str] = []

        def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(LOCAL_SCHEMES):
                r.continue_()
            else:
                outside.append(url)
                r.abort()

        page = self._context.new_page()
        try:
            page.route("**/*", route)
            page.goto(path.resolve().as_uri(), wait_until="load")
            if wait_for is not None:
                page.wait_for_selector(wait_for, state="attached", timeout=60_000)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            too_wide = tuple(page.evaluate(_TOO_WIDE))
            # The page's top, as tall as the page up to MAX_SHOT: a taller viewport rather than
            # a full-page shot, which re-lays out a long page at its whole height.
            height = int(page.evaluate("document.documentElement.scrollHeight"))
            page.set_viewport_size({"width": WIDTH, "height": max(min(height, MAX_SHOT), 1)})
            page.screenshot(path=str(screenshot))
            text = page.inner_text("body")
        finally:
            page.close()
        return Opened(screenshot, tuple(outside), too_wide, text)

    def page(self) -> Any:
        """A bare page of this browser (the caller closes it)."""
        return self._context.new_page()


@contextmanager
def browser(profile: Path) -> Iterator[Browser]:
    """Chromium headless with a fresh ``--user-data-dir`` under ``profile``."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=list(FLAGS),
            viewport={"width": WIDTH, "height": HEIGHT},
            service_workers="block",
        )
        try:
            yield Browser(context)
        finally:
            context.close()
