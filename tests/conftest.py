"""Shared test settings.

`strict_jax` (equinox-style): dtype promotion "strict" and rank promotion "raise", so a silent
broadcast or an accidental float64 fails the test instead of passing quietly.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def strict_jax():
    import jax

    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield


@pytest.fixture(scope="session")
def pw():
    """One Playwright driver for the whole session: its sync API cannot be started twice at once,
    and both the JupyterLab tests (tests/browser) and the Lite tests (tests/lite) drive Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


def pytest_collection_modifyitems(config, items):
    """Kernel-side tests first, real-browser tests last (their order kept within each group).

    Playwright's sync API keeps its event loop registered as the running loop of the main thread
    from its first use until the session ends, so a later test that calls `asyncio.run` (the
    slider's and the server extension's) would fail for reasons of order, not of the code."""
    def uses_browser(item) -> bool:
        return item.get_closest_marker("browser") is not None or "pw" in getattr(item, "fixturenames", ())

    items[:] = [i for i in items if not uses_browser(i)] + [i for i in items if uses_browser(i)]
