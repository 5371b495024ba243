"""Headless Chromium through Playwright, for the tests that look at a page in a real
browser: Debian's Chromium (``playwright install`` cannot download browsers here), and the
marks that skip those tests only when Chromium or Playwright is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("GR_SCREENSHOTS", REPO_ROOT / "build" / "screenshots"))
"""Where screenshots go, for a person to look at."""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def _find_chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium")


CHROMIUM = _find_chromium()

try:
    from playwright.sync_api import Browser, sync_playwright
except ImportError as exc:  # pragma: no cover - depends on the environment
    PLAYWRIGHT_MISSING: str | None = f"playwright is not importable ({exc})"
else:
    PLAYWRIGHT_MISSING = None

NEEDS_CHROMIUM = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium (/usr/bin/chromium or `chromium` on PATH); "
        "install it with `apt-get install -y chromium`",
    ),
    pytest.mark.skipif(PLAYWRIGHT_MISSING is not None, reason=str(PLAYWRIGHT_MISSING)),
]


def launched() -> Iterator[Browser]:
    """A headless Chromium for a module's tests (a fixture's body)."""
    assert CHROMIUM is not None
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
