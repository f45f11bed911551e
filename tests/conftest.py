"""Shared test settings: JAX's strict promotion modes for every test (`jax_promotion` below), the
tier markers, and how pytest-xdist hands the tests to its workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The course's reference solutions are files of this repository (course_source/solutions), never in the
# installed package: the tests read them from here wherever pytree-lab is installed (a checkout, or
# `pip install --target` on an accelerator's image), in kernels they start too.
os.environ.setdefault("PYTREE_LAB_SOLUTIONS", str(Path(__file__).resolve().parents[1] / "course_source" / "solutions"))

# JAX's strict modes for every test, as equinox's tests run: rank promotion "raise" (`x + b` with
# x of shape (4, 8) and b of shape (8,) fails instead of broadcasting silently) and dtype
# promotion "strict" (an implicit int32 -> float32 or float32 -> float64 fails). The library's own
# code runs under both; it never sets them itself, so a user's loss runs under the user's own
# settings. They are set on `jax.config` around each test's whole run (setup, call, teardown:
# module-scoped fixtures are built under the settings of the test that first needs them) and put
# back after it, so no test depends on what ran before it in its worker; not with JAX's `with`
# forms, which hold only in the thread that enters them (a step a test runs in another thread is
# strict too).
#
# `@pytest.mark.jax_promotion(rank="why", dtype="why")` gives one test JAX's default for the
# setting named ("allow" ranks, "standard" dtypes), for code the library must accept as written:
# a user's model that adds a bias to a batch, optax's Adam (a float to the power of its int32
# step count), JAX's own mixed-dtype results as the Lite engine's reference. The text names that
# code. `jax_promotion("why")` gives both defaults. Every test that uses a module-scoped fixture
# running such code carries the same marker (whichever of them runs first builds it).
_PROMOTION = {
    "rank": ("jax_numpy_rank_promotion", "raise", "allow"),
    "dtype": ("jax_numpy_dtype_promotion", "strict", "standard"),
}


def _promotion(item) -> dict[str, str]:
    """The JAX settings `item` runs under: strict, but for what its jax_promotion markers name."""
    relaxed: set[str] = set()
    for marker in item.iter_markers("jax_promotion"):
        if marker.args and (len(marker.args) > 1 or marker.kwargs):
            raise pytest.UsageError(f"{item.nodeid}: jax_promotion takes one reason, or rank= and/or dtype= reasons")
        reasons = dict.fromkeys(_PROMOTION, marker.args[0]) if marker.args else marker.kwargs
        if (
            not reasons
            or set(reasons) - set(_PROMOTION)
            or not all(isinstance(why, str) and why.strip() for why in reasons.values())
        ):
            raise pytest.UsageError(
                f"{item.nodeid}: jax_promotion needs a reason for rank= and/or dtype=, "
                f"not {marker.args or marker.kwargs!r}"
            )
        relaxed |= set(reasons)
    return {name: default if key in relaxed else strict for key, (name, strict, default) in _PROMOTION.items()}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's JAX promotion settings (`_promotion`) from its setup to its teardown, then the
    ones before it."""
    try:
        import jax
    except ImportError:  # a venv without JAX: nothing to set
        return (yield)
    wanted = _promotion(item)
    before = {name: getattr(jax.config, name) for name in wanted}
    for name, value in wanted.items():
        jax.config.update(name, value)
    try:
        return (yield)
    finally:
        for name, value in before.items():
            jax.config.update(name, value)


@pytest.fixture(scope="session")
def pw():
    """One Playwright driver for the whole session: its sync API cannot be started twice at once,
    and both the JupyterLab tests (tests/browser) and the Lite tests (tests/lite) drive Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(autouse=True)
def _no_loop_left_running_by_playwright(request):
    """Playwright's sync API marks its event loop as the main thread's running loop between its
    calls, from its first use until the session ends; a later test that calls `asyncio.run` (the
    slider's, the hub's, the server extension's) would then fail for reasons of order, not of
    the code. Tests that do not drive a browser run with no running loop, as in a fresh process."""
    import asyncio

    loop = asyncio._get_running_loop()
    if loop is None or _uses_browser(request.node):
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)


def _uses_browser(item) -> bool:
    return item.get_closest_marker("browser") is not None or "pw" in getattr(item, "fixturenames", ())


# `make test` runs the suite in four pytest-xdist workers, in groups (`_group`): the JupyterLite
# tests that use the session's built site (tests/lite/conftest.py `lite_site`) share one group,
# every other module is a group of its own (a worker that runs JupyterLab tests starts its own Lab
# server, once; concurrent site builds share lite_build/.cache, whose writes are atomic). The
# scheduler below hands out whole groups, longest first (seconds each took in a full `make test`
# with `--durations=0`, rounded), so the run does not end waiting on one long group started last.
_LITE_SITE_MODULES = {
    f"tests/lite/{name}.py"
    for name in (
        "test_lite_background",
        "test_lite_bench_builds",
        "test_lite_mirror",
        "test_lite_offline",
        "test_lite_publish",
        "test_lite_site",
        "test_lite_slow_cdn",
        "test_site_says_why",
    )
}
# a long test that shares no module fixture is a group of its own, so it runs beside its module
_TERM_REGRADE = "tests/test_nbgrader.py::test_a_term_late_penalty_regrade_after_a_fixed_hidden_test_and_exports"
_GROUP_SECONDS = {
    "lite": 700,
    "tests/test_nbgrader.py": 490,
    _TERM_REGRADE: 165,
    "tests/test_notebooks.py": 170,
    "tests/test_graded_in_context.py": 300,
    "tests/test_nbgrader_intake.py": 75,
    "tests/test_binder.py": 140,
    "tests/test_floors_tool.py": 125,
    "tests/test_computed_answers.py": 125,
    "tests/browser/test_browser_lecture_layout.py": 105,
    "tests/browser/test_browser_explorer.py": 100,
    "tests/test_documented_install.py": 90,
    "tests/test_hub.py": 85,
    "tests/lite/test_bytecode_cache.py": 80,
    "tests/test_explorer_hostile.py": 75,
    "tests/test_bench_runs.py": 70,
    "tests/test_big_explorer.py": 70,
    "tests/browser/test_frontends.py": 60,
    "tests/browser/test_browser_bars.py": 60,
    "tests/test_bad_input.py": 55,
    "tests/browser/test_contrast.py": 50,
    "tests/lite/test_lean_site.py": 50,
    "tests/browser/test_keys_and_focus.py": 50,
    "tests/browser/test_browser_exercises.py": 50,
    "tests/test_explorer_layout.py": 50,
}


def _group(nodeid: str) -> str:
    if nodeid == _TERM_REGRADE:
        return nodeid
    path = nodeid.split("::", 1)[0]
    return "lite" if path in _LITE_SITE_MODULES else path


# Test tiers (markers, pyproject.toml): every test is in one of
#   browser   a real JupyterLab / Notebook 7 / Voila / JupyterLite page in Chromium
#   lite      the JupyterLite build and its kernel (tests/lite/), browser or not
#   install   a fresh venv from an install line (the documented install, Binder, the floors)
#   notebook  whole notebooks or real kernels run through nbclient / nbgrader / JupyterHub
#   kernel    the rest: the library in this process
# and kernel tests that take a second or more are also `slow` (tests/slow_tests.txt, written by
# tools/slow_tests.py). `make test-fast` runs `kernel and not slow`; `make test` runs everything.
_NOTEBOOK_MODULES = {
    f"tests/{name}.py"
    for name in (
        "test_notebooks",
        "test_notebook_typed_answers",
        "test_notebook_student",
        "test_static_export_execute",
        "test_nbgrader",
        "test_nbgrader_intake",
        "test_graded_in_context",
        "test_hub",
        "test_server_extension",
    )
}
_SLOW = {
    line.strip()
    for line in (Path(__file__).with_name("slow_tests.txt")).read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
}
_TIERS = ("browser", "lite", "install", "notebook")


def _tier(item) -> str:
    path = item.nodeid.split("::", 1)[0]
    if _uses_browser(item):
        return "browser"
    if path.startswith("tests/lite/"):
        return "lite"
    for tier in ("install", "notebook"):  # a test in a kernel-tier module that starts kernels or graders says so
        if item.get_closest_marker(tier) is not None:
            return tier
    return "notebook" if path in _NOTEBOOK_MODULES else "kernel"


def pytest_collection_modifyitems(config, items):
    """Tier markers; then the longest groups first, the rest in file order (also without xdist:
    a test's outcome does not depend on the order)."""
    for item in items:
        _promotion(item)  # a jax_promotion marker without its reason fails here, before any test runs
        tier = _tier(item)
        item.add_marker(tier)
        if tier == "browser" and item.nodeid.startswith("tests/lite/"):
            item.add_marker("lite")  # a JupyterLite page: both
        if tier == "kernel" and (item.nodeid in _SLOW or item.nodeid.split("::", 1)[0] in _SLOW):
            item.add_marker("slow")
    for item in items:  # a module that uses the session's site outside its group builds it again
        path = item.nodeid.split("::", 1)[0]
        if "lite_site" in getattr(item, "fixturenames", ()) and path not in _LITE_SITE_MODULES:
            raise pytest.UsageError(f"{path} uses the built Lite site: add it to _LITE_SITE_MODULES in {__file__}")
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (-_GROUP_SECONDS.get(_group(item.nodeid), 0), order[id(item)]))


class _GroupsToWorkers:
    """xdist's loadscope scheduling (whole units to a worker, in collection order with
    --no-loadscope-reorder) with the units from `_group`. A plugin registered only where xdist is
    active (`-p no:xdist`, or a venv without the dev extra, runs the suite in one process): its
    hook is xdist's, unknown to pytest without it."""

    def pytest_xdist_make_scheduler(self, config, log):
        from xdist.scheduler import LoadScopeScheduling

        class GroupScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return _group(nodeid)

        return GroupScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_GroupsToWorkers(), "pytree-lab-groups")


@pytest.fixture
def cpu_reference():
    """JAX pinned to the host's CPU for a test that compares with CPU-specific numbers (the Lite
    engine's numpy, IEEE float64, a recorded value): on an accelerator it computes there too,
    so such a test fails only for a real difference (docs/backends.md)."""
    import jax

    with jax.default_device(jax.devices("cpu")[0]):
        yield
