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
